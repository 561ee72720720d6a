"""The harness (measuring/harness.py): every case once a round, each place once in n rounds, a
predecessor that changes from round to round, run_group timing that order, each timing after
its own case's untimed calls, and calls per round counted from calls after the first."""

from __future__ import annotations

import functools
import mmap
import statistics
import timeit
from collections import Counter

import pytest

from measuring import harness
from measuring.harness import Case, Group, _calibrate, _settle_calls, round_order, run_group


@pytest.mark.parametrize("n", range(1, 12))
def test_each_round_runs_every_case_once_and_each_case_takes_each_place(n):
    rounds = [round_order(n, r) for r in range(n)]
    assert all(sorted(order) == list(range(n)) for order in rounds)
    for place in range(n):
        assert sorted(order[place] for order in rounds) == list(range(n))


@pytest.mark.parametrize("n", range(2, 12))
def test_within_rounds_each_case_follows_each_other_equally_often(n):
    span, times = (n, 1) if n % 2 == 0 else (2 * n, 2)
    pairs = Counter(
        (order[i], order[i + 1]) for order in map(functools.partial(round_order, n), range(span))
        for i in range(n - 1)
    )  # fmt: skip
    assert len(pairs) == n * (n - 1) and set(pairs.values()) == {times}


@pytest.mark.parametrize("n", range(6, 40))
@pytest.mark.parametrize("rounds", [5, 9, 15])
def test_no_case_follows_the_same_case_in_most_rounds(n, rounds):
    """What one case leaves behind (its caches' state, its freed memory) is met by different
    cases in different rounds: under the rotation it was always the same case's (the round
    boundaries and the warm-up round counted too)."""
    ran = round_order(n, 0) + [i for r in range(rounds) for i in round_order(n, r)]
    follows = Counter((ran[i - 1], ran[i]) for i in range(n, len(ran)))
    assert max(follows.values()) <= rounds // 2


def test_run_group_times_its_cases_in_that_order():
    ran: list[int] = []
    cases = [Case(f"c{i}", "pass", dict, functools.partial(ran.append, i)) for i in range(6)]
    timings = run_group(Group("order", cases, rounds=4, round_seconds=1e-4), log=lambda _: None)
    # prepare runs once as each case is set up, then before each of its timings
    warm_up = round_order(6, 0)
    assert ran == [*range(6), *warm_up, *(i for r in range(4) for i in round_order(6, r))]
    assert all(len(timings[f"c{i}"].rounds) == 4 for i in range(6))


def test_calls_per_round_are_counted_from_calls_after_the_first():
    """A first call ten times the next (kvbridge times its store policy at the first call of a
    size) must not set how many calls a round times: scaled from it, a round of a 3 ms call
    timed 2 calls, and the cost of following another case was half of each round's figure."""
    clock = [0.0]
    calls = []

    def call():
        clock[0] += 0.05 if not calls else 0.001  # 50 ms, then 1 ms a call (a fake clock)
        calls.append(1)

    timer = timeit.Timer("call()", timer=lambda: clock[0], globals={"call": call})
    assert _calibrate(timer, 0.1) in (99, 100)  # 0.1 s of 1 ms calls, give or take rounding


@pytest.mark.parametrize("number", [1, 3, 70, 80_000])
@pytest.mark.parametrize("round_seconds", [0.02, 0.05, 0.1])
def test_settling_takes_at_least_the_settle_time_at_the_calibrated_rate(number, round_seconds):
    settle = _settle_calls(number, round_seconds)
    assert settle >= 1 and settle * round_seconds / number >= harness.SETTLE_SECONDS
    assert settle == 1 or (settle - 1) * round_seconds / number < harness.SETTLE_SECONDS


def test_each_timing_follows_untimed_calls_of_its_own_case(monkeypatch):
    """What the case before left running (an OpenMP runtime's threads spin for milliseconds
    after their parallel region, on the CPU a two-thread case's worker needs) must have gone
    quiet when a timing starts: between one case's prepare and the next, it runs its settling
    calls and then its timed ones, in every round, the warm-up included."""
    monkeypatch.setattr(harness, "_calibrate", lambda timer, seconds: 3)  # 3 calls a timing
    calls: list[str] = []
    cases = [Case(f"c{i}", "call()", lambda i=i: {"call": functools.partial(calls.append, f"c{i}")},
                  functools.partial(calls.append, f"prepare c{i}")) for i in range(3)]  # fmt: skip
    run_group(Group("settle", cases, rounds=2, round_seconds=0.001), log=lambda _: None)
    settle = _settle_calls(3, 0.001)
    assert settle == 30  # 10 ms of calls at 3 a millisecond
    runs, run = [], None
    for call in calls[3:]:  # after each case's first prepare, at setup
        if call.startswith("prepare "):
            run = [call.removeprefix("prepare ")]
            runs.append(run)
        else:
            run.append(call)
    assert len(runs) == 3 * 3  # the warm-up round and two rounds, three cases each
    assert all(run[1:] == [run[0]] * (settle + 3) for run in runs)


def test_each_round_counts_its_cases_page_faults_a_call():
    """Beside each round's time, the page faults its timed calls took, per call: a call that
    writes fresh pages (a new anonymous mapping each call, one store a page) takes one a page,
    a call that writes none takes none, counted over the calls the harness times; and the
    machine's compaction stalls, one count a round."""
    pages = 64
    fresh = "m = mmap.mmap(-1, pages * size)\nfor i in range(0, pages * size, size): m[i] = 1\nm.close()"
    cases = [Case("fresh", fresh, lambda: {"mmap": mmap, "pages": pages, "size": mmap.PAGESIZE}),
             Case("none", "x + 1", lambda: {"x": 1})]  # fmt: skip
    timings = run_group(Group("faults", cases, rounds=5, round_seconds=0.002), log=lambda _: None)
    assert all(len(t.faults) == len(t.stalls) == 5 for t in timings.values())
    # its timed calls' faults only: the settling calls before them (5 a timed call here) not
    assert pages <= statistics.median(timings["fresh"].faults) <= 1.5 * pages
    assert statistics.median(timings["none"].faults) < 1
    assert all(s >= 0 for t in timings.values() for s in t.stalls)
