"""The trap tables' rules (benchmarks/outcomes.py, render.traps): a severity comes from what a
probe observed, never from the words describing it, and a trap is counted once per cause.
Run by `tox -e semantics` (the report's imports need the packages installed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from outcomes import KINDS, Outcome, severity, worst  # noqa: E402

WORDINGS = [
    "no copy, freed when the array dies",  # words that matched "copy" under the old rules
    "dangles? no: the copy is kept",
    "wrong values, never freed, process dies",
    "",
]


@pytest.mark.parametrize("kind", sorted(k for k in KINDS if k != "not probed"))
def test_rewording_a_detail_never_changes_a_severity(kind):
    for raises, valid in ((None, True), ("TypeError", False), ("TypeError", True)):
        got = {severity(Outcome(kind, "TypeError", w), raises, valid) for w in WORDINGS}
        assert len(got) == 1, (kind, raises, valid, got)


def test_a_success_described_with_trap_words_is_no_trap():
    assert severity(Outcome("freed", detail="no copy, freed when the array dies")) is None
    assert severity(Outcome("kept alive", detail="a copy would dangle")) is None


def test_severities_follow_the_kind():
    assert severity(Outcome("copied")) == "silent copy"
    assert severity(Outcome("copied as typed", "list")) is None  # the copy the user's type asks
    assert severity(Outcome("misread")) == "wrong result without an error"
    assert severity(Outcome("crashed", "SIGABRT")) == "crash"
    assert severity(Outcome("raised", "RuntimeError"), raises="TypeError") == "wrong exception type"
    assert severity(Outcome("raised", "TypeError"), raises="TypeError", valid=False) is None
    assert severity(Outcome("returned", "1"), raises="TypeError", valid=False) == (
        "wrong result without an error"
    )
    # A bool taken as an int is a choice, not a wrong value; refusing it is right too.
    assert severity(Outcome("returned", "1"), raises="TypeError", valid=True) is None
    assert severity(Outcome("raised", "TypeError"), raises=None) == "refuses valid input"


def test_a_rows_severity_is_its_worst_trap():
    """A row (or a column's pair of modes) is as bad as its worst cell, never its mildest."""
    from page import render

    assert worst(["refuses valid input", None, "crash", "silent copy"]) == "crash"
    assert worst([None, None]) is None
    assert render.severity_cell(["A", "B", "C"], ["refuses valid input", "crash", None]) == (
        "crash: B"
    )
    assert render.severity_cell(["A", "B"], ["silent copy", "silent copy"]) == "silent copy"


def test_probed_counts_only_the_questions_a_probe_answered():
    from page import render

    why = "the probe hands out none"
    axes = {
        "arguments": {"a": Outcome("returned", "1"), "b": Outcome("not probed", detail=why)},
        "arrays": {"c": Outcome("copied"), "d": Outcome("not probed", detail=why)},
    }
    assert render.questions_probed(axes) == (2, 4)


def test_a_cell_that_is_not_probed_must_say_why():
    with pytest.raises(ValueError, match="must say why"):
        Outcome("not probed")
    with pytest.raises(ValueError, match="unknown outcome kind"):
        Outcome("copied silently")


def test_one_cause_in_many_rows_is_one_trap():
    from page import render
    from probing.asking import kinds
    from probing.questions import ESCAPE, TRANSLATION, UNDECLARED

    THROWS = kinds()

    crash = Outcome("crashed", "SIGABRT", cause=ESCAPE)
    axes = {
        "exceptions": dict.fromkeys(THROWS, crash),
        "undeclared throw": {UNDECLARED: crash},
        "arguments": {"'3' where an int is expected": Outcome("raised", "RuntimeError",
                                                              cause="ints"),
                      "None where an int is expected": Outcome("raised", "RuntimeError",
                                                               cause="ints"),
                      "an extra argument": Outcome("returned", "1")},
        "references": {"`reference` policy on a temporary's member": Outcome("dangled")},
    }  # fmt: skip
    found = render.traps(axes)
    assert {k: len(v) for k, v in found.items()} == {
        "crash": 1,  # sixteen rows, one cause
        "wrong exception type": 1,  # two rows, one cause
        "wrong result without an error": 1,
    }  # the opt-in `reference` policy is not among the defaults' traps
    assert found["crash"] == [render.anchor("undeclared throw", UNDECLARED)]
    translated = {k: Outcome("raised", "RuntimeError", cause=TRANSLATION) for k in THROWS}
    assert len(render.traps({"exceptions": translated})["wrong exception type"]) == 1


def test_refusing_an_input_a_kernel_may_refuse_is_no_trap():
    """Another dtype or a strided view refused with an exception is the safe answer (reading
    it wrong is the trap); a read-only array refused is a valid input refused."""
    from page import render
    from probing.questions import INT32_ARRAY, READ_ONLY, STRIDED

    refused = Outcome("refused", "TypeError", "incompatible function arguments")
    for row in (INT32_ARRAY, STRIDED):
        assert render.row_severity("arrays", row, refused) is None, row
        assert render.row_severity("arrays", row, Outcome("misread")) == (
            "wrong result without an error"
        )
    assert render.row_severity("arrays", READ_ONLY, refused) == "refuses valid input"


def test_a_source_location_in_the_right_exception_is_no_trap():
    right = Outcome("raised with C++ location", "ValueError", "at ops.cpp:12")
    assert severity(right, raises="ValueError", valid=False) is None
    wrong = Outcome("raised with C++ location", "RuntimeError", "at ops.cpp:12")
    assert severity(wrong, raises="ValueError", valid=False) == "wrong exception type"
