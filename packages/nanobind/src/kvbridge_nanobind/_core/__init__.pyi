"""kvbridge core bound with nanobind"""

from kvbridge_nanobind._core import _testing as _testing


BACKEND: str = 'nanobind'

class PoolStats:
    """Live view of one pool's counters"""

    @property
    def allocated_total(self) -> int: ...

    @property
    def released_total(self) -> int: ...

    @property
    def peak_in_use(self) -> int: ...

    def __repr__(self) -> str: ...

class BlockPool:
    """Ref-counted KV-cache block allocator"""

    def __init__(self, num_blocks: int) -> None: ...

    @property
    def num_blocks(self) -> int: ...

    @property
    def num_free(self) -> int: ...

    def allocate(self, n: int) -> list[int] | None: ...

    def allocate_many(self, counts: object) -> list[list[int]] | None: ...

    def retain(self, block: int) -> None: ...

    def release(self, block: int) -> None: ...

    def refcount(self, block: int) -> int: ...

    def refcounts(self) -> object: ...

    @property
    def stats(self) -> PoolStats: ...

    def __repr__(self) -> str: ...

def common_prefix(a: object, b: object) -> int:
    """Length of the longest common prefix"""

def count_eos(tokens: object, eos: int) -> int:
    """How many tokens equal eos"""

def rmsnorm(x: object, weight: object, eps: float = 1e-06, *, out: object | None = None) -> object:
    """Fused RMSNorm over the last dimension"""

def live_buffers() -> int:
    """C++-allocated buffers now owned by Python objects"""

def live_pools() -> int:
    """C++ BlockPool objects now alive"""

def set_num_threads(n: int) -> None:
    """Threads a kernel call may use (n >= 1)"""

def get_num_threads() -> int:
    """Threads a kernel call may use"""

def _default_num_threads() -> int: ...
