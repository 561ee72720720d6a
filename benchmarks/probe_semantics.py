"""Probe what each binding technology does natively, with no kvbridge translation layer.

Runs small probe modules (benchmarks/probes: pybind11, Cython and CPython C-API modules built the
default way; and, compiled here with torch.utils.cpp_extension, torch ops and a pybind11 module
inside a torch extension) and records what each does with C++ exceptions, wrong argument types,
overflowing ints, the GIL, array inputs, returned buffers, references into objects, and
torch.compile. Every cell is an observation made now; nothing is typed in.

    python benchmarks/probe_semantics.py --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# The GIL probe is the conformance suite's own (one question, asked the same way of every module).
sys.path.insert(0, str(ROOT / "tests" / "conformance"))
from common import python_ran_during_call  # noqa: E402


def _kinds() -> list[str]:
    """The contract's exception kinds, read from the core's one table (c_abi.h's kvb_status,
    through the C ABI's kvb_status_name) rather than typed here again."""
    from kvbridge_ctypes._ffi import lib, string

    kinds, status = [], 1
    while (name := string(lib.kvb_status_name(status))) is not None:
        kinds.append(name)
        status += 1
    return kinds


KINDS = _kinds()


def outcome(fn, *args) -> str:
    """What a call does: the exception type it raises, or what it returns."""
    try:
        result = fn(*args)
    except BaseException as e:  # noqa: BLE001 - the type is the observation
        return type(e).__name__
    return f"returns {result!r}"


def array_inputs(address_of) -> dict[str, str]:
    """For an int64-array parameter: what happens with other arrays."""
    rows = {}
    base = np.arange(64, dtype=np.int64)
    readonly = base.copy()
    readonly.flags.writeable = False
    cases = {
        "int32 array to an int64 parameter": np.arange(8, dtype=np.int32),
        "strided int64 view": base[::2],
        "read-only int64 array": readonly,
    }
    for name, arr in cases.items():
        try:
            address = address_of(arr)
        except BaseException as e:  # noqa: BLE001
            rows[name] = f"refused ({type(e).__name__})"
            continue
        own = arr.__array_interface__["data"][0]
        rows[name] = "read in place" if address == own else "copied silently"
    return rows


def reference_into_object(module) -> dict[str, str]:
    gc.collect()
    before = module.live_owners()
    view = module.Owner().counters
    gc.collect()
    alive = module.live_owners() - before
    owner = module.Owner()
    got = owner.get_counters() if hasattr(owner, "get_counters") else owner.counters
    owner.bump()
    value = got["value"] if isinstance(got, dict) else got.value
    del view
    return {
        "attribute returning a member": "keeps owner alive" if alive else "copy (owner may die)",
        "method returning a reference": "copy" if value == 0 else "view",
    }


def numpy_technology(module) -> dict:
    return {
        "exceptions": {k: outcome(module.throw_kind, k) for k in KINDS},
        "wrong type": {repr(v): outcome(module.take_int32, v) for v in ("3", 1.5, None)},
        "overflow": {
            "2**40 to int32": outcome(module.take_int32, 2**40),
            "2**70 to int64": outcome(module.take_int64, 2**70),
        },
        "gil held by default": not python_ran_during_call(lambda: module.spin(0.2)),
        "arrays": array_inputs(module.array_address),
        "returned buffer": type(module.returned_vector()).__name__ + " (a copy)",
        "references": reference_into_object(module),
    }


# --- C ABI: one extern "C" library (probes/probe_c_abi.h) through ctypes and through cffi ---------

# How each technology loads the library with its defaults, as a user writes it. ctypes: CDLL with
# argtypes/restype declared (llama-cpp-python's way); cffi: ABI mode over the same declarations.
C_ABI_LOADERS = {
    "ctypes": """
import ctypes
from kvbridge_probes import c_abi_library
lib = ctypes.CDLL(c_abi_library())
lib.kvbp_throw_kind.argtypes = [ctypes.c_char_p]
""",
    "cffi": """
from cffi import FFI
from kvbridge_probes import c_abi_declarations, c_abi_library
ffi = FFI()
ffi.cdef(c_abi_declarations())
lib = ffi.dlopen(c_abi_library())
""",
}


def escaping_exception(technology: str, kind: str) -> str:
    """What a C++ exception escaping an extern "C" function does to the process: in a
    subprocess, since the answer may be that the process dies."""
    code = C_ABI_LOADERS[technology] + f"lib.kvbp_throw_kind({kind!r}.encode())\nprint('returned')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode < 0:
        return f"process dies ({signal.Signals(-done.returncode).name})"
    if done.returncode:
        return done.stderr.strip().splitlines()[-1].split(":")[0]
    return "returns"


def c_abi_arrays(lib, pointer) -> dict[str, str]:
    """The rows of `array_inputs`, asked of an `int64_t*` parameter: a pointer carries no dtype
    and no strides, so the question is which values the library reads (element 1 of each)."""
    base = np.arange(64, dtype=np.int64)
    readonly = base.copy()
    readonly.flags.writeable = False
    cases = {
        "int32 array to an int64 parameter": np.arange(8, dtype=np.int32),
        "strided int64 view": base[::2],
        "read-only int64 array": readonly,
    }
    rows = {}
    for name, arr in cases.items():
        try:
            p = pointer(arr)
            address, seen = int(lib.kvbp_array_address(p)), int(lib.kvbp_element(p, 1))
        except BaseException as e:  # noqa: BLE001
            rows[name] = f"refused ({type(e).__name__})"
            continue
        in_place = address == arr.__array_interface__["data"][0]
        right = seen == int(arr[1])
        rows[name] = ("read in place" if in_place else "copied silently") + (
            "" if right else f": wrong values, no error (element 1 reads {seen}, not {arr[1]})"
        )
    return rows


def c_abi_technology(technology: str) -> dict:
    import ctypes

    namespace: dict = {}
    exec(C_ABI_LOADERS[technology], namespace)  # noqa: S102 - the loader a user writes, verbatim
    lib = namespace["lib"]
    if technology == "ctypes":
        c = ctypes
        lib.kvbp_take_int32.argtypes, lib.kvbp_take_int32.restype = [c.c_int32], c.c_int32
        lib.kvbp_take_int64.argtypes, lib.kvbp_take_int64.restype = [c.c_int64], c.c_int64
        lib.kvbp_spin.argtypes = [c.c_double]
        lib.kvbp_array_address.argtypes = [c.POINTER(c.c_int64)]
        lib.kvbp_array_address.restype = c.c_size_t
        lib.kvbp_element.argtypes = [c.POINTER(c.c_int64), c.c_int64]
        lib.kvbp_element.restype = c.c_int64
        lib.kvbp_returned_buffer.restype = c.POINTER(c.c_int32)

        def pointer(arr):  # numpy's ctypes idiom
            return arr.ctypes.data_as(c.POINTER(c.c_int64))
    else:
        ffi = namespace["ffi"]

        def pointer(arr):  # cffi's idiom for a numpy array
            return ffi.from_buffer("int64_t[]", arr)

    returned = lib.kvbp_returned_buffer()
    return {
        "exceptions": {k: escaping_exception(technology, k) for k in KINDS},
        "wrong type": {repr(v): outcome(lib.kvbp_take_int32, v) for v in ("3", 1.5, None)},
        "overflow": {
            "2**40 to int32": outcome(lib.kvbp_take_int32, 2**40),
            "2**70 to int64": outcome(lib.kvbp_take_int64, 2**70),
        },
        "gil held by default": not python_ran_during_call(lambda: lib.kvbp_spin(0.2)),
        "arrays": c_abi_arrays(lib, pointer),
        "returned buffer": f"{type(returned).__name__}: a raw pointer, freed by no one unless "
        "the caller calls the library's free",
        "references": {
            "attribute returning a member": "not probed: a C ABI has no objects",
            "method returning a reference": "not probed: a C ABI has no objects",
        },
    }


TORCH_OPS_SOURCE = r"""
#include <torch/library.h>
#include <ATen/ATen.h>
#include <chrono>
#include "kvbridge/testing.hpp"
namespace {
void spin(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {}
}
}
TORCH_LIBRARY(kvprobe, m) {
  m.def("noop() -> ()", [] {});
  m.def("throw_kind(str kind) -> ()", [](const std::string& k) { kvbridge::testing::throw_kind(k); });
  m.def("take_int(int x) -> int", [](int64_t x) { return x; });
  m.def("spin(float seconds) -> ()", &spin);
  m.def("numel_of(Tensor t) -> int", [](const at::Tensor& t) { return t.numel(); });
  m.def("address_of(Tensor t) -> int",
        [](const at::Tensor& t) { return reinterpret_cast<int64_t>(t.data_ptr()); });
  m.def("scale(Tensor t) -> Tensor", [](const at::Tensor& t) { return t * 2; });
}
"""

TORCH_PYBIND_SOURCE = r"""
#include <torch/extension.h>
#include <chrono>
#include "kvbridge/testing.hpp"
void throw_kind(const std::string& kind) { kvbridge::testing::throw_kind(kind); }
int32_t take_int32(int32_t x) { return x; }
int64_t take_int64(int64_t x) { return x; }
void spin(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {}
}
void noop() {}
at::Tensor scale(const at::Tensor& t) { return t * 2; }
"""


def build_torch_probes(build_dir: Path):
    """Compile the torch probes (a TORCH_LIBRARY and a pybind11 module in a torch extension)."""
    from torch.utils.cpp_extension import load_inline

    errors_cpp = (ROOT / "common_cpp/src/testing.cpp").read_text()
    include = [str(ROOT / "common_cpp/include")]
    build_dir.mkdir(parents=True, exist_ok=True)
    for sub in ("ops", "pybind"):
        (build_dir / sub).mkdir(exist_ok=True)
    load_inline(
        name="kvprobe_ops",
        cpp_sources=[errors_cpp, TORCH_OPS_SOURCE],
        is_python_module=False,
        extra_include_paths=include,
        build_directory=str(build_dir / "ops"),
        extra_cflags=["-O1"],
    )
    return load_inline(
        name="kvprobe_torch_pybind",
        cpp_sources=[errors_cpp, TORCH_PYBIND_SOURCE],
        functions=["noop", "throw_kind", "take_int32", "take_int64", "spin", "scale"],
        extra_include_paths=include,
        build_directory=str(build_dir / "pybind"),
        extra_cflags=["-O1"],
    )


def graph_breaks(fn, *args) -> str:
    """Graph breaks dynamo records compiling fn, and whether fullgraph=True compiles it."""
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    torch.compile(fn, backend="eager")(*args)
    breaks = sum(counters["graph_break"].values())
    torch._dynamo.reset()
    try:
        torch.compile(fn, backend="eager", fullgraph=True)(*args)
        full = "fullgraph compiles"
    except Exception as e:  # noqa: BLE001 - the failure is the observation
        full = f"fullgraph fails: {type(e).__name__}"
    return f"{breaks} ({full})"


def torch_technologies(build_dir: Path) -> tuple[dict, dict, dict]:
    import kvbridge_torch
    import torch
    from kvbridge_probes import probe_nanobind

    pyb = build_torch_probes(build_dir)
    ops = torch.ops.kvprobe
    t = torch.arange(8, dtype=torch.int64)
    ops_result = {
        "exceptions": {k: outcome(ops.throw_kind, k) for k in KINDS},
        "wrong type": {repr(v): outcome(ops.take_int, v) for v in ("3", 1.5, None)},
        "overflow": {
            "2**40 to int32": "n/a (schema ints are int64)",
            "2**70 to int64": outcome(ops.take_int, 2**70),
        },
        "gil held by default": not python_ran_during_call(lambda: ops.spin(0.2)),
        "arrays": {
            "int32 array to an int64 parameter": "passed through unconverted (Tensor is untyped)",
            "strided int64 view": "read in place"
            if ops.address_of(t[::2]) == t.data_ptr()
            else "copied silently",
            "read-only int64 array": "n/a (tensors have no read-only flag)",
        },
        "returned buffer": "Tensor (torch-owned storage)",
        "references": {
            "attribute returning a member": "not expressible (custom classes return values "
            "or intrusive_ptr)",
            "method returning a reference": "not expressible",
        },
    }
    pyb_result = {
        "exceptions": {k: outcome(pyb.throw_kind, k) for k in KINDS},
        "wrong type": {repr(v): outcome(pyb.take_int32, v) for v in ("3", 1.5, None)},
        "overflow": {
            "2**40 to int32": outcome(pyb.take_int32, 2**40),
            "2**70 to int64": outcome(pyb.take_int64, 2**70),
        },
        "gil held by default": not python_ran_during_call(lambda: pyb.spin(0.2)),
    }
    x, w = torch.randn(8, 16), torch.randn(16)
    compile_result = {
        "op returning a Tensor, with a fake kernel (kvbridge_torch.rmsnorm)": graph_breaks(
            lambda x: kvbridge_torch.rmsnorm(x, w) * 2, x
        ),
        "op returning a Tensor, no fake kernel": graph_breaks(lambda x: ops.scale(x) + 1, x),
        "op returning an int": graph_breaks(lambda x: x * ops.numel_of(x), x),
        "pybind11 function in a torch extension": graph_breaks(lambda x: pyb.scale(x) + 1, x),
        "nanobind function taking the Tensor (nb::ndarray, DLPack), returning an int": (
            graph_breaks(lambda x: x * probe_nanobind.numel_of(x), x)
        ),
    }
    return ops_result, pyb_result, compile_result


def kvbridge_package(kv) -> dict:
    """The same questions asked of a kvbridge package: what its users actually get."""
    if kv.BACKEND == "torch":
        import torch

        def to_native(a):
            return torch.from_numpy(a)
    else:

        def to_native(a):
            return a

    pool = kv.BlockPool(4)
    tokens = to_native(np.ones(64 * 1024 * 1024, np.int32))
    base = np.arange(64, dtype=np.int64)
    readonly = base.copy()
    readonly.flags.writeable = False
    arrays = {}
    for name, arr in {
        "int32 array to an int64 parameter": np.arange(8, dtype=np.int32),
        "strided int64 view": base[::2],
        "read-only int64 array": readonly,
    }.items():
        try:
            address = kv._testing.data_address(arr)
            own = arr.__array_interface__["data"][0]
            arrays[name] = "read in place" if address == own else "copied silently"
        except BaseException as e:  # noqa: BLE001
            arrays[name] = f"refused ({type(e).__name__})"
    gc.collect()
    buffers = kv.live_buffers()
    counts = pool.refcounts()
    adopted = kv.live_buffers() == buffers + 1
    del counts
    gc.collect()
    pools = kv.live_pools()
    stats = kv.BlockPool(2).stats
    gc.collect()
    kept = kv.live_pools() == pools + 1
    del stats
    return {
        "exceptions": {k: outcome(kv._testing.throw, k) for k in KINDS},
        "wrong type": {repr(v): outcome(pool.allocate, v) for v in ("3", 1.5, None)},
        "overflow": {
            "2**40 to int32": outcome(pool.allocate, 2**40),
            "2**70 to int64": outcome(kv.count_eos, to_native(np.zeros(2, np.int64)), 2**70),
        },
        "gil held by default": not python_ran_during_call(lambda: kv.count_eos(tokens, 0)),
        "arrays": arrays,
        "returned buffer": "C++ buffer adopted, no copy" if adopted else "copied",
        "references": {
            "attribute returning a member": "keeps owner alive" if kept else "copy (owner may die)",
            "method returning a reference": "n/a (the API has none)",
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build" / "torch_probes")
    args = parser.parse_args()
    from kvbridge_probes import probe_cython, probe_nanobind, probe_pybind

    print("probing pybind11 ...", flush=True)
    results = {"pybind11": numpy_technology(probe_pybind)}
    print("probing nanobind ...", flush=True)
    results["nanobind"] = numpy_technology(probe_nanobind)
    print("probing Cython ...", flush=True)
    results["Cython"] = numpy_technology(probe_cython)
    print("building and probing torch ops and pybind11-in-torch ...", flush=True)
    ops, pyb, compiled = torch_technologies(args.build_dir)
    results["torch ops"] = ops
    results["pybind11 in a torch extension"] = pyb
    results["torch.compile graph breaks"] = compiled
    for technology in ("ctypes", "cffi"):
        print(f'probing {technology} over an extern "C" library ...', flush=True)
        results[technology] = c_abi_technology(technology)
    import importlib

    for name in ("pybind", "nanobind", "cython", "torch", "ctypes", "cffi"):
        print(f"probing kvbridge_{name} ...", flush=True)
        results[f"kvbridge_{name}"] = kvbridge_package(importlib.import_module(f"kvbridge_{name}"))
    args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
