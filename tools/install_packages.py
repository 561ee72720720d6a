"""Build and install kvbridge packages into the running Python: the one install step every tox
env uses.

Each package is built from its folder against the build requirements already installed
(--no-build-isolation: fast, offline once cached, and required for torch, whose extension is tied
to the installed torch), with a build folder per package under --build-root so reruns are
incremental, and reinstalled every time so a test never runs an old build.

    python tools/install_packages.py --build-root .tox/x pybind cython
    python tools/install_packages.py --build-root .tox/x --sanitize pybind   # ASan + UBSan
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Folders that are not packages/<name>: the report's probe modules (those for a free-threaded
# Python apart), and the asan env's numpy allocator.
FOLDERS = {
    "probes": ROOT / "benchmarks" / "probes",
    "probes-ft": ROOT / "benchmarks" / "probes_ft",
    "plain-malloc": ROOT / "tests" / "plain_malloc",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+", help="pybind, nanobind, cython, torch, ctypes, ...")
    parser.add_argument("--build-root", type=Path, required=True)
    parser.add_argument("--sanitize", action="store_true", help="Debug build with ASan + UBSan")
    args = parser.parse_args()
    for name in args.packages:
        cmd = [
            sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
            "--force-reinstall", "--quiet",
            f"--config-settings=build-dir={args.build_root / ('skbuild-' + name)}",
        ]  # fmt: skip
        if args.sanitize:
            cmd += [
                "--config-settings=cmake.define.KVBRIDGE_SANITIZE=address,undefined",
                "--config-settings=cmake.build-type=Debug",
            ]
        cmd.append(str(FOLDERS.get(name, ROOT / "packages" / name)))
        print(f"installing {name}", flush=True)
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
