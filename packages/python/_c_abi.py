"""The contract's API over the core's C ABI (common_cpp/include/kvbridge/c_abi.h).

One file shared by kvbridge-ctypes and kvbridge-cffi: each wheel carries it (README.md here)
beside its own `_ffi.py`, which is all that differs between the two (how the library is loaded,
how a pointer, an out-parameter and a C string are made and read). Everything here would
otherwise be written twice.

What a C ABI leaves to the caller, and what this file does about it:
- no exception crosses it: every call returns a kvb_status (the token kernels and refcount a
  count, or minus the status), and `_check` raises the Python type the core's table names for
  it (kvb_status_exception) with kvb_last_error()'s text;
- nothing checks argument types and ints wrap silently at the declared width: every argument
  goes through the contract's rules (`_args.py`, beside it in packages/python)
  before it reaches C, and the core narrows to int32 with its own checks;
- arrays cross as address, length and stride in elements (rmsnorm's shapes and strides in one
  int64 array; a contiguous token array as address and length, to the kernel of its dtype), read
  in place; only dtypes the core cannot read are converted;
- an address does not keep its memory alive, and the GIL is released during the call: a
  converted input that nothing holds can be freed, and its memory reused by another thread,
  while C reads it. So every address handed to a foreign call is the port's `array_pointer`
  object, which owns its array, passed in the call's own arguments (never an int taken from
  it): the array then lives until the call returns, wherever the conversion happened;
- nothing frees memory unless the caller does: pools and buffers the core allocates get a
  finalizer that calls their C free function exactly once;
- ctypes and cffi release the GIL around every foreign call, so the kernels run without it.
"""

from __future__ import annotations

import builtins
import weakref
from typing import Any, NoReturn

import numpy as np

from . import _args
from ._args import INT64_MAX as _INT64_MAX
from ._args import INT64_MIN as _INT64_MIN
from ._args import READ_IN_PLACE as _READ_IN_PLACE
from ._args import as_int64 as _as_int64
from ._args import describe as _describe
from ._args import tokens as _tokens
from ._ffi import UNLENDABLE as _UNLENDABLE
from ._ffi import address_of, array_pointer, deref, int32_list, int64_array, lib, new, string
from ._ffi import lend as _lend

_NDARRAY = np.ndarray

# --- errors -----------------------------------------------------------------------------------


def _exception_types() -> dict[int, type[Exception]]:
    """kvb_status -> Python exception, read once from the core's one table."""
    types, status = {}, 1
    while (name := string(lib.kvb_status_exception(status))) is not None:
        types[status] = getattr(builtins, name)
        status += 1
    return types


_EXCEPTIONS = _exception_types()


def _check(status: int) -> None:
    """The one error path: a non-zero kvb_status becomes the contract's exception."""
    if status:
        raise _EXCEPTIONS[status](string(lib.kvb_last_error()))


# --- conversions ------------------------------------------------------------------------------


def _token_args(obj: Any, name: str, keep_uint64: bool) -> tuple:
    """(pointer, kvb_dtype, size, stride in elements): how a token argument crosses the strided
    kernels, after the contract's rule (`_tokens`: an array the core reads in place is itself).
    The pointer owns the array, so a conversion made for this call lives as long as the call.
    (The per-step calls take their contiguous case before this: see count_eos.)"""
    arr, code = _tokens(obj, name, keep_uint64)
    return array_pointer(arr), code, len(arr), arr.strides[0] // arr.itemsize


_ELEMENTS_OF_4 = (4).__rfloordiv__  # a float32 stride in bytes -> in elements


def _dims(x: np.ndarray, weight: np.ndarray, out: np.ndarray) -> Any:
    """kvb_rmsnorm's dims: x's shape and strides in elements, weight's, then out's shape."""
    return int64_array((*x.shape, *map(_ELEMENTS_OF_4, x.strides), *weight.shape,
                        *map(_ELEMENTS_OF_4, weight.strides), *out.shape))  # fmt: skip


class _AdoptedBuffer:
    """Owns one kvb_buffer and lends its memory to numpy through __array_interface__: numpy
    keeps this object as its array's base, so the buffer is never copied and is freed exactly
    once (the finalizer), when the last array over it dies."""

    __slots__ = ("__array_interface__", "__weakref__")

    def __init__(self, handle: Any) -> None:
        self.__array_interface__ = {
            "data": (address_of(lib.kvb_buffer_data(handle)), False),
            "shape": (lib.kvb_buffer_size(handle),),
            "typestr": "<i4" if np.little_endian else ">i4",
            "version": 3,
        }
        weakref.finalize(self, lib.kvb_buffer_free, handle)


def _adopt(handle: Any) -> np.ndarray:
    return np.asarray(_AdoptedBuffer(handle))


def _id_lists(handle: Any, counts: list[int]) -> list[list[int]]:
    """Block ids out of a kvb_buffer: copied into Python ints, and the buffer freed at once."""
    try:
        flat = int32_list(lib.kvb_buffer_data(handle), lib.kvb_buffer_size(handle))
    finally:
        lib.kvb_buffer_free(handle)
    lists, start = [], 0
    for c in counts:
        lists.append(flat[start : start + c])
        start += c
    return lists


# --- BlockPool ----------------------------------------------------------------------------------


def _stats_read(pool: BlockPool) -> tuple[int, int, int]:
    stats = new("kvb_pool_stats")
    lib.kvb_pool_stats_read(pool._handle, stats)
    return stats.allocated_total, stats.released_total, stats.peak_in_use


def _stats_repr(pool: BlockPool) -> str:
    return string(lib.kvb_pool_stats_repr(pool._handle))


PoolStats = _args.PoolStats


@_args.block_pool(_stats_read, _stats_repr)
class BlockPool:
    """Ref-counted KV-cache block allocator (a kvb_pool handle, freed with the object)."""

    __slots__ = ("_handle", "__weakref__")

    def __init__(self, num_blocks: int) -> None:
        out = new("kvb_pool *")
        _check(lib.kvb_pool_create(_as_int64(num_blocks), out))
        handle = deref(out)
        object.__setattr__(self, "_handle", handle)
        weakref.finalize(self, lib.kvb_pool_free, handle)

    @property
    def num_blocks(self) -> int:
        return lib.kvb_pool_num_blocks(self._handle)

    @property
    def num_free(self) -> int:
        return lib.kvb_pool_num_free(self._handle)

    def allocate(self, n: int) -> list[int] | None:
        count = _as_int64(n)
        out = new("kvb_buffer *")
        _check(lib.kvb_pool_allocate(self._handle, count, out))
        handle = deref(out)
        return _id_lists(handle, [count])[0] if handle else None

    def allocate_many(self, counts: Any) -> list[list[int]] | None:
        arr, _ = _tokens(counts, "counts", False)
        batch = np.ascontiguousarray(arr, dtype=np.int64)
        out = new("kvb_buffer *")
        status = lib.kvb_pool_allocate_many(
            self._handle, array_pointer(batch, "int64_t"), batch.shape[0], out
        )
        _check(status)
        handle = deref(out)
        return _id_lists(handle, batch.tolist()) if handle else None

    def retain(self, block: int) -> None:
        _check(lib.kvb_pool_retain(self._handle, _as_int64(block)))

    def release(self, block: int) -> None:
        _check(lib.kvb_pool_release(self._handle, _as_int64(block)))

    def refcount(self, block: int) -> int:
        # Per block, per step: the plain-int shortcut, and the count returned, not an out-parameter.
        if type(block) is not int or not _INT64_MIN <= block <= _INT64_MAX:
            block = _as_int64(block)
        count = lib.kvb_pool_refcount(self._handle, block)
        if count < 0:
            _check(-count)
        return count

    def refcounts(self) -> np.ndarray:
        out = new("kvb_buffer *")
        _check(lib.kvb_pool_refcounts(self._handle, out))
        return _adopt(deref(out))

    def __repr__(self) -> str:
        return string(lib.kvb_pool_repr(self._handle))


# --- functions ----------------------------------------------------------------------------------


_kvb_common_prefix, _kvb_count_eos = lib.kvb_common_prefix, lib.kvb_count_eos  # looked up once


def _contiguous_kernels(keep_uint64: bool, kernels: tuple) -> dict[np.dtype, Any]:
    """dtype -> the core's contiguous kernel for it (c_abi.h's forms of one dtype), for exactly
    the dtypes the rule reads in place (`READ_IN_PLACE`): `kernels` indexed by kvb_dtype."""
    return {dtype: kernels[code] for dtype, (code, _) in _READ_IN_PLACE[keep_uint64].items()}


# In kvb_dtype's order (c_abi.h): KVB_INT32 = 0, KVB_INT64 = 1, KVB_UINT64 = 2.
_COUNT_EOS_OF = _contiguous_kernels(
    True, (lib.kvb_count_eos_int32, lib.kvb_count_eos_int64, lib.kvb_count_eos_uint64)
)
_COMMON_PREFIX_OF = _contiguous_kernels(
    False, (lib.kvb_common_prefix_int32, lib.kvb_common_prefix_int64)
)

# The per-step token calls' own case, written out in their frames: a 1-D array of a dtype read in
# place whose buffer `_lend` can lend. Every Python frame and every argument on this path costs as
# much as the kernel does on a short input (an argument about 45 ns through cffi, 130 through
# ctypes), so the contiguous kernels take address and length only: a buffer is lent only from a
# C-contiguous array, and a 1-D one is C-contiguous only where its stride is one element (or it
# has at most one). Everything else (strided, read-only under ctypes, another dtype, a list) takes
# the strided kernels through the contract's rule (`_token_args`).


def common_prefix(a: Any, b: Any) -> int:
    """Length of the longest common prefix."""
    if type(a) is _NDARRAY and type(b) is _NDARRAY and a.ndim == 1 and b.ndim == 1:
        kernel = _COMMON_PREFIX_OF.get(a.dtype)
        if kernel is not None and b.dtype is a.dtype:  # an equal dtype, another object: strided
            try:
                a_pointer, b_pointer = _lend(a), _lend(b)
            except _UNLENDABLE:
                pass
            else:
                count = kernel(a_pointer, len(a), b_pointer, len(b))
                if count < 0:  # minus the kvb_status it failed with
                    _check(-count)
                return count
    count = _kvb_common_prefix(*_token_args(a, "a", False), *_token_args(b, "b", False))
    if count < 0:
        _check(-count)
    return count


def count_eos(tokens: Any, eos: Any) -> int:
    """How many tokens equal eos (compared exactly, as int64)."""
    # The plain-int shortcut _torch_ops.py takes too (as_int64 decides everything else).
    if type(eos) is not int or not _INT64_MIN <= eos <= _INT64_MAX:
        eos = _as_int64(eos)
    if type(tokens) is _NDARRAY and tokens.ndim == 1:
        kernel = _COUNT_EOS_OF.get(tokens.dtype)
        if kernel is not None:
            try:
                pointer = _lend(tokens)
            except _UNLENDABLE:
                pass
            else:
                count = kernel(pointer, len(tokens), eos)
                if count < 0:
                    _check(-count)
                return count
    count = _kvb_count_eos(*_token_args(tokens, "tokens", True), eos)
    if count < 0:
        _check(-count)
    return count


def rmsnorm(x: Any, weight: Any, eps: float = 1e-6, *, out: np.ndarray | None = None) -> np.ndarray:
    """Fused RMSNorm over the last dimension."""
    xa, wa, c_eps, out, fresh = _args.rmsnorm_arrays(x, weight, eps, out)
    status = lib.kvb_rmsnorm(
        array_pointer(xa, "float"), xa.ndim, array_pointer(wa, "float"), wa.ndim,
        array_pointer(out, "float"), out.ndim, _dims(xa, wa, out), c_eps, int(fresh),
    )  # fmt: skip
    _check(status)
    return out


def live_buffers() -> int:
    """C++-allocated buffers now owned by Python objects."""
    return lib.kvb_live_buffers()


def live_pools() -> int:
    """C++ BlockPool objects now alive."""
    return lib.kvb_live_pools()


def set_num_threads(n: int) -> None:
    """Threads a kernel call may use (n >= 1)."""
    _check(lib.kvb_set_num_threads(_as_int64(n)))


def get_num_threads() -> int:
    """Threads a kernel call may use."""
    return lib.kvb_get_num_threads()


_check(lib.kvb_default_num_threads(new("int64_t")))  # a malformed KVBRIDGE_NUM_THREADS fails import


# --- _testing -----------------------------------------------------------------------------------


def throw(kind: str) -> NoReturn:
    """Throw the named C++ exception inside the core (for the conformance suite)."""
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a str, got {_describe(kind)}")
    _check(lib.kvb_testing_throw(kind.encode()))
    raise AssertionError("kvb_testing_throw returned KVB_OK")  # pragma: no cover


def last_num_threads() -> int:
    """Threads the last kernel call from this thread ran on."""
    return lib.kvb_testing_last_num_threads()


def arm_gate(timeout_s: float) -> None:
    """The next kernel call waits at the GIL gate until it is opened (kvbridge/testing.hpp)."""
    _check(lib.kvb_testing_arm_gate(float(timeout_s)))


def open_gate() -> int:
    """Opens the GIL gate if a kernel waits at it; the gate's state."""
    return lib.kvb_testing_open_gate()


def close_gate() -> int:
    """Disarms the GIL gate; the state it had."""
    return lib.kvb_testing_close_gate()


# What the core says of itself, for the benchmarks and the page (any package would say the same;
# the registry's `core_answers` names the one the benchmarks ask).


def store_choice() -> str:
    """The store policy the kernels use here, and why, as the core words it."""
    return _said(lib.kvb_store_choice)


def rmsnorm_paths() -> str:
    """The paths the RMSNorm kernels take on this CPU, as the core words them."""
    return _said(lib.kvb_rmsnorm_paths)


def error_kinds() -> list[str]:
    """The contract's exception kinds, in the core's status order (c_abi.h's kvb_status)."""
    kinds, status = [], 1
    while (name := string(lib.kvb_status_name(status))) is not None:
        kinds.append(name)
        status += 1
    return kinds


def _said(fn) -> str:
    out = new("const char *")
    _check(fn(out))
    return string(deref(out))


def data_address(tokens: Any) -> int:
    """Address count_eos's C++ code reads tokens from: the strided kernels' input path, whose
    buffer for a contiguous array is the one count_eos's contiguous kernel is lent."""
    out = new("uintptr_t")
    _check(lib.kvb_testing_data_address(*_token_args(tokens, "tokens", True), out))
    return deref(out)
