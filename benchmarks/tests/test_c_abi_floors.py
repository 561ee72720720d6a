"""The C ABI's array floors (probing/ask_c_abi.py's array_floors) are given what a C function
given arrays is given: each array's address and its length, as kvbridge's C ABI is. A floor
that passed the address alone would be cheaper than any honest C call taking an array, and the
health page would hold kvbridge-ctypes and kvbridge-cffi to it."""

from __future__ import annotations

import sys
from functools import reduce
from operator import xor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ARRAYS = {"one array": ("a",), "one array, one int": ("a",), "two arrays": ("a", "b"),
          "three arrays, one float": ("x", "w", "out")}  # fmt: skip
FOLDED = {"one array, one int": 1, "three arrays, one float": 1}  # the int 1; eps > 0


def test_each_array_is_passed_with_its_length():
    pytest.importorskip("kvbridge_probes")
    pytest.importorskip("cffi")
    from probing import ask_c_abi

    rows = ask_c_abi.floors()
    asked = 0
    for row, calls in rows.items():
        for call, names in ARRAYS.items():
            if call not in calls:
                continue
            statement, namespace = calls[call]
            arrays = [namespace[name] for name in names]
            parts = [v for arr in arrays for v in (arr.__array_interface__["data"][0], arr.size)]
            expected = reduce(xor, parts, FOLDED.get(call, 0))
            assert int(eval(statement, dict(namespace))) == expected, (row, call, statement)  # noqa: S307
            asked += 1
    assert asked >= 5 * len(ARRAYS), sorted(rows)  # ctypes' three idioms, cffi's two modes
