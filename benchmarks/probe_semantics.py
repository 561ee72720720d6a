"""Probe what each binding technology does natively, with no kvbridge translation layer.

Each technology is asked the same questions through a probe module built the way its users
build one (benchmarks/probes: pybind11, nanobind and Cython modules with their defaults; an
extern "C" library loaded through ctypes and cffi; torch operators and a hand-written
PYBIND11_MODULE built with torch.utils.cpp_extension.load), and every kvbridge package is
asked them too. Every value recorded is an observation made by this run; where a question
cannot be asked of a technology, the value says so and why (`not_probed`), and the report
shows that reason in the cell. Every value is an `Outcome` (benchmarks/outcomes.py): a kind,
the one value a rule may read, the words a reader sees, and the cause where one mechanism
answers several questions, so that the report counts it once.

    python benchmarks/probe_semantics.py --json out.json
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# The GIL probe is the conformance suite's own (one question, asked the same way of every module).
sys.path.insert(0, str(ROOT / "tests" / "conformance"))
import spec  # noqa: E402
from common import python_ran_during_call, run_threads  # noqa: E402
from outcomes import Outcome, not_probed  # noqa: E402
from questions import (  # noqa: E402
    ARITY,
    CONTIGUOUS_IDIOM,
    CONTIGUOUS_INT32,
    CONTIGUOUS_VIEW,
    ESCAPE,
    INT_CHECK,
    UNDECLARED,
)

TORCH_PROBES = ROOT / "benchmarks" / "probes" / "torch"
CHECKS = [
    "TORCH_CHECK",
    "TORCH_CHECK_VALUE",
    "TORCH_CHECK_INDEX",
    "TORCH_CHECK_TYPE",
    "TORCH_CHECK_NOT_IMPLEMENTED",
]


def _kinds() -> list[str]:
    """The contract's exception kinds, read from the core's one table (c_abi.h's kvb_status,
    through the C ABI's kvb_status_name) rather than typed here again."""
    return spec.core().error_kinds()


KINDS = _kinds()


def outcome(fn, *args, cause: str = "", **kwargs) -> Outcome:
    """What a call does: the exception type it raises, or what it returns."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - the type is the observation
        return Outcome("raised", type(e).__name__, str(e).splitlines()[0][:120] if str(e) else "",
                       cause)  # fmt: skip
    return Outcome("returned", repr(result), cause=cause)


def arguments(fn_int) -> dict[str, Outcome]:
    """An int parameter given what callers get wrong."""
    return {
        "'3' where an int is expected": outcome(fn_int, "3", cause=INT_CHECK),
        "1.5 where an int is expected": outcome(fn_int, 1.5, cause=INT_CHECK),
        "None where an int is expected": outcome(fn_int, None, cause=INT_CHECK),
        "True where an int is expected": outcome(fn_int, True, cause=INT_CHECK),
        "numpy.int64(3) where an int is expected": outcome(fn_int, np.int64(3), cause=INT_CHECK),
        "a missing argument": outcome(fn_int, cause=ARITY),
        "an extra argument": outcome(fn_int, 1, 2, cause=ARITY),
    }


def overflow(fn32, fn64) -> dict[str, Outcome]:
    """Ints past a C parameter's width (one cause: the technology's range check)."""
    cause = "how an int past the C type's range is converted"
    return {
        "2**40 to int32": outcome(fn32, 2**40, cause=cause) if fn32 else not_probed(
            "schema ints are int64"),
        "2**70 to int64": outcome(fn64, 2**70, cause=cause),
    }  # fmt: skip


def gil(call) -> dict[str, Outcome]:
    held = not python_ran_during_call(call)
    return {"GIL during a long C++ call": Outcome("held the GIL" if held else "released the GIL")}


def array_inputs(address_of) -> dict[str, Outcome]:
    """An int64 array parameter given other arrays: read in place, copied, or refused."""
    rows = {}
    base = np.arange(64, dtype=np.int64)
    readonly = base.copy()
    readonly.flags.writeable = False
    cases = {
        "int32 array to an int64 array parameter": np.arange(8, dtype=np.int32),
        "strided int64 view": base[::2],
        "read-only int64 array": readonly,
    }
    for name, arr in cases.items():
        try:
            address = address_of(arr)
        except BaseException as e:  # noqa: BLE001
            rows[name] = Outcome("refused", type(e).__name__, str(e)[:120])
            continue
        own = arr.__array_interface__["data"][0]
        rows[name] = Outcome("read in place" if address == own else "copied")
    return rows


# The temporary-address question: 8 threads, each passing C the address of an int64 array made
# for the call from its own 8 tokens (thread i's hold i copies of eos), to a kernel that runs
# with the GIL released. A call that returns another count read memory that was freed before it
# read it, and that another thread's array had taken by then.
TEMPORARY_ROW = "an address taken from a temporary array, read with the GIL released (8 threads)"
TEMPORARY_THREADS, TEMPORARY_CALLS, TEMPORARY_EOS = 8, 20_000, 2


def temporary_tokens(i: int) -> list[int]:
    return [TEMPORARY_EOS] * i + [100 + i] * (8 - i)


def temporary_address(count, idiom: str = "") -> Outcome:
    """`count(i)` is one call of thread i as a user writes it; it must return i."""
    wrong = []

    def worker(i):
        def run():
            for _ in range(TEMPORARY_CALLS):
                if wrong:
                    return
                if (got := count(i)) != i:
                    wrong.append(got)

        return run

    run_threads([worker(i) for i in range(TEMPORARY_THREADS)])
    if wrong:
        return Outcome("misread", detail=f"C read the array after it was freed{idiom}")
    return Outcome("returned", "the right count",
                   f"in all {TEMPORARY_THREADS} x {TEMPORARY_CALLS} calls")  # fmt: skip


RAW_LOOP = "a raw data-pointer loop over a strided view"


def raw_loop(second_element) -> Outcome:
    """Element 1 of a strided int64 view, as a kernel reads it through the data pointer."""
    view = np.arange(8, dtype=np.int64)[::2]
    got = int(second_element(view))
    if got != int(view[1]):
        return Outcome("misread", detail=f"element 1 reads {got}, not {view[1]}")
    return Outcome("read in place", detail="element 1 is right")


def vector_inputs(take_vector) -> dict[str, Outcome]:
    return {
        "a list to a std::vector parameter": outcome(take_vector, [1, 2, 3]),
        "a numpy array to a std::vector parameter": outcome(take_vector, np.arange(3)),
    }


def numpy_address(arr) -> int:
    return arr.__array_interface__["data"][0]


def zero_copy_return(module, address_of=numpy_address) -> Outcome:
    """The technology's zero-copy return idiom (probe: adopted(), a numpy array or, from a torch
    op, a from_blob tensor with a deleter): copied or not, freed or not."""
    gc.collect()
    before = module.live_adopted()
    arr = module.adopted()
    same = address_of(arr) == module.adopted_address()
    del arr
    gc.collect()
    freed = module.live_adopted() == before
    if not freed:
        return Outcome("leaked", detail="never freed after the array died")
    return Outcome("freed" if same else "copied", detail="no copy" if same else "a copy")


def reference_into_object(module) -> dict[str, Outcome]:
    gc.collect()
    before = module.live_owners()
    view = module.Owner().counters
    gc.collect()
    alive = module.live_owners() - before
    owner = module.Owner()
    got = owner.get_counters() if hasattr(owner, "get_counters") else owner.counters
    owner.bump()
    value = got["value"] if isinstance(got, dict) else got.value
    del view, owner, got
    rows = {
        "attribute returning a member": Outcome("kept alive") if alive else Outcome(
            "copied", detail="a copy: the owner may die"),
        "method returning const&": Outcome("copied", detail="a copy, not a view")
        if value == 0 else Outcome("read in place", detail="a view"),
    }  # fmt: skip
    if hasattr(module.Owner, "counters_ref"):
        gc.collect()
        before = module.live_owners()
        ref = module.Owner().counters_ref()  # the `reference` policy on a temporary's member
        gc.collect()
        dangling = module.live_owners() == before
        rows["`reference` policy on a temporary's member"] = (
            Outcome("dangled", detail="the owner is freed while the reference lives")
            if dangling
            else Outcome("kept alive")
        )
        del ref
    else:
        rows["`reference` policy on a temporary's member"] = not_probed(
            "Cython has no return policies; C structs come back as copies"
        )
    return rows


def in_subprocess(code: str, cause: str) -> Outcome:
    """What `code` does to a fresh interpreter: killed by a signal, an exception, or nothing."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode < 0:
        return Outcome("crashed", signal.Signals(-done.returncode).name, cause=cause)
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1]
        return Outcome("raised", last.split(":")[0], last, cause)
    return Outcome("returned", "None", cause=cause)


def undeclared_throw(module_name: str) -> Outcome:
    """A C++ throw through a declaration that says nothing of exceptions, in a subprocess."""
    code = (
        f"from kvbridge_probes import {module_name} as m\nm.throw_kind_undeclared('runtime_error')"
    )
    return in_subprocess(code, UNDECLARED)


# One cause for every kind: the technology's one translation of C++ exceptions.
TRANSLATION = "how a C++ exception is translated"


def translated(fn) -> dict[str, Outcome]:
    return {k: outcome(fn, k, cause=TRANSLATION) for k in KINDS}


def contiguity_opt_in(technology: str, address_of) -> dict[str, Outcome]:
    """The two array rows asked again through the technology's contiguity opt-in, its idiom
    named in each cell's detail."""
    asked = array_inputs(address_of)
    idiom = CONTIGUOUS_IDIOM[technology]
    return {
        row: Outcome(o.kind, o.value, f"{idiom}: {o.detail}" if o.detail else idiom, o.cause)
        for row, o in ((CONTIGUOUS_VIEW, asked["strided int64 view"]),
                       (CONTIGUOUS_INT32, asked["int32 array to an int64 array parameter"]))
    }  # fmt: skip


def numpy_technology(technology: str, module) -> dict:
    declared = hasattr(module, "throw_kind_undeclared")
    return {
        "exceptions": translated(module.throw_kind),
        "undeclared throw": {
            UNDECLARED: (
                undeclared_throw(module.__name__.rsplit(".", 1)[-1])
                if declared
                else not_probed("every bound call catches")
            )
        },
        "arguments": arguments(module.take_int32),
        "overflow": overflow(module.take_int32, module.take_int64),
        "gil": gil(lambda: module.spin(0.2)),
        "arrays": {
            **array_inputs(module.array_address),
            **vector_inputs(module.take_vector),
            **contiguity_opt_in(technology, module.array_address_contiguous),
            RAW_LOOP: raw_loop(module.second_element),
            TEMPORARY_ROW: not_probed(
                "a bound argument's converted array is held by the binding until the call returns"
            ),
            ".contiguous() on a view, then a write": not_probed("a torch idiom"),
        },
        "returned buffer": {
            "a returned std::vector": Outcome(
                "copied as typed", type(module.returned_vector()).__name__
            ),
            "zero-copy return idiom": zero_copy_return(module),
        },
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
    "cffi ABI": """
from cffi import FFI
from kvbridge_probes import c_abi_declarations, c_abi_library
ffi = FFI()
ffi.cdef(c_abi_declarations())
lib = ffi.dlopen(c_abi_library())
""",
    # API mode: a module cffi generated and the compiler built against the same header
    # (probes/src/kvbridge_probes/probe_cffi_api_build.py, as `cffi_modules` does).
    "cffi API": """
from kvbridge_probes.probe_cffi_api import ffi, lib
""",
}


def escaping_exception(technology: str, kind: str) -> Outcome:
    """What a C++ exception escaping an extern "C" function does to the process: in a
    subprocess, since the answer may be that the process dies."""
    code = C_ABI_LOADERS[technology] + f"lib.kvbp_throw_kind({kind!r}.encode())"
    return in_subprocess(code, ESCAPE)


def c_abi_arrays(lib, pointer) -> dict[str, Outcome]:
    """The rows of `array_inputs`, asked of an `int64_t*` parameter: a pointer carries no dtype
    and no strides, so the question is which values the library reads (element 1 of each)."""
    base = np.arange(64, dtype=np.int64)
    readonly = base.copy()
    readonly.flags.writeable = False
    cases = {
        "int32 array to an int64 array parameter": np.arange(8, dtype=np.int32),
        "strided int64 view": base[::2],
        "read-only int64 array": readonly,
    }
    rows = {}
    for name, arr in cases.items():
        try:
            p = pointer(arr)
            address, seen = int(lib.kvbp_array_address(p)), int(lib.kvbp_element(p, 1))
        except BaseException as e:  # noqa: BLE001
            rows[name] = Outcome("refused", type(e).__name__, str(e)[:120])
            continue
        in_place = address == arr.__array_interface__["data"][0]
        if seen != int(arr[1]):  # one cause: a C pointer carries no dtype and no strides
            rows[name] = Outcome("misread", detail=f"element 1 reads {seen}, not {arr[1]}",
                                 cause="a C pointer carries no dtype and no strides")  # fmt: skip
        else:
            rows[name] = Outcome("read in place" if in_place else "copied")
    no_vector = not_probed("a C ABI has no std::vector")
    no_layout = not_probed("a C pointer declares no layout to opt into")
    return {
        **rows,
        RAW_LOOP: not_probed("a C pointer has no strides: the strided row above"),
        ".contiguous() on a view, then a write": not_probed("a torch idiom"),
        "a list to a std::vector parameter": no_vector,
        "a numpy array to a std::vector parameter": no_vector,
        CONTIGUOUS_VIEW: no_layout,
        CONTIGUOUS_INT32: no_layout,
    }


# How each C ABI technology's users take a temporary array's address (see `temporary` below).
IDIOMS = {"ctypes": " (`arr.ctypes.data`)", "cffi ABI": " (`ffi.cast` of `ffi.from_buffer(arr)`)",
          "cffi API": " (`ffi.cast` of `ffi.from_buffer(arr)`)"}  # fmt: skip


def returned_pointer(lib, address) -> Outcome:
    """A buffer the library allocated, returned as a pointer: is it freed once the pointer
    object is gone and nobody called the library's free? (The library counts its buffers.)"""
    before = lib.kvbp_live_buffers()
    returned = lib.kvbp_returned_buffer()
    kept = address(returned)  # to free it ourselves afterwards
    kind = type(returned).__name__
    del returned
    gc.collect()
    leaked = lib.kvbp_live_buffers() - before
    lib.kvbp_free(kept)
    if leaked:
        return Outcome("leaked", detail=f"a {kind} died and the buffer stayed allocated")
    return Outcome("freed", detail=f"a {kind}'s buffer was freed with it")


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
        lib.kvbp_free.argtypes = [c.c_void_p]
        lib.kvbp_live_buffers.restype = c.c_int64

        def address(p):
            return c.cast(p, c.c_void_p).value

        lib.kvbp_count_eos.argtypes = [c.c_void_p, c.c_int64, c.c_int64]
        lib.kvbp_count_eos.restype = c.c_int64

        def pointer(arr):  # numpy's ctypes idiom
            return arr.ctypes.data_as(c.POINTER(c.c_int64))

        def temporary(i):  # an address from numpy's ctypes interface: an int
            arr = np.array(temporary_tokens(i), np.int64).ctypes.data
            return lib.kvbp_count_eos(arr, 8, TEMPORARY_EOS)
    else:
        ffi = namespace["ffi"]

        def address(p):
            return ffi.cast("void *", p)

        def pointer(arr):  # cffi's idiom for a numpy array
            return ffi.from_buffer("int64_t[]", arr)

        def temporary(i):  # from_buffer cast to the parameter's type: the cast holds nothing
            arr = ffi.cast("int64_t *", ffi.from_buffer(np.array(temporary_tokens(i), np.int64)))
            return lib.kvbp_count_eos(arr, 8, TEMPORARY_EOS)

    no_objects = not_probed("a C ABI has no objects")
    return {
        "exceptions": {k: escaping_exception(technology, k) for k in KINDS},
        "undeclared throw": {UNDECLARED: escaping_exception(technology, "runtime_error")},
        "arguments": arguments(lib.kvbp_take_int32),
        "overflow": overflow(lib.kvbp_take_int32, lib.kvbp_take_int64),
        "gil": gil(lambda: lib.kvbp_spin(0.2)),
        "arrays": {
            **c_abi_arrays(lib, pointer),
            TEMPORARY_ROW: temporary_address(temporary, IDIOMS[technology]),
        },
        "returned buffer": {
            "a returned std::vector": not_probed("a C ABI returns pointers, not vectors"),
            "zero-copy return idiom": returned_pointer(lib, address),
        },
        "references": {
            "attribute returning a member": no_objects,
            "method returning const&": no_objects,
            "`reference` policy on a temporary's member": no_objects,
        },
    }


# --- torch ---------------------------------------------------------------------------------------


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
    quiet = {"extra_include_paths": include, "extra_cflags": ["-O1"], "verbose": False}
    load(name="kvprobe_ops", sources=[str(TORCH_PROBES / "kvprobe_ops.cpp"), testing_cpp],
         is_python_module=False, build_directory=str(build_dir / "ops"), **quiet)  # fmt: skip
    handwritten = load(name="kvprobe_pybind", sources=[str(TORCH_PROBES / "kvprobe_pybind.cpp"),
                       testing_cpp], build_directory=str(build_dir / "pybind"), **quiet)  # fmt: skip
    inline = load_inline(
        name="kvprobe_inline",
        cpp_sources=[
            Path(testing_cpp).read_text(),
            "#define KVPROBE_NO_MODULE\n" + (TORCH_PROBES / "kvprobe_pybind.cpp").read_text(),
        ],
        functions=["throw_kind", "check", "take_int32", "take_int64", "spin", "noop", "scale"],
        build_directory=str(build_dir / "inline"),
        **quiet,
    )
    return handwritten, inline


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
            noisy = "Exception raised from" in text or "frame #" in text
            rows[kind] = Outcome("raised with C++ location" if noisy else "raised",
                                 type(e).__name__, text.splitlines()[0][:120], cause)  # fmt: skip
    return rows


def graph_breaks(fn, *args) -> Outcome:
    """Graph breaks dynamo records compiling fn, and whether fullgraph=True compiles it."""
    import torch
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
    import torch

    try:
        torch.jit.script(fn)
    except Exception as e:  # noqa: BLE001
        return Outcome("failed", f"refused ({type(e).__name__})")
    return Outcome("passed", "scripts")


def opcheck(op, args) -> Outcome:
    import torch

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


def torch_technologies(build_dir: Path) -> dict[str, dict]:
    import kvbridge_torch
    import torch
    from kvbridge_probes import probe_cython, probe_nanobind, probe_pybind

    handwritten, inline = build_torch_probes(build_dir)
    ops = torch.ops.kvprobe
    readonly = np.arange(8, dtype=np.int64)
    readonly.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that it cannot mark the tensor read-only
        readonly_tensor = torch.from_numpy(readonly)
    view = torch.arange(8, dtype=torch.int64)[::2]
    # Each thread's tokens as a strided view, which contiguous() must copy.
    strided = [torch.tensor(temporary_tokens(i), dtype=torch.int64).repeat_interleave(2)[::2]
               for i in range(TEMPORARY_THREADS)]  # fmt: skip
    written = torch.zeros(8)[::2]
    handwritten.fill_contiguous(written)
    holder = torch.classes.kvprobe.Holder()
    every_call = {"a C++ throw through a declaration without exception handling":
                  not_probed("every op call catches")}  # fmt: skip
    ops_result = {
        "exceptions": translated(ops.throw_kind),
        "undeclared throw": every_call,
        "arguments": arguments(ops.take_int),
        "overflow": overflow(None, ops.take_int),
        "gil": gil(lambda: ops.spin(0.2)),
        "arrays": {
            # A schema Tensor has no dtype: the kernel's typed accessor is the only check.
            "int32 array to an int64 array parameter": typed_accessor(
                ops.second_element, torch.arange(8, dtype=torch.int32)
            ),
            "strided int64 view": Outcome(
                "read in place" if ops.address_of(view) == view.data_ptr() else "copied"
            ),
            "read-only int64 array": Outcome(
                "read in place" if ops.address_of(readonly_tensor) == readonly_tensor.data_ptr()
                else "copied"
            ),
            RAW_LOOP: raw_loop(lambda v: ops.second_element(torch.from_numpy(v))),
            ".contiguous() on a view, then a write": not_probed(
                "an op declares the tensors it writes in its schema: see the next column"
            ),
            TEMPORARY_ROW: temporary_address(
                lambda i: ops.count_eos_of_contiguous(strided[i], TEMPORARY_EOS),
                " (`t.contiguous().data_ptr<int64_t>()`)",
            ),
            "a list to a std::vector parameter": not_probed("schemas take Tensors, not vectors"),
            "a numpy array to a std::vector parameter": not_probed("as above"),
            CONTIGUOUS_VIEW: not_probed("a schema Tensor declares no layout: the kernel calls "
                                        "`.contiguous()`, the row above"),
            CONTIGUOUS_INT32: not_probed("a schema Tensor declares no dtype: the typed accessor "
                                         "row above"),
        },
        "returned buffer": {
            "a returned std::vector": not_probed("schemas return Tensors, not vectors"),
            "zero-copy return idiom": zero_copy_return(ops, lambda t: t.data_ptr()),
        },
        "references": {
            "attribute returning a member": not_probed(
                "custom classes return values or intrusive_ptr, never references"
            ),
            "method returning const&": not_probed("as above"),
            "`reference` policy on a temporary's member": not_probed("as above"),
        },
        "torch checks": torch_check(ops.check),
        "custom-class method": {
            k: outcome(holder.throw_kind, k, cause="how a torch::class_ method's exception is "
                       "translated") for k in KINDS},
    }  # fmt: skip

    # The same functions bound two ways (a hand-written PYBIND11_MODULE; load_inline's
    # functions=), asked the same questions.
    def pybind_in_torch(m, contiguous_write: Outcome) -> dict:
        numpy_rows = not_probed("pybind11's column answers it")
        return {
            "exceptions": translated(m.throw_kind),
            "undeclared throw": {UNDECLARED: not_probed("every bound call catches")},
            "arguments": arguments(m.take_int32),
            "overflow": overflow(m.take_int32, m.take_int64),
            "gil": gil(lambda: m.spin(0.2)),
            "arrays": {
                **dict.fromkeys(ops_result["arrays"], numpy_rows),
                ".contiguous() on a view, then a write": contiguous_write,
            },
            "returned buffer": dict.fromkeys(ops_result["returned buffer"], numpy_rows),
            "references": dict.fromkeys(ops_result["references"], numpy_rows),
            "torch checks": torch_check(m.check),
        }

    contiguous_write = (
        Outcome("misread", detail="the view is unchanged: the write went to a copy")
        if bool((written == 0).all())
        else Outcome("read in place", detail="the view sees the write")
    )
    pyb_result = pybind_in_torch(handwritten, contiguous_write)
    inline_result = pybind_in_torch(inline, not_probed("load_inline binds the functions listed"))
    x, w = torch.randn(8, 16), torch.randn(16)
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
    }
    globals()["torch"], globals()["_handwritten"] = torch, handwritten  # for the scripted code
    script_result = {
        "an op": scripts(_script_op),
        "a custom-class method": scripts(_script_method),
        "a pybind11 function": scripts(_script_pybind),
    }
    a = torch.randn(4)
    opcheck_result = {
        "op with no fake kernel": opcheck(ops.twice.default, (a,)),
        "op that mutates an input its schema does not declare": opcheck(
            ops.add_one_.default, (a.clone(),)
        ),
        "op with no autograd formula, given requires_grad": opcheck(
            ops.twice.default, (a.clone().requires_grad_(),)
        ),
    }
    return {
        "torch ops": ops_result,
        "pybind11 in a torch extension": pyb_result,
        "pybind11 in a torch extension (load_inline functions=)": inline_result,
        "torch.compile": compile_result,
        "torch.jit.script": script_result,
        "torch.library.opcheck": opcheck_result,
    }


# Functions handed to torch.jit.script, which reads their source: `torch` and `_handwritten` are
# this module's globals, set by torch_technologies before scripting.
def _script_op(x):
    return torch.ops.kvprobe.scale(x)  # noqa: F821


def _script_method(x):
    holder = torch.classes.kvprobe.Holder()  # noqa: F821
    holder.noop()
    return x


def _script_pybind(x):
    return _handwritten.scale(x)  # noqa: F821


def c_abi_callable():
    import ctypes

    from kvbridge_probes import c_abi_library

    lib = ctypes.CDLL(c_abi_library())
    lib.kvbp_take_int64.argtypes, lib.kvbp_take_int64.restype = [ctypes.c_int64], ctypes.c_int64
    return lib.kvbp_take_int64


# --- the kvbridge packages, asked the same questions ----------------------------------------------


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
    gc.collect()
    buffers = kv.live_buffers()
    counts = pool.refcounts()
    adopted = kv.live_buffers() == buffers + 1
    del counts
    gc.collect()
    freed = kv.live_buffers() == buffers
    pools = kv.live_pools()
    stats = kv.BlockPool(2).stats
    gc.collect()
    kept = kv.live_pools() == pools + 1
    del stats
    none_here = not_probed("the kvbridge API has no such function")
    view = to_native(np.arange(8, dtype=np.int64))[::2]  # [0, 2, 4, 6]
    x, w = to_native(np.ones((4, 8), np.float32)), to_native(np.ones(4, np.float32))
    return {
        "exceptions": {k: outcome(kv._testing.throw, k) for k in KINDS},
        "undeclared throw": {
            UNDECLARED: not_probed("every call goes through the package's one error path")
        },
        "arguments": arguments(pool.allocate),
        "overflow": overflow(
            pool.allocate, lambda v: kv.count_eos(to_native(np.zeros(2, np.int64)), v)
        ),
        "gil": gil(lambda: kv.count_eos(tokens, 0)),
        "arrays": {
            **array_inputs(kv._testing.data_address),
            # kvbridge has no std::vector parameter; its token arguments take lists and arrays.
            "a list to a std::vector parameter": outcome(kv.count_eos, [1, 2, 2], 2),
            "a numpy array to a std::vector parameter": outcome(
                kv.count_eos, to_native(np.array([1, 2, 2])), 2
            ),
            CONTIGUOUS_VIEW: none_here,
            CONTIGUOUS_INT32: none_here,
            # count_eos over a strided view: the core reads it with its stride.
            RAW_LOOP: Outcome("read in place", detail="element-wise right")
            if kv.count_eos(view, 2) == 1
            else Outcome("misread", detail="count_eos over a strided view"),
            # rmsnorm(..., out=) into a strided view: refused, never written through a copy.
            ".contiguous() on a view, then a write": outcome(
                kv.rmsnorm, x.T, w, out=to_native(np.empty((8, 8), np.float32))[:, ::2]
            ),
            # A list: converted by the package for the call, as the temporary above.
            TEMPORARY_ROW: temporary_address(
                lambda i: kv.count_eos(temporary_tokens(i), TEMPORARY_EOS)
            ),
        },
        "returned buffer": {
            "a returned std::vector": none_here,
            "zero-copy return idiom": Outcome("leaked", detail="never freed")
            if not freed
            else Outcome("freed" if adopted else "copied"),
        },
        "references": {
            "attribute returning a member": Outcome("kept alive")
            if kept
            else Outcome("copied", detail="a copy: the owner may die"),
            "method returning const&": none_here,
            "`reference` policy on a temporary's member": none_here,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build" / "torch_probes")
    args = parser.parse_args()
    from kvbridge_probes import probe_cython, probe_nanobind, probe_pybind

    results: dict[str, dict] = {}
    for name, module in (("pybind11", probe_pybind), ("nanobind", probe_nanobind),
                         ("Cython", probe_cython)):  # fmt: skip
        print(f"probing {name} ...", flush=True)
        results[name] = numpy_technology(name, module)
    print("building and probing torch ops and pybind11 in a torch extension ...", flush=True)
    results.update(torch_technologies(args.build_dir))
    for technology in C_ABI_LOADERS:
        print(f'probing {technology} over an extern "C" library ...', flush=True)
        results[technology] = c_abi_technology(technology)
    for name in spec.PACKAGES:
        module = spec.REGISTRY[name]["module"]
        print(f"probing {module} ...", flush=True)
        results[module] = kvbridge_package(importlib.import_module(module))
    # In the order asked; every Outcome as its fields.
    args.json.write_text(json.dumps(results, indent=1, default=Outcome.to_json))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
