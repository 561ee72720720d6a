"""torch operators and a torch::class_ (TORCH_LIBRARY), built as users build them, with
torch.utils.cpp_extension.load (probes/torch/kvprobe_ops.cpp). Asked by ask_torch.py."""

from __future__ import annotations

from pathlib import Path

import torch

from outcomes import not_probed
from probing.ask_torch import (
    BUILD_FLAGS,
    CONTIGUOUS_HELD,
    TESTING_CPP,
    TORCH_PROBES,
    build_dir_of,
    floor_rmsnorm_tensors,
    op_answers,
    torch_check,
)
from probing.asking import floor_array, kinds, outcome
from probing.questions import ATTRIBUTE, CONST_REF, HANDLE_AFTER_FREE, REFERENCE_POLICY


def build(build_dir: Path):
    """The ops library, loaded into this process: its ops are torch.ops.kvprobe."""
    from torch.utils.cpp_extension import load

    load(name="kvprobe_ops", sources=[str(TORCH_PROBES / "kvprobe_ops.cpp"), str(TESTING_CPP)],
         is_python_module=False, build_directory=build_dir_of(build_dir, "ops"), **BUILD_FLAGS)  # fmt: skip
    return torch.ops.kvprobe


def answers(ops) -> dict:
    holder = torch.classes.kvprobe.Holder()
    return {
        **op_answers(ops, CONTIGUOUS_HELD),
        "references": {
            ATTRIBUTE: not_probed(
                "custom classes return values or intrusive_ptr, never references"
            ),
            CONST_REF: not_probed("as above"),
            REFERENCE_POLICY: not_probed("as above"),
            HANDLE_AFTER_FREE: not_probed("no handle: a ScriptObject is counted"),
        },
        "torch checks": torch_check(ops.check),
        "custom-class method": {
            k: outcome(holder.throw_kind, k, cause="how a torch::class_ method's exception is "
                       "translated") for k in kinds()},
    }  # fmt: skip


def compile_calls(ops, x) -> dict:
    """Each kind of op, and kvbridge_torch's rmsnorm (an op with a fake kernel)."""
    import kvbridge_torch

    w = torch.randn(x.shape[-1])
    return {
        "op with a CPU kernel only, no fake kernel": lambda x: ops.scale(x) + 1,
        "op with a fake kernel (kvbridge_torch.rmsnorm)": lambda x: (
            kvbridge_torch.rmsnorm(x, w) * 2
        ),
        "composite op (m.def with an implementation)": lambda x: ops.composite(x) + 1,
        "op returning an int": lambda x: x * ops.numel_of(x),
    }


# Functions handed to torch.jit.script, which reads their source (and `torch`, this module's).
def script_op(x):
    return torch.ops.kvprobe.scale(x)


def script_method(x):
    holder = torch.classes.kvprobe.Holder()
    holder.noop()
    return x


def script_calls(ops) -> dict:
    return {"an op": script_op, "a custom-class method": script_method}


def opcheck_calls(ops) -> dict:
    a = torch.randn(4)
    return {
        "op with no fake kernel": (ops.twice.default, (a,)),
        "op that mutates an input its schema does not declare": (ops.add_one_.default, (a.clone(),)),
        "op with no autograd formula, given requires_grad": (
            ops.twice.default, (a.clone().requires_grad_(),)),
    }  # fmt: skip


class CachedMethods:
    """A Python class over a torch::class_ object that looks its methods up once, as
    kvbridge_torch's BlockPool does (a ScriptObject resolves a method name on every access):
    the floors of a method and a property, with the lookups kvbridge's calls make."""

    __slots__ = ("_noop", "_take_int", "_value")

    def __init__(self, holder):
        self._noop, self._take_int, self._value = holder.noop, holder.take_int, holder.value

    def noop(self):
        self._noop()

    def take_int64(self, x):
        return self._take_int(x)

    @property
    def value(self):
        return self._value()


def floors(ops) -> dict[str, dict[str, tuple[str, dict]]]:
    """Ops and a torch::class_'s methods, looked up on every call and cached."""
    holder = torch.classes.kvprobe.Holder()
    cached = CachedMethods(holder)
    return {
        "torch ops": {
            "no-op": ("f()", {"f": ops.noop.default}),
            "one int": ("f(1)", {"f": ops.take_int.default}),
            "one array": (
                "f(t)",
                {"f": ops.numel_of.default, "t": torch.from_numpy(floor_array())},
            ),
            "one array, one int": (
                "f(t, 1)",
                {"f": ops.numel_plus.default, "t": torch.from_numpy(floor_array())},
            ),
            "two arrays": (
                "f(t, u)",
                {
                    "f": ops.numels_of.default,
                    "t": torch.from_numpy(floor_array()),
                    "u": torch.from_numpy(floor_array()),
                },
            ),
            "three arrays, one float": (
                "f(x, w, out, 1e-6)",
                {"f": ops.three_arrays.default, **floor_rmsnorm_tensors()},
            ),
            "method": ("h.noop()", {"h": holder}),
            "method, one int": ("h.take_int(1)", {"h": holder}),
            "property": ("h.value()", {"h": holder}),  # custom classes have methods only
        },
        "torch ops (methods cached)": {
            "method": ("h.noop()", {"h": cached}),
            "method, one int": ("h.take_int64(1)", {"h": cached}),
            "property": ("h.value", {"h": cached}),
        },
    }
