"""The core's C ABI through cffi in ABI mode: the shared library, and the helpers the shared
front end (_api.py) calls through.

ABI mode (ffi.cdef + ffi.dlopen, no compiler at install time) because the library is prebuilt
and ships in the wheel: one pure-Python loader serves every Python version. The declarations are
the shipped header itself, c_abi.h, with its preprocessor lines dropped: cffi's cdef() reads
plain C declarations, which is all that header holds between them. cffi checks argument types
and ranges (an int too large for int64_t raises OverflowError) and releases the GIL around
every call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cffi import FFI

_HERE = Path(__file__).parent


def _declarations(header: str) -> str:
    """c_abi.h without its preprocessor lines and its `#ifdef __cplusplus` blocks."""
    kept, skipping = [], False
    for line in header.splitlines():
        stripped = line.strip()
        if stripped.startswith("#ifdef __cplusplus"):
            skipping = True
        elif skipping and stripped.startswith("#endif"):
            skipping = False
        elif not skipping and not stripped.startswith("#"):
            kept.append(line)
    return "\n".join(kept)


ffi = FFI()
ffi.cdef(_declarations((_HERE / "c_abi.h").read_text()))
lib = ffi.dlopen(str(_HERE / "libkvbridge.so"))


def new(ctype: str) -> Any:
    """An out-parameter of the C type `ctype`."""
    return ffi.new(ctype + " *")


def deref(out: Any) -> Any:
    """The value an out-parameter received (a handle is a pointer cdata, falsy when NULL)."""
    return out[0]


def array_pointer(arr) -> Any:
    """A `void *` to a numpy array's first element (cffi takes `void *` for any pointer
    parameter): a contiguous array lends its buffer (ffi.from_buffer); a strided view reports
    its address through __array_interface__, which builds a dict per call. The caller keeps the
    array alive for the call."""
    try:
        return ffi.cast("void *", ffi.from_buffer(arr))
    except (TypeError, ValueError, BufferError):
        return ffi.cast("void *", arr.__array_interface__["data"][0])


def address_of(pointer: Any) -> int:
    return int(ffi.cast("uintptr_t", pointer))


def int32_list(pointer: Any, size: int) -> list[int]:
    """`size` int32 values at a kvb_buffer_data pointer, as Python ints."""
    return ffi.unpack(pointer, size)


def int64_array(values) -> Any:
    return ffi.new("int64_t[]", list(values))


def string(text: Any) -> str | None:
    """A char* result, or None for NULL."""
    return None if text == ffi.NULL else ffi.string(text).decode()
