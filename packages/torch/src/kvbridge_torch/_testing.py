"""Hooks the conformance suite uses to test the boundary itself, and the paths the core's
RMSNorm kernels take here (the torch tests run every path: KVBRIDGE_KERNELS)."""

from .ops import OPS, data_address, last_num_threads, rmsnorm_paths, throw

__all__ = ["OPS", "data_address", "last_num_threads", "rmsnorm_paths", "throw"]
