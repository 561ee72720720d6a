"""What a probe observed, as a type, and the one place its severity comes from.

Every cell of the comparison page's trap tables is an `Outcome`: what happened (its `kind`),
the one value the rules may read (the exception type raised, the signal that killed the
process), the words a reader sees (`detail`, never read by any rule), and, where one cause shows
in many rows, the id of that cause (`cause`), so that a trap is counted once. `severity` derives
a user's risk from the kind alone: rewording a detail cannot change a count
(benchmarks/tests/test_outcomes.py shows it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# What can happen when a probe asks a question, and the short label a table shows for it.
KINDS = {
    "raised": "{value}",  # an exception of type `value`
    "raised with C++ location": "{value} + C++ source location",  # ... its message carries it
    "returned": "returns {value}",  # a value, no exception
    "read in place": "read in place",
    "copied": "copied",  # the input or result was copied where no copy was asked for
    "copied as typed": "copied ({value})",  # a copy the user's own type asks for (a list)
    "misread": "wrong values",  # read memory it should not have, no error
    "dangled": "dangles",  # a reference outlived its owner
    "crashed": "process dies ({value})",
    "leaked": "never freed",
    "freed": "freed once",  # adopted, freed exactly once
    "kept alive": "keeps its owner alive",
    "held the GIL": "held",
    "released the GIL": "released",
    "GIL enabled": "GIL back on",  # on a free-threaded Python: the whole process has a GIL again
    "GIL disabled": "GIL stays off",
    "refused": "refused ({value})",  # a valid input refused with an exception
    "passed": "{value}",  # a tool's check passed (opcheck, compile, script)
    "failed": "{value}",  # ... or failed, with its message
    "not probed": "not probed: {detail}",  # the reason is shown in the cell itself
}

SEVERITY_ORDER = ["crash", "wrong result without an error", "use after free",
                  "leak unless freed by hand", "wrong exception type", "silent copy",
                  "threads serialised", "refuses valid input"]  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    kind: str
    value: str = ""
    detail: str = ""
    cause: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown outcome kind {self.kind!r}")
        if self.kind == "not probed" and not self.detail:
            raise ValueError("a cell that is not probed must say why")

    def label(self) -> str:
        return KINDS[self.kind].format(value=self.value, detail=self.detail)

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v}

    @classmethod
    def from_json(cls, data: dict) -> Outcome:
        return cls(**data)


def not_probed(reason: str) -> Outcome:
    return Outcome("not probed", detail=reason)


# The kinds that are a trap whatever the question was.
TRAPS = {
    "crashed": "crash",
    "misread": "wrong result without an error",
    "dangled": "use after free",
    "leaked": "leak unless freed by hand",
    "copied": "silent copy",
    "held the GIL": "threads serialised",
    "GIL enabled": "threads serialised",
    "refused": "refuses valid input",
}


def severity(
    outcome: Outcome, raises: str | None = None, valid: bool = True, may_refuse: bool = False
) -> str | None:
    """What an outcome means for a user, or None when it is what a careful binding gives.
    For a question whose answer is an exception or a value: `raises`, the exception type the
    contract asks for (None: any exception refuses a valid input), and `valid`, whether a value
    is right (a bool where an int is expected may be taken as one). `may_refuse`: an input a
    kernel may refuse with an exception instead of reading it (a refusal is then safe). A C++
    source location in the right exception's message is shown, not counted: it misleads no one."""
    kind = outcome.kind
    if kind in TRAPS:
        return None if kind == "refused" and may_refuse else TRAPS[kind]
    if kind in ("raised", "raised with C++ location"):
        if raises is None:
            return "refuses valid input"
        return "wrong exception type" if outcome.value != raises else None
    if kind == "returned":
        return None if valid else "wrong result without an error"
    return None


def worst(severities) -> str | None:
    found = [s for s in severities if s]
    return min(found, key=SEVERITY_ORDER.index) if found else None
