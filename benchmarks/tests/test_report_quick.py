"""make report-quick, a smoke run, skips the sections only a decision needs (report.py,
decision_sections) and each page says so: it starts no build, interpreter or download. Run by
`tox -e semantics`."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import report  # noqa: E402


def test_a_smoke_run_skips_the_decision_sections_and_says_so(tmp_path, monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("a smoke run started a decision section")

    for name in ("builds", "free_threaded", "portability"):
        monkeypatch.setattr(report, name, must_not_run)
    monkeypatch.setattr(report.bench_call_overhead, "abi3_builds", must_not_run)
    build, abi3, ft, port = report.decision_sections(tmp_path, True, False, {})
    assert build is None
    for skipped in (abi3, ft, port):
        assert isinstance(skipped, str) and report.QUICK_SKIPS in skipped
