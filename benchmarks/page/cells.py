"""The helpers every page's cells are made with, for render.py (the pages make report writes)
and page/cuda.py (the CUDA page) alike: a markdown table, a list said as a sentence, a package's
name on an index, and the one rule that judges a ratio against its target."""

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


def verdict_summary(verdicts: list[str]) -> str:
    """ "3 met, 1 within noise, 0 not met, of 4": the targets page's and the CUDA page's count."""
    counts = {v: verdicts.count(v) for v in ("met", "within noise", "**not met**")}
    return (f"{counts['met']} met, {counts['within noise']} within noise, "
            f"{counts['**not met**']} not met, of {len(verdicts)}")  # fmt: skip
