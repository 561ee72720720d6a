"""kvbridge's C++ core as PyTorch operators on the LibTorch stable ABI, with the contract's API:
one library for every torch from its stable ABI target on."""

from importlib.metadata import version as _version
from pathlib import Path as _Path

import torch

from ._build_info import TORCH_TARGET as _TORCH_TARGET


def _release(version: str) -> tuple[int, int]:
    """major.minor of a torch version string ("2.13.0+cpu" -> (2, 13))."""
    major, minor = version.split("+", maxsplit=1)[0].split(".")[:2]
    return int(major), int(minor)


# The library calls only stable-ABI shims that exist from its target on; an older torch lacks
# some, and loading it there fails on undefined symbols. Say so, naming both versions.
if _release(torch.__version__) < _release(_TORCH_TARGET):
    raise ImportError(
        f"kvbridge_torch_stable needs torch >= {_TORCH_TARGET} (its stable ABI target), "
        f"but torch {torch.__version__} is installed; pip install 'torch>={_TORCH_TARGET}'"
    )

# Loading the library runs its STABLE_TORCH_LIBRARY registration; _torch_ops.py looks the ops up.
torch.ops.load_library(str(_Path(__file__).with_name("libkvbridge_torch_stable.so")))

from . import _testing  # noqa: E402
from ._torch_ops import (  # noqa: E402
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

BACKEND = "torch_stable"
__version__ = _version("kvbridge-torch-stable")

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
