"""Probe what each binding technology does natively, with no kvbridge translation layer.

Each technology is asked the same questions (benchmarks/probing/questions.py: each defined once, with
what the contract expects of its answer) through a probe built the way its users build one, by
its probe family (its row's `family` in benchmarks/technologies.json: a module
benchmarks/probing/ask_<family>.py, which names no technology; what is a technology's own is
its row and its probe file, benchmarks/probing/technologies/); then every kvbridge package of
the registry is asked the same questions (ask_kvbridge.py).

Every value recorded is an observation made by this run; where a question cannot be asked of a
technology, the value says so and why (`not_probed`), and the page shows that reason in the
cell. Every value is an `Outcome` (benchmarks/outcomes.py): a kind, the one value a rule may
read, the words a reader sees, and the cause where one mechanism answers several questions, so
that the page counts it once. A family that leaves a question unanswered, or answers one the
table does not ask, fails here with a TypeError naming it.

    python benchmarks/probing/probe_semantics.py --json out.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: run as a script

import spec  # noqa: E402
from outcomes import Outcome  # noqa: E402
from probing import ask_kvbridge  # noqa: E402
from probing.asking import kinds  # noqa: E402
from probing.questions import TOOLS, checked  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    results: dict[str, dict] = {}
    # Each probe family of the technology table (benchmarks/technologies.json), in its order,
    # then the kvbridge packages.
    families = dict.fromkeys(spec.family_of(t) for t in spec.TECHNOLOGIES)
    asked = [importlib.import_module(family).ask() for family in families]
    answered = {t for found in asked for t in found} - set(TOOLS)
    if answered != set(spec.TECHNOLOGIES):  # a column with no answers, or answers with no column
        raise TypeError(f"asked {sorted(answered)}, the technology table lists "
                        f"{sorted(spec.TECHNOLOGIES)}")  # fmt: skip
    for found in (*asked, ask_kvbridge.ask()):
        for technology, answers in found.items():
            results[technology] = answers if technology in TOOLS else checked(
                technology, answers, kinds())  # fmt: skip
    # In the order asked; every Outcome as its fields.
    args.json.write_text(json.dumps(results, indent=1, default=Outcome.to_json))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
