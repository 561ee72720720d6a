"""The contract's Python API over kvbridge's torch operators: the one front end of both torch
packages, each of which installs it beside its own library (packages/registry.json's `shares`).

The two libraries register the same ops, each in its own namespace, which the package's
`_build_info.py` names: kvbridge-torch's `torch.ops.kvbridge` (TORCH_LIBRARY, built against one
torch's C++ ABI) and kvbridge-torch-stable's `torch.ops.kvbridge_stable` (the LibTorch stable
ABI: one library for every torch from its target on). Where the stable ABI lacks something,
this file makes up for it (`STABLE_ABI`, from the same file), and those are the only places
the two differ:
- a wrong dtype: the classic ops raise c10's TypeError from C++; the stable ABI has none, so
  there rmsnorm's dtypes are checked here, and a token dtype its op refuses ("[NotReadInPlace]",
  its csrc/ops.cpp) is converted here or refused with TypeError, and the op called again;
- BlockPool: the classic library's is a torch::class_ (a ScriptObject, which its intrusive_ptr
  keeps alive); the stable ABI has no custom classes, so there the pool is a handle the library
  owns, freed exactly once, by __del__;
- the thread count: the classic op sets torch's; the stable ABI cannot, so there the core
  checks n and torch.set_num_threads sets it;
- rmsnorm's autograd: the classic library registers its formula in C++ (csrc/ops.cpp); the
  stable ABI has no autograd API, so there it is registered from Python, and where no graph
  is wanted the front end calls the op below that Python kernel (`call_below_autograd`).
What it adds for both, and why (torch's argument parsing differs from docs/contract.md,
"Errors"):
- the contract's argument rules (`_args.py`, beside it), which give TypeError/OverflowError
  where torch.ops would raise RuntimeError for a wrong type, a missing argument or an int that
  overflows int64;
- the one error path: every op's RuntimeError goes to `_torch_glue.reraise` (through `typed`,
  or the per-call ops' own `except`), since torch 2.15 turns whatever a kernel throws into
  RuntimeError: both libraries tag the core's exceptions with their contract type
  (kvbridge::rethrow_tagged), and `reraise` raises that type, on every torch;
- numpy inputs shared with torch.from_numpy (copied only where torch cannot express them:
  negative strides, byte-swapped data, dtypes torch cannot read), and rmsnorm's fake kernels
  and autograd: `_torch_glue.py`, beside it.
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
from ._build_info import OPS_NAMESPACE, STABLE_ABI

OPS = getattr(torch.ops, OPS_NAMESPACE)
# The library's ops through the one error path, by name (for tests that call ops directly).
TYPED_OPS = _torch_glue.TypedOps(OPS)

_typed = _torch_glue.typed
_reraise = _torch_glue.reraise
# The per-step token ops and rmsnorm are called bare, with typed's `except` written in their
# callers: a frame fewer on a call whose cost is all overhead (at a decode step, 1 us of 18 was
# the front end's). And not through the OpOverload either: its __call__ is a Python frame that
# only calls the C++ callable it keeps as `_op` (torch/_ops.py, every torch this project
# supports), 140-180 ns of a 0.7-1 us call (the costs page; 400 ns with rmsnorm's out=). Where
# a torch has no `_op`, the overload itself.
_common_prefix = _torch_glue.bound(OPS.common_prefix.default)
_count_eos = _torch_glue.bound(OPS.count_eos.default)
# rmsnorm's two overloads: bare in eager calls; as OpOverloads where torch.compile traces the
# call, since dynamo traces an OpOverload into its graph and breaks the graph at the bare callable.
_RMSNORM_BARE = (_torch_glue.bound(OPS.rmsnorm.default), _torch_glue.bound(OPS.rmsnorm.out))
_RMSNORM_TRACED = (OPS.rmsnorm.default, OPS.rmsnorm.out)
_is_compiling = torch.compiler.is_compiling
_data_address = _typed(OPS.data_address.default)
_throw_kind = _typed(OPS.throw_kind.default)
_live_buffers = _typed(OPS.live_buffers.default)
_live_pools = _typed(OPS.live_pools.default)
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

_float_tensor = _torch_glue.float_tensor
_call_below_autograd = _torch_glue.call_below_autograd


# --- what the stable ABI makes up for: dtypes ---------------------------------------------------


# A token tensor goes straight to its op, which checks its dtype and shape in C++ (the classic
# ops raise c10's TypeError with the contract's message: ops.cpp, with_tokens). The stable ABI
# has no c10 exception types, so its ops refuse a dtype they do not read in place with a
# "[NotReadInPlace]" tag (its csrc/ops.cpp), and the front end then applies the rule (`_tokens`:
# convert, or the contract's TypeError) and calls again: no dtype is read in Python on the
# per-step calls' common case. The benchmarks show what is left over the raw op.
_NOT_READ_IN_PLACE = "[NotReadInPlace] "


def _raise_unless_not_read_in_place(e: RuntimeError) -> None:
    """Return where the op refused a token tensor's dtype (the caller applies the rule and calls
    again); else raise what the op raised (`_reraise`)."""
    if not str(e).startswith(_NOT_READ_IN_PLACE):
        _reraise(e)


# Token dtypes the library reads in place; other integer dtypes are converted to int64 first.
_IN_PLACE = frozenset({torch.int32, torch.int64})
_INTEGER = frozenset(
    {torch.uint8, torch.int8, torch.int16, torch.uint16, torch.uint32, torch.uint64} | _IN_PLACE
)
_FLOATS = frozenset({torch.float32, torch.bfloat16, torch.float16})
# What the stable ABI's _tokens hands over as it is (uint64 converted, kept where the function
# compares it exactly).
_AS_IS_WIDENED, _AS_IS_EXACT = _IN_PLACE, _IN_PLACE | {torch.uint64}


if STABLE_ABI:

    def _tokens(obj: Any, name: str, keep_uint64: bool) -> torch.Tensor:
        """A token argument as a tensor by the contract's rule (`_torch_glue.tokens`), its dtype
        checked (TypeError) and converted where the library does not read it in place (uint64
        kept where the function compares it exactly)."""
        t = obj if type(obj) is torch.Tensor else _torch_glue.tokens(obj, name, keep_uint64)
        dtype = t.dtype
        if dtype in (_AS_IS_EXACT if keep_uint64 else _AS_IS_WIDENED):
            return t
        if dtype in _INTEGER:
            return t.to(torch.int64)
        raise TypeError(f"{name} must have an integer dtype, got {dtype}")

else:
    _tokens = _torch_glue.tokens  # only what is not a tensor: a tensor's dtype is the op's


def _float_dtype(t: torch.Tensor, name: str) -> None:
    if t.dtype not in _FLOATS:
        raise TypeError(f"{name} must be float32, bfloat16 or float16, got {t.dtype}")


# --- functions ---------------------------------------------------------------------------------


def common_prefix(a: Any, b: Any) -> int:
    """Length of the longest common prefix."""
    if type(a) is not torch.Tensor:
        a = _tokens(a, "a", False)
    if type(b) is not torch.Tensor:
        b = _tokens(b, "b", False)
    try:
        return _common_prefix(a, b)
    except RuntimeError as e:
        _raise_unless_not_read_in_place(e)
    try:
        return _common_prefix(_tokens(a, "a", False), _tokens(b, "b", False))
    except RuntimeError as e:
        _reraise(e)


def count_eos(tokens: Any, eos: int) -> int:
    """How many tokens equal eos (compared exactly, as int64)."""
    if type(tokens) is not torch.Tensor:
        tokens = _tokens(tokens, "tokens", True)
    if type(eos) is not int or not _INT64_MIN <= eos <= _INT64_MAX:
        eos = _as_int64(eos)
    try:
        return _count_eos(tokens, eos)
    except RuntimeError as e:
        _raise_unless_not_read_in_place(e)
    try:
        return _count_eos(_tokens(tokens, "tokens", True), eos)
    except RuntimeError as e:
        _reraise(e)


def rmsnorm(
    x: Any, weight: Any, eps: float = 1e-6, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Fused RMSNorm over the last dimension (float32 math; bf16/fp16 in and out)."""
    # Each check's common case inline and the op called bare, typed's `except` written here (as
    # in the per-step token calls): at a decode step's shape the call is a few microseconds of
    # work, and each Python frame around it tens of nanoseconds more.
    if type(x) is not torch.Tensor:
        x = _float_tensor(x, "x")
    if type(weight) is not torch.Tensor:
        weight = _float_tensor(weight, "weight")
    if type(eps) is not float:
        eps = _args.as_eps(eps)
    if STABLE_ABI and (x.dtype not in _FLOATS or weight.dtype not in _FLOATS):
        _float_dtype(x, "x")
        _float_dtype(weight, "weight")
    op, op_out = _RMSNORM_TRACED if _is_compiling() else _RMSNORM_BARE
    try:
        if out is None:
            if STABLE_ABI:  # its autograd formula is Python's (_torch_glue.register_rmsnorm)
                return _call_below_autograd(op, x, weight, eps)
            return op(x, weight, eps)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor, got {_describe(out)}")
        if STABLE_ABI and out.dtype is not x.dtype:
            raise TypeError(f"out must be {x.dtype}, got {out.dtype}")
        return op_out(x, weight, eps, out=out)
    except RuntimeError as e:
        _reraise(e)


def live_buffers() -> int:
    """C++-allocated buffers now owned by Python objects."""
    return _live_buffers()


def live_pools() -> int:
    """C++ BlockPool objects now alive."""
    return _live_pools()


if STABLE_ABI:
    _check_num_threads = _typed(OPS.check_num_threads.default)

    def set_num_threads(n: int) -> None:
        """Threads a kernel call may use (n >= 1): the core's check of n, then
        torch.set_num_threads (the stable ABI cannot set it from C++; torch's own raises
        RuntimeError for 0)."""
        torch.set_num_threads(_check_num_threads(_as_int64(n)))

else:
    _set_num_threads = _typed(OPS.set_num_threads.default)

    def set_num_threads(n: int) -> None:
        """Threads a kernel call may use (n >= 1): torch.set_num_threads, with the contract's
        errors (torch's own raises RuntimeError for 0 and for a float)."""
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
    if STABLE_ABI or type(tokens) is not torch.Tensor:
        tokens = _tokens(tokens, "tokens", True)
    return _data_address(tokens)


# --- BlockPool ---------------------------------------------------------------------------------

PoolStats = _args.PoolStats

if STABLE_ABI:
    _pool_destroy = _typed(OPS.pool_destroy.default)
    _pool_num_blocks = _typed(OPS.pool_num_blocks.default)
    _pool_num_free = _typed(OPS.pool_num_free.default)
    _pool_stats = _typed(OPS.pool_stats.default)
    _pool_repr = _typed(OPS.pool_repr.default)
    _pool_stats_repr = _typed(OPS.pool_stats_repr.default)

    def _stats_read(pool: BlockPool) -> list[int]:
        return _pool_stats(pool._handle)

    def _stats_repr(pool: BlockPool) -> str:
        return _pool_stats_repr(pool._handle)

    @_args.block_pool(_stats_read, _stats_repr)
    class BlockPool:
        """Ref-counted KV-cache block allocator over a handle the library owns (the stable ABI
        has no custom classes). The handle is this object's alone and freed once, when it
        goes."""

        __slots__ = ("_handle",)
        _handle: int

        def __init__(self, num_blocks: int) -> None:
            object.__setattr__(self, "_handle", _pool_create(_as_int64(num_blocks)))

        def __del__(self, _destroy=_pool_destroy) -> None:
            # Bound as a default: at interpreter exit this module's globals may be gone already.
            handle = getattr(self, "_handle", None)  # None: __init__ raised before a pool existed
            if handle is not None:
                _destroy(handle)

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

        def __repr__(self) -> str:
            return _pool_repr(self._handle)

else:
    # The stats view holds the Python pool, whose custom-class object keeps the C++ pool alive.
    def _stats_read(pool: BlockPool) -> tuple[int, int, int]:
        stats = pool._pool.stats()
        return stats.allocated_total(), stats.released_total(), stats.peak_in_use()

    def _stats_repr(pool: BlockPool) -> str:
        return pool._pool.stats().repr()

    # The custom-class methods each pool looks up once: a ScriptObject resolves a method name on
    # every attribute access, which costs more than the call itself. A try_ method is a call's
    # fast path; when the core refuses it (it changed nothing), the same call goes through the
    # op, which raises the contract's exception (csrc/ops.cpp says why).
    _CACHED = ("num_free", "try_allocate", "try_retain", "try_release", "try_refcount")

    @_args.block_pool(_stats_read, _stats_repr)
    class BlockPool:
        """Ref-counted KV-cache block allocator (a torch.classes.kvbridge.BlockPool)."""

        __slots__ = ("_pool", *(f"_{m}" for m in _CACHED))

        def __init__(self, num_blocks: int) -> None:
            pool = _pool_create(_as_int64(num_blocks))
            object.__setattr__(self, "_pool", pool)
            for method in _CACHED:
                object.__setattr__(self, f"_{method}", getattr(pool, method))

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
                counts = _tokens(counts, "counts", False)
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

        def __repr__(self) -> str:
            return self._pool.repr()


# --- rmsnorm: fake kernels and autograd (torch.compile and opcheck need them) ----------------

# The stable ABI has no autograd API: its formula is registered from Python, the classic one's in
# C++ (ops.cpp).
_torch_glue.register_rmsnorm(OPS_NAMESPACE, autograd=STABLE_ABI)
