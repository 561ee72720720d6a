"""
Hooks the conformance suite uses
"""
from __future__ import annotations
import typing
__all__: list[str] = ['data_address', 'last_num_threads', 'throw']
def data_address(tokens: typing.Any) -> int:
    """
    Address count_eos's C++ code reads tokens from
    """
def last_num_threads() -> int:
    """
    Threads the last kernel call from this thread ran on
    """
def throw(kind: str) -> None:
    ...
