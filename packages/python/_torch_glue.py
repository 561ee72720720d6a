"""The torch front end's helpers (`_torch_ops.py`, beside it in both torch packages): the one
error path (`typed`), numpy inputs turned into tensors by the contract's rules, the GIL gate's
hooks, and rmsnorm's fake kernels and autograd, registered for an op namespace. Each wheel
carries this file beside `_args.py` (README.md here).
"""

from __future__ import annotations

import re
import warnings
from typing import Any, NoReturn

import numpy as np
import torch

from . import _args

# --- the one error path ---------------------------------------------------------------------
# torch 2.13 and 2.14 map a standard exception out of a kernel to the Python type the contract
# names; torch 2.15 makes every one RuntimeError. So each package's C++ tags what the core throws
# with that type's name, "[ValueError] <message>" (kvbridge::rethrow_tagged), and every op is
# called through `typed`, which raises that type: the same on every torch.

_TYPES = {t.__name__: t for t in (ValueError, IndexError, OverflowError, MemoryError, RuntimeError)}
_TAG = re.compile(r"\[(\w+)\] (.*)", re.DOTALL)


def reraise(e: RuntimeError) -> NoReturn:
    """Raise what an op raised: as its type where the library tagged it, else torch's own, as it
    is. Called in an op call's `except RuntimeError` (typed's, or a per-step call's own)."""
    tagged = _TAG.match(str(e))
    if tagged is None or tagged[1] not in _TYPES:
        raise e
    raise _TYPES[tagged[1]](tagged[2]) from None


def typed(op: Any) -> Any:
    """The op, the exceptions its library tagged raised as their types."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return op(*args, **kwargs)
        except RuntimeError as e:
            reraise(e)

    return call


def bound(overload: Any) -> Any:
    """An OpOverload's C++ callable, called without the overload's own Python frame: its
    __call__ does nothing else (dispatch, modes and fake tensors all happen past it)."""
    op = getattr(overload, "_op", None)
    return op if callable(op) else overload


class TypedOps:
    """An op namespace's ops (default overloads) through `typed`, by name: the library as its
    front end calls it, for tests that call ops directly."""

    def __init__(self, ops: Any) -> None:
        self._ops = ops

    def __getattr__(self, name: str) -> Any:
        return typed(getattr(self._ops, name).default)


# --- numpy inputs ----------------------------------------------------------------------------


def from_numpy(arr: np.ndarray) -> torch.Tensor:
    """Share a numpy array with torch; copy only what torch cannot view."""
    if not arr.dtype.isnative or any(s < 0 or s % arr.itemsize for s in arr.strides):
        # A real copy: ascontiguousarray may return a one-element array as is, negative stride
        # and all (numpy calls it contiguous), which from_numpy then refuses.
        arr = np.array(arr, dtype=arr.dtype.newbyteorder("="), order="C", copy=True)
    if not arr.flags.writeable:
        # torch warns that it cannot mark a tensor read-only; kvbridge's ops only read their
        # inputs, so sharing a read-only array is safe here.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(arr)
    return torch.from_numpy(arr)


def tokens(obj: Any, name: str, keep_uint64: bool) -> torch.Tensor:
    """A tensor for a token argument that is not one, by the contract's rule (lists copied to
    int64, arrays shared; uint64 kept where the function compares it exactly)."""
    return from_numpy(_args.tokens(obj, name, keep_uint64)[0])


def float_tensor(obj: Any, name: str) -> torch.Tensor:
    """A tensor for an rmsnorm argument; its dtype is the op's to check."""
    if isinstance(obj, torch.Tensor):
        return obj
    return from_numpy(_args.array_of(obj, name, "a float32 array"))


def gate_hooks(ops: Any) -> tuple:
    """The GIL gate's hooks (common_cpp's testing.hpp) of an op namespace, for its _testing:
    arm_gate(timeout_s), open_gate() and close_gate(), the ops through the one error path
    (they take and return plain numbers)."""
    return tuple(
        typed(getattr(ops, name).default) for name in ("arm_gate", "open_gate", "close_gate")
    )


# The guard torch's own autograd kernel for a Python-registered formula enters before it
# redispatches when no graph is wanted (torch/_library/autograd.py, every torch this project
# supports). A private name, so looked up here, never assumed: without it, nothing is skipped.
_BELOW_AUTOGRAD = getattr(torch._C, "_AutoDispatchBelowAutograd", None)
_is_compiling = torch.compiler.is_compiling


def call_below_autograd(op: Any, x: torch.Tensor, weight: torch.Tensor, *rest: Any) -> Any:
    """rmsnorm's op called past its Python-registered autograd kernel where that kernel would do
    nothing but call it (no input requires grad, or grad mode is off), as the kernel itself then
    does: that kernel is a Python function torch runs on every call (a 1x4096 float32 call took
    12.4 us through it, 6.9 below it: Xeon, torch 2.13). Not while torch.compile traces the
    call: dynamo cannot trace the guard, and the traced op carries its formula anyway."""
    if (
        _BELOW_AUTOGRAD is None
        or _is_compiling()
        or (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad))
    ):
        return op(x, weight, *rest)
    with _BELOW_AUTOGRAD():
        return op(x, weight, *rest)


def register_rmsnorm(namespace: str, autograd: bool) -> None:
    """rmsnorm's fake (meta) kernels, so torch.compile and opcheck trace shapes without running
    C++, and, with `autograd`, its autograd formula, with the C++ backward
    (`<namespace>::rmsnorm_backward`), so they see one differentiable op instead of an opaque
    call. A library that can register its formula in C++ does (the classic one: ops.cpp): one
    registered here runs Python in every call of the op, gradients wanted or not, unless the
    call goes below it (`call_below_autograd`)."""

    @torch.library.register_fake(f"{namespace}::rmsnorm")
    def _rmsnorm_fake(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        torch._check(x.dim() >= 1, lambda: "x must have at least 1 dimension, got a 0-d array")
        torch._check(
            weight.dim() == 1, lambda: f"weight must be 1-D, got shape {tuple(weight.shape)}"
        )
        torch._check(
            weight.shape[0] == x.shape[-1],
            lambda: f"weight has length {weight.shape[0]}, expected x.shape[-1] = {x.shape[-1]}",
        )
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    @torch.library.register_fake(f"{namespace}::rmsnorm_backward")
    def _rmsnorm_backward_fake(grad, x, weight, eps):
        return torch.empty_like(x, memory_format=torch.contiguous_format), torch.empty_like(weight)

    if not autograd:
        return
    backward = getattr(torch.ops, namespace).rmsnorm_backward.default

    def setup_context(ctx, inputs, output) -> None:
        x, weight, eps = inputs
        ctx.save_for_backward(x, weight)
        ctx.eps = eps

    def _backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x, grad_weight = backward(grad, x, weight, ctx.eps)
        return (
            grad_x if ctx.needs_input_grad[0] else None,
            grad_weight if ctx.needs_input_grad[1] else None,
            None,
        )

    torch.library.register_autograd(f"{namespace}::rmsnorm", _backward, setup_context=setup_context)
