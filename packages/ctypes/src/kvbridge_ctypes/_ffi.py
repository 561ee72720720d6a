"""The core's C ABI through the standard library's ctypes: the shared library, and the
helpers the shared front end (_c_abi.py) calls through.

Every function is declared once here, next to its C signature in c_abi.h, with `argtypes` and
`restype` (llama-cpp-python's pattern). Without them ctypes guesses: ints become C int (2**40
wraps silently), pointers are truncated to 32 bits, and results are read as int. Even with them,
an int beyond the declared type wraps silently, which is why _c_abi.py checks every int first.
CDLL (not PyDLL) releases the GIL around every call.
"""

from __future__ import annotations

import ctypes
import struct
from ctypes import (
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_void_p,
)
from pathlib import Path
from typing import Any

c_int64_p = POINTER(c_int64)


class kvb_pool_stats(Structure):  # noqa: N801 - the C name
    _fields_ = [
        ("allocated_total", c_int64),
        ("released_total", c_int64),
        ("peak_in_use", c_int64),
    ]


lib = ctypes.CDLL(str(Path(__file__).with_name("libkvbridge.so")))

_SIGNATURES: dict[str, tuple[list, Any]] = {
    # name: (argtypes, restype)
    "kvb_version": ([], c_char_p),
    "kvb_last_error": ([], c_char_p),
    "kvb_status_name": ([c_int], c_char_p),
    "kvb_status_exception": ([c_int], c_char_p),
    # kvb_status kvb_pool_create(int64_t num_blocks, kvb_pool** out)
    "kvb_pool_create": ([c_int64, POINTER(c_void_p)], c_int),
    "kvb_pool_free": ([c_void_p], None),
    "kvb_pool_num_blocks": ([c_void_p], c_int32),
    "kvb_pool_num_free": ([c_void_p], c_int32),
    # kvb_status kvb_pool_allocate(kvb_pool*, int64_t n, kvb_buffer** out)
    "kvb_pool_allocate": ([c_void_p, c_int64, POINTER(c_void_p)], c_int),
    # kvb_status kvb_pool_allocate_many(kvb_pool*, const int64_t* counts, int64_t, kvb_buffer**)
    "kvb_pool_allocate_many": ([c_void_p, c_void_p, c_int64, POINTER(c_void_p)], c_int),
    "kvb_pool_retain": ([c_void_p, c_int64], c_int),
    "kvb_pool_release": ([c_void_p, c_int64], c_int),
    # int64_t kvb_pool_refcount(const kvb_pool*, int64_t block): the count, or minus a kvb_status
    "kvb_pool_refcount": ([c_void_p, c_int64], c_int64),
    "kvb_pool_refcounts": ([c_void_p, POINTER(c_void_p)], c_int),
    "kvb_pool_stats_read": ([c_void_p, POINTER(kvb_pool_stats)], None),
    "kvb_pool_repr": ([c_void_p], c_char_p),
    "kvb_pool_stats_repr": ([c_void_p], c_char_p),
    "kvb_buffer_data": ([c_void_p], c_void_p),
    "kvb_buffer_size": ([c_void_p], c_int64),
    "kvb_buffer_free": ([c_void_p], None),
    # int64_t kvb_common_prefix(a, a_dtype, a_size, a_stride, b, b_dtype, b_size, b_stride):
    # the count, or minus a kvb_status (so is kvb_count_eos's)
    "kvb_common_prefix": (
        [c_void_p, c_int, c_int64, c_int64, c_void_p, c_int, c_int64, c_int64],
        c_int64,
    ),
    # int64_t kvb_count_eos(tokens, dtype, size, stride, int64_t eos)
    "kvb_count_eos": ([c_void_p, c_int, c_int64, c_int64, c_int64], c_int64),
    # the contiguous forms of one dtype: int64_t kvb_count_eos_int32(tokens, size, int64_t eos)
    "kvb_count_eos_int32": ([c_void_p, c_int64, c_int64], c_int64),
    "kvb_count_eos_int64": ([c_void_p, c_int64, c_int64], c_int64),
    "kvb_count_eos_uint64": ([c_void_p, c_int64, c_int64], c_int64),
    # int64_t kvb_common_prefix_int32(a, a_size, b, b_size)
    "kvb_common_prefix_int32": ([c_void_p, c_int64, c_void_p, c_int64], c_int64),
    "kvb_common_prefix_int64": ([c_void_p, c_int64, c_void_p, c_int64], c_int64),
    # kvb_status kvb_rmsnorm(x, x_ndim, weight, weight_ndim, out, out_ndim, const int64_t* dims,
    #                        double eps, int out_fresh)
    "kvb_rmsnorm": (
        [c_void_p, c_int64, c_void_p, c_int64, c_void_p, c_int64, c_int64_p, c_double, c_int],
        c_int,
    ),
    "kvb_live_buffers": ([], c_int64),
    "kvb_live_pools": ([], c_int64),
    "kvb_set_num_threads": ([c_int64], c_int),
    "kvb_get_num_threads": ([], c_int64),
    "kvb_default_num_threads": ([c_int64_p], c_int),
    "kvb_store_choice": ([POINTER(c_char_p)], c_int),
    "kvb_rmsnorm_paths": ([POINTER(c_char_p)], c_int),
    "kvb_testing_last_num_threads": ([], c_int64),
    "kvb_testing_arm_gate": ([c_double], c_int),
    "kvb_testing_open_gate": ([], c_int),
    "kvb_testing_close_gate": ([], c_int),
    "kvb_testing_throw": ([c_char_p], c_int),
    "kvb_testing_data_address": ([c_void_p, c_int, c_int64, c_int64, POINTER(c_size_t)], c_int),
}
for _name, (_args, _res) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.argtypes, _fn.restype = _args, _res

# Out-parameters by C type: ctypes passes an instance by reference where argtypes says POINTER.
_OUT = {
    "int64_t": c_int64,
    "int32_t": c_int32,
    "uintptr_t": c_size_t,
    "kvb_pool *": c_void_p,
    "kvb_buffer *": c_void_p,
    "kvb_pool_stats": kvb_pool_stats,
    "const char *": c_char_p,
}


def new(ctype: str) -> Any:
    """An out-parameter of the C type `ctype`."""
    return _OUT[ctype]()


def deref(out: Any) -> Any:
    """The value an out-parameter received (a handle is an int, or None for NULL)."""
    return out.value


# A ctypes array type of no length: `from_buffer` lays one over any writable C-contiguous buffer,
# of any size, and the instance holds a buffer export of it (the array stays alive and cannot be
# resized). A c_void_p parameter takes a ctypes array as the address of its first byte.
_BYTES = c_char * 0


class ArrayPointer:
    """A `void *` argument that owns an array no buffer can be laid over (read-only, strided):
    ctypes converts it through `_as_parameter_`, and the call's argument tuple holds it."""

    __slots__ = ("_as_parameter_", "_array")

    def __init__(self, arr) -> None:
        self._array = arr
        self._as_parameter_ = arr.__array_interface__["data"][0]


# The cheapest owning pointer, where it applies: `lend(arr)` lays _BYTES over a writable
# C-contiguous buffer, or raises one of UNLENDABLE (then array_pointer's other way applies). The
# per-step token calls call it directly: no Python frame between them and the buffer export.
lend = _BYTES.from_buffer
UNLENDABLE = (TypeError, ValueError, BufferError)


def array_pointer(arr, ctype: str = "void") -> Any:
    """A pointer argument to a numpy array's first element that keeps the array alive as long
    as the pointer object lives: pass the object itself to the call, never an int taken from
    it (the front end's rule, _c_abi.py says why). A writable contiguous array lends its buffer
    (the cheapest correct idiom: no `.ctypes` object, no interface dict); any other reports its
    address through __array_interface__. (`ctype` is cffi's concern: argtypes declare every
    array parameter `c_void_p`.)"""
    try:
        return lend(arr)
    except UNLENDABLE:
        return ArrayPointer(arr)


def address_of(pointer: int | None) -> int:
    return pointer or 0


def int32_list(pointer: int, size: int) -> list[int]:
    """`size` int32 values at a kvb_buffer_data address, as Python ints."""
    return list((c_int32 * size).from_address(pointer)) if size else []


# By length: the c_int64 array type and the struct that packs its values, made once each.
_INT64_ARRAYS: dict[int, tuple[Any, struct.Struct]] = {}


def int64_array(values) -> Any:
    """An `int64_t *` argument holding `values` (a sequence of ints). Packed with struct and
    copied in whole: a ctypes array's constructor converts its values one by one, at a cost
    that dominated a small rmsnorm call."""
    n = len(values)
    made = _INT64_ARRAYS.get(n)
    if made is None:
        made = _INT64_ARRAYS[n] = (c_int64 * n, struct.Struct(f"={n}q"))
    array_type, packer = made
    return array_type.from_buffer_copy(packer.pack(*values))


def string(text: bytes | None) -> str | None:
    """A char* result: c_char_p gives bytes, or None for NULL."""
    return None if text is None else text.decode()
