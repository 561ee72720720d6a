"""Hooks the conformance suite uses to test the boundary itself, and the paths the core's
RMSNorm kernels take here (the torch tests run every path: KVBRIDGE_KERNELS)."""

from .ops import OPS, data_address, last_num_threads, rmsnorm_paths, throw

# The GIL gate (common_cpp's testing.hpp): the ops themselves, which take and return plain
# numbers.
arm_gate = OPS.arm_gate.default
open_gate = OPS.open_gate.default
close_gate = OPS.close_gate.default

__all__ = [
    "OPS",
    "arm_gate",
    "close_gate",
    "open_gate",
    "data_address",
    "last_num_threads",
    "rmsnorm_paths",
    "throw",
]
