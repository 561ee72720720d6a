"""Hooks the conformance suite uses"""



def throw(kind: object) -> None: ...

def data_address(tokens: object) -> int:
    """Address count_eos's C++ code reads tokens from"""

def last_num_threads() -> int:
    """Threads the last kernel call from this thread ran on"""
