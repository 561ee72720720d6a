"""The questions' one table (benchmarks/probing/questions.py): a probe family's answers are checked
against it, so a question left unanswered, or a row the table does not ask, fails the probe run
by name instead of leaving a gap on the page."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from outcomes import Outcome  # noqa: E402
from probing.questions import QUESTIONS, SHARED_AXES, checked  # noqa: E402

KINDS = ["invalid_argument", "runtime_error"]


def answers() -> dict:
    found = {"exceptions": {k: Outcome("raised", "ValueError") for k in KINDS}}
    for axis in SHARED_AXES:
        found[axis] = {row: Outcome("returned", "1") for row in reversed(QUESTIONS[axis])}
    return found


def test_complete_answers_come_back_in_the_table_order():
    got = checked("t", answers(), KINDS)
    assert all(list(got[a]) == list(QUESTIONS[a]) for a in SHARED_AXES)


def test_a_missing_answer_is_a_type_error_naming_it():
    found = answers()
    del found["arrays"]["strided int64 view"]
    with pytest.raises(TypeError, match="t: arrays: no answer to 'strided int64 view'"):
        checked("t", found, KINDS)


def test_an_unknown_row_or_a_missing_axis_is_a_type_error():
    found = answers()
    found["overflow"]["2**80 to int64"] = Outcome("returned", "1")
    del found["gil"]
    with pytest.raises(TypeError, match="no gil answers.*'2\\*\\*80 to int64' is no question"):
        checked("t", found, KINDS)
    found = answers()
    del found["exceptions"]["runtime_error"]
    with pytest.raises(TypeError, match="exceptions: no answer to 'runtime_error'"):
        checked("t", found, KINDS)
