"""benchmarks/bench_cases.py hands pytest-benchmark the page's own cases: one list, made by
the same code, each statement run as written."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import spec  # noqa: E402


def test_pytest_benchmark_runs_the_cases_the_report_times(monkeypatch):
    """Over the token cases (the other modules' compile torch: a minute): the same keys in the
    same order, and a statement that runs as written over its case's globals."""
    pytest.importorskip("kvbridge_probes")
    import bench_cases

    monkeypatch.setattr(spec, "BENCH_MODULES", ("measuring.bench_tokens",))
    made = bench_cases.cases(quick=True)
    timed = [case.key for name in spec.BENCH_MODULES
             for group in importlib.import_module(name).groups(True) for case in group.cases]  # fmt: skip
    assert [c.key for c in made] == timed and timed
    bench_cases.callable_of(made[0])()
