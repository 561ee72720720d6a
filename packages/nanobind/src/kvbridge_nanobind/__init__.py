"""kvbridge's C++ core bound with nanobind: the contract's API over numpy arrays."""

from importlib.metadata import version as _version

from ._core import (
    BACKEND,
    BlockPool,
    PoolStats,
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

__version__ = _version("kvbridge-nanobind")

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
