"""pybind11 in a torch extension through load_inline(functions=[...]), which writes the
PYBIND11_MODULE itself, over the same functions as probe_pybind_torch.py's module. Asked by
ask_torch.py."""

from __future__ import annotations

from pathlib import Path

from outcomes import not_probed
from probing.ask_torch import BUILD_FLAGS, TESTING_CPP, build_dir_of, module_answers
from probing.technologies.probe_pybind_torch import SOURCE

FUNCTIONS = ["throw_kind", "check", "take_int32", "take_int64", "wait_for_python", "noop",
             "scale", "second_element", "count_eos_of_contiguous"]  # fmt: skip


def build(build_dir: Path):
    from torch.utils.cpp_extension import load_inline

    return load_inline(
        name="kvprobe_inline",
        cpp_sources=[TESTING_CPP.read_text(), "#define KVPROBE_NO_MODULE\n" + SOURCE.read_text()],
        functions=FUNCTIONS,
        build_directory=build_dir_of(build_dir, "inline"),
        **BUILD_FLAGS,
    )


def answers(m) -> dict:
    return module_answers(m, not_probed("load_inline binds the functions listed"), "pybind11")
