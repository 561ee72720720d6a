"""What the conformance suite shares: one module every test imports (nanobind's tests/common.py
idiom); no test module imports another.

- the package map (packages/registry.json), and the adapters that turn numpy test data
  into each package's arrays;
- `snapshot`: everything observable about a pool, to prove a failed call changed nothing;
- `refused`: the contract's error check, the exact type (a subclass is a different contract)
  and a message that names the value;
- `run_threads` and `python_ran_during_call`: real threads on a barrier, and the GIL probe
  (benchmarks/probe_semantics.py asks the same question of the native probe modules with it);
- `rmsnorm_reference` and `rand`: the float64 reference and the test data it is compared on;
- `EXCEPTION_TYPES`: the contract's mapping of C++ exception kinds, as the tests expect it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import sys
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
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
        return sum(max(e.cpu_memory_usage, 0) for e in prof.events())


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


# While the GIL probe measures, the interpreter hands the GIL over every 0.1 ms instead of every
# 5 ms: when a call that held the GIL returns, the waiting thread runs for one switch interval
# before the caller reads the clock, so the margin below must dwarf the interval whatever the
# machine's speed (a long call is many intervals either way).
PROBE_SWITCH_INTERVAL_S = 1e-4


def python_ran_during_call(call, attempts=12):
    """True if a pure-Python thread kept making progress through one C++ call.

    A spinner thread records the time as fast as it can while `call` runs. A call that holds the
    GIL stops it for its whole C++ part: its ticks show one gap as long as the call itself,
    timed alone first (the fastest of three), in every attempt. A call that releases the GIL
    leaves only the gaps of the spinner's own scheduling, which a loaded machine can stretch
    but rarely to most of a call of tens of milliseconds, and not in twelve attempts in a row:
    one attempt without such a gap proves the GIL was released (more attempts cost a held call
    time, never its verdict: its gap is in every one). Five were not enough on CI's two cores
    with a compiler running beside the suite: kvbridge_torch's count_eos looked held. Two
    simpler rules failed on a fast, loaded machine: "a tick in the middle half of the window"
    passed GIL-holding calls (after a held call returns, the spinner runs until the caller gets
    the GIL back and reads the clock, which can be a quarter of a short call: three holds-gil
    mutants survived), and "no gap longer than half the window, by majority" failed calls that
    release it (a starved spinner).
    `call` must make one C++ call: between several, the interpreter hands the GIL over anyway.
    """
    alone = []
    for _ in range(3):
        start = time.perf_counter()
        call()
        alone.append(time.perf_counter() - start)
    assert min(alone) > 40 * PROBE_SWITCH_INTERVAL_S, "the call is too short to probe"
    previous = sys.getswitchinterval()
    sys.setswitchinterval(PROBE_SWITCH_INTERVAL_S)
    try:
        for _ in range(attempts):
            ticks, stop = [], threading.Event()

            def spin(ticks=ticks, stop=stop):
                while not stop.is_set():
                    ticks.append(time.perf_counter())

            spinner = threading.Thread(target=spin, daemon=True)
            spinner.start()
            while not ticks:  # the spinner is running before the call starts
                time.sleep(0.001)
            start = time.perf_counter()
            call()
            end = time.perf_counter()
            stop.set()
            spinner.join(JOIN_TIMEOUT_S)
            inside = [start, *(t for t in ticks if start < t < end), end]
            longest = max(b - a for a, b in zip(inside, inside[1:], strict=False))
            # Released: no gap near as long as the call, nor as long as half this window (a
            # held call's one gap is its whole C++ part, whatever the caller waited after it).
            if longest < min(0.6 * min(alone), 0.5 * (end - start)):
                return True
        return False
    finally:
        sys.setswitchinterval(previous)


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
