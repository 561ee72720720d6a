"""kvbridge's C++ core as PyTorch operators and custom classes, with the contract's API."""

from importlib.metadata import version as _version

import torch

from ._build_info import TORCH_VERSION as _BUILT_AGAINST

# The extension links torch's C++ ABI, which changes between releases: loading it into another
# torch fails with undefined symbols (or worse). Say so, and how to fix it, before loading.
if torch.__version__ != _BUILT_AGAINST:
    raise ImportError(
        f"kvbridge_torch was built against torch {_BUILT_AGAINST} but torch {torch.__version__} "
        "is installed; rebuild it against this torch with\n"
        "    pip install --no-build-isolation --force-reinstall ./packages/torch"
    )

# Loading _C runs its TORCH_LIBRARY registration; _torch_ops.py looks the ops up, so _C comes first.
from . import (
    _C,  # noqa: E402, F401
    _testing,  # noqa: E402
)
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

BACKEND = "torch"
__version__ = _version("kvbridge-torch")

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
