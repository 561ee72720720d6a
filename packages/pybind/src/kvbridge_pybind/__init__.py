"""kvbridge's C++ core bound with pybind11: the contract's API over numpy arrays."""

from ._core import (
    BACKEND,
    BlockPool,
    PoolStats,
    __version__,
    _testing,
    common_prefix,
    count_eos,
    live_buffers,
    live_pools,
    rmsnorm,
)

__all__ = [
    "BACKEND",
    "BlockPool",
    "PoolStats",
    "__version__",
    "_testing",
    "common_prefix",
    "count_eos",
    "live_buffers",
    "live_pools",
    "rmsnorm",
]
