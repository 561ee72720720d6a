"""docs/contract.md, "The API": every package exports the same names."""

import re

import numpy as np
import pytest

EXPORTED = {
    "BACKEND",
    "BlockPool",
    "PoolStats",
    "__version__",
    "_testing",
    "common_prefix",
    "count_eos",
    "rmsnorm",
    "live_buffers",
    "live_pools",
    "set_num_threads",
    "get_num_threads",
}


def test_exports_the_contract_names(kv):
    assert EXPORTED <= set(dir(kv))
    assert set(kv.__all__) == EXPORTED


def test_backend_names_the_binding(kv, request):
    assert kv.BACKEND == request.config.getoption("--package")


def test_version_is_a_version_string(kv):
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", kv.__version__)


def test_testing_hooks_exist(kv):
    assert callable(kv._testing.throw) and callable(kv._testing.data_address)
    assert callable(kv._testing.last_num_threads)


def test_pool_properties_are_read_only(kv):
    pool = kv.BlockPool(4)
    for name in ("num_blocks", "num_free", "stats"):
        with pytest.raises(AttributeError):
            setattr(pool, name, 1)
    with pytest.raises(AttributeError):
        pool.stats.peak_in_use = 7


def test_results_are_plain_python_ints(kv, native):
    pool = kv.BlockPool(4)
    assert type(pool.num_blocks) is int and type(pool.num_free) is int
    assert all(type(b) is int for b in pool.allocate(2))
    assert type(pool.refcount(0)) is int
    assert type(kv.count_eos(native(np.array([1, 2], np.int64)), 2)) is int
    assert type(kv.common_prefix([1], [1])) is int
    assert type(kv.live_buffers()) is int and type(kv.live_pools()) is int
