"""The contract's Python API over the `torch.ops.kvbridge_stable.*` operators.

The ops are those of kvbridge-torch, registered through the LibTorch stable ABI (csrc/ops.cpp).
What this front end adds, and why:
- the contract's argument rules (`_args.py`, beside it), where `torch.ops` would
  raise RuntimeError for a wrong type, a missing argument or an int past int64;
- every tensor's dtype checked here, before the op: the stable ABI has no c10 exception types,
  so no C++ kernel behind it can raise the contract's TypeError (csrc/ops.cpp says what it can);
- the one error path: each op's exceptions come tagged with the Python type the core's table
  names ("[ValueError] ..."), since torch 2.15 turns whatever a stable-ABI kernel throws into
  RuntimeError, and `_torch_glue.typed` raises that type (the same on every torch);
- numpy inputs shared with torch, and rmsnorm's fake kernels and autograd: `_torch_glue.py`,
  shared with kvbridge-torch;
- BlockPool: a Python class over a handle the library owns, freed exactly once, by __del__
  (there are no custom classes on the stable ABI).
The OpOverload objects are cached at import: the `torch.ops.x.y` attribute path costs a
dictionary walk per call on top of the dispatcher.
"""

from __future__ import annotations

from typing import Any, NoReturn

import torch

from . import _args, _torch_glue
from ._args import INT64_MAX as _INT64_MAX
from ._args import INT64_MIN as _INT64_MIN
from ._args import as_int64 as _as_int64
from ._args import describe as _describe

OPS = torch.ops.kvbridge_stable

_typed = _torch_glue.typed
# The library's ops through the one error path, by name (for the tests of its handles).
TYPED_OPS = _torch_glue.TypedOps(OPS)

_common_prefix = _typed(OPS.common_prefix.default)
_count_eos = _typed(OPS.count_eos.default)
_rmsnorm = _typed(OPS.rmsnorm.default)
_rmsnorm_out = _typed(OPS.rmsnorm.out)
_data_address = _typed(OPS.data_address.default)
_throw_kind = _typed(OPS.throw_kind.default)
_live_buffers = _typed(OPS.live_buffers.default)
_live_pools = _typed(OPS.live_pools.default)
_check_num_threads = _typed(OPS.check_num_threads.default)
_get_num_threads = _typed(OPS.get_num_threads.default)
_last_num_threads = _typed(OPS.last_num_threads.default)
_rmsnorm_paths = _typed(OPS.rmsnorm_paths.default)
_pool_create = _typed(OPS.pool_create.default)
_pool_destroy = _typed(OPS.pool_destroy.default)
_pool_num_blocks = _typed(OPS.pool_num_blocks.default)
_pool_num_free = _typed(OPS.pool_num_free.default)
_pool_allocate = _typed(OPS.pool_allocate.default)
_pool_allocate_many = _typed(OPS.pool_allocate_many.default)
_pool_retain = _typed(OPS.pool_retain.default)
_pool_release = _typed(OPS.pool_release.default)
_pool_refcount = _typed(OPS.pool_refcount.default)
_pool_refcounts = _typed(OPS.pool_refcounts.default)
_pool_stats = _typed(OPS.pool_stats.default)
_pool_repr = _typed(OPS.pool_repr.default)
_pool_stats_repr = _typed(OPS.pool_stats_repr.default)

# Token dtypes the library reads in place; other integer dtypes are converted to int64 first.
_IN_PLACE = frozenset({torch.int32, torch.int64})
_INTEGER = frozenset(
    {torch.uint8, torch.int8, torch.int16, torch.uint16, torch.uint32, torch.uint64} | _IN_PLACE
)
_FLOATS = frozenset({torch.float32, torch.bfloat16, torch.float16})


def _token_tensor(t: torch.Tensor, name: str, keep_uint64: bool) -> torch.Tensor:
    """A token tensor the library can read: its dtype checked (TypeError), converted where the
    library does not read it in place (uint64 kept where the function compares it exactly)."""
    dtype = t.dtype
    if dtype in _IN_PLACE or (keep_uint64 and dtype is torch.uint64):
        return t
    if dtype in _INTEGER:
        return t.to(torch.int64)
    raise TypeError(f"{name} must have an integer dtype, got {dtype}")


def _tokens(obj: Any, name: str, keep_uint64: bool) -> torch.Tensor:
    if type(obj) is not torch.Tensor:
        obj = _torch_glue.tokens(obj, name)
    return _token_tensor(obj, name, keep_uint64)


def _float_dtype(t: torch.Tensor, name: str) -> None:
    if t.dtype not in _FLOATS:
        raise TypeError(f"{name} must be float32, bfloat16 or float16, got {t.dtype}")


# --- functions ---------------------------------------------------------------------------------


def common_prefix(a: Any, b: Any) -> int:
    """Length of the longest common prefix."""
    return _common_prefix(_tokens(a, "a", False), _tokens(b, "b", False))


def count_eos(tokens: Any, eos: int) -> int:
    """How many tokens equal eos (compared exactly, as int64)."""
    tokens = _tokens(tokens, "tokens", True)
    if type(eos) is not int or not _INT64_MIN <= eos <= _INT64_MAX:
        eos = _as_int64(eos)
    return _count_eos(tokens, eos)


def rmsnorm(
    x: Any, weight: Any, eps: float = 1e-6, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Fused RMSNorm over the last dimension (float32 math; bf16/fp16 in and out)."""
    x, weight = _torch_glue.float_tensor(x, "x"), _torch_glue.float_tensor(weight, "weight")
    c_eps = _args.as_eps(eps)
    _float_dtype(x, "x")
    _float_dtype(weight, "weight")
    if out is None:
        return _rmsnorm(x, weight, c_eps)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor, got {_describe(out)}")
    if out.dtype is not x.dtype:
        raise TypeError(f"out must be {x.dtype}, got {out.dtype}")
    return _rmsnorm_out(x, weight, c_eps, out=out)


def live_buffers() -> int:
    """C++-allocated buffers now owned by Python objects."""
    return _live_buffers()


def live_pools() -> int:
    """C++ BlockPool objects now alive."""
    return _live_pools()


def set_num_threads(n: int) -> None:
    """Threads a kernel call may use (n >= 1): the core's check of n, then torch.set_num_threads
    (the stable ABI has no way to set it from C++; torch's own raises RuntimeError for 0)."""
    torch.set_num_threads(_check_num_threads(_as_int64(n)))


def get_num_threads() -> int:
    """Threads a kernel call may use: torch.get_num_threads(), read through the stable ABI."""
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
    return _data_address(_tokens(tokens, "tokens", True))


# --- BlockPool -----------------------------------------------------------------------------------


def _stats_read(pool: BlockPool) -> list[int]:
    return _pool_stats(pool._handle)


def _stats_repr(pool: BlockPool) -> str:
    return _pool_stats_repr(pool._handle)


# Its view holds the Python BlockPool, whose handle keeps the C++ pool alive.
PoolStats = _args.PoolStats


class BlockPool:
    """Ref-counted KV-cache block allocator over a handle the library owns (the stable ABI has
    no custom classes). The handle is this object's alone and freed once, when it goes."""

    __slots__ = ("_handle",)
    _handle: int

    def __init__(self, num_blocks: int) -> None:
        object.__setattr__(self, "_handle", _pool_create(_as_int64(num_blocks)))

    def __del__(self, _destroy=_pool_destroy) -> None:
        # Bound as a default: at interpreter exit this module's globals may be gone already.
        handle = getattr(self, "_handle", None)  # None: __init__ raised before a pool existed
        if handle is not None:
            _destroy(handle)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"BlockPool.{name} is read-only")

    @property
    def num_blocks(self) -> int:
        return _pool_num_blocks(self._handle)

    @property
    def num_free(self) -> int:
        return _pool_num_free(self._handle)

    def allocate(self, n: int) -> list[int] | None:
        return _pool_allocate(self._handle, _as_int64(n))

    def allocate_many(self, counts: Any) -> list[list[int]] | None:
        return _pool_allocate_many(self._handle, _tokens(counts, "counts", False))

    def retain(self, block: int) -> None:
        _pool_retain(self._handle, _as_int64(block))

    def release(self, block: int) -> None:
        _pool_release(self._handle, _as_int64(block))

    def refcount(self, block: int) -> int:
        return _pool_refcount(self._handle, _as_int64(block))

    def refcounts(self) -> torch.Tensor:
        return _pool_refcounts(self._handle)

    @property
    def stats(self) -> PoolStats:
        return PoolStats._view(self, _stats_read, _stats_repr)

    def __repr__(self) -> str:
        return _pool_repr(self._handle)


# --- rmsnorm: fake kernels and autograd (torch.compile and opcheck need them) ----------------

_torch_glue.register_rmsnorm("kvbridge_stable")
