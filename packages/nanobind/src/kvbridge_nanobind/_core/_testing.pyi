"""Hooks the conformance suite uses"""



def throw(kind: object) -> None: ...

def data_address(tokens: object) -> int:
    """Address count_eos's C++ code reads tokens from"""
