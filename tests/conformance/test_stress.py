"""Thread storms and leak checks (docs/contract.md, "Errors", "Threads" and "Ownership"):
bounded in time, so a deadlock fails a test
instead of hanging CI, and no input leaks or double-frees."""

import gc
import os

import numpy as np
from common import run_threads

THREADS, OPS = 8, 10_000


def test_thread_storm(kv, native, adapter):
    """8 threads x 10^4 mixed pool operations, with kernels running alongside; afterwards no
    block was ever held by two owners and the counters add up."""
    pool = kv.BlockPool(512)
    held = [[] for _ in range(THREADS)]
    errors = []
    tokens = native(np.arange(4096, dtype=np.int64))
    x, w = native(np.ones((64, 128), np.float32)), native(np.ones(128, np.float32))

    def worker(i):
        def run():
            rng = np.random.default_rng(i)
            mine = held[i]
            for step, op in enumerate(rng.integers(0, 6, OPS)):
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
                if mine and mine[-1] >= 0 and step % 997 == 0:
                    assert pool.refcount(mine[-1]) >= 1

        return run

    run_threads([worker(i) for i in range(THREADS)])
    assert not errors
    owned = [b for mine in held for b in mine]
    assert len(owned) == len(set(owned)), "a block was held by two owners"
    counts = adapter.to_numpy(pool.refcounts())
    assert sorted(np.flatnonzero(counts).tolist()) == sorted(owned)
    assert all(counts[b] == 1 for b in owned)
    assert pool.num_free == 512 - len(owned)
    s = pool.stats
    assert s.allocated_total - s.released_total == len(owned)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def cycle(kv):
    pool = kv.BlockPool(4)
    pool.allocate(2)
    counts = pool.refcounts()
    stats = pool.stats
    return counts, stats


def test_no_leaks_over_many_cycles(kv):
    """10^5 create/drop cycles of pools, stats views and adopted buffers: the live counters
    return to their baseline and RSS stays flat."""
    gc.collect()
    pools, buffers = kv.live_pools(), kv.live_buffers()
    for _ in range(10_000):  # warm-up: allocator pools, caches, lazy imports
        cycle(kv)
    gc.collect()
    warm = rss_bytes()
    for _ in range(100_000):
        cycle(kv)
    gc.collect()
    assert (kv.live_pools(), kv.live_buffers()) == (pools, buffers)
    if os.environ.get("KVBRIDGE_SANITIZER"):
        return  # ASan's quarantine keeps freed memory mapped on purpose: RSS says nothing there
    growth = rss_bytes() - warm
    # A leak of even one 4-block pool (~100 bytes) per cycle would be ~10 MB here.
    assert growth < 2 * 1024 * 1024, f"RSS grew {growth} bytes over 10^5 cycles"
