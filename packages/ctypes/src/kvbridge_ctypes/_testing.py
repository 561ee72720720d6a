"""Hooks the conformance suite uses to test the boundary itself, and the core's own answers
(its store policy, its kernels' paths, its exception kinds) that the benchmarks read."""

from ._c_abi import (
    arm_gate,
    close_gate,
    data_address,
    error_kinds,
    last_num_threads,
    open_gate,
    rmsnorm_paths,
    store_choice,
    throw,
)

__all__ = [
    "arm_gate",
    "close_gate",
    "data_address",
    "error_kinds",
    "last_num_threads",
    "open_gate",
    "rmsnorm_paths",
    "store_choice",
    "throw",
]
