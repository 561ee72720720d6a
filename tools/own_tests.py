"""Runs a package's own tests, the ones beside the conformance suite that every package runs:
its family's shared tests and its own (packages/registry.py, own_tests). Most packages have
none: that is a pass, said in one line.

    python tools/own_tests.py torch_stable [pytest arguments]
"""

from __future__ import annotations

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
    return subprocess.call([sys.executable, "-m", "pytest", *map(str, paths), *pytest_args])


if __name__ == "__main__":
    sys.exit(main())
