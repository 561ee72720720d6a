"""Hooks the conformance suite uses to test the boundary itself, and the paths the core's
RMSNorm kernels take here (the torch tests run every path: KVBRIDGE_KERNELS)."""

from ._torch_glue import gate_hooks
from ._torch_ops import (
    OPS,
    TYPED_OPS,
    data_address,
    last_num_threads,
    rmsnorm_paths,
    throw,
)

arm_gate, open_gate, close_gate = gate_hooks(OPS)  # the GIL gate (common_cpp's testing.hpp)

__all__ = [
    "OPS",
    "TYPED_OPS",
    "arm_gate",
    "close_gate",
    "open_gate",
    "data_address",
    "last_num_threads",
    "rmsnorm_paths",
    "throw",
]
