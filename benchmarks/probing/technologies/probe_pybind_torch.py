"""pybind11 in a torch extension: a hand-written PYBIND11_MODULE built with
torch.utils.cpp_extension.load (probes/torch/kvprobe_pybind.cpp). Asked by ask_torch.py."""

from __future__ import annotations

from pathlib import Path

from probing.ask_torch import (
    BUILD_FLAGS,
    TESTING_CPP,
    TORCH_PROBES,
    build_dir_of,
    contiguous_write,
    module_answers,
)

SOURCE = TORCH_PROBES / "kvprobe_pybind.cpp"


def build(build_dir: Path):
    from torch.utils.cpp_extension import load

    return load(name="kvprobe_pybind", sources=[str(SOURCE), str(TESTING_CPP)],
                build_directory=build_dir_of(build_dir, "pybind"), **BUILD_FLAGS)  # fmt: skip


def answers(m) -> dict:
    return module_answers(m, contiguous_write(m.fill_contiguous), "pybind11")


def compile_calls(m, x) -> dict:
    return {
        "pybind11 function (hand-written module in a torch extension)": lambda x: m.scale(x) + 1
    }


def script_calls(m) -> dict:
    def script_pybind(x):  # torch.jit.script reads its source; `m` is its closure's
        return m.scale(x)

    return {"a pybind11 function": script_pybind}


def floors(m) -> dict[str, dict[str, tuple[str, dict]]]:
    return {
        "pybind11 in a torch extension": {
            "no-op": ("f()", {"f": m.noop}),
            "one int": ("f(1)", {"f": m.take_int64}),
        },
    }
