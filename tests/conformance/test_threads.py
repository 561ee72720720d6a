"""docs/contract.md, "Threads": the GIL and threads.

No test here asserts a wall-clock time or leans on the scheduler: each GIL test checks an event
that is impossible unless the GIL was released (another Python thread ran while the kernel
waited for it), and every thread is joined with a timeout so that a deadlock fails the test
instead of hanging CI.
"""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from common import (
    GATE_IDLE,
    GATE_TIMED_OUT,
    PACKAGES,
    ran_without_the_gil,
    rand,
    refused,
    rmsnorm_reference,
    run_threads,
)

# Each GIL test makes one kernel call whose kernel waits at the core's GIL gate until a Python
# thread opens it (common.ran_without_the_gil): the inputs can be small, since the proof is who
# ran during the call, not how long it took.


def test_count_eos_releases_the_gil(kv, native):
    tokens = native(np.ones(4096, np.int32))
    assert ran_without_the_gil(kv, lambda: kv.count_eos(tokens, 1))


def test_common_prefix_releases_the_gil(kv, native):
    a = native(np.ones(4096, np.int32))
    assert ran_without_the_gil(kv, lambda: kv.common_prefix(a, a))


def test_rmsnorm_releases_the_gil(kv, native):
    x, w = native(np.ones((64, 256), np.float32)), native(np.ones(256, np.float32))
    out = native(np.empty((64, 256), np.float32))
    assert ran_without_the_gil(kv, lambda: kv.rmsnorm(x, w, out=out))


def test_rmsnorm_without_out_releases_the_gil(kv, native):
    x, w = native(np.ones((64, 256), np.float32)), native(np.ones(256, np.float32))
    assert ran_without_the_gil(kv, lambda: kv.rmsnorm(x, w))


def test_the_gil_gate_times_out_when_no_thread_opens_it(kv, native):
    """The gate's other answer, which a binding that kept the GIL gets: a kernel waits at the
    armed gate, no thread opens it, the wait ends at the timeout and the call still returns the
    right result. The wrong timeouts are refused, naming the value."""
    tokens = native(np.array([1, 2, 1], np.int64))
    kv._testing.arm_gate(0.05)
    try:
        assert kv.count_eos(tokens, 1) == 2
    finally:
        outcome = kv._testing.close_gate()
    assert outcome == GATE_TIMED_OUT
    for bad in (0.0, -1.0, float("nan"), 1e9):
        with pytest.raises(ValueError, match=r"gate timeout must be in \(0, 3600\] seconds, got"):
            kv._testing.arm_gate(bad)
    assert kv._testing.close_gate() == GATE_IDLE  # refused: still idle


def test_kernels_give_right_answers_from_two_threads(kv, native, adapter):
    tokens = native(np.tile(np.array([1, 2, 3, 2], np.int64), 1 << 18))
    x = np.random.default_rng(0).standard_normal((512, 256)).astype(np.float32)
    w = np.ones(256, np.float32)
    want = adapter.to_numpy(kv.rmsnorm(native(x), native(w)))
    results = {}

    def worker(i):
        def run():
            for _ in range(20):
                assert kv.count_eos(tokens, 2) == 1 << 19
                assert kv.common_prefix(tokens, tokens) == 1 << 20
                np.testing.assert_array_equal(
                    adapter.to_numpy(kv.rmsnorm(native(x), native(w))), want
                )
            results[i] = True

        return run

    run_threads([worker(0), worker(1)])
    assert results == {0: True, 1: True}


def converted_inputs(i: int) -> list[tuple[str, tuple, object]]:
    """Thread i's calls whose inputs a package must convert before C++ reads them (lists, int8
    and uint16 tokens, byte-swapped and 5-byte-strided float32), each with its right answer.
    Every thread's inputs have the same sizes, so a freed conversion's memory is what the next
    thread's conversion gets from numpy's small-block cache, and different values: a call that
    reads another thread's data returns a different answer."""
    eos = 2
    tokens = [eos] * i + [100 + i] * (8 - i)  # i copies of eos among 8 tokens
    other = [7 + i] * i + [-1] * (8 - i)  # shares its first i tokens with `[7 + i] * 8`
    x = np.arange(32, dtype=np.float32).reshape(4, 8) + 10 * i
    w = np.linspace(0.5, 1.5, 8, dtype=np.float32) + i
    # A record array's float32 field: 5-byte strides, which no kernel can read in place.
    packed = np.zeros(8, dtype=[("pad", "u1"), ("w", "<f4")])
    packed["w"] = w
    want = rmsnorm_reference(x, w).astype(np.float32)
    head8, other16 = np.array([7 + i] * 8, np.int8), np.array(other, np.int64).astype(np.uint16)
    swapped_x = x.astype(">f4")
    return [
        ("count_eos(list)", ("count_eos", tokens, eos), i),
        ("count_eos(int8)", ("count_eos", np.array(tokens, np.int8), eos), i),
        ("count_eos(uint16)", ("count_eos", np.array(tokens, np.uint16), eos), i),
        ("count_eos(big-endian int64)", ("count_eos", np.array(tokens, ">i8"), eos), i),
        ("common_prefix(list, list)", ("common_prefix", [7 + i] * 8, other), i),
        ("common_prefix(int8, uint16)", ("common_prefix", head8, other16), i),
        ("allocate_many(list)", ("allocate_many", [i + 1, 8 - i]), [i + 1, 8 - i]),
        ("rmsnorm(big-endian x, 5-byte-strided w)", ("rmsnorm", swapped_x, packed["w"]), want),
    ]


def test_kernels_read_converted_inputs_right_from_eight_threads(kv, adapter):
    """8 threads at once, each calling every kernel on small inputs that must be converted, and
    every result checked. A package that passes C++ the address of a conversion it has already
    dropped reads whatever another thread's conversion wrote there since, and returns it without
    an error (the temporary-address trap of ctypes and cffi)."""
    n_threads, rounds = 8, 400
    wrong: list[str] = []

    def call(pool, op, *args):
        if op == "allocate_many":
            got = pool.allocate_many(*args)
            for ids in got:
                for b in ids:
                    pool.release(b)
            return [len(ids) for ids in got]
        if op == "rmsnorm":
            return adapter.to_numpy(kv.rmsnorm(*args))
        return getattr(kv, op)(*args)

    def worker(i):
        def run():
            pool, cases = kv.BlockPool(16), converted_inputs(i)
            for _ in range(rounds):
                for name, (op, *args), want in cases:
                    got = call(pool, op, *args)
                    same = (
                        np.allclose(got, want, rtol=1e-5, atol=1e-6)
                        if isinstance(want, np.ndarray)
                        else got == want
                    )
                    if not same:
                        wrong.append(f"thread {i}: {name} returned {got!r}, expected {want!r}")

        return run

    run_threads([worker(i) for i in range(n_threads)])
    calls = n_threads * rounds * len(converted_inputs(0))
    assert not wrong, f"{len(wrong)} of {calls} calls wrong, e.g. {wrong[:3]}"


def test_block_pool_is_thread_safe(kv, native, adapter):  # noqa: PLR0915 - one worker, many ops
    """8 threads x 10^4 mixed pool operations (errors among them), with kernels running
    alongside and stats and refcounts() read while the others mutate; afterwards no block was
    ever held by two owners and the counters add up. With the GIL on, most bindings run one
    pool call at a time; on a free-threaded Python (py313t-*) the calls really race, and only
    the core's lock keeps this green."""
    n_threads, ops = 8, 10_000
    pool = kv.BlockPool(512)
    held = [[] for _ in range(n_threads)]
    errors = []
    tokens = native(np.arange(4096, dtype=np.int64))
    x, w = native(np.ones((64, 128), np.float32)), native(np.ones(128, np.float32))

    def worker(i):
        def run():
            rng = np.random.default_rng(i)
            mine = held[i]
            for step, op in enumerate(rng.integers(0, 7, ops)):
                if op == 0:
                    got = pool.allocate(int(rng.integers(0, 4)))
                    mine.extend(got or [])
                elif op == 1:
                    got = pool.allocate_many([1, int(rng.integers(0, 3))])
                    mine.extend(b for req in (got or []) for b in req)
                elif op == 2 and mine:
                    pool.release(mine.pop(int(rng.integers(0, len(mine)))))
                elif op == 3 and mine:
                    b = mine[-1]
                    pool.retain(b)
                    pool.release(b)
                elif op == 4:
                    try:
                        pool.release(-1)
                    except IndexError:
                        pass
                    else:
                        errors.append("release(-1) did not raise")
                elif op == 5 and step % 50 == 0:  # kernels, concurrently with the pool
                    assert kv.count_eos(tokens, 7) == 1
                    kv.rmsnorm(x, w)
                elif op == 6 and step % 10 == 0:  # read while the others mutate
                    s = pool.stats
                    released = s.released_total  # first: only ever follows an allocation
                    assert s.allocated_total >= released and s.peak_in_use <= 512
                    counts = adapter.to_numpy(pool.refcounts())
                    assert counts.min() >= 0 and all(counts[b] >= 1 for b in mine)
                if mine and step % 997 == 0:
                    assert pool.refcount(mine[-1]) >= 1

        return run

    run_threads([worker(i) for i in range(n_threads)])
    assert not errors
    owned = [b for mine in held for b in mine]
    assert len(owned) == len(set(owned)), "a block was held by two owners"
    counts = adapter.to_numpy(pool.refcounts())
    assert sorted(np.flatnonzero(counts).tolist()) == sorted(owned)
    assert all(counts[b] == 1 for b in owned)
    assert pool.num_free == 512 - len(owned)
    s = pool.stats
    assert s.allocated_total - s.released_total == len(owned)
    assert s.peak_in_use <= 512


def test_shared_blocks_are_retained_and_released_from_many_threads(kv):
    """8 threads retain and release the same 2 blocks at once, as prefix-sharing requests do,
    while the blocks' owner keeps its reference: every refcount must come back to 1. With the
    GIL off (py313t-*) the calls race inside the core, and a retain or release without its lock
    loses updates: a count left off, or a block freed under its holders (release refuses a free
    block, so the loss shows as an error)."""
    n_threads, rounds = 8, 20_000
    pool = kv.BlockPool(16)
    shared = pool.allocate(2)
    errors = []

    def worker(i):
        def run():
            retain, release = pool.retain, pool.release
            try:
                for r in range(rounds):
                    b = shared[(r + i) & 1]
                    retain(b)
                    retain(b)
                    release(b)
                    release(b)
            except Exception as e:  # noqa: BLE001 - any error here is the finding
                errors.append(repr(e))

        return run

    run_threads([worker(i) for i in range(n_threads)])
    assert not errors, errors[:3]
    assert [pool.refcount(b) for b in shared] == [1, 1]
    assert pool.num_free == 14
    assert pool.stats.allocated_total - pool.stats.released_total == 2


# --- how many threads a kernel call uses ------------------------------------------------------


@pytest.fixture
def restore_threads(kv):
    before = kv.get_num_threads()
    yield
    kv.set_num_threads(before)


@pytest.fixture(scope="module")
def large_rmsnorm_inputs():
    # 16 MB: far above the size below which a call stays on the calling thread.
    return rand(1024, 4096), rand(4096, seed=1)


def test_num_threads_defaults_to_the_cpus_this_process_may_use(kv, adapter):
    if adapter.threads_from_environment and os.environ.get("KVBRIDGE_NUM_THREADS"):
        pytest.skip("KVBRIDGE_NUM_THREADS is set for this run")
    assert kv.get_num_threads() == adapter.default_num_threads()


def test_set_num_threads_refuses_bad_values_and_changes_nothing(kv, restore_threads):
    before = kv.get_num_threads()
    for bad in (0, -3):
        with refused(ValueError, match=f"num_threads must be >= 1, got {bad}$"):
            kv.set_num_threads(bad)
    for bad in (1.5, "2", None, True):
        with refused(TypeError, match="expected an int"):
            kv.set_num_threads(bad)
    with refused(OverflowError):
        kv.set_num_threads(2**70)
    assert kv.get_num_threads() == before
    kv.set_num_threads(np.int64(2))  # numpy integers are ints, as everywhere
    assert kv.get_num_threads() == 2


def test_one_thread_runs_a_large_call_on_the_calling_thread(
    kv, native, restore_threads, large_rmsnorm_inputs
):
    x, w = (native(a) for a in large_rmsnorm_inputs)
    kv.set_num_threads(1)
    kv.rmsnorm(x, w)
    assert kv._testing.last_num_threads() == 1


def test_two_threads_run_a_large_call_on_two(kv, native, restore_threads, large_rmsnorm_inputs):
    x, w = (native(a) for a in large_rmsnorm_inputs)
    kv.set_num_threads(2)
    kv.rmsnorm(x, w)
    assert kv._testing.last_num_threads() == 2


def thread_states() -> dict[int, str]:
    """The scheduler's state of each thread of this process but the calling one (Linux:
    /proc/self/task/<tid>/stat's third field: "S" asleep, "R" running or waiting for a CPU)."""
    states = {}
    for task in os.listdir("/proc/self/task"):
        if int(task) == threading.get_native_id():
            continue
        try:
            with open(f"/proc/self/task/{task}/stat") as f:
                states[int(task)] = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile
            pass
    return states


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads Linux's /proc")
def test_kernel_threads_sleep_between_calls(kv, native, restore_threads, large_rmsnorm_inputs):
    """After a call that ran on two threads, every other thread of the process (the kernels'
    workers, whoever's pool they are) is soon seen asleep: an idle process burns no CPU. A
    worker that spins forever is never seen asleep, however long this looks and however busy
    the machine is, so the check waits for a state and never times anything."""
    x, w = (native(a) for a in large_rmsnorm_inputs)
    kv.set_num_threads(2)
    kv.rmsnorm(x, w)
    assert kv._testing.last_num_threads() == 2
    deadline = time.monotonic() + 60
    while (awake := {t: s for t, s in thread_states().items() if s not in "SDI"}) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.01)
    assert not awake, f"threads still running between calls: {awake}"


def test_results_are_identical_for_every_thread_count(
    kv, native, adapter, restore_threads, large_rmsnorm_inputs
):
    x, w = (native(a) for a in large_rmsnorm_inputs)
    results = []
    for n in (1, 2, 3):
        kv.set_num_threads(n)
        results.append(adapter.to_numpy(kv.rmsnorm(x, w)))
    for other in results[1:]:
        np.testing.assert_array_equal(other, results[0])  # bit for bit


def test_thread_count_at_import(kv, adapter):
    """numpy packages read KVBRIDGE_NUM_THREADS at import (a malformed value fails the import,
    naming it); kvbridge_torch follows torch.set_num_threads instead."""
    name = PACKAGES[kv.BACKEND]
    if adapter.threads_from_environment:
        code = f"import {name}; print({name}.get_num_threads())"
        env = {**os.environ, "KVBRIDGE_NUM_THREADS": "3"}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
        )
        assert done.stdout.strip() == "3", done.stderr
        env["KVBRIDGE_NUM_THREADS"] = "many"
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode != 0
        assert "ValueError: KVBRIDGE_NUM_THREADS must be an integer >= 1, got 'many'" in done.stderr
    else:
        code = f"import torch, {name}; torch.set_num_threads(3); print({name}.get_num_threads())"
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=False
        )
        assert done.stdout.strip() == "3", done.stderr
