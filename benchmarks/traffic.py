"""The bytes behind every GB/s: one rule, read by the CPU pages' RMSNorm cases
(measuring/bench_rmsnorm.py) and the GPU check (packages/torch/gpu_check.py) alike, so that a
bandwidth and its target mean the same on both (benchmarks/tests/test_traffic.py).

A figure's bytes are the least a pass must move through memory, not what a kernel happens to
move: an RMSNorm reads x and w once and writes y once (its second pass over a row reads it
again from cache, which is no memory traffic); a copy, and every floor that only reads x and
writes x's size, moves x twice. A kernel that re-reads x from memory is slower for it, and its
GB/s says so.
"""

from __future__ import annotations


def rmsnorm_bytes(x_bytes: int, w_bytes: int) -> int:
    """x read, y (x's size) written, w read: each once."""
    return 2 * x_bytes + w_bytes


def copy_bytes(x_bytes: int) -> int:
    """x read and x's size written: a copy, and the one-pass floors (a negation, a clone)."""
    return 2 * x_bytes
