"""The helpers every page's cells are made with, for render.py (the pages make report writes)
and page/cuda.py (the CUDA page) alike: a markdown table, a list said as a sentence, a package's
name on an index, the one rule that judges a ratio against its target, and the one that
says when a missed target is its floor's."""

from __future__ import annotations

import spec
import stats


def table(header: list[str], rows: list[list], empty: str = "") -> str:
    """A markdown table; with no rows, the sentence `empty` (why this run measured none)."""
    if not rows and empty:
        return empty

    def cell(c) -> str:
        return str(c).replace("|", "\\|")  # a | inside a cell would end it

    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def said_list(items: list[str]) -> str:
    """ "a", "a and b", "a, b and c": a list as a sentence names it."""
    return " and ".join(filter(None, [", ".join(items[:-1]), *items[-1:]]))


def distribution(package: str) -> str:
    """A package's name on an index: "kvbridge-torch-stable" for torch_stable."""
    return "kvbridge-" + package.replace("_", "-")


def verdict(r: stats.Ratio, t: spec.Target) -> str:
    """met / not met when the middle 80% of rounds is on one side of the bound, else within
    noise: a verdict a rerun would flip is not a verdict."""
    lo, hi = r.spread
    if t.at_most:
        return "met" if hi <= t.bound else ("**not met**" if lo > t.bound else "within noise")
    return "met" if lo >= t.bound else ("**not met**" if hi < t.bound else "within noise")


def floor_explains(floor_verdict: str, package_over_floor: stats.Ratio) -> bool:
    """Whether a target a package misses is its floor's to explain (the machine's, fresh
    memory's or the technology's, by the floor's kind): the floor misses the bound too, or it
    does not meet it either (within noise) while the package is not clearly behind it, the
    package's own per-round ratio to the floor spanning 1 in its middle 80%. A package behind a
    floor that only sometimes misses is not excused: the rounds where the floor met the bound
    say the machine could."""
    if floor_verdict == "**not met**":
        return True
    lo, hi = package_over_floor.spread
    return floor_verdict == "within noise" and lo <= 1 <= hi


def verdict_summary(verdicts: list[str]) -> str:
    """ "3 met, 1 within noise, 0 not met, of 4": the targets page's and the CUDA page's count."""
    counts = {v: verdicts.count(v) for v in ("met", "within noise", "**not met**")}
    return (f"{counts['met']} met, {counts['within noise']} within noise, "
            f"{counts['**not met**']} not met, of {len(verdicts)}")  # fmt: skip
