"""kvbridge's C++ core through its C ABI and cffi (ABI mode): the contract's API."""

from importlib.metadata import version as _version

from . import _testing
from ._c_abi import (
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

BACKEND = "cffi"
__version__ = _version("kvbridge-cffi")

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
