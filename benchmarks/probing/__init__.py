"""Probing: what each binding technology does with its defaults, and what every kvbridge package
does, asked the same questions (probe_semantics.py runs it; questions.py holds the questions).

Threads on a barrier and the GIL gate are the conformance suite's own helpers
(tests/conformance/common.py): on the path for every module of this package.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "conformance"))
