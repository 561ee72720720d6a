"""Prove a package's sdist builds on its own, away from the monorepo.

Builds the sdist, checks it carries the core (sdist.force-include), unpacks it into a temporary
folder where ../../common_cpp does not exist, builds a wheel from that with build isolation (as
a user's `pip install kvbridge-<x>.tar.gz` would), installs it with the dependencies its
metadata names and imports it.

    python tools/check_sdist.py packages/pybind
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def run(*cmd: str) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main(package_dir: str) -> None:
    package = Path(package_dir).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        dist = Path(tmp) / "dist"
        run(sys.executable, "-m", "build", "--sdist", "--outdir", str(dist), str(package))
        (sdist,) = dist.glob("*.tar.gz")
        with tarfile.open(sdist) as tar:
            names = tar.getnames()
            top = names[0].split("/")[0]
            needed = f"{top}/common_cpp/CMakeLists.txt"
            if needed not in names:
                sys.exit(f"{sdist.name} lacks {needed}: sdist.force-include of the core failed")
            tar.extractall(tmp, filter="data")
        run(
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--wheel-dir",
            str(dist),
            str(Path(tmp) / top),
        )
        (wheel,) = dist.glob("*.whl")
        # With its dependencies, as a user's install gets them: the wheel's metadata must name
        # what its import needs.
        run(sys.executable, "-m", "pip", "install", str(wheel))
        run(sys.executable, "-m", "pip", "install", "--force-reinstall", "--no-deps", str(wheel))
    module = importlib.import_module(f"kvbridge_{package.name}")
    print(f"ok: {sdist.name} -> {wheel.name}, imports as {module.__name__} {module.__version__}")


if __name__ == "__main__":
    main(sys.argv[1])
