"""Hooks the conformance suite uses to test the boundary itself."""

from .ops import data_address, throw

__all__ = ["data_address", "throw"]
