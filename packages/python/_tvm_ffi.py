"""The contract's API over libkvbridge_tvm_ffi (src/bindings.cpp), loaded with tvm_ffi.load_module.

tvm-ffi converts each argument by its Python type and checks it against the C++ signature, but
not as the contract reads arguments, so every one goes through the contract's rules first
(`_args.py`, beside it in packages/python), and the library gets what they return:
- an int: tvm-ffi takes a bool as an int, wraps an int that does not fit an int32 parameter and
  names a TypeError where an int does not fit int64; `as_int64` decides all three;
- an array: tvm-ffi takes anything with `__dlpack__` and hands C++ its dtype and strides
  unchecked; the library reads a numpy array in place where it can and otherwise raises
  NotReadInPlace, which the rule (`_tokens`) answers here by converting the array or raising
  the contract's error: so the per-step token calls test the array's type alone;
- a read-only array: tvm-ffi asks numpy for a legacy DLPack capsule, which cannot say read-only,
  so numpy refuses to export one (BufferError, before any C++ runs). The call is made again with
  the array exported as DLPack 1.0, which can (`_exported`): read in place, not copied;
- errors: the library raises tvm::ffi::Error with the contract's type as its kind, which
  tvm-ffi raises as that Python type; OverflowError is the one kind it has no entry for;
- the GIL: tvm-ffi releases it around every call, so the kernels run without it;
- memory: refcounts() comes back as a tvm_ffi.Tensor that owns the core's buffer, and numpy
  takes it through DLPack without a copy; the buffer is freed once, with the last array over it.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

import numpy as np
import tvm_ffi

from . import _args
from ._args import INT64_MAX as _INT64_MAX
from ._args import INT64_MIN as _INT64_MIN
from ._args import as_int64 as _as_int64
from ._args import describe as _describe
from ._args import tokens as _tokens

_NDARRAY = np.ndarray

_lib = tvm_ffi.load_module(os.path.join(os.path.dirname(__file__), "libkvbridge_tvm_ffi.so"))
tvm_ffi.register_error("OverflowError", OverflowError)


class _NotReadInPlace(Exception):
    """The library does not read this token array in place (src/bindings.cpp, `tokens`); never
    raised to a user: the rule converts the array or raises the contract's error."""


tvm_ffi.register_error("kvbridge.NotReadInPlace", _NotReadInPlace)
# A call retried through the rule: numpy exports no DLPack for the array (BufferError: see
# _exported, and _tokens's strides), or the library does not read it in place.
_RETRIED = (BufferError, _NotReadInPlace)


def _exported(arr: Any) -> Any:
    """A read-only numpy array as a tvm_ffi.Tensor over its memory (DLPack 1.0 says read-only);
    anything else as it is."""
    if isinstance(arr, np.ndarray) and not arr.flags.writeable:
        return tvm_ffi.from_dlpack(arr.__dlpack__(max_version=(1, 0)))
    return arr


# --- BlockPool --------------------------------------------------------------------------------

PoolStats = _args.PoolStats


def _stats_read(pool: BlockPool) -> tuple[int, int, int]:
    return _METHODS["stats_read"](pool)


def _stats_repr(pool: BlockPool) -> str:
    return _METHODS["stats_repr"](pool)


@tvm_ffi.register_object("kvbridge.BlockPool")
@_args.block_pool(_stats_read, _stats_repr)
class BlockPool(tvm_ffi.Object):
    """Ref-counted KV-cache block allocator (a tvm-ffi object: the core's pool, freed with the
    last reference to it)."""

    def __init__(self, num_blocks: int) -> None:
        self.__ffi_init__(_as_int64(num_blocks))

    @property
    def num_blocks(self) -> int:
        return _num_blocks(self)

    @property
    def num_free(self) -> int:
        return _num_free(self)

    def allocate(self, n: int) -> list[int] | None:
        ids = _allocate(self, _as_int64(n))
        return None if ids is None else list(ids)

    def allocate_many(self, counts: Any) -> list[list[int]] | None:
        arr, _ = _tokens(counts, "counts", False)
        batch = np.ascontiguousarray(arr, dtype=np.int64)
        flat = _allocate_many(self, batch)
        if flat is None:
            return None
        lists, start = [], 0
        for c in batch.tolist():
            lists.append(list(flat[start : start + c]))
            start += c
        return lists

    def retain(self, block: int) -> None:
        _retain(self, _as_int64(block))

    def release(self, block: int) -> None:
        _release(self, _as_int64(block))

    def refcount(self, block: int) -> int:
        if type(block) is not int or not _INT64_MIN <= block <= _INT64_MAX:  # per block, per step
            block = _as_int64(block)
        return _refcount(self, block)

    def refcounts(self) -> np.ndarray:
        return np.from_dlpack(_refcounts(self))

    def __repr__(self) -> str:
        return _repr(self)


# The C++ methods (src/bindings.cpp), each called with the pool first; the class above defines the
# names users call, so tvm-ffi does not install these on it.
_METHODS = {m.name: m.func for m in BlockPool.__tvm_ffi_type_info__.methods}
_num_blocks, _num_free = _METHODS["num_blocks"], _METHODS["num_free"]
_allocate, _allocate_many = _METHODS["allocate"], _METHODS["allocate_many"]
_retain, _release = _METHODS["retain"], _METHODS["release"]
_refcount, _refcounts = _METHODS["refcount"], _METHODS["refcounts"]
_repr = _METHODS["__repr__"]


# --- functions ----------------------------------------------------------------------------------

_common_prefix, _count_eos, _rmsnorm = _lib.common_prefix, _lib.count_eos, _lib.rmsnorm


def common_prefix(a: Any, b: Any) -> int:
    """Length of the longest common prefix."""
    # A numpy array goes as it is: the library reads it in place or says it does not (DLPack
    # strides are in elements, so every numpy stride it exports is whole); anything else, and
    # what the library does not read, through the rule (`_tokens`).
    if type(a) is not _NDARRAY:
        a = _tokens(a, "a", False)[0]
    if type(b) is not _NDARRAY:
        b = _tokens(b, "b", False)[0]
    try:
        return _common_prefix(a, b)
    except _RETRIED:
        pass  # outside the handler, so an error of the rule's is not chained to this one
    a, b = _tokens(a, "a", False)[0], _tokens(b, "b", False)[0]
    return _common_prefix(_exported(a), _exported(b))


def count_eos(tokens: Any, eos: Any) -> int:
    """How many tokens equal eos (compared exactly, as int64)."""
    # The call a decode loop makes every step, so its Python frames are counted: the plain-int
    # shortcut the C ABI front end takes, and common_prefix's test of the array.
    if type(eos) is not int or not _INT64_MIN <= eos <= _INT64_MAX:
        eos = _as_int64(eos)
    if type(tokens) is not _NDARRAY:
        tokens = _tokens(tokens, "tokens", True)[0]
    try:
        return _count_eos(tokens, eos)
    except _RETRIED:
        pass  # outside the handler, so an error of the rule's is not chained to this one
    return _count_eos(_exported(_tokens(tokens, "tokens", True)[0]), eos)


def rmsnorm(x: Any, weight: Any, eps: float = 1e-6, *, out: np.ndarray | None = None) -> np.ndarray:
    """Fused RMSNorm over the last dimension."""
    xa, wa, c_eps, out, fresh = _args.rmsnorm_arrays(x, weight, eps, out)
    try:
        _rmsnorm(xa, wa, out, c_eps, fresh)
    except BufferError:
        _rmsnorm(_exported(xa), _exported(wa), out, c_eps, fresh)
    return out


live_buffers = _lib.live_buffers
live_pools = _lib.live_pools
get_num_threads = _lib.get_num_threads


def set_num_threads(n: int) -> None:
    """Threads a kernel call may use (n >= 1)."""
    _lib.set_num_threads(_as_int64(n))


_lib.default_num_threads()  # a malformed KVBRIDGE_NUM_THREADS fails the import, naming it


# --- _testing -----------------------------------------------------------------------------------


def throw(kind: str) -> NoReturn:
    """Throw the named C++ exception inside the core (for the conformance suite)."""
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a str, got {_describe(kind)}")
    _lib.testing_throw(kind)
    raise AssertionError("testing_throw returned")  # pragma: no cover


def data_address(tokens: Any) -> int:
    """Address count_eos's C++ code reads tokens from (the same input path as count_eos)."""
    arr, _ = _tokens(tokens, "tokens", True)
    try:
        return _lib.testing_data_address(arr)
    except BufferError:
        return _lib.testing_data_address(_exported(arr))


last_num_threads = _lib.testing_last_num_threads
# The GIL gate (common_cpp's testing.hpp).
arm_gate = _lib.testing_arm_gate
open_gate = _lib.testing_open_gate
close_gate = _lib.testing_close_gate
