"""The contract's Python API over the kvbridge torch operators and custom classes.

Every function here is a thin wrapper over a `torch.ops.kvbridge.*` op; the ops check their
tensors in C++, and every op is called through the one error path the torch packages share
(`_torch_glue.typed`: the core's exceptions come tagged with their contract type, since torch
2.15 makes them all RuntimeError). What the wrappers add, and why (torch's argument parsing
differs from docs/contract.md, "Errors"):
- the contract's argument rules (`_args.py`, beside it), which
  give TypeError/OverflowError where torch.ops would raise RuntimeError for a wrong type, a
  missing argument or an int that overflows int64;
- numpy inputs shared with torch.from_numpy (copied only where torch cannot express them:
  negative strides, byte-swapped data, dtypes torch cannot read), and rmsnorm's fake kernels
  and autograd: `_torch_glue.py`, shared with kvbridge-torch-stable.
The OpOverload objects are cached at import: the `torch.ops.kvbridge.x` attribute path costs
a dictionary walk per call on top of the dispatcher.
"""

from __future__ import annotations

from typing import Any, NoReturn

import torch

from . import _args, _torch_glue
from ._args import INT64_MAX as _INT64_MAX
from ._args import INT64_MIN as _INT64_MIN
from ._args import as_int64 as _as_int64
from ._args import describe as _describe

OPS = torch.ops.kvbridge
_typed = _torch_glue.typed
_common_prefix = _typed(OPS.common_prefix.default)
_count_eos = _typed(OPS.count_eos.default)
_rmsnorm = _typed(OPS.rmsnorm.default)
_rmsnorm_out = _typed(OPS.rmsnorm.out)
_rmsnorm_backward = _typed(OPS.rmsnorm_backward.default)
_data_address = _typed(OPS.data_address.default)
_throw_kind = _typed(OPS.throw_kind.default)
_live_buffers = _typed(OPS.live_buffers.default)
_live_pools = _typed(OPS.live_pools.default)
_set_num_threads = _typed(OPS.set_num_threads.default)
_get_num_threads = _typed(OPS.get_num_threads.default)
_last_num_threads = _typed(OPS.last_num_threads.default)
_rmsnorm_paths = _typed(OPS.rmsnorm_paths.default)
_pool_create = _typed(OPS.pool_create.default)
_pool_allocate = _typed(OPS.pool_allocate.default)
_pool_allocate_many = _typed(OPS.pool_allocate_many.default)
_pool_retain = _typed(OPS.pool_retain.default)
_pool_release = _typed(OPS.pool_release.default)
_pool_refcount = _typed(OPS.pool_refcount.default)
_pool_refcounts = _typed(OPS.pool_refcounts.default)


_from_numpy = _torch_glue.from_numpy
_tokens = _torch_glue.tokens
_float_tensor = _torch_glue.float_tensor


# --- functions ---------------------------------------------------------------------------------


# Fast paths: a tensor goes straight to the op, which checks its dtype and shape in C++ with the
# same messages (ops.cpp, with_tokens), and a plain int within int64 needs no conversion. Only
# other inputs pay for the Python-side checks; the benchmarks show what is left over the raw op.


def common_prefix(a: Any, b: Any) -> int:
    """Length of the longest common prefix."""
    if type(a) is not torch.Tensor:
        a = _tokens(a, "a")
    if type(b) is not torch.Tensor:
        b = _tokens(b, "b")
    return _common_prefix(a, b)


def count_eos(tokens: Any, eos: int) -> int:
    """How many tokens equal eos (compared exactly, as int64)."""
    if type(tokens) is not torch.Tensor:
        tokens = _tokens(tokens, "tokens")
    if type(eos) is not int or not _INT64_MIN <= eos <= _INT64_MAX:
        eos = _as_int64(eos)
    return _count_eos(tokens, eos)


def rmsnorm(
    x: Any, weight: Any, eps: float = 1e-6, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Fused RMSNorm over the last dimension (float32 math; bf16/fp16 in and out)."""
    x, weight = _float_tensor(x, "x"), _float_tensor(weight, "weight")
    c_eps = _args.as_eps(eps)
    if out is None:
        return _rmsnorm(x, weight, c_eps)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor, got {_describe(out)}")
    return _rmsnorm_out(x, weight, c_eps, out=out)


def live_buffers() -> int:
    """C++-allocated buffers now owned by Python objects."""
    return _live_buffers()


def live_pools() -> int:
    """C++ BlockPool objects now alive."""
    return _live_pools()


def set_num_threads(n: int) -> None:
    """Threads a kernel call may use (n >= 1): torch.set_num_threads, with the contract's errors
    (torch's own raises RuntimeError for 0 and for a float)."""
    _set_num_threads(_as_int64(n))


def get_num_threads() -> int:
    """Threads a kernel call may use: torch.get_num_threads()."""
    return _get_num_threads()


def last_num_threads() -> int:
    """Threads the last kernel call from this thread ran on (for the conformance suite)."""
    return _last_num_threads()


def rmsnorm_paths() -> str:
    """The paths the RMSNorm kernels take on this CPU, as the core words them."""
    return _rmsnorm_paths()


def throw(kind: str) -> NoReturn:
    """Throw the named C++ exception from the core (for the conformance suite)."""
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a str, got {_describe(kind)}")
    _throw_kind(kind)
    raise AssertionError("throw_kind returned")  # pragma: no cover


def data_address(tokens: Any) -> int:
    """Address count_eos's C++ code reads tokens from (the same input path as count_eos)."""
    if type(tokens) is not torch.Tensor:
        tokens = _tokens(tokens, "tokens")
    return _data_address(tokens)


# --- BlockPool -----------------------------------------------------------------------------------


def _stats_read(stats: Any) -> tuple[int, int, int]:
    return stats.allocated_total(), stats.released_total(), stats.peak_in_use()


def _stats_repr(stats: Any) -> str:
    return stats.repr()


# Its custom-class object holds an intrusive_ptr to the pool, which keeps the pool alive.
PoolStats = _args.PoolStats


class BlockPool:
    """Ref-counted KV-cache block allocator (a torch.classes.kvbridge.BlockPool)."""

    # The custom-class methods are looked up once here: a ScriptObject resolves a method name
    # on every attribute access, which costs more than the call itself. A try_ method is a
    # call's fast path; when the core refuses it (it changed nothing), the same call goes
    # through the op, which raises the contract's exception (csrc/ops.cpp says why).
    _METHODS = ("num_free", "try_allocate", "try_retain", "try_release", "try_refcount")
    __slots__ = ("_pool", *(f"_{m}" for m in _METHODS))

    def __init__(self, num_blocks: int) -> None:
        pool = _pool_create(_as_int64(num_blocks))
        object.__setattr__(self, "_pool", pool)
        for method in self._METHODS:
            object.__setattr__(self, f"_{method}", getattr(pool, method))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"BlockPool.{name} is read-only")

    @property
    def num_blocks(self) -> int:
        return self._pool.num_blocks()

    @property
    def num_free(self) -> int:
        return self._num_free()

    def allocate(self, n: int) -> list[int] | None:
        count = _as_int64(n)
        done, ids = self._try_allocate(count)
        return ids if done else _pool_allocate(self._pool, count)

    def allocate_many(self, counts: Any) -> list[list[int]] | None:
        if type(counts) is not torch.Tensor:
            counts = _tokens(counts, "counts")
        return _pool_allocate_many(self._pool, counts)

    def retain(self, block: int) -> None:
        b = _as_int64(block)
        if not self._try_retain(b):
            _pool_retain(self._pool, b)

    def release(self, block: int) -> None:
        b = _as_int64(block)
        if not self._try_release(b):
            _pool_release(self._pool, b)

    def refcount(self, block: int) -> int:
        b = _as_int64(block)
        count = self._try_refcount(b)
        return count if count >= 0 else _pool_refcount(self._pool, b)

    def refcounts(self) -> torch.Tensor:
        return _pool_refcounts(self._pool)

    @property
    def stats(self) -> PoolStats:
        return PoolStats._view(self._pool.stats(), _stats_read, _stats_repr)

    def __repr__(self) -> str:
        return self._pool.repr()


# --- rmsnorm: fake kernels and autograd (torch.compile and opcheck need them) ----------------

_torch_glue.register_rmsnorm("kvbridge")
