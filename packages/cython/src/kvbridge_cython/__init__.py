"""kvbridge's C++ core bound with Cython: the contract's API over numpy arrays."""

from importlib.metadata import version as _version

from . import _testing
from ._core import (
    BACKEND,
    BlockPool,
    PoolStats,
    common_prefix,
    count_eos,
    get_num_threads,
    live_buffers,
    live_pools,
    rmsnorm,
    set_num_threads,
)

__version__ = _version("kvbridge-cython")

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
