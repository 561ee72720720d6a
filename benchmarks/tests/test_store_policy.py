"""The store policy the costs page states (report.py's store_timings, from the core's own
answer): chosen under auto by timing both stores on this machine, and forced either way by
KVBRIDGE_STORES. The choice is made once per process, so each case is a fresh interpreter. What
is timed is not asserted (the machine says which is faster); that it was timed, and that a forced
policy times nothing, is. Run by `tox -e semantics`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent

# An out= of 12 MB at one thread: over 8 MiB, the most auto ever writes to the cache untimed.
CODE = """
import sys
sys.path.insert(0, {benchmarks!r})
import numpy as np
import spec
kv = spec.module(spec.registry.CORE_ANSWERS)
spec.thread_setter(spec.registry.CORE_ANSWERS, 1)()
x = np.ones((3000, 1000), np.float32)
kv.rmsnorm(x, np.ones(1000, np.float32), 1e-6, out=np.empty_like(x))
print(spec.core().store_choice())
"""


def choice(policy: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "KVBRIDGE_STORES"}
    if policy is not None:
        env["KVBRIDGE_STORES"] = policy
    done = subprocess.run([sys.executable, "-c", CODE.format(benchmarks=str(BENCHMARKS))],
                          env=env, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_auto_times_both_stores_on_this_machine_and_says_what_it_found():
    said = choice(None)
    assert said.startswith("auto: outputs under "), said
    assert "; timed here: float32 8 MiB-16 MiB at 1 thread: " in said, said
    assert ("streamed (" in said) != ("to the cache (" in said), said


def test_the_environment_forces_either_store_and_nothing_is_timed():
    assert choice("stream") == "stream (KVBRIDGE_STORES): every out= streamed"
    assert choice("cache") == "cache (KVBRIDGE_STORES): no out= streamed"
