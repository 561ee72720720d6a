"""The torch probe family: torch operators (TORCH_LIBRARY, and STABLE_TORCH_LIBRARY on the LibTorch
stable ABI) and a hand-written PYBIND11_MODULE built the way users build them
(torch.utils.cpp_extension; sources in benchmarks/probing/probes/torch), asked every question
of benchmarks/probing/questions.py, and what torch's tools (torch.compile, torch.jit.script, opcheck)
make of each kind of callable. The builder lives here: bench_call_overhead.py builds its torch
floors with it."""

from __future__ import annotations

import dataclasses
import functools
import re
import warnings
from pathlib import Path

import numpy as np
import torch

from outcomes import Outcome, not_probed
from probing.asking import (
    ROOT,
    TEMPORARY_EOS,
    TEMPORARY_THREADS,
    after_free,
    arguments,
    floor_array,
    gil,
    handle_calls,
    kinds,
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
    ATTRIBUTE,
    CHECKS,
    CONST_REF,
    CONTIGUOUS_INT32,
    CONTIGUOUS_VIEW,
    CONTIGUOUS_WRITE,
    HANDLE_AFTER_FREE,
    INT32_ARRAY,
    LIST_VECTOR,
    QUESTIONS,
    RAW_LOOP,
    READ_ONLY,
    REFERENCE_POLICY,
    RETURNED_VECTOR,
    STRIDED,
    TEMPORARY_ROW,
    UNDECLARED,
    ZERO_COPY,
)

TORCH_PROBES = ROOT / "benchmarks" / "probing" / "probes" / "torch"
BUILD_DIR = ROOT / "build" / "torch_probes"  # where the probes are built, once per tree
# The oldest torch the stable-ABI probe is built for, as kvbridge-torch-stable is built (its
# CMakeLists.txt): TORCH_TARGET_VERSION, major.minor in the top 16 bits.
STABLE_TARGET = "-DTORCH_TARGET_VERSION=0x020b000000000000"


@functools.cache  # once a process: torch refuses a second registration of the same ops
def build_torch_probes(build_dir: Path):
    """Build the torch probes the way users build them, with torch.utils.cpp_extension: the
    operators, a hand-written PYBIND11_MODULE (load), and the same functions bound by
    load_inline(functions=[...]), which writes the module itself. Returns the two modules."""
    from torch.utils.cpp_extension import load, load_inline

    testing_cpp = str(ROOT / "common_cpp" / "src" / "testing.cpp")
    # TORCH_PROBES for kvprobe_checks.hpp: load_inline compiles a copy of the source elsewhere.
    include = [str(ROOT / "common_cpp" / "include"), str(TORCH_PROBES)]
    for sub in ("ops", "pybind", "inline"):
        (build_dir / sub).mkdir(parents=True, exist_ok=True)
    # CMake's Release flags, which build every other probe (scikit-build-core's default build
    # type): the call figures compare like with like.
    quiet = {"extra_include_paths": include, "extra_cflags": ["-O3", "-DNDEBUG"], "verbose": False}
    load(name="kvprobe_ops", sources=[str(TORCH_PROBES / "kvprobe_ops.cpp"), testing_cpp],
         is_python_module=False, build_directory=str(build_dir / "ops"), **quiet)  # fmt: skip
    build_stable_probe(build_dir)
    handwritten = load(name="kvprobe_pybind", sources=[str(TORCH_PROBES / "kvprobe_pybind.cpp"),
                       testing_cpp], build_directory=str(build_dir / "pybind"), **quiet)  # fmt: skip
    inline = load_inline(
        name="kvprobe_inline",
        cpp_sources=[
            Path(testing_cpp).read_text(),
            "#define KVPROBE_NO_MODULE\n" + (TORCH_PROBES / "kvprobe_pybind.cpp").read_text(),
        ],
        functions=[
            "throw_kind",
            "check",
            "take_int32",
            "take_int64",
            "wait_for_python",
            "noop",
            "scale",
            "second_element",
            "count_eos_of_contiguous",
        ],
        build_directory=str(build_dir / "inline"),
        **quiet,
    )
    return handwritten, inline


def build_stable_probe(build_dir: Path) -> Path:
    """The stable-ABI operators (probes/torch/kvprobe_stable.cpp), built with load() as the other
    ops are, for the stable ABI's target; loaded into this process. Returns the library."""
    from torch.utils.cpp_extension import load

    (build_dir / "stable").mkdir(parents=True, exist_ok=True)
    load(name="kvprobe_stable",
         sources=[str(TORCH_PROBES / "kvprobe_stable.cpp"),
                  str(ROOT / "common_cpp" / "src" / "testing.cpp")],
         is_python_module=False, build_directory=str(build_dir / "stable"),
         extra_include_paths=[str(ROOT / "common_cpp" / "include")],
         extra_cflags=["-O3", "-DNDEBUG", STABLE_TARGET], verbose=False)  # fmt: skip
    return build_dir / "stable" / "kvprobe_stable.so"


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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dynamo's advice on each break; the count is the record
        torch.compile(fn, backend="eager")(*args)
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


# The idiom both torch probes read a strided view's dense copy with (kvprobe_checks.hpp).
CONTIGUOUS_HELD = " (`auto dense = t.contiguous(); dense.data_ptr<int64_t>()`)"


def strided_tokens() -> list:
    """Each thread's tokens as a strided view, which contiguous() must copy."""
    return [torch.tensor(temporary_tokens(i), dtype=torch.int64).repeat_interleave(2)[::2]
            for i in range(TEMPORARY_THREADS)]  # fmt: skip


def op_answers(ops, held: str) -> dict:
    """An operator library's answers to the shared axes, whichever ABI registered it: both probe
    libraries (kvprobe_ops.cpp, kvprobe_stable.cpp) define the same ops for these questions.
    `held` names the idiom their contiguous copy is held by."""
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


def torch_ops(ops) -> dict:
    """torch operators (probes/torch/kvprobe_ops.cpp) asked every question."""
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


# A child that loads the stable probe, frees an object and reads it through its handle.
AFTER_FREE = """
import torch
torch.ops.load_library({library!r})
o = torch.ops.kvprobe_stable
handle = o.counter_create()
o.counter_destroy(handle)
print(o.counter_value(handle))
"""


def handle_after_free(library: Path) -> Outcome:
    """The object's address as its handle, used after the object was freed."""
    return after_free(AFTER_FREE.format(library=str(library)))


def torch_stable_ops(ops, library: Path) -> dict:
    """Operators on the LibTorch stable ABI (probes/torch/kvprobe_stable.cpp) asked every
    question. No custom classes there: an object is a handle, its address."""
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
            HANDLE_AFTER_FREE: handle_after_free(library),
        },
        "torch checks": {k: checks[k] if k == "TORCH_CHECK" else not_probed(only_std)
                         for k in CHECKS},
    }  # fmt: skip


def pybind_in_torch(m, write: Outcome) -> dict:
    """The same functions bound with pybind11 in a torch extension (a hand-written
    PYBIND11_MODULE, or load_inline's functions=), asked the same questions."""
    numpy_rows = not_probed("see pybind11's column")
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
    write in its schema, or a pybind11 function)."""
    written = torch.zeros(8)[::2]
    fill(written)
    if bool((written == 0).all()):
        return Outcome("copied", detail="the view is unchanged: the write went to a copy")
    return Outcome("read in place", detail="the view sees the write")


def tools(ops, handwritten) -> dict[str, dict]:
    """What torch.compile, torch.jit.script and opcheck make of each kind of callable."""
    import kvbridge_torch
    import kvbridge_torch_stable
    from kvbridge_probes import probe_cython, probe_nanobind, probe_pybind, tvm_ffi_probe

    x, w = torch.randn(8, 16), torch.randn(16)
    stable = torch.ops.kvprobe_stable
    cython_tensor = probe_cython.take_int64  # a Cython function (it takes an int: numel)
    c_abi = c_abi_callable()
    compile_result = {
        "op with a CPU kernel only, no fake kernel": graph_breaks(lambda x: ops.scale(x) + 1, x),
        "op with a fake kernel (kvbridge_torch.rmsnorm)": graph_breaks(
            lambda x: kvbridge_torch.rmsnorm(x, w) * 2, x
        ),
        "composite op (m.def with an implementation)": graph_breaks(
            lambda x: ops.composite(x) + 1, x
        ),
        "op returning an int": graph_breaks(lambda x: x * ops.numel_of(x), x),
        "stable-ABI op with a CPU kernel only, no fake kernel": graph_breaks(
            lambda x: stable.scale(x) + 1, x
        ),
        "stable-ABI op with a fake kernel (kvbridge_torch_stable.rmsnorm)": graph_breaks(
            lambda x: kvbridge_torch_stable.rmsnorm(x, w) * 2, x
        ),
        "pybind11 function (hand-written module in a torch extension)": graph_breaks(
            lambda x: handwritten.scale(x) + 1, x
        ),
        "pybind11 function (numpy probe, given an int)": graph_breaks(
            lambda x: x * probe_pybind.take_int64(x.numel()), x
        ),
        "nanobind function (Tensor through nb::ndarray), returning an int": graph_breaks(
            lambda x: x * probe_nanobind.numel_of(x), x
        ),
        "Cython function (given an int)": graph_breaks(lambda x: x * cython_tensor(x.numel()), x),
        "ctypes function (given an int)": graph_breaks(lambda x: x * c_abi(x.numel()), x),
        "tvm-ffi function (the tensor through DLPack), returning an int": graph_breaks(
            lambda x: x * tvm_ffi_probe.numel_of(x), x
        ),
    }

    def script_pybind(x):  # torch.jit.script reads its source; `handwritten` is its closure's
        return handwritten.scale(x)

    a = torch.randn(4)
    return {
        "torch.compile": compile_result,
        "torch.jit.script": {
            "an op": scripts(script_op),
            "a custom-class method": scripts(script_method),
            "a pybind11 function": scripts(script_pybind),
        },
        "torch.library.opcheck": {
            "op with no fake kernel": opcheck(ops.twice.default, (a,)),
            "op that mutates an input its schema does not declare": opcheck(
                ops.add_one_.default, (a.clone(),)
            ),
            "op with no autograd formula, given requires_grad": opcheck(
                ops.twice.default, (a.clone().requires_grad_(),)
            ),
            "stable-ABI op with no fake kernel": opcheck(stable.scale.default, (a,)),
        },
    }


def torch_technologies(build_dir: Path) -> dict[str, dict]:
    handwritten, inline = build_torch_probes(build_dir)
    ops = torch.ops.kvprobe
    return {
        "torch ops": torch_ops(ops),
        "torch stable ABI": torch_stable_ops(
            torch.ops.kvprobe_stable, build_dir / "stable" / "kvprobe_stable.so"
        ),
        "pybind11 in a torch extension": pybind_in_torch(
            handwritten, contiguous_write(handwritten.fill_contiguous)
        ),
        "pybind11 in a torch extension (load_inline functions=)": pybind_in_torch(
            inline, not_probed("load_inline binds the functions listed")
        ),
        **tools(ops, handwritten),
    }


# Functions handed to torch.jit.script, which reads their source (and `torch`, this module's).
def script_op(x):
    return torch.ops.kvprobe.scale(x)


def script_method(x):
    holder = torch.classes.kvprobe.Holder()
    holder.noop()
    return x


def c_abi_callable():
    import ctypes

    from kvbridge_probes import c_abi_library

    lib = ctypes.CDLL(c_abi_library())
    lib.kvbp_take_int64.argtypes, lib.kvbp_take_int64.restype = [ctypes.c_int64], ctypes.c_int64
    return lib.kvbp_take_int64


class CachedMethods:
    """A Python class over a torch::class_ object that looks its methods up once, as
    kvbridge_torch's BlockPool does (a ScriptObject resolves a method name on every access):
    the floors of a method and a property for torch, with the lookups kvbridge's calls make."""

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


# A class over a stable-ABI handle, written as kvbridge_torch_stable's BlockPool is: slots, the
# handle in an attribute, each op's OpOverload a module global looked up once at import.
OVER_STABLE_HANDLE = """
_noop = ops.counter_noop.default
_take_int = ops.counter_take_int.default
_value = ops.counter_value.default


class OverStableHandle:
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


def over_stable_handle(ops, handle):
    namespace = {"ops": ops}
    exec(OVER_STABLE_HANDLE, namespace)  # noqa: S102 - its methods see the ops as globals
    return namespace["OverStableHandle"](handle)


def floors(build_dir: Path = BUILD_DIR) -> dict[str, dict[str, tuple[str, dict]]]:
    """The torch probes' floors: ops and a torch::class_'s methods, the stable ABI's ops and a
    Python class over its handle, and the hand-written PYBIND11_MODULE's functions."""
    a = floor_array()
    handwritten, _ = build_torch_probes(build_dir)
    ops, holder = torch.ops.kvprobe, torch.classes.kvprobe.Holder()
    stable = torch.ops.kvprobe_stable
    cached = CachedMethods(holder)
    return {
        "torch ops": {
            "no-op": ("f()", {"f": ops.noop.default}),
            "one int": ("f(1)", {"f": ops.take_int.default}),
            "one array": ("f(t)", {"f": ops.numel_of.default, "t": torch.from_numpy(a)}),
            "method": ("h.noop()", {"h": holder}),
            "method, one int": ("h.take_int(1)", {"h": holder}),
            "property": ("h.value()", {"h": holder}),  # custom classes have methods only
        },
        "torch ops (methods cached)": {
            "method": ("h.noop()", {"h": cached}),
            "method, one int": ("h.take_int64(1)", {"h": cached}),
            "property": ("h.value", {"h": cached}),
        },
        "torch stable ABI": {
            "no-op": ("f()", {"f": stable.noop.default}),
            "one int": ("f(1)", {"f": stable.take_int.default}),
            "one array": ("f(t)", {"f": stable.numel_of.default, "t": torch.from_numpy(a)}),
        },
        "torch stable ABI (Python class)": handle_calls(
            over_stable_handle(stable, stable.counter_create())
        ),
        "pybind11 in a torch extension": {
            "no-op": ("f()", {"f": handwritten.noop}),
            "one int": ("f(1)", {"f": handwritten.take_int64}),
        },
    }


def ask(build_dir: Path = BUILD_DIR) -> dict[str, dict]:
    print("building and probing torch ops and pybind11 in a torch extension ...", flush=True)
    return torch_technologies(build_dir)
