"""Hooks the conformance suite uses to test the boundary itself."""

from ._core import _arm_gate as arm_gate
from ._core import _close_gate as close_gate
from ._core import _data_address as data_address
from ._core import _last_num_threads as last_num_threads
from ._core import _open_gate as open_gate
from ._core import _throw as throw

__all__ = ["arm_gate", "close_gate", "data_address", "last_num_threads", "open_gate", "throw"]
