"""How every figure on docs/comparison.md is measured.

A benchmark is a group of cases that are compared with each other: a kvbridge call and the
floors it is judged against. Each case is a `timeit` statement (the loop times the statement
inline, with no Python frame around it: a lambda would add one call to every case and compress
every ratio), calibrated once to take about `round_seconds`. Then the group runs in rounds, and
in each round every case runs once, in an order of its own (`round_order`), so slow drift of the
machine (other tenants, frequency) hits every case alike, and no case always runs after the same
one: what a case leaves behind lands on a different case each round (on the 480 MiB-L3 Xeon the
first streamed out= after the copy, which writes the same output array, took 7 ms, the next 3).
Some of what a case leaves behind is not evened out by the order, since it weighs on some cases
only: an OpenMP runtime's threads (the copy's, the plain loop's, torch's ops') spin for
milliseconds after their parallel region, on the CPU that a two-thread case's own worker then
needs. On the Xeon the second two-thread 2048x4096 out= after the copy took 3.96 ms, the third
and later 1.4-1.5; kvbridge's pool spins only as long as one wake-up took, so the floors paid
nothing like it after kvbridge. So each timing follows its own case's calls, untimed, for at
least SETTLE_SECONDS (`_settle_calls`), whatever ran before.
A ratio of two cases is the ratio within each round; its median is the figure, and its spread
(the middle 80% of rounds: 10th to 90th percentile) says how far to trust it. The thread count a
case runs with is part of the case. Around each timing, outside it, the harness also counts the
process's page faults and the machine's compaction stalls: an allocating call's time hangs on
whether its allocator handed it fresh pages, which the time alone does not say.
"""

from __future__ import annotations

import gc
import math
import resource
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
    """Calls per timing so that one timing takes about `seconds`, counted from calls after the
    first, which is made untimed: a first call can cost ten times the next (kvbridge times its
    store policy at the first call of a size: 36 ms for a 3 ms out=), and a count scaled from
    it made each round time 2 calls, so that the cost a call pays for following another case
    (7 ms for the first out= after the copy, 3 ms the next) was half of every round's figure."""
    timer.timeit(1)
    number = 1
    while True:
        took = timer.timeit(number)
        if took >= seconds / 4 or number >= 1 << 24:
            return max(1, int(number * seconds / max(took, 1e-9)))
        number *= 4


# How long a case runs untimed before each of its timings: what the case before it left running
# has stopped by then (the OpenMP threads above went quiet within 6 ms on the Xeon).
SETTLE_SECONDS = 0.01


def _settle_calls(number: int, round_seconds: float) -> int:
    """Calls that take at least SETTLE_SECONDS at the calibrated rate (`number` calls in
    `round_seconds`), and at least one."""
    return max(1, math.ceil(number * SETTLE_SECONDS / round_seconds))


def page_faults() -> int:
    """This process's minor page faults so far, all its threads."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def compaction_stalls() -> int:
    """The machine's direct compaction stalls so far (Linux's /proc/vmstat; 0 where there is
    none): each is a fault that waited while the kernel moved pages to make a huge one."""
    try:
        with open("/proc/vmstat") as counters:
            return next((int(line.split()[1]) for line in counters
                         if line.startswith("compact_stall ")), 0)  # fmt: skip
    except OSError:
        return 0


def round_order(n: int, r: int) -> list[int]:
    """The order of n cases in round r: row r of a balanced Latin square (Williams' design:
    0, 1, n-1, 2, n-2, ... shifted by r, and mirrored every other n rounds where n is odd). Each
    case takes each place once in n rounds, and within the rounds follows each other case
    exactly once in n rounds (n even), twice in 2n (n odd). A rotation, which the harness used
    before, gave every case the same predecessor in every round but one."""
    first = [0]
    for k in range(1, n):
        first.append((k + 1) // 2 if k % 2 else n - k // 2)
    order = [(i + r) % n for i in first]
    return order[::-1] if n % 2 and (r // n) % 2 else order


def run_group(group: Group, log: Callable[[str], None] = print) -> dict[str, Timing]:
    timers = []
    for case in group.cases:
        namespace = case.setup()
        if case.prepare:
            case.prepare()
        timer = timeit.Timer(case.stmt, globals=namespace)
        number = _calibrate(timer, group.round_seconds)
        timers.append((case, timer, number, _settle_calls(number, group.round_seconds)))
    results: dict[str, Timing] = {case.key: Timing([]) for case in group.cases}
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection inside one case's round would bias it
    try:
        for r in range(-1, group.rounds):  # round -1 is a warm-up, not recorded
            for case, timer, number, settle in map(timers.__getitem__,
                                                   round_order(len(timers), max(r, 0))):  # fmt: skip
                if case.prepare:
                    case.prepare()
                timer.timeit(settle)  # untimed: SETTLE_SECONDS
                faults, stalls = page_faults(), compaction_stalls()  # read outside the timing
                seconds = timer.timeit(number) / number
                faults, stalls = page_faults() - faults, compaction_stalls() - stalls
                if r >= 0:
                    timing = results[case.key]
                    timing.rounds.append(seconds)
                    timing.faults.append(float(f"{faults / number:.3g}"))  # 3 digits: run.json
                    timing.stalls.append(stalls)
    finally:
        if gc_was_enabled:
            gc.enable()
    log(f"{group.name}: {len(timers)} cases x {group.rounds} rounds")
    return results
