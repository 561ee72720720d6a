"""The contract's API over the core's C ABI (common_cpp/include/kvbridge/c_abi.h).

One file shared by kvbridge-ctypes and kvbridge-cffi: each wheel carries it as `_api.py` beside
its own `_ffi.py`, which is all that differs between the two (how the library is loaded, how a
pointer, an out-parameter and a C string are made and read). Everything here would otherwise be
written twice.

What a C ABI leaves to the caller, and what this file does about it:
- no exception crosses it: every call returns a kvb_status, and `_check` raises the Python type
  the core's table names for it (kvb_status_exception) with kvb_last_error()'s text;
- nothing checks argument types and ints wrap silently at the declared width: every int goes
  through `_as_int64` (TypeError for non-ints and bools, OverflowError past int64) before it
  reaches a C int64_t, and the core narrows to int32 with its own checks;
- arrays cross as address, length and stride in elements, read in place; only dtypes the core
  cannot read are converted;
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
from operator import index as _index
from typing import Any, NoReturn

import numpy as np

from ._ffi import address_of, array_pointer, deref, int32_list, int64_array, lib, new, string

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# The dtypes the core reads in place, as their kvb_dtype (KVB_INT32, KVB_INT64, KVB_UINT64); a
# byte-swapped dtype compares unequal, so it is converted like every other.
_IN_PLACE = {np.dtype(np.int32): 0, np.dtype(np.int64): 1, np.dtype(np.uint64): 2}


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


def _describe(value: object) -> str:
    cls = type(value)
    name = cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"
    return f"{name}: {value!r}"


def _as_int64(value: Any) -> int:
    """An int as the contract reads it: int or __index__ (numpy ints), never bool/float/str."""
    if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:  # the common case, first
        return value
    # numpy.bool_ too: its __index__ is deprecated in some numpy releases, an error in others.
    if isinstance(value, (bool, np.bool_)) or not hasattr(type(value), "__index__"):
        raise TypeError(f"expected an int, got {_describe(value)}")
    i = _index(value)
    if i < _INT64_MIN or i > _INT64_MAX:
        raise OverflowError(f"{i} does not fit in int64")
    return i


def _tokens(obj: Any, name: str, keep_uint64: bool) -> tuple[np.ndarray, int]:
    """A 1-D integer array the core reads in place, and its kvb_dtype: int32/int64 (and uint64
    when `keep_uint64`: count_eos compares it exactly) as given, other integer dtypes converted
    to int64, lists and tuples copied."""
    if type(obj) is np.ndarray and obj.ndim == 1:  # the per-call fast path: a dict lookup
        code = _in_place_code(obj, keep_uint64)
        if code is not None:
            return obj, code
    if isinstance(obj, (list, tuple)):
        return np.array([_as_int64(v) for v in obj], dtype=np.int64), 1
    arr = obj if type(obj) is np.ndarray else np.asarray(obj)
    kind = arr.dtype.kind
    if kind == "O":
        raise TypeError(f"{name} must be an integer array or sequence, got {_describe(obj)}")
    if kind not in "iu":  # type before shape, as in every package
        raise TypeError(f"{name} must have an integer dtype, got {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    code = _in_place_code(arr, keep_uint64)
    return (arr, code) if code is not None else (arr.astype(np.int64), 1)


def _in_place_code(arr: np.ndarray, keep_uint64: bool) -> int | None:
    """The kvb_dtype of a 1-D array the core can read as it is, or None to convert it."""
    code = _IN_PLACE.get(arr.dtype)
    if code is None or (code == 2 and not keep_uint64) or arr.strides[0] % arr.itemsize:
        return None
    return code


def _token_args(arr: np.ndarray, code: int) -> tuple:
    """(pointer, kvb_dtype, size, stride in elements): how an array crosses the C ABI. The
    pointer owns `arr`, so a conversion made for this call lives as long as the call."""
    return array_pointer(arr), code, arr.shape[0], arr.strides[0] // arr.itemsize


def _floats(obj: Any, name: str) -> np.ndarray:
    arr = np.asarray(obj) if obj is not None and not isinstance(obj, str) else None
    if arr is None or arr.dtype.kind == "O":
        raise TypeError(f"{name} must be a float32 array, got {_describe(obj)}")
    if arr.dtype.kind != "f" or arr.dtype.itemsize != 4:  # float32 in either byte order
        raise TypeError(f"{name} must be float32, got {arr.dtype}")
    if not arr.dtype.isnative or any(s % 4 for s in arr.strides):  # byte-swapped: converted
        arr = np.ascontiguousarray(arr, dtype=np.float32)
    return arr


def _float_args(arr: np.ndarray) -> tuple:
    """(address, ndim, shape, strides in elements) for the core's FloatArrayView."""
    return (
        array_pointer(arr, "float"),
        arr.ndim,
        int64_array(arr.shape),
        int64_array([s // 4 for s in arr.strides]),
    )


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


class PoolStats:
    """Live view of one pool's counters; holds its pool, which keeps the pool alive."""

    __slots__ = ("_pool",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("PoolStats has no constructor: use BlockPool.stats")

    @classmethod
    def _of(cls, pool: BlockPool) -> PoolStats:
        self = object.__new__(cls)
        object.__setattr__(self, "_pool", pool)
        return self

    def _read(self) -> Any:
        stats = new("kvb_pool_stats")
        lib.kvb_pool_stats_read(self._pool._handle, stats)
        return stats

    @property
    def allocated_total(self) -> int:
        return self._read().allocated_total

    @property
    def released_total(self) -> int:
        return self._read().released_total

    @property
    def peak_in_use(self) -> int:
        return self._read().peak_in_use

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"PoolStats.{name} is read-only")

    def __repr__(self) -> str:
        s = self._read()
        return (
            f"<PoolStats allocated_total={s.allocated_total} "
            f"released_total={s.released_total} peak_in_use={s.peak_in_use}>"
        )


class BlockPool:
    """Ref-counted KV-cache block allocator (a kvb_pool handle, freed with the object)."""

    __slots__ = ("_handle", "__weakref__")

    def __init__(self, num_blocks: int) -> None:
        out = new("kvb_pool *")
        _check(lib.kvb_pool_create(_as_int64(num_blocks), out))
        handle = deref(out)
        object.__setattr__(self, "_handle", handle)
        weakref.finalize(self, lib.kvb_pool_free, handle)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"BlockPool.{name} is read-only")

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
        out = new("int32_t")
        _check(lib.kvb_pool_refcount(self._handle, _as_int64(block), out))
        return deref(out)

    def refcounts(self) -> np.ndarray:
        out = new("kvb_buffer *")
        _check(lib.kvb_pool_refcounts(self._handle, out))
        return _adopt(deref(out))

    @property
    def stats(self) -> PoolStats:
        return PoolStats._of(self)

    def __repr__(self) -> str:
        return string(lib.kvb_pool_repr(self._handle))


# --- functions ----------------------------------------------------------------------------------


def common_prefix(a: Any, b: Any) -> int:
    """Length of the longest common prefix."""
    ta, tb = _tokens(a, "a", False), _tokens(b, "b", False)
    out = new("int64_t")
    _check(lib.kvb_common_prefix(*_token_args(*ta), *_token_args(*tb), out))
    return deref(out)


def count_eos(tokens: Any, eos: Any) -> int:
    """How many tokens equal eos (compared exactly, as int64)."""
    target = _as_int64(eos)
    out = new("int64_t")
    _check(lib.kvb_count_eos(*_token_args(*_tokens(tokens, "tokens", True)), target, out))
    return deref(out)


def rmsnorm(x: Any, weight: Any, eps: float = 1e-6, *, out: np.ndarray | None = None) -> np.ndarray:
    """Fused RMSNorm over the last dimension."""
    if eps is None or isinstance(eps, str):
        raise TypeError(f"eps must be a float, got {_describe(eps)}")
    c_eps = float(eps)
    xa, wa = _floats(x, "x"), _floats(weight, "weight")
    fresh = out is None  # kvbridge::Out in rmsnorm.hpp: a new buffer is not streamed
    if out is None:
        out = np.empty(xa.shape, np.float32)  # the core checks the arguments before writing
    else:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy.ndarray, got {_describe(out)}")
        if out.dtype != np.float32:
            raise TypeError(f"out must be float32, got {out.dtype}")
        if not (out.flags.c_contiguous and out.flags.writeable):
            raise ValueError("out must be a writeable C-contiguous array")
    status = lib.kvb_rmsnorm(
        *_float_args(xa), *_float_args(wa), c_eps, array_pointer(out, "float"), out.ndim,
        int64_array(out.shape), int(fresh),
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


def data_address(tokens: Any) -> int:
    """Address count_eos's C++ code reads tokens from (the same input path as count_eos)."""
    out = new("uintptr_t")
    _check(lib.kvb_testing_data_address(*_token_args(*_tokens(tokens, "tokens", True)), out))
    return deref(out)
