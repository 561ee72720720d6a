"""
kvbridge core bound with pybind11
"""
from __future__ import annotations
import numpy
import typing
from . import _testing
__all__: list[str] = ['BACKEND', 'BlockPool', 'PoolStats', 'common_prefix', 'count_eos', 'get_num_threads', 'live_buffers', 'live_pools', 'rmsnorm', 'set_num_threads']
class PoolStats:
    """
    Live view of one pool's counters
    """
    def __repr__(self) -> str:
        ...
    @property
    def allocated_total(self) -> int:
        ...
    @property
    def peak_in_use(self) -> int:
        ...
    @property
    def released_total(self) -> int:
        ...
class BlockPool:
    """
    Ref-counted KV-cache block allocator
    """
    def __init__(self, num_blocks: int) -> None:
        ...
    def __repr__(self) -> str:
        ...
    def allocate(self, n: int) -> list[int] | None:
        ...
    def allocate_many(self, counts: typing.Any) -> list[list[int]] | None:
        ...
    def refcount(self, block: int) -> int:
        ...
    def refcounts(self) -> numpy.ndarray:
        ...
    def release(self, block: int) -> None:
        ...
    def retain(self, block: int) -> None:
        ...
    @property
    def num_blocks(self) -> int:
        ...
    @property
    def num_free(self) -> int:
        ...
    @property
    def stats(self) -> PoolStats:
        ...
def _default_num_threads() -> int:
    ...
def common_prefix(a: typing.Any, b: typing.Any) -> int:
    """
    Length of the longest common prefix
    """
def count_eos(tokens: typing.Any, eos: int) -> int:
    """
    How many tokens equal eos
    """
def get_num_threads() -> int:
    """
    Threads a kernel call may use
    """
def live_buffers() -> int:
    """
    C++-allocated buffers now owned by Python objects
    """
def live_pools() -> int:
    """
    C++ BlockPool objects now alive
    """
def rmsnorm(x: typing.Any, weight: typing.Any, eps: float = 1e-06, *, out: typing.Any = None) -> numpy.ndarray:
    """
    Fused RMSNorm over the last dimension
    """
def set_num_threads(n: int) -> None:
    """
    Threads a kernel call may use (n >= 1)
    """
BACKEND: str = 'pybind'
__version__: str = '0.1.0'
