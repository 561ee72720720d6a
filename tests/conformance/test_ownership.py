"""docs/contract.md, "Ownership": who owns memory. Buffers adopted without a copy and freed exactly
once; views
that keep their owner alive; inputs never kept."""

import gc
import os
import sys

import numpy as np


def test_refcounts_buffer_is_counted_while_alive(kv):
    gc.collect()
    base = kv.live_buffers()
    counts = kv.BlockPool(4).refcounts()
    assert kv.live_buffers() == base + 1
    del counts
    gc.collect()
    assert kv.live_buffers() == base


def test_refcounts_buffer_freed_exactly_once_after_views(kv, adapter):
    gc.collect()
    base = kv.live_buffers()
    counts = kv.BlockPool(6).refcounts()
    view = counts[2:]
    del counts
    gc.collect()
    assert kv.live_buffers() == base + 1  # the view still holds the C++ buffer
    assert adapter.to_numpy(view).tolist() == [0, 0, 0, 0]
    del view
    gc.collect()
    assert kv.live_buffers() == base  # freed once: not above (leak), not below (double free)


def test_refcounts_buffer_is_adopted_without_copy(kv, adapter):
    pool = kv.BlockPool(1000)
    gc.collect()
    base = kv.live_buffers()
    arrays = [pool.refcounts() for _ in range(10)]
    # Each result is backed by its own live C++ buffer: nothing was copied into a
    # Python-allocated array and the C++ buffer freed.
    assert kv.live_buffers() == base + 10
    addresses = {adapter.data_address(a) for a in arrays}
    assert len(addresses) == 10
    del arrays
    gc.collect()
    assert kv.live_buffers() == base


def test_buffer_outlives_its_pool(kv, adapter):
    pool = kv.BlockPool(3)
    pool.allocate(2)
    counts = pool.refcounts()
    del pool
    gc.collect()
    assert adapter.to_numpy(counts).tolist() == [1, 1, 0]


def test_stats_keeps_pool_alive(kv):
    gc.collect()
    base = kv.live_pools()
    s = kv.BlockPool(4).stats
    gc.collect()
    assert kv.live_pools() == base + 1
    assert (s.allocated_total, s.released_total, s.peak_in_use) == (0, 0, 0)
    del s
    gc.collect()
    assert kv.live_pools() == base


def test_pool_is_freed_when_last_reference_dies(kv):
    gc.collect()
    base = kv.live_pools()
    pools = [kv.BlockPool(2) for _ in range(5)]
    assert kv.live_pools() == base + 5
    del pools
    gc.collect()
    assert kv.live_pools() == base


def test_inputs_are_not_kept(kv, native):
    tokens = native(np.arange(100, dtype=np.int64))
    other = native(np.arange(100, dtype=np.int32))
    lst = [1, 2, 3]
    x = native(np.ones((4, 8), np.float32))
    w = native(np.ones(8, np.float32))
    out = native(np.zeros((4, 8), np.float32))
    counts = [1, 1]
    objects = (tokens, other, lst, x, w, out, counts)
    before = [sys.getrefcount(o) for o in objects]
    kv.count_eos(tokens, 5)
    kv.common_prefix(tokens, other)
    kv.common_prefix(lst, tokens)
    kv._testing.data_address(tokens)
    kv.rmsnorm(x, w)
    kv.rmsnorm(x, w, out=out)
    kv.BlockPool(4).allocate_many(counts)
    gc.collect()
    assert [sys.getrefcount(o) for o in objects] == before


def test_list_input_is_copied_whole_as_int64(kv):
    # A list has no buffer to read in place, so the core reads a copy: every element (the last
    # ones of a long list too), as int64 (values past int32 neither truncated nor refused), and
    # one that is not the list itself (an element changed after a call does not show in the
    # last call's result). That the list is neither kept nor changed is test_inputs_are_not_kept.
    big = 2**40 + 1
    tokens = [1] * 5000 + [big, big]
    assert kv.count_eos(tokens, big) == 2
    assert kv.count_eos(tokens, big - 2**40) == 5000
    assert kv.common_prefix(tokens, [*tokens[:-1], 0]) == len(tokens) - 1
    assert kv.common_prefix(tokens, tokens) == len(tokens)
    tokens[-1] = 0
    assert kv.count_eos(tokens, big) == 1


def test_array_input_is_read_in_place(kv, native, adapter):
    tokens = native(np.arange(10, dtype=np.int64))
    assert kv._testing.data_address(tokens) == adapter.data_address(tokens)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_no_leaks_over_many_cycles(kv):
    """10^5 create/drop cycles of pools, stats views and adopted buffers: the live counters
    return to their baseline and RSS stays flat."""

    def cycle():
        pool = kv.BlockPool(4)
        pool.allocate(2)
        return pool.refcounts(), pool.stats

    gc.collect()
    pools, buffers = kv.live_pools(), kv.live_buffers()
    for _ in range(10_000):  # warm-up: allocator pools, caches, lazy imports
        cycle()
    gc.collect()
    warm = rss_bytes()
    for _ in range(100_000):
        cycle()
    gc.collect()
    assert (kv.live_pools(), kv.live_buffers()) == (pools, buffers)
    if os.environ.get("KVBRIDGE_SANITIZER"):
        return  # ASan's quarantine keeps freed memory mapped on purpose: RSS says nothing there
    growth = rss_bytes() - warm
    # A leak of even one 4-block pool (~100 bytes) per cycle would be ~10 MB here.
    assert growth < 2 * 1024 * 1024, f"RSS grew {growth} bytes over 10^5 cycles"
