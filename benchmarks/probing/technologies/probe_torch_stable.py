"""torch operators on the LibTorch stable ABI (STABLE_TORCH_LIBRARY), built with
torch.utils.cpp_extension.load for the stable ABI's target, as kvbridge-torch-stable is
(probes/torch/kvprobe_stable.cpp). No custom classes there: an object is a handle, its
address. Asked by ask_torch.py."""

from __future__ import annotations

from pathlib import Path

import torch

from outcomes import not_probed
from probing.ask_torch import (
    TESTING_CPP,
    TORCH_PROBES,
    build_dir_of,
    floor_rmsnorm_tensors,
    op_answers,
    over_handle,
    torch_check,
)
from probing.asking import ROOT, after_free, floor_array, handle_calls
from probing.questions import ATTRIBUTE, CHECKS, CONST_REF, HANDLE_AFTER_FREE, REFERENCE_POLICY

# The oldest torch the probe is built for, as kvbridge-torch-stable is built (its
# CMakeLists.txt): TORCH_TARGET_VERSION, major.minor in the top 16 bits.
STABLE_TARGET = "-DTORCH_TARGET_VERSION=0x020b000000000000"


def build(build_dir: Path) -> Path:
    """The stable-ABI library, loaded into this process (its ops: torch.ops.kvprobe_stable);
    its file, which a child process loads too."""
    from torch.utils.cpp_extension import load

    load(name="kvprobe_stable", sources=[str(TORCH_PROBES / "kvprobe_stable.cpp"), str(TESTING_CPP)],
         is_python_module=False, build_directory=build_dir_of(build_dir, "stable"),
         extra_include_paths=[str(ROOT / "common_cpp" / "include")],
         extra_cflags=["-O3", "-DNDEBUG", STABLE_TARGET], verbose=False)  # fmt: skip
    return build_dir / "stable" / "kvprobe_stable.so"


# A child that loads the library, frees an object and reads it through its handle.
AFTER_FREE = """
import torch
torch.ops.load_library({library!r})
o = torch.ops.kvprobe_stable
handle = o.counter_create()
o.counter_destroy(handle)
print(o.counter_value(handle))
"""


def answers(library: Path) -> dict:
    ops = torch.ops.kvprobe_stable
    only_std = "the stable ABI has only STD_TORCH_CHECK, a std::runtime_error"
    checks = torch_check(ops.check)
    return {
        **op_answers(
            ops, " (`Tensor dense = torch::stable::contiguous(t); dense.const_data_ptr<int64_t>()`)"
        ),
        "references": {
            ATTRIBUTE: not_probed("the stable ABI has no custom classes: nothing returns a reference"),
            CONST_REF: not_probed("as above"),
            REFERENCE_POLICY: not_probed("as above"),
            HANDLE_AFTER_FREE: after_free(AFTER_FREE.format(library=str(library))),
        },
        "torch checks": {k: checks[k] if k == "TORCH_CHECK" else not_probed(only_std)
                         for k in CHECKS},
    }  # fmt: skip


def compile_calls(library: Path, x) -> dict:
    """An op with no fake kernel, and kvbridge_torch_stable's rmsnorm (one with a fake kernel)."""
    import kvbridge_torch_stable

    stable = torch.ops.kvprobe_stable
    w = torch.randn(x.shape[-1])
    return {
        "stable-ABI op with a CPU kernel only, no fake kernel": lambda x: stable.scale(x) + 1,
        "stable-ABI op with a fake kernel (kvbridge_torch_stable.rmsnorm)": (
            lambda x: kvbridge_torch_stable.rmsnorm(x, w) * 2),
    }  # fmt: skip


def opcheck_calls(library: Path) -> dict:
    return {"stable-ABI op with no fake kernel": (torch.ops.kvprobe_stable.scale.default,
                                                  (torch.randn(4),))}  # fmt: skip


def floors(library: Path) -> dict[str, dict[str, tuple[str, dict]]]:
    """Its ops, and a Python class over its handle, written as kvbridge_torch_stable's BlockPool
    is (each op's OpOverload looked up once)."""
    stable = torch.ops.kvprobe_stable
    return {
        "torch stable ABI": {
            "no-op": ("f()", {"f": stable.noop.default}),
            "one int": ("f(1)", {"f": stable.take_int.default}),
            "one array": ("f(t)", {"f": stable.numel_of.default, "t": torch.from_numpy(floor_array())}),
            "one array, one int": ("f(t, 1)", {"f": stable.numel_plus.default,
                                               "t": torch.from_numpy(floor_array())}),
            "two arrays": ("f(t, u)", {"f": stable.numels_of.default, "t": torch.from_numpy(floor_array()),
                                       "u": torch.from_numpy(floor_array())}),
            "three arrays, one float": ("f(x, w, out, 1e-6)", {"f": stable.three_arrays.default,
                                        **floor_rmsnorm_tensors()}),
        },
        "torch stable ABI (Python class)": handle_calls(over_handle(
            stable.counter_noop.default, stable.counter_take_int.default,
            stable.counter_value.default, stable.counter_create())),
    }  # fmt: skip
