"""The askers every probe family shares (benchmarks/probing/ask_*.py): each asks one question, or one
axis of questions (benchmarks/probing/questions.py), of a callable the family hands it, and returns typed
outcomes (benchmarks/outcomes.py). Every value is an observation made by this run."""

from __future__ import annotations

import ctypes
import functools
import gc
import importlib
import math
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
from common import JOIN_TIMEOUT_S, run_threads

import spec
from outcomes import Outcome, not_probed
from probing.questions import (
    ARITY,
    ARRAY_VECTOR,
    EXTRA_ARGUMENT,
    GIL,
    INT32_ARRAY,
    INT_CHECK,
    LIST_VECTOR,
    MISSING_ARGUMENT,
    READ_ONLY,
    STRIDED,
    TRANSLATION,
)

ROOT = Path(__file__).resolve().parents[2]


def family_probes(family: str, field: str, package: str) -> dict:
    """A probe family's technologies (`family`: its module's name), in the technology table's
    order, each with the module its row's `field` names in `package`: its probe module
    (kvbridge_probes, `probe_module`) or its probe file (probing.technologies, `probe_file`)."""
    return {name: importlib.import_module(f"{package}.{t[field]}")
            for name, t in spec.TECHNOLOGIES.items() if spec.family_of(name) == family}  # fmt: skip


@functools.cache
def kinds() -> list[str]:
    """The contract's exception kinds, read from the core's one table (c_abi.h's kvb_status)
    through its public testing hook rather than typed here again."""
    return spec.core().error_kinds()


def message(e: BaseException) -> str:
    """An exception's first line as a cell shows it, a path in it cut to its file name: torch's
    stable-ABI checks name the header or source file they are in (tensor_inl.h:62), and where
    this checkout or its venv lies is no part of the answer (the page must not differ by it)."""
    first = str(e).splitlines()[0] if str(e) else ""
    return re.sub(r"(?:/[^/\s,:]+)+/([^/\s,:]+)", r"\1", first)[:120]


def outcome(fn, *args, cause: str = "", **kwargs) -> Outcome:
    """What a call does: the exception type it raises, or what it returns."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - the type is the observation
        return Outcome("raised", type(e).__name__, message(e), cause)
    return Outcome("returned", repr(result), cause=cause)


def arguments(fn_int) -> dict[str, Outcome]:
    """An int parameter given what callers get wrong."""
    return {
        "'3' where an int is expected": outcome(fn_int, "3", cause=INT_CHECK),
        "1.5 where an int is expected": outcome(fn_int, 1.5, cause=INT_CHECK),
        "None where an int is expected": outcome(fn_int, None, cause=INT_CHECK),
        "True where an int is expected": outcome(fn_int, True, cause=INT_CHECK),
        "numpy.int64(3) where an int is expected": outcome(fn_int, np.int64(3), cause=INT_CHECK),
        MISSING_ARGUMENT: outcome(fn_int, cause=ARITY),
        EXTRA_ARGUMENT: outcome(fn_int, 1, 2, cause=ARITY),
    }


def overflow(fn32, fn64) -> dict[str, Outcome]:
    """Ints past a C parameter's width (one cause: the technology's range check)."""
    cause = "how an int past the C type's range is converted"
    return {
        "2**40 to int32": outcome(fn32, 2**40, cause=cause) if fn32 else not_probed(
            "schema ints are int64"),
        "2**70 to int64": outcome(fn64, 2**70, cause=cause),
    }  # fmt: skip


# How long a probe call waits for a Python thread to store its flag: a call that keeps the GIL
# takes this long, one that lets it go only as long as the opener takes to be scheduled once.
GIL_WAIT_S = 5.0


def gil(wait_for_python) -> dict[str, Outcome]:
    """Does a call bound with the technology's defaults let other Python threads run? The probe
    module binds kvbridge::testing::wait_for_python(address, timeout): the call stores 1 in a flag
    of ours, then waits for another thread to store 2. Our opener thread polls the flag and
    stores 2 once it reads 1: it can run only if the call let go of the GIL. So the answer
    depends on what ran, never on how long anything took (the conformance suite asks kvbridge's
    own packages the same way, through the core's gate: tests/conformance/common.py)."""
    flag = ctypes.c_int32(0)
    called = threading.Event()

    def open_it():
        while not called.is_set():
            if flag.value == 1:
                flag.value = 2
                return
            time.sleep(0.001)

    opener = threading.Thread(target=open_it, daemon=True)
    opener.start()
    try:
        released = bool(wait_for_python(ctypes.addressof(flag), GIL_WAIT_S))
    finally:
        called.set()
        opener.join(JOIN_TIMEOUT_S)
    return gil_outcome(released)


def gil_outcome(released: bool) -> dict[str, Outcome]:
    return {GIL: Outcome("released the GIL" if released else "held the GIL")}


def array_cases() -> dict[str, np.ndarray]:
    """The arrays an int64 array parameter is given: another dtype, a strided view, read-only."""
    base = np.arange(64, dtype=np.int64)
    readonly = base.copy()
    readonly.flags.writeable = False
    return {INT32_ARRAY: np.arange(8, dtype=np.int32), STRIDED: base[::2], READ_ONLY: readonly}


def array_inputs(address_of) -> dict[str, Outcome]:
    """An int64 array parameter given other arrays: read in place, copied, or refused."""
    rows = {}
    for name, arr in array_cases().items():
        try:
            address = address_of(arr)
        except BaseException as e:  # noqa: BLE001
            rows[name] = Outcome("refused", type(e).__name__, str(e)[:120])
            continue
        own = arr.__array_interface__["data"][0]
        rows[name] = Outcome("read in place" if address == own else "copied")
    return rows


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


def raw_loop(second_element) -> Outcome:
    """Element 1 of a strided int64 view, as a kernel reads it through the data pointer."""
    view = np.arange(8, dtype=np.int64)[::2]
    got = int(second_element(view))
    if got != int(view[1]):
        return Outcome("misread", detail=f"element 1 reads {got}, not {view[1]}")
    return Outcome("read in place", detail="element 1 is right")


def vector_inputs(take_vector) -> dict[str, Outcome]:
    return {
        LIST_VECTOR: outcome(take_vector, [1, 2, 3]),
        ARRAY_VECTOR: outcome(take_vector, np.arange(3)),
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


def in_subprocess(code: str, cause: str) -> Outcome:
    """What `code` does to a fresh interpreter: killed by a signal, an exception, or nothing."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode < 0:
        return Outcome("crashed", signal.Signals(-done.returncode).name, cause=cause)
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1]
        return Outcome("raised", last.split(":")[0], last, cause)
    return Outcome("returned", "None", cause=cause)


# What binding a library must call once bound, in the probe library's terms (probe_c_abi.h).
BOUND_CALL = "assert lib.kvbp_take_int64(3) == 3"
# The variables through which a build finds a compiler besides PATH (distutils', CMake's).
COMPILER_VARIABLES = ("CC", "CXX", "LDSHARED", "CMAKE_C_COMPILER", "CMAKE_CXX_COMPILER")


def without_compiler(bind: str) -> Outcome:
    """Whether `bind` (source that binds a library from nothing and leaves it in `lib`) binds it
    and calls it in a fresh interpreter on a machine with no compiler: PATH names an empty
    directory and no variable names a compiler. Asked first with the machine's own PATH, so
    that what fails without a compiler is the compiler's absence and nothing else."""
    import os
    import tempfile

    env = {k: v for k, v in os.environ.items() if k not in COMPILER_VARIABLES}

    def attempt(compiler: bool) -> str | None:
        """None where it bound and called, else the last line it printed."""
        with tempfile.TemporaryDirectory() as where:
            (Path(where) / "bin").mkdir()
            path = {} if compiler else {"PATH": str(Path(where) / "bin")}  # an empty directory
            done = subprocess.run([sys.executable, "-c", bind + "\n" + BOUND_CALL], cwd=where,
                                  env={**env, **path}, text=True, capture_output=True,
                                  timeout=300, check=False)  # fmt: skip
        return (done.stderr.strip().splitlines() or ["no output"])[-1] if done.returncode else None

    if (control := attempt(compiler=True)) is not None:
        return not_probed(f"it does not bind even with a compiler here: {control[:160]}")
    if (last := attempt(compiler=False)) is None:
        return Outcome("passed", "binds and calls, no compiler")
    return Outcome("failed", f"needs a compiler ({last.split(':')[0]})", last[:300])


def after_free(code: str) -> Outcome:
    """What a handle used after its object was freed reads, in a fresh interpreter (`code`
    makes an object, frees it, and prints what a call through its handle returns): the answer
    may be that the process dies, an exception, or the freed memory read back."""
    found = in_subprocess(code, "")
    if found.kind != "returned":  # the process died, or the call raised
        return found
    # What it read is whatever the allocator left there (a pointer of its own, often): it
    # differs from run to run, so the cell says what happened, not the value.
    return Outcome("dangled", detail="read the freed object's memory, no error")


def translated(fn) -> dict[str, Outcome]:
    return {k: outcome(fn, k, cause=TRANSLATION) for k in kinds()}


# --- floors: what each family's no-op calls cost (bench_call_overhead.py times them) -----------
# A family's floors() returns floor row (benchmarks/technologies.json's `floors`) -> call
# (spec.CALLS) -> (statement, globals); a call a technology cannot make is absent, and the page
# marks it so.


def floor_array() -> np.ndarray:
    """The array every "one array" floor passes: as many values as a decode step's activations
    (spec.DECODE_SHAPE), flat, so that the tensor operators' decisive call (the comparison's
    guide) is an op given the tensor a decode step gives it. A floor reads its address or its
    length only; what the size can still change is a binding that copies its argument."""
    return np.arange(math.prod(spec.DECODE_SHAPE), dtype=np.int64)


def floor_rmsnorm_arrays() -> dict[str, np.ndarray]:
    """The arrays the "three arrays, one float" floor passes: a decode step's, as
    `rmsnorm(x, w, eps, out=out)` is given them (x and out spec.DECODE_SHAPE, the weight one row,
    float32), named x, w and out in the floor's globals. It reads their addresses (and, through a
    C ABI, their lengths) only."""
    x = np.ones(spec.DECODE_SHAPE, dtype=np.float32)
    return {"x": x, "w": np.ones(spec.DECODE_SHAPE[-1], dtype=np.float32), "out": np.empty_like(x)}


def handle_calls(obj) -> dict[str, tuple[str, dict]]:
    """The method and property floors of an object with kvbridge's class's shape (noop,
    take_int64, value)."""
    return {
        "method": ("h.noop()", {"h": obj}),
        "method, one int": ("h.take_int64(1)", {"h": obj}),
        "property": ("h.value", {"h": obj}),
    }
