"""
Hooks the conformance suite uses
"""
from __future__ import annotations
import typing
__all__: list[str] = ['arm_gate', 'close_gate', 'data_address', 'last_num_threads', 'open_gate', 'throw']
def arm_gate(timeout_s: typing.SupportsFloat | typing.SupportsIndex) -> None:
    """
    The next kernel call waits at the GIL gate until another thread opens it
    """
def close_gate() -> int:
    """
    Disarms the GIL gate; the state it had
    """
def data_address(tokens: typing.Any) -> int:
    """
    Address count_eos's C++ code reads tokens from
    """
def last_num_threads() -> int:
    """
    Threads the last kernel call from this thread ran on
    """
def open_gate() -> int:
    """
    Opens the GIL gate if a kernel waits at it; the gate's state
    """
def throw(kind: str) -> None:
    ...
