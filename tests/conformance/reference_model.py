"""A pure-Python model of docs/contract.md "BlockPool"'s BlockPool, for differential testing.

It raises the contract's exception types for the same inputs and hands out the same block ids
(deterministic LIFO free list), so every package can be compared with it step by step.
"""

from __future__ import annotations

import operator

import numpy as np

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def as_int(value) -> int:
    """The contract's reading of an int argument (bools are not ints here)."""
    if isinstance(value, (bool, np.bool_)) or not hasattr(type(value), "__index__"):
        raise TypeError(f"expected an int, got {value!r}")
    i = operator.index(value)
    if not INT64_MIN <= i <= INT64_MAX:
        raise OverflowError(i)
    return i


def as_count(value) -> int:
    n = as_int(value)
    if n < 0:
        raise ValueError(n)
    if n > INT32_MAX:
        raise OverflowError(n)
    return n


class ModelPool:
    def __init__(self, num_blocks):
        self.num_blocks = as_count(num_blocks)
        self.free = list(range(self.num_blocks - 1, -1, -1))  # the back is handed out next
        self.refs = [0] * self.num_blocks
        self.allocated_total = self.released_total = self.peak_in_use = 0

    @property
    def num_free(self) -> int:
        return len(self.free)

    def _take(self, n: int) -> list[int]:
        blocks = [self.free.pop() for _ in range(n)]
        for b in blocks:
            self.refs[b] = 1
        self.allocated_total += n
        return blocks

    def _note_peak(self) -> None:
        self.peak_in_use = max(self.peak_in_use, self.num_blocks - len(self.free))

    def allocate(self, n):
        n = as_count(n)
        if n > len(self.free):
            return None
        blocks = self._take(n)
        self._note_peak()
        return blocks

    def allocate_many(self, counts):
        # The whole batch is converted (types, int64 range) before any value is checked, as a
        # binding does at the boundary before the core sees it: a TypeError anywhere in the
        # batch wins over a ValueError earlier in it.
        counts = [as_count(c) for c in [as_int(c) for c in counts]]
        if sum(counts) > len(self.free):
            return None
        result = [self._take(c) for c in counts]
        self._note_peak()
        return result

    def _block(self, block) -> int:
        b = as_int(block)
        if not -(2**31) <= b <= INT32_MAX:
            raise OverflowError(b)
        if not 0 <= b < self.num_blocks:
            raise IndexError(b)
        return b

    def retain(self, block) -> None:
        b = self._block(block)
        if self.refs[b] == 0:
            raise RuntimeError(b)
        self.refs[b] += 1

    def release(self, block) -> None:
        b = self._block(block)
        if self.refs[b] == 0:
            raise RuntimeError(b)
        self.refs[b] -= 1
        if self.refs[b] == 0:
            self.free.append(b)
            self.released_total += 1

    def refcount(self, block) -> int:
        return self.refs[self._block(block)]
