"""What the conformance suite shares: one module every test imports (nanobind's tests/common.py
idiom); no test module imports another.

- the package map (packages/registry.json), and the adapters that turn numpy test data
  into each package's arrays;
- `snapshot`: everything observable about a pool, to prove a failed call changed nothing;
- `refused`: the contract's error check, the exact type (a subclass is a different contract)
  and a message that names the value;
- `run_threads` and `ran_without_the_gil`: real threads on a barrier, and the GIL proof (the
  core's gate: a kernel waits until a Python thread has run);
- `rmsnorm_reference` and `rand`: the float64 reference and the test data it is compared on;
- `EXCEPTION_TYPES`: the contract's mapping of C++ exception kinds, as the tests expect it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import threading
import time
import tracemalloc

import numpy as np

_REGISTRY = os.path.join(os.path.dirname(__file__), "..", "..", "packages", "registry.json")
with open(_REGISTRY) as _f:
    REGISTRY = {p["name"]: p for p in json.load(_f)["packages"]}
PACKAGES = {name: p["module"] for name, p in REGISTRY.items()}


class NumpyAdapter:
    """How the suite talks to a package whose native array is numpy.ndarray."""

    native_type = np.ndarray

    def __init__(self, module):
        self.module = module

    def native(self, a: np.ndarray):
        return a

    def to_numpy(self, a) -> np.ndarray:
        return np.asarray(a)

    def data_address(self, a) -> int:
        return a.__array_interface__["data"][0]

    # The numpy packages size their own pool: by default the CPUs this process may run on, or
    # KVBRIDGE_NUM_THREADS read at import.
    threads_from_environment = True

    def default_num_threads(self) -> int:
        return len(os.sched_getaffinity(0))

    def bytes_allocated(self, fn) -> int:
        """Bytes of array memory allocated (and still traced at the peak) while fn runs."""
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            fn()
            return tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()


class TorchAdapter(NumpyAdapter):
    """How the suite talks to kvbridge_torch, whose native array is torch.Tensor."""

    def __init__(self, module):
        import torch

        super().__init__(module)
        self.torch = torch
        self.native_type = torch.Tensor

    def native(self, a: np.ndarray):
        # from_numpy shares memory; it cannot express negative strides, which tests pass as
        # plain numpy arrays instead (the torch package accepts those too).
        return self.torch.from_numpy(a)

    def to_numpy(self, a) -> np.ndarray:
        return a.detach().cpu().numpy() if isinstance(a, self.torch.Tensor) else np.asarray(a)

    def data_address(self, a) -> int:
        if isinstance(a, self.torch.Tensor):
            return a.data_ptr()
        return super().data_address(a)

    # kvbridge_torch's kernels run on torch's intra-op pool: torch's setting is theirs.
    threads_from_environment = False

    def default_num_threads(self) -> int:
        return self.torch.get_num_threads()

    def bytes_allocated(self, fn) -> int:
        # autograd's profiler, not torch.profiler's wrapper of it: the wrapper's start asks
        # hasattr(torch, "_inductor"), which imports the compiler and, through it, triton,
        # whose module turns the GIL back on in a free-threaded Python (seen: torch 2.12.0, 3.13t).
        from torch.autograd.profiler import profile

        with profile(use_cpu=True, profile_memory=True) as prof:
            fn()
        return sum(max(e.cpu_memory_usage, 0) for e in prof.function_events)


def snapshot(pool, adapter):
    """Everything observable about a pool, to prove a failed call changed nothing."""
    s = pool.stats
    return (
        pool.num_free,
        adapter.to_numpy(pool.refcounts()).tolist(),
        s.allocated_total,
        s.released_total,
        s.peak_in_use,
    )


@contextlib.contextmanager
def refused(exception: type[BaseException], match: str | None = None):
    """Like pytest.raises, but the type must be exactly the contract's: a binding that raises a
    subclass (pybind11's `builtins.ValueError` subclasses, a torch error type) breaks code that
    compares types. `match` is a regular expression the message must contain."""
    try:
        yield
    except BaseException as e:  # noqa: BLE001 - the type is what is checked
        assert type(e) is exception, f"expected {exception.__name__}, got {type(e).__name__}: {e}"
        if match is not None:
            assert re.search(match, str(e)), f"{match!r} not in {str(e)!r}"
    else:
        raise AssertionError(f"did not raise {exception.__name__}")


JOIN_TIMEOUT_S = 120


def run_threads(targets):
    """Start every target together on a barrier (nanobind's `parallelize` idiom); re-raise.
    Each thread runs in a copy of the caller's context (as threads do from Python 3.14 on where
    asked to), so context-held settings are the caller's: numpy's data allocator among them,
    which `tox -e asan` replaces (tests/plain_malloc)."""
    barrier = threading.Barrier(len(targets))
    errors = []

    def wrap(fn):
        context = contextvars.copy_context()  # one per thread: a context runs in one at a time

        def run():
            try:
                barrier.wait(timeout=JOIN_TIMEOUT_S)
                context.run(fn)
            except BaseException as e:  # noqa: BLE001 - reported to the main thread below
                errors.append(e)

        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT_S)
        assert not t.is_alive(), "thread did not finish: deadlock?"
    if errors:
        raise errors[0]


# The GIL gate's states (GateState in common_cpp/include/kvbridge/testing.hpp).
GATE_IDLE, GATE_ARMED, GATE_OPENED, GATE_TIMED_OUT = 0, 1, 3, 4
# How long a kernel waits at the gate for a Python thread to open it: a held GIL costs the test
# this long, a released one only as long as the opener takes to be scheduled once.
GATE_TIMEOUT_S = 20.0


def ran_without_the_gil(kv, call, timeout_s: float = GATE_TIMEOUT_S) -> bool:
    """True if another Python thread ran while `call`'s kernel was in C++.

    The core's GIL gate makes the next kernel call wait, before its work, until a Python thread
    opens it. This opener polls the gate from a thread of its own: it can run only if the
    kernel's caller let go of the GIL, so a call that keeps the GIL waits out the timeout with no
    one able to open the gate (False), and a call that releases it is let through as soon as the
    opener is scheduled once (True). No verdict here reads a clock, so a machine whose cores are
    all busy gives the same answer as an idle one, only later. `call` must make one kernel call.
    """
    testing = kv._testing
    returned = threading.Event()

    def open_it():
        while not returned.is_set() and testing.open_gate() not in (GATE_OPENED, GATE_TIMED_OUT):
            time.sleep(0.001)

    testing.arm_gate(timeout_s)
    opener = threading.Thread(target=open_it, daemon=True)
    try:
        opener.start()
        call()
    finally:
        returned.set()
        opener.join(JOIN_TIMEOUT_S)
        outcome = testing.close_gate()
    assert not opener.is_alive(), "the gate's opener did not finish"
    assert outcome != GATE_ARMED, "the call reached no kernel, so it proves nothing"
    return outcome == GATE_OPENED


def rmsnorm_reference(x, w, eps=1e-6):
    """rmsnorm in float64: what every package's float32 result is compared against."""
    x64 = np.asarray(x, np.float64)
    # Rows of no elements have no mean: their (empty) output needs no value.
    ms = (
        np.mean(x64**2, axis=-1, keepdims=True) if x64.shape[-1] else np.zeros((*x64.shape[:-1], 1))
    )
    return x64 / np.sqrt(ms + eps) * np.asarray(w, np.float64)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# kind -> Python exception: the mapping pybind11, nanobind and torch share. ◆ marks Cython's
# native outliers, which kvbridge_cython brings into line.
EXCEPTION_TYPES = {
    "invalid_argument": ValueError,
    "domain_error": ValueError,
    "length_error": ValueError,  # ◆
    "out_of_range": IndexError,
    "range_error": ValueError,  # ◆
    "overflow_error": OverflowError,
    "underflow_error": RuntimeError,  # ◆
    "bad_alloc": MemoryError,
    "bad_cast": RuntimeError,  # ◆
    "ios_failure": RuntimeError,  # ◆
    "logic_error": RuntimeError,
    "runtime_error": RuntimeError,
    "system_error": RuntimeError,
    "custom": RuntimeError,
    "non_std": RuntimeError,
}
# Kinds whose C++ object carries kvbridge's what() text (the others' what() is the library's).
WITH_MESSAGE = set(EXCEPTION_TYPES) - {"bad_alloc", "bad_cast", "non_std"}
