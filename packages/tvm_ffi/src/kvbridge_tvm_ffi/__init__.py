"""kvbridge's C++ core as a tvm-ffi library: the contract's API over numpy arrays (DLPack)."""

from importlib.metadata import version as _version

from . import _testing
from ._tvm_ffi import (
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

BACKEND = "tvm_ffi"
__version__ = _version("kvbridge-tvm-ffi")

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
