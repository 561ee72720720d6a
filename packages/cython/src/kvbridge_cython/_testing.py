"""Hooks the conformance suite uses to test the boundary itself."""

from ._core import _data_address as data_address
from ._core import _last_num_threads as last_num_threads
from ._core import _throw as throw

__all__ = ["data_address", "last_num_threads", "throw"]
