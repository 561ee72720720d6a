"""Hooks the conformance suite uses"""



def throw(kind: object) -> None: ...

def data_address(tokens: object) -> int:
    """Address count_eos's C++ code reads tokens from"""

def last_num_threads() -> int:
    """Threads the last kernel call from this thread ran on"""

def arm_gate(timeout_s: float) -> None:
    """
    The next kernel call waits at the GIL gate until another thread opens it
    """

def open_gate() -> int:
    """Opens the GIL gate if a kernel waits at it; the gate's state"""

def close_gate() -> int:
    """Disarms the GIL gate; the state it had"""
