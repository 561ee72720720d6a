"""The core never takes the GIL while holding its own lock (docs/contract.md, "Threads"), because
it never takes the GIL at all: nothing under common_cpp/ includes Python's headers or calls its C
API, so a pool or pool-of-threads lock can only ever be held by C++ that cannot wait for Python.
A binding takes the GIL around the core's calls, never inside them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    p for p in (ROOT / "common_cpp").rglob("*") if p.suffix in {".c", ".h", ".cpp", ".hpp", ".cu"}
]
# Python's headers, or a call of any of its C API (PyGILState_Ensure, PyEval_RestoreThread, ...).
PYTHON = re.compile(r'#\s*include\s*[<"]Python\.h[>"]|\bPy[A-Z]\w*\s*\(|\bPy_\w+')


def test_the_core_includes_and_calls_no_python():
    assert len(SOURCES) > 20
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in SOURCES
             for m in PYTHON.finditer(p.read_text())]  # fmt: skip
    assert not found, found


def test_the_check_sees_a_python_call():
    assert PYTHON.search("  PyGILState_STATE s = PyGILState_Ensure();")
    assert PYTHON.search('#include "Python.h"')
    assert not PYTHON.search("// two Python threads calling at once")
