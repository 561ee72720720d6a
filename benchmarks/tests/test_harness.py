"""The harness (measuring/harness.py): every case once a round, each place once in n rounds, a
predecessor that changes from round to round, run_group timing that order, and calls per round
counted from calls after the first."""

from __future__ import annotations

import functools
import timeit
from collections import Counter

import pytest

from measuring.harness import Case, Group, _calibrate, round_order, run_group


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
