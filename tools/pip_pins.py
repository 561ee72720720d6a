"""pip install with exact pins that hold whatever cap the machine's pip configuration sets.

An env that pins a release exactly (the torch a torch package is built against or installed
beside: the registry rows' `torches` and `cuda`, a pyproject's pin, the report's portability
runs) exists to run that release. A machine's pip configuration may name a constraints file
(`pip config list`: `constraint`, or PIP_CONSTRAINT) that caps the same package lower: some keep
only the releases on their own disk, so pip then fails with ResolutionImpossible, or, where the
pin is only a dependency, silently installs the capped release in the pin's place. This is the
one place that is handled: the configured constraints files are copied with every line naming
a pinned package left out, and pip is pointed at the copies by PIP_CONSTRAINT, which outranks
every configuration file. Every other constraint, index and find-links of the machine still
applies, so the envs that use the releases on local disk keep finding them.

    python tools/pip_pins.py torch==2.15.0 -- --quiet --no-compile     # pip install torch==2.15.0
    python tools/pip_pins.py torch==2.15.0 -- --quiet some.whl         # ... and the wheel beside it
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "packages"))

from registry import requirement_name  # noqa: E402

# Where pip reads `constraint` from, lowest precedence first (pip's own order: the [global]
# section, then the command's [install] section, then the environment).
_SOURCES = ("global.constraint", "install.constraint", ":env:.constraint")
_INCLUDE = re.compile(r"^\s*(-c|--constraint)(=|\s+)(\S+)\s*$")


def pinned(requirements: Iterable[str]) -> set[str]:
    """The distributions `requirements` pin exactly (`torch==2.15.0` -> torch), normalised."""
    return {_normal(requirement_name(r)) for r in requirements if "==" in r and ";" not in r}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def configured(python: Sequence[str]) -> list[str]:
    """The constraints files pip, run as `python -m pip`, reads by its configuration."""
    listed = subprocess.run([*python, "-m", "pip", "config", "list"], check=True,
                            capture_output=True, text=True).stdout  # fmt: skip
    found = dict(line.split("=", 1) for line in listed.splitlines() if "=" in line)
    value = next((found[k] for k in reversed(_SOURCES) if k in found), "")
    return value.strip().strip("'\"").split()


def _without(source: str, names: set[str], into: Path) -> str:
    """A copy of constraints file `source` with the lines naming `names` left out (and so in
    the files it includes), in folder `into`; its path. A remote file is kept as it is."""
    if urlparse(source).scheme not in ("", "file"):
        return source
    path = Path(urlparse(source).path if source.startswith("file:") else source)
    kept = []
    for line in path.read_text().splitlines():
        if include := _INCLUDE.match(line):
            inner = include.group(3)
            inner = inner if urlparse(inner).scheme else str(path.parent / inner)
            kept.append(f"-c {_without(inner, names, into)}")
        elif (text := line.split("#", 1)[0].strip()) and _normal(requirement_name(text)) in names:
            kept.append(f"# (tools/pip_pins.py: lifted for an exact pin) {line}")
        else:
            kept.append(line)
    digest = hashlib.sha256(f"{path.resolve()}\n{sorted(names)}".encode()).hexdigest()[:12]
    copy = into / f"constraints-{digest}.txt"
    copy.write_text("\n".join(kept) + "\n")
    return str(copy)


def environ(
    requirements: Iterable[str], into: Path, python: Sequence[str] = (sys.executable,)
) -> dict[str, str]:
    """os.environ, for a `python -m pip install` of `requirements` in which the machine's caps on
    what they pin exactly are lifted (module docstring); the copies are written to folder
    `into`, which must outlive that pip (and be seen by it, where it runs in a chroot)."""
    env = dict(os.environ)
    names = pinned(requirements)
    files = configured(python) if names else []
    if files:
        into.mkdir(parents=True, exist_ok=True)
        env["PIP_CONSTRAINT"] = " ".join(_without(f, names, into) for f in files)
    return env


def main(argv: list[str]) -> int:
    at = argv.index("--") if "--" in argv else len(argv)
    pins, rest = argv[:at], argv[at + 1 :]
    if not pins:
        print(__doc__, file=sys.stderr)
        return 2
    cmd = [sys.executable, "-m", "pip", "install", *rest, *pins]
    with tempfile.TemporaryDirectory(prefix="kvbridge-pins-") as into:
        return subprocess.run(cmd, check=False, env=environ(pins, Path(into))).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
