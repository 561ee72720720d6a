"""What a figure is, read by the measuring and the page alike: seconds per call, one value per
round (Timing), and a ratio of two cases taken round by round (Ratio), with its median and
spread. measuring/harness.py makes them; page/render.py reads them back from run.json."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class Timing:
    """Seconds per call, one value per round; and, where the harness counted them, the same
    rounds' page faults per call (this process's minor faults: fresh pages its calls touched) and
    the machine's direct compaction stalls (a huge page had to be made before a fault could be
    served), which an allocating call's time can hang on."""

    rounds: list[float]
    faults: list[float] = field(default_factory=list)
    stalls: list[int] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.rounds)

    def extend(self, more: Timing) -> None:
        """Pool another run's rounds of the same case into these (report.py: both passes)."""
        self.rounds += more.rounds
        self.faults += more.faults
        self.stalls += more.stalls


def middle_80(values: list[float]) -> tuple[float, float]:
    """The 10th and 90th percentiles. Chosen by rerunning: over pairs of back-to-back full
    reports, target verdicts taken with this spread agreed more often than with the
    interquartile range (too narrow for the machine's drift between runs) or the min-max range
    (one hiccup moves it)."""
    if len(values) < 3:
        return min(values), max(values)
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return deciles[0], deciles[-1]


@dataclass
class Ratio:
    """a / b, round by round."""

    per_round: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.per_round)

    @property
    def spread(self) -> tuple[float, float]:
        return middle_80(self.per_round)


def ratio(a: Timing, b: Timing) -> Ratio:
    return Ratio([x / y for x, y in zip(a.rounds, b.rounds, strict=True)])
