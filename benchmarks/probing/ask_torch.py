"""The torch probe family: extensions of torch built the way users build them
(torch.utils.cpp_extension; sources in benchmarks/probing/probes/torch), asked every question
of benchmarks/probing/questions.py, and what torch's tools (torch.compile, torch.jit.script,
opcheck) make of each kind of callable, every technology's included.

Its technologies are the rows of benchmarks/technologies.json whose family is torch; what is a
technology's own is its probe file (benchmarks/probing/technologies/<row's probe_file>.py):
- build(build_dir): its extension built (once a process: torch refuses a second registration
  of the same ops) and loaded, what the rest of the file takes;
- answers(built): its answers, made with the askers here;
- where it has them, compile_calls(built, x) (torch.compile rows: a function of the tensor x),
  script_calls(built) (torch.jit.script rows), opcheck_calls(built) (opcheck rows: an op and
  its arguments), and floors(built) (its floor rows).
Every other technology with a `compile_row` is asked for that row with its `compile_call`,
over what its own family's compile_subject(technology) gives. bench_call_overhead.py times the
floors this family's floors() returns.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
import warnings
from pathlib import Path
from types import ModuleType

import numpy as np
import torch

import spec
from outcomes import Outcome, not_probed
from probing.asking import (
    ROOT,
    TEMPORARY_EOS,
    TEMPORARY_THREADS,
    arguments,
    family_probes,
    floor_rmsnorm_arrays,
    gil,
    message,
    outcome,
    overflow,
    raw_loop,
    temporary_address,
    temporary_tokens,
    translated,
    zero_copy_return,
)
from probing.questions import (
    ARRAY_VECTOR,
    CHECKS,
    CONTIGUOUS_INT32,
    CONTIGUOUS_VIEW,
    CONTIGUOUS_WRITE,
    INT32_ARRAY,
    LIST_VECTOR,
    QUESTIONS,
    RAW_LOOP,
    READ_ONLY,
    RETURNED_VECTOR,
    STRIDED,
    TEMPORARY_ROW,
    UNDECLARED,
    ZERO_COPY,
)

TORCH_PROBES = ROOT / "benchmarks" / "probing" / "probes" / "torch"
BUILD_DIR = ROOT / "build" / "torch_probes"  # where the probes are built, once per tree
TESTING_CPP = ROOT / "common_cpp" / "src" / "testing.cpp"
# CMake's Release flags, which build every other probe (scikit-build-core's default build type):
# the call figures compare like with like. TORCH_PROBES for kvprobe_checks.hpp (load_inline
# compiles a copy of its source elsewhere).
BUILD_FLAGS = {
    "extra_include_paths": [str(ROOT / "common_cpp" / "include"), str(TORCH_PROBES)],
    "extra_cflags": ["-O3", "-DNDEBUG"],
    "verbose": False,
}


# What this family reads of a technology's row, and what its probe file must define (the
# docstring says what each is; tests/test_technologies.py checks them without running either).
ROW_FIELDS = ("probe_file",)
PROBE_FILE = ("build", "answers")


def technologies() -> dict[str, ModuleType]:
    """This family's technologies, in the table's order, each with its probe file."""
    return family_probes(__name__, "probe_file", "probing.technologies")


def build_dir_of(build_dir: Path, name: str) -> str:
    (build_dir / name).mkdir(parents=True, exist_ok=True)
    return str(build_dir / name)


@functools.cache  # once a process: torch refuses a second registration of the same ops
def built(build_dir: Path = BUILD_DIR) -> dict[str, object]:
    """Every technology's extension, built and loaded, in the table's order."""
    return {name: probe.build(build_dir) for name, probe in technologies().items()}


# --- the askers ---------------------------------------------------------------------------------


def torch_check(fn) -> dict[str, Outcome]:
    """What TORCH_CHECK and its typed variants become, and whether the message carries C++
    source locations or a backtrace."""
    rows, cause = {}, "how TORCH_CHECK is translated"
    for kind in CHECKS:
        try:
            fn(kind)
            rows[kind] = Outcome("returned", "None", cause=cause)
        except BaseException as e:  # noqa: BLE001
            text = str(e)
            # c10's "Exception raised from", a backtrace, or STD_TORCH_CHECK's "file.cpp:25"
            noisy = ("Exception raised from" in text or "frame #" in text
                     or re.search(r"\.(cpp|cc|h|hpp|cu):\d+", text) is not None)  # fmt: skip
            rows[kind] = Outcome("raised with C++ location" if noisy else "raised",
                                 type(e).__name__, message(e), cause)  # fmt: skip
    return rows


def graph_breaks(fn, *args) -> Outcome:
    """Graph breaks dynamo records compiling fn, and whether fullgraph=True compiles it."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    try:
        with warnings.catch_warnings():
            # dynamo's advice on each break: the count is the record
            warnings.simplefilter("ignore")
            torch.compile(fn, backend="eager")(*args)
    except Exception as e:  # noqa: BLE001 - dynamo itself failing on the call is the observation
        torch._dynamo.reset()
        return Outcome("failed", f"compile fails ({type(e).__name__})", message(e))
    breaks = sum(counters["graph_break"].values())
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.compile(fn, backend="eager", fullgraph=True)(*args)
    except Exception as e:  # noqa: BLE001 - the failure is the observation
        return Outcome("failed", f"{breaks} (fullgraph fails: {type(e).__name__})")
    return Outcome("passed", f"{breaks} (fullgraph compiles)")


def scripts(fn) -> Outcome:
    try:
        torch.jit.script(fn)
    except Exception as e:  # noqa: BLE001
        return Outcome("failed", f"refused ({type(e).__name__})")
    return Outcome("passed", "scripts")


def opcheck(op, args) -> Outcome:
    try:
        torch.library.opcheck(op, args)
    except Exception as e:  # noqa: BLE001
        # "opcheck(op, ...): test_schema failed with ...": the test that failed is the finding.
        first = str(e).strip().splitlines()[0]
        failed = first.split("): ", 1)[-1].split(" failed", 1)[0]
        return Outcome("failed", f"fails {failed}", first[:160])
    return Outcome("passed", "passes")


def typed_accessor(read, tensor) -> Outcome:
    """An int64 kernel (data_ptr<int64_t>()) handed a tensor of another dtype."""
    got = outcome(read, tensor)
    if got.kind == "raised":
        return Outcome("refused", got.value, got.detail)
    return Outcome("misread", detail=f"read as int64: {got.value}")


SCHEMA_MATCHER = "torch's schema matcher: every argument it cannot bind is one RuntimeError"


def schema_matched(axes: dict[str, dict[str, Outcome]]) -> dict[str, dict[str, Outcome]]:
    """An op's argument rows: each RuntimeError the call raised came from the dispatcher binding
    the arguments to the schema (the kernel never ran), one mechanism, so one cause."""
    return {axis: {row: dataclasses.replace(o, cause=SCHEMA_MATCHER)
                   if o.kind == "raised" and o.value == "RuntimeError" else o
                   for row, o in rows.items()}
            for axis, rows in axes.items()}  # fmt: skip


# The idiom the probes read a strided view's dense copy with, in torch's C++ API
# (kvprobe_checks.hpp).
CONTIGUOUS_HELD = " (`auto dense = t.contiguous(); dense.data_ptr<int64_t>()`)"


def strided_tokens() -> list:
    """Each thread's tokens as a strided view, which contiguous() must copy."""
    return [torch.tensor(temporary_tokens(i), dtype=torch.int64).repeat_interleave(2)[::2]
            for i in range(TEMPORARY_THREADS)]  # fmt: skip


def op_answers(ops, held: str) -> dict:
    """An operator library's answers to the shared axes, whichever ABI registered it: the probe
    libraries define the same ops for these questions. `held` names the idiom their
    contiguous copy is held by."""
    readonly = np.arange(8, dtype=np.int64)
    readonly.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that it cannot mark the tensor read-only
        readonly_tensor = torch.from_numpy(readonly)
    view = torch.arange(8, dtype=torch.int64)[::2]
    strided = strided_tokens()
    return {
        "exceptions": translated(ops.throw_kind),
        "undeclared throw": {UNDECLARED: not_probed("every op call catches")},
        **schema_matched({"arguments": arguments(ops.take_int),
                          "overflow": overflow(None, ops.take_int)}),  # fmt: skip
        "gil": gil(ops.wait_for_python),
        "arrays": {
            # A schema Tensor has no dtype: the kernel's typed accessor is the only check.
            INT32_ARRAY: typed_accessor(
                ops.second_element, torch.arange(8, dtype=torch.int32)
            ),
            STRIDED: Outcome(
                "read in place" if ops.address_of(view) == view.data_ptr() else "copied"
            ),
            READ_ONLY: Outcome(
                "read in place" if ops.address_of(readonly_tensor) == readonly_tensor.data_ptr()
                else "copied"
            ),
            RAW_LOOP: raw_loop(lambda v: ops.second_element(torch.from_numpy(v))),
            CONTIGUOUS_WRITE: contiguous_write(ops.fill_contiguous_),
            TEMPORARY_ROW: temporary_address(
                lambda i: ops.count_eos_of_contiguous(strided[i], TEMPORARY_EOS), held
            ),
            LIST_VECTOR: not_probed("schemas take Tensors, not vectors"),
            ARRAY_VECTOR: not_probed("as above"),
            CONTIGUOUS_VIEW: not_probed("a schema Tensor has no layout: the `contiguous()` row"),
            CONTIGUOUS_INT32: not_probed("a schema Tensor has no dtype: the typed accessor row"),
        },
        "returned buffer": {
            RETURNED_VECTOR: not_probed("schemas return Tensors, not vectors"),
            ZERO_COPY: zero_copy_return(ops, lambda t: t.data_ptr()),
        },
    }  # fmt: skip


def module_answers(m, write: Outcome, numpy_column: str) -> dict:
    """A Python module's functions in a torch extension, asked the questions torch's own
    kernels answer; its numpy questions are its technology's column (`numpy_column`)."""
    numpy_rows = not_probed(f"see {numpy_column}'s column")
    strided = strided_tokens()
    return {
        "exceptions": translated(m.throw_kind),
        "undeclared throw": {UNDECLARED: not_probed("every bound call catches")},
        "arguments": arguments(m.take_int32),
        "overflow": overflow(m.take_int32, m.take_int64),
        "gil": gil(m.wait_for_python),
        "arrays": {
            **dict.fromkeys(QUESTIONS["arrays"], numpy_rows),
            # A torch extension's kernels read data_ptr<T>(), as the op's do: asked here too.
            RAW_LOOP: raw_loop(lambda v: m.second_element(torch.from_numpy(v))),
            TEMPORARY_ROW: temporary_address(
                lambda i: m.count_eos_of_contiguous(strided[i], TEMPORARY_EOS), CONTIGUOUS_HELD
            ),
            CONTIGUOUS_WRITE: write,
        },  # fmt: skip
        "returned buffer": dict.fromkeys(QUESTIONS["returned buffer"], numpy_rows),
        "references": dict.fromkeys(QUESTIONS["references"], numpy_rows),
        "torch checks": torch_check(m.check),
    }


def contiguous_write(fill) -> Outcome:
    """A function that writes through `t.contiguous()` of a strided view (an op declaring the
    write in its schema, or a module's function)."""
    written = torch.zeros(8)[::2]
    fill(written)
    if bool((written == 0).all()):
        return Outcome("copied", detail="the view is unchanged: the write went to a copy")
    return Outcome("read in place", detail="the view sees the write")


# A class over a handle, written as kvbridge's Python classes over a handle are: slots, the
# handle in an attribute, each call a module global looked up once. `calls` names the three
# callables (noop, take_int, value) in the namespace it is made in.
OVER_HANDLE = """
class OverHandle:
    __slots__ = ("_handle",)

    def __init__(self, handle):
        self._handle = handle

    def noop(self):
        _noop(self._handle)

    def take_int64(self, x):
        return _take_int(self._handle, x)

    @property
    def value(self):
        return _value(self._handle)
"""


def floor_rmsnorm_tensors() -> dict[str, torch.Tensor]:
    """The "three arrays, one float" floor's arrays (asking.floor_rmsnorm_arrays), as tensors."""
    return {name: torch.from_numpy(a) for name, a in floor_rmsnorm_arrays().items()}


def over_handle(noop, take_int, value, handle):
    """An OverHandle whose methods see the three calls as module globals."""
    namespace = {"_noop": noop, "_take_int": take_int, "_value": value}
    exec(OVER_HANDLE, namespace)  # noqa: S102 - its methods see the calls as globals
    return namespace["OverHandle"](handle)


# --- the tables of torch's tools, and the family's two entry points -----------------------------


def tools(made: dict[str, object]) -> dict[str, dict]:
    """What torch.compile, torch.jit.script and opcheck make of each kind of callable: this
    family's technologies' own rows, then each other technology's `compile_row`."""
    x = torch.randn(8, 16)
    compiled, scripted, checked = {}, {}, {}
    for name, probe in technologies().items():
        if hasattr(probe, "compile_calls"):
            compiled |= {row: graph_breaks(fn, x) for row, fn in probe.compile_calls(made[name], x).items()}  # fmt: skip
        if hasattr(probe, "script_calls"):
            scripted |= {row: scripts(fn) for row, fn in probe.script_calls(made[name]).items()}
        if hasattr(probe, "opcheck_calls"):
            checked |= {row: opcheck(op, args)
                        for row, (op, args) in probe.opcheck_calls(made[name]).items()}  # fmt: skip
    for name, t in spec.TECHNOLOGIES.items():
        if "compile_call" in t and spec.family_of(name) != __name__:
            subject = importlib.import_module(spec.family_of(name)).compile_subject(name)
            fn = eval(f"lambda x: {t['compile_call']}", {"m": subject})  # noqa: S307 - its row's call
            compiled[t["compile_row"]] = graph_breaks(fn, x)
    return {"torch.compile": compiled, "torch.jit.script": scripted,
            "torch.library.opcheck": checked}  # fmt: skip


def ask(build_dir: Path = BUILD_DIR) -> dict[str, dict]:
    made = built(build_dir)
    found = {}
    for name, probe in technologies().items():
        print(f"probing {name} ...", flush=True)
        found[name] = probe.answers(made[name])
    return {**found, **tools(made)}


def floors(build_dir: Path = BUILD_DIR) -> dict[str, dict[str, tuple[str, dict]]]:
    """Each technology's floors (its probe file's)."""
    made = built(build_dir)
    return {row: calls for name, probe in technologies().items() if hasattr(probe, "floors")
            for row, calls in probe.floors(made[name]).items()}  # fmt: skip
