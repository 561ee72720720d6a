"""Runs a package's own tests, the ones beside the conformance suite that every package runs:
its family's shared tests and its own (packages/registry.py, own_tests). Most packages have
none: that is a pass, said in one line.

    python tools/own_tests.py torch_stable [pytest arguments]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "packages"))

import registry  # noqa: E402


def main() -> int:
    name, pytest_args = sys.argv[1], sys.argv[2:]
    if not (paths := registry.own_tests(name)):
        print(f"{name}: no tests beyond the conformance suite")
        return 0
    # gil_watch: on a free-threaded Python these tests too leave the GIL off (its docstring)
    conformance = Path(__file__).resolve().parent.parent / "tests" / "conformance"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(conformance), *filter(None, [os.environ.get("PYTHONPATH")])])}  # fmt: skip
    return subprocess.call([sys.executable, "-m", "pytest", "-p", "gil_watch", *map(str, paths),
                            *pytest_args], env=env)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
