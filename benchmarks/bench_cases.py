"""The page's benchmark cases under pytest-benchmark, for measuring one change against another
on one machine. The cases are the page's own, made by the same code (spec.BENCH_MODULES'
groups()): nothing here defines a case.

    tox -e bench -- -k "rmsnorm and 2048x4096" --benchmark-autosave    # on main
    tox -e bench -- -k "rmsnorm and 2048x4096" --benchmark-compare     # on the change

KVBRIDGE_BENCH_QUICK=1 makes the quick run's cases (small sizes). Each case's statement runs
in a function of its own (pytest-benchmark times a callable): one Python frame per call that
the page's harness does not have, the same on both sides of a comparison. docs/reproduce.md
says which runner is for what, and why the page keeps its own.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: spec, measuring

import spec  # noqa: E402
from measuring.harness import Case  # noqa: E402


def cases(quick: bool) -> list[Case]:
    """Every case of every group the report times, in its order."""
    return [case for name in spec.BENCH_MODULES
            for group in importlib.import_module(name).groups(quick)
            for case in group.cases]  # fmt: skip


def callable_of(case: Case):
    """The case's statement as a function over its globals (its setup's), thread counts set."""
    namespace = dict(case.setup())
    exec(f"def _call():\n    {case.stmt}\n", namespace)  # noqa: S102 - the case's own statement
    return namespace["_call"]


QUICK = os.environ.get("KVBRIDGE_BENCH_QUICK") == "1"


def pytest_generate_tests(metafunc) -> None:
    """The cases, made when pytest collects this file (not when another module imports it)."""
    if "case" in metafunc.fixturenames:
        made = cases(QUICK)
        metafunc.parametrize("case", made, ids=[c.key for c in made])


def test_case(benchmark, case: Case) -> None:
    call = callable_of(case)
    if case.prepare:
        case.prepare()
    benchmark.extra_info.update(case.meta)
    benchmark(call)
