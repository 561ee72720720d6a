"""docs/contract.md, "The GIL and threads": the GIL and threads.

No test here asserts a wall-clock time: each checks an ordering that is impossible unless the
GIL was released (another thread ran in the middle of a call), and every thread is joined with
a timeout so that a deadlock fails the test instead of hanging CI.
"""

import numpy as np
import pytest
from common import python_ran_during_call, run_threads


@pytest.fixture(scope="module")
def long_tokens():
    # 256 MB of touched memory (np.zeros would map one shared zero page and read from cache):
    # one pass takes tens of milliseconds, several switch intervals.
    return np.ones(64 * 1024 * 1024, np.int32)


def test_count_eos_releases_the_gil(kv, native, long_tokens):
    tokens = native(long_tokens)
    assert python_ran_during_call(lambda: kv.count_eos(tokens, 1))


def test_common_prefix_releases_the_gil(kv, native, long_tokens):
    a = native(long_tokens)
    assert python_ran_during_call(lambda: kv.common_prefix(a, a))


def test_rmsnorm_releases_the_gil(kv, native):
    x, w = native(np.ones((4096, 4096), np.float32)), native(np.ones(4096, np.float32))
    out = native(np.empty((4096, 4096), np.float32))
    assert python_ran_during_call(lambda: kv.rmsnorm(x, w, out=out))


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


def test_block_pool_is_thread_safe(kv, adapter):
    pool = kv.BlockPool(256)
    n_threads, rounds = 8, 2000
    held = [[] for _ in range(n_threads)]

    def worker(i):
        def run():
            mine = held[i]
            for r in range(rounds):
                got = pool.allocate(1 + r % 3)
                if got is not None:
                    mine.extend(got)
                if r % 5 == 0:
                    batch = pool.allocate_many([1, 2])
                    if batch is not None:
                        mine.extend(b for req in batch for b in req)
                while len(mine) > 12:
                    b = mine.pop()
                    pool.retain(b)
                    pool.release(b)
                    pool.release(b)

        return run

    run_threads([worker(i) for i in range(n_threads)])
    owned = [b for mine in held for b in mine]
    assert len(owned) == len(set(owned)), "a block was handed out twice"
    counts = adapter.to_numpy(pool.refcounts())
    assert sorted(np.flatnonzero(counts).tolist()) == sorted(owned)
    assert pool.num_free == 256 - len(owned)
    s = pool.stats
    assert s.allocated_total - s.released_total == len(owned)
    assert s.peak_in_use <= 256
