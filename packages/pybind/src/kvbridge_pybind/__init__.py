"""kvbridge's C++ core bound with pybind11: the contract's API over numpy arrays."""

from ._core import (
    BACKEND,
    BlockPool,
    PoolStats,
    __version__,
    _default_num_threads,
    _testing,
    common_prefix,
    count_eos,
    get_num_threads,
    live_buffers,
    live_pools,
    rmsnorm,
    set_num_threads,
)

_default_num_threads()  # a malformed KVBRIDGE_NUM_THREADS fails the import, naming it

__all__ = [
    "BACKEND",
    "BlockPool",
    "PoolStats",
    "__version__",
    "_testing",
    "common_prefix",
    "count_eos",
    "get_num_threads",
    "live_buffers",
    "live_pools",
    "rmsnorm",
    "set_num_threads",
]
