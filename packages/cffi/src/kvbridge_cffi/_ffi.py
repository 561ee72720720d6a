"""The core's C ABI through cffi in ABI mode: the shared library, and the helpers the shared
front end (_c_abi.py) calls through.

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


_OUT_TYPES: dict[str, Any] = {}  # "int64_t" -> ffi.typeof("int64_t *"): parsed once each


def new(ctype: str) -> Any:
    """An out-parameter of the C type `ctype`."""
    pointer_type = _OUT_TYPES.get(ctype)
    if pointer_type is None:
        pointer_type = _OUT_TYPES[ctype] = ffi.typeof(ctype + " *")
    return ffi.new(pointer_type)


def deref(out: Any) -> Any:
    """The value an out-parameter received (a handle is a pointer cdata, falsy when NULL)."""
    return out[0]


# The array type from_buffer lends each element type's buffer as (cffi passes a `char[]` only
# where C takes `void *`).
_ARRAYS = {name: ffi.typeof(array) for name, array in
           (("void", "char[]"), ("int64_t", "int64_t[]"), ("float", "float[]"))}  # fmt: skip


# The cheapest owning pointer, where it applies: `lend(arr)` is from_buffer as a `void *`
# argument (its default type is `char[]`, _ARRAYS["void"]), or raises one of UNLENDABLE (then
# array_pointer's other way applies). The per-step token calls call it directly: no Python frame
# between them and the buffer, and the bound method itself, since naming the type through a
# functools.partial costs 60 ns a call here, a quarter of what cffi's own array call costs.
lend = ffi.from_buffer
UNLENDABLE = (TypeError, ValueError, BufferError)


def array_pointer(arr, ctype: str = "void") -> Any:
    """A `ctype *` argument to a numpy array's first element that keeps the array alive as long
    as the pointer object lives: pass the cdata itself to the call, never an address taken from
    it (the front end's rule, _c_abi.py says why).

    A contiguous array lends its buffer (ffi.from_buffer, whose cdata holds the array). A
    strided view has no such buffer: its address comes from __array_interface__, and the cast
    pointer is wrapped by ffi.gc with a no-op destructor that holds the array, the one way cffi
    offers to tie an owner to a cast pointer."""
    try:
        return ffi.from_buffer(_ARRAYS[ctype], arr)
    except UNLENDABLE:
        pointer = ffi.cast(ctype + " *", arr.__array_interface__["data"][0])
        return ffi.gc(pointer, _holder(arr))


def _holder(owner: Any):
    """A destructor that does nothing but hold `owner` until the pointer it guards is freed."""
    return lambda _pointer: owner


def address_of(pointer: Any) -> int:
    return int(ffi.cast("uintptr_t", pointer))


def int32_list(pointer: Any, size: int) -> list[int]:
    """`size` int32 values at a kvb_buffer_data pointer, as Python ints."""
    return ffi.unpack(pointer, size)


def int64_array(values) -> Any:
    """An `int64_t *` argument holding `values`: cffi converts a list or tuple passed for a
    pointer parameter into a C array itself, owned by the call."""
    return values if type(values) in (list, tuple) else list(values)


def string(text: Any) -> str | None:
    """A char* result, or None for NULL."""
    return None if text == ffi.NULL else ffi.string(text).decode()
