"""docs/contract.md, "BlockPool" and "Errors": BlockPool semantics and its argument errors. Paired
with
common_cpp/tests/test_block_pool.cpp."""

import re

import numpy as np
import pytest
from common import refused, snapshot


def test_fresh_pool(kv):
    pool = kv.BlockPool(8)
    assert (pool.num_blocks, pool.num_free) == (8, 8)
    assert repr(pool) == "<BlockPool free=8/8>"


def test_repr_tracks_free_blocks(kv):
    pool = kv.BlockPool(8)
    pool.allocate(3)
    assert repr(pool) == "<BlockPool free=5/8>"


def test_ids_are_deterministic(kv):
    pool = kv.BlockPool(8)
    assert pool.allocate(3) == [0, 1, 2]
    assert pool.allocate(2) == [3, 4]


def test_released_block_is_reused_first(kv):
    pool = kv.BlockPool(8)
    pool.allocate(4)
    pool.release(2)
    pool.release(0)
    assert pool.allocate(3) == [0, 2, 4]  # LIFO: last released first, then never-used


def test_allocate_zero_returns_empty_list(kv):
    pool = kv.BlockPool(2)
    assert pool.allocate(0) == []
    assert kv.BlockPool(0).allocate(0) == []


def test_allocate_is_all_or_nothing(kv, adapter):
    pool = kv.BlockPool(4)
    pool.allocate(3)
    before = snapshot(pool, adapter)
    assert pool.allocate(2) is None
    assert snapshot(pool, adapter) == before


def test_allocate_many_grants_every_request(kv, native):
    pool = kv.BlockPool(6)
    assert pool.allocate_many([2, 0, 3]) == [[0, 1], [], [2, 3, 4]]
    assert pool.allocate_many(native(np.array([1], np.int64))) == [[5]]
    assert pool.allocate_many(native(np.array([], np.int32))) == []


def test_allocate_many_accepts_arrays_and_sequences(kv, native):
    for counts in (
        [1, 2],
        (1, 2),
        np.array([1, 2], np.int32),
        native(np.array([1, 2], np.int64)),
        np.array([1, 2], np.uint8),
    ):
        assert kv.BlockPool(3).allocate_many(counts) == [[0], [1, 2]]


def test_allocate_many_reads_a_strided_array_by_its_strides(kv, native):
    """counts as a strided view (every other entry): each request is the entry the view shows,
    never its neighbour in memory."""
    for dtype in (np.int64, np.int32):
        counts = native(np.array([1, 9, 2, 9, 3], dtype))[::2]
        assert kv.BlockPool(16).allocate_many(counts) == [[0], [1, 2], [3, 4, 5]]


def test_allocate_many_is_all_or_nothing(kv, adapter):
    pool = kv.BlockPool(5)
    pool.allocate(1)
    before = snapshot(pool, adapter)
    assert pool.allocate_many([2, 3]) is None
    assert snapshot(pool, adapter) == before


def test_retain_and_release(kv):
    pool = kv.BlockPool(4)
    (b,) = pool.allocate(1)
    pool.retain(b)
    assert pool.refcount(b) == 2
    pool.release(b)
    assert (pool.refcount(b), pool.num_free) == (1, 3)
    pool.release(b)
    assert (pool.refcount(b), pool.num_free) == (0, 4)


def test_refcounts_snapshot(kv, adapter):
    pool = kv.BlockPool(4)
    pool.allocate(2)
    pool.retain(1)
    counts = pool.refcounts()
    assert isinstance(counts, adapter.native_type)
    assert adapter.to_numpy(counts).dtype == np.int32
    assert adapter.to_numpy(counts).tolist() == [1, 2, 0, 0]


def test_refcounts_is_a_snapshot(kv, adapter):
    pool = kv.BlockPool(3)
    counts = pool.refcounts()
    pool.allocate(1)
    assert adapter.to_numpy(counts).tolist() == [0, 0, 0]  # later pool changes don't show
    adapter.to_numpy(counts)[2] = 9
    assert pool.refcount(2) == 0  # writes don't reach the pool


def test_stats_counts(kv):
    pool = kv.BlockPool(4)
    pool.allocate(3)
    pool.release(1)
    pool.allocate_many([1, 1])
    s = pool.stats
    assert (s.allocated_total, s.released_total, s.peak_in_use) == (5, 1, 4)


def test_stats_is_a_live_view(kv):
    pool = kv.BlockPool(4)
    s = pool.stats
    pool.allocate(2)
    assert (s.allocated_total, s.peak_in_use) == (2, 2)
    pool.release(0)
    assert s.released_total == 1


def test_pool_stats_type_is_exported(kv):
    assert isinstance(kv.BlockPool(1).stats, kv.PoolStats)


# --- errors (docs/contract.md, "Errors") ----------------------------------------------------------


def test_negative_num_blocks_is_value_error(kv):
    with refused(ValueError, match="-1"):
        kv.BlockPool(-1)


def test_num_blocks_beyond_int32_is_overflow_error(kv):
    with refused(OverflowError, match=str(2**40)):
        kv.BlockPool(2**40)
    with refused(OverflowError, match=str(2**31)):
        kv.BlockPool(2**31)


def test_zero_blocks_is_a_valid_pool(kv):
    pool = kv.BlockPool(0)
    assert (pool.num_blocks, pool.num_free, pool.allocate(1)) == (0, 0, None)


def test_num_blocks_beyond_int64_is_overflow_error(kv):
    with refused(OverflowError, match=str(2**70)):
        kv.BlockPool(2**70)


@pytest.mark.parametrize("bad", ["3", 1.5, None, 2.0, [1], True, np.float64(3)])
def test_num_blocks_of_wrong_type_is_type_error(kv, bad):
    # numpy scalars repr as np.float64(3.0); the message names the value as str() prints it.
    named = str(bad) if isinstance(bad, np.generic) else repr(bad)
    with refused(TypeError, match=re.escape(named)):
        kv.BlockPool(bad)


def test_numpy_integer_scalars_are_ints(kv):
    pool = kv.BlockPool(np.int64(4))
    assert pool.allocate(np.int32(2)) == [0, 1]
    pool.retain(np.uint8(1))
    assert pool.refcount(np.int16(1)) == 2


def test_negative_allocate_is_value_error_and_changes_nothing(kv, adapter):
    pool = kv.BlockPool(4)
    before = snapshot(pool, adapter)
    with refused(ValueError, match="-2"):
        pool.allocate(-2)
    with refused(ValueError, match="-7"):
        pool.allocate(np.int8(-7))
    assert snapshot(pool, adapter) == before


@pytest.mark.parametrize("bad", ["3", 1.5, None, True, False, [1]])
def test_allocate_of_wrong_type_is_type_error(kv, adapter, bad):
    pool = kv.BlockPool(4)
    before = snapshot(pool, adapter)
    with refused(TypeError, match=re.escape(repr(bad))):
        pool.allocate(bad)
    assert snapshot(pool, adapter) == before


def test_allocate_of_numpy_bool_is_type_error(kv, adapter):
    # np.bool_ has __index__ but is no more an int than True is; the message is Python's or the
    # binding's, so only the type is the contract's.
    pool = kv.BlockPool(4)
    before = snapshot(pool, adapter)
    with refused(TypeError):
        pool.allocate(np.bool_(True))
    assert snapshot(pool, adapter) == before


def test_allocate_beyond_int32_is_overflow_error(kv, adapter):
    pool = kv.BlockPool(4)
    before = snapshot(pool, adapter)
    for n in (2**40, 2**70, -(2**70)):
        with refused(OverflowError, match=str(n)):
            pool.allocate(n)
    assert snapshot(pool, adapter) == before


def test_negative_entry_in_allocate_many_is_value_error_and_changes_nothing(kv, adapter, native):
    pool = kv.BlockPool(8)
    before = snapshot(pool, adapter)
    with refused(ValueError, match="-3"):
        pool.allocate_many([1, 2, -3])
    with refused(ValueError, match="-3"):
        pool.allocate_many(native(np.array([1, -3], np.int64)))
    assert snapshot(pool, adapter) == before


def test_allocate_many_entry_beyond_int32_is_overflow_error(kv, adapter):
    pool = kv.BlockPool(8)
    before = snapshot(pool, adapter)
    with refused(OverflowError, match=str(2**40)):
        pool.allocate_many([1, 2**40])
    with refused(OverflowError, match=str(2**70)):
        pool.allocate_many([1, 2**70])
    assert snapshot(pool, adapter) == before


def test_allocate_many_of_wrong_type_is_type_error(kv, adapter, native):
    pool = kv.BlockPool(8)
    before = snapshot(pool, adapter)
    with refused(TypeError, match="1.5"):
        pool.allocate_many([1, 1.5])
    with refused(TypeError, match="True"):
        pool.allocate_many([1, True])
    with refused(TypeError, match="float64"):
        pool.allocate_many(native(np.array([1.0, 2.0])))
    with refused(TypeError, match="None"):
        pool.allocate_many(None)
    assert snapshot(pool, adapter) == before


def test_allocate_many_of_2d_array_is_value_error(kv, native):
    with refused(ValueError, match=r"\(1, 2\)"):
        kv.BlockPool(8).allocate_many(native(np.array([[1, 2]], np.int64)))


@pytest.mark.parametrize("method", ["retain", "release", "refcount"])
@pytest.mark.parametrize("block", [8, -1, 2**31 - 1])
def test_block_out_of_range_is_index_error(kv, adapter, method, block):
    pool = kv.BlockPool(8)
    pool.allocate(8)
    before = snapshot(pool, adapter)
    with refused(IndexError, match=str(block)):
        getattr(pool, method)(block)
    assert snapshot(pool, adapter) == before


@pytest.mark.parametrize("method", ["retain", "release", "refcount"])
def test_block_beyond_int32_is_overflow_error(kv, adapter, method):
    pool = kv.BlockPool(8)
    pool.allocate(2)
    before = snapshot(pool, adapter)
    with refused(OverflowError, match=str(2**40)):
        getattr(pool, method)(2**40)
    assert snapshot(pool, adapter) == before


@pytest.mark.parametrize("method", ["retain", "release", "refcount"])
@pytest.mark.parametrize("bad", ["3", 1.5, None, True])
def test_block_of_wrong_type_is_type_error(kv, adapter, method, bad):
    pool = kv.BlockPool(8)
    pool.allocate(2)
    before = snapshot(pool, adapter)
    with refused(TypeError, match=re.escape(repr(bad))):
        getattr(pool, method)(bad)
    assert snapshot(pool, adapter) == before


@pytest.mark.parametrize("method", ["retain", "release"])
def test_unallocated_block_is_runtime_error_and_changes_nothing(kv, adapter, method):
    pool = kv.BlockPool(4)
    pool.allocate(1)
    before = snapshot(pool, adapter)
    with refused(RuntimeError, match="block 2"):
        getattr(pool, method)(2)
    assert snapshot(pool, adapter) == before


def test_double_release_is_runtime_error(kv):
    pool = kv.BlockPool(4)
    (b,) = pool.allocate(1)
    pool.release(b)
    with refused(RuntimeError, match=f"block {b}"):
        pool.release(b)
    assert pool.num_free == 4


def test_batch_with_a_bad_value_before_a_bad_type_is_type_error(kv, adapter):
    # A batch is converted whole before any value is checked: the str wins over the earlier -1,
    # and the pool is unchanged.
    pool = kv.BlockPool(4)
    before = snapshot(pool, adapter)
    with refused(TypeError, match="expected an int, got str"):
        pool.allocate_many([-1, "x"])
    assert snapshot(pool, adapter) == before
