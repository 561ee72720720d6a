"""How every figure on docs/comparison.md is measured.

A benchmark is a group of cases that are compared with each other: a kvbridge call and the
floors it is judged against. Each case is a `timeit` statement (the loop times the statement
inline, with no Python frame around it: a lambda would add one call to every case and compress
every ratio), calibrated once to take about `round_seconds`. Then the group runs in rounds, and
in each round every case runs once, in an order that rotates from round to round, so slow
drift of the machine (other tenants, frequency) hits every case alike. A ratio of two cases is
the ratio within each round; its median is the figure, and its spread (the middle 80% of
rounds: 10th to 90th percentile) says how far to trust it. The thread count a case runs with is
part of the case.
"""

from __future__ import annotations

import gc
import timeit
from collections.abc import Callable
from dataclasses import dataclass, field

from stats import Timing


@dataclass
class Case:
    key: str  # unique within the run, e.g. "count_eos n=1048576 [pybind]"
    stmt: str  # a timeit statement, run inline in timeit's loop
    setup: Callable[[], dict]  # the statement's globals, built once
    prepare: Callable[[], None] | None = None  # run before every timing (thread counts)
    meta: dict = field(default_factory=dict)  # package, kind, bytes, threads, ... for the report


@dataclass
class Group:
    name: str
    cases: list[Case]
    rounds: int = 15
    round_seconds: float = 0.02


def _calibrate(timer: timeit.Timer, seconds: float) -> int:
    """Calls per timing so that one timing takes about `seconds`."""
    number = 1
    while True:
        took = timer.timeit(number)
        if took >= seconds / 4 or number >= 1 << 24:
            return max(1, int(number * seconds / max(took, 1e-9)))
        number *= 4


def run_group(group: Group, log: Callable[[str], None] = print) -> dict[str, Timing]:
    timers = []
    for case in group.cases:
        namespace = case.setup()
        if case.prepare:
            case.prepare()
        timer = timeit.Timer(case.stmt, globals=namespace)
        timers.append((case, timer, _calibrate(timer, group.round_seconds)))
    results: dict[str, list[float]] = {case.key: [] for case in group.cases}
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection inside one case's round would bias it
    try:
        for r in range(-1, group.rounds):  # round -1 is a warm-up, not recorded
            shift = r % len(timers) if r >= 0 else 0
            for case, timer, number in timers[shift:] + timers[:shift]:
                if case.prepare:
                    case.prepare()
                seconds = timer.timeit(number) / number
                if r >= 0:
                    results[case.key].append(seconds)
    finally:
        if gc_was_enabled:
            gc.enable()
    log(f"{group.name}: {len(timers)} cases x {group.rounds} rounds")
    return {key: Timing(values) for key, values in results.items()}
