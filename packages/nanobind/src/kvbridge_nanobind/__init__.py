"""kvbridge's C++ core bound with nanobind: the contract's API over numpy arrays."""

from importlib.metadata import version as _version

from ._core import (
    BACKEND,
    BlockPool,
    PoolStats,
    _testing,
    common_prefix,
    count_eos,
    live_buffers,
    live_pools,
    rmsnorm,
)

__version__ = _version("kvbridge-nanobind")

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
