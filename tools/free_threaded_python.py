"""Find or make a free-threaded CPython 3.13+ (docs/contract.md, "Free-threaded Python").

    python tools/free_threaded_python.py     # prints the interpreter's path, or why there is none
    python tools/free_threaded_python.py --venv DIR [--tests]
        # ... then a venv of it at DIR (made once) holding what building the packages needs
        # (and running the suite, with --tests): prints the venv's python

In order, the first that works:
1. a free-threaded interpreter already here: python3.13t/python3.14t on PATH, or a pyenv version
   whose name ends in "t" (what this script builds: so it is built once per machine);
2. `pyenv install 3.13.5t` as pyenv would do it, when its download works;
3. on a Debian-family machine, CPython's source from the distribution: the `python3.13` source
   package's orig tarball, from the mirror the machine's own apt sources name, for the suite
   that carries 3.13.5. That tarball is python.org's release file byte for byte: it is checked
   against the sha256 in pyenv's own 3.13.5 definition, placed in pyenv's cache, and pyenv then
   builds 3.13.5t offline.
Exit status 0 with the path on stdout; 1 with the reason on stderr (2: a usage error).
"""

from __future__ import annotations

import glob
import hashlib
import lzma
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

VERSION = "3.13.5"
SUITES = ("trixie", "trixie-updates", "trixie-security")  # Debian 13 carries 3.13.5
PROBE = "import sys, sysconfig; print(sysconfig.get_config_var('Py_GIL_DISABLED') == 1)"
# What a free-threaded venv needs before tools/install_packages.py (which installs each
# package's own requirements) can build there, as tox.ini's deps say for the py313t envs, and
# to run the conformance suite. numpy and hypothesis as wheels: their newest releases have none
# for 3.13t, and a source build of numpy outlasts the suite (tox.ini says the same for tox).
BUILD_REQUIREMENTS = ["cmake>=3.18", "ninja", "numpy>=1.24"]
TEST_REQUIREMENTS = ["pytest>=9", "hypothesis>=6.100"]


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def is_free_threaded(python: str) -> bool:
    try:
        out = subprocess.run(
            [python, "-c", PROBE], check=False, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == "True"


def pyenv_root() -> Path | None:
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return None
    out = subprocess.run([pyenv, "root"], check=False, capture_output=True, text=True)
    return Path(out.stdout.strip()) if out.returncode == 0 else None


def found(root: Path | None) -> str | None:
    candidates = [shutil.which(name) for name in ("python3.14t", "python3.13t")]
    if root is not None:
        built = root / "versions" / "3.1[3-9].*t" / "bin" / "python3.1?t"
        candidates += sorted(glob.glob(str(built)))
    return next((c for c in candidates if c and is_free_threaded(c)), None)


def pyenv_sha256(root: Path) -> str | None:
    definition = root / "plugins" / "python-build" / "share" / "python-build" / VERSION
    if not definition.is_file():
        return None
    match = re.search(rf"Python-{VERSION}\.tar\.xz#([0-9a-f]{{64}})", definition.read_text())
    return match.group(1) if match else None


def apt_sources() -> list[str]:
    """The text of every apt source file on this machine."""
    paths = ["/etc/apt/sources.list", *glob.glob("/etc/apt/sources.list.d/*")]
    return [Path(p).read_text(errors="replace") for p in paths
            if p.endswith((".list", ".sources")) and os.path.isfile(p)]  # fmt: skip


def apt_mirrors(texts: list[str]) -> list[str]:
    """The Debian archives apt sources name (deb822 `URIs:` and one-line `deb` entries), each
    once, in order: only archives of the distribution itself (a path ending in /debian)."""
    mirrors = []
    for text in texts:
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("URIs:"):
                mirrors += line.split()[1:]
            elif line.startswith(("deb ", "deb-src ")):
                mirrors += [w for w in line.split() if "://" in w][:1]
    return list(dict.fromkeys(m.rstrip("/") for m in mirrors if m.rstrip("/").endswith("/debian")))


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:
        return response.read()


def debian_tarball(dest: Path, sha256: str) -> bool:
    for mirror in apt_mirrors(apt_sources()):
        for suite in SUITES:
            try:
                sources = lzma.decompress(fetch(f"{mirror}/dists/{suite}/main/source/Sources.xz"))
            except OSError as e:
                say(f"  {suite} at {mirror}: {e}")
                continue
            text = sources.decode(errors="replace")
            for stanza in text.split("\n\n"):
                if not re.search(r"^Package: python3\.13$", stanza, re.M):
                    continue
                directory = re.search(r"^Directory: (\S+)$", stanza, re.M)
                name = f"python3.13_{VERSION}.orig.tar.xz"
                if directory is None or f" {sha256} " not in stanza or name not in stanza:
                    continue
                say(f"  {name} from {suite}, checked against pyenv's sha256")
                data = fetch(f"{mirror}/{directory.group(1)}/{name}")
                if hashlib.sha256(data).hexdigest() != sha256:
                    say("  its sha256 does not match pyenv's: not used")
                    return False
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
                return True
    return False


def pyenv_install(root: Path, offline: bool) -> bool:
    env = dict(os.environ)
    if offline:
        env["PYTHON_BUILD_CACHE_PATH"] = str(root / "cache")
    say(f"  pyenv install {VERSION}t (a few minutes)")
    done = subprocess.run(["pyenv", "install", "--skip-existing", f"{VERSION}t"], check=False,
                          env=env, stdout=sys.stderr, stderr=sys.stderr)  # fmt: skip
    return done.returncode == 0


def make_venv(python: str, venv: Path, tests: bool) -> str | None:
    """A venv of `python` at `venv` with the requirements, made once: its python, or None."""
    venv_python = venv / "bin" / "python"
    if venv_python.exists():
        return str(venv_python)
    wanted = BUILD_REQUIREMENTS + (TEST_REQUIREMENTS if tests else [])
    pip = [str(venv_python), "-m", "pip", "install", "-q", "--only-binary", "numpy,hypothesis"]
    for cmd in ([python, "-m", "venv", str(venv)], pip + wanted):
        if subprocess.run(cmd, check=False, stdout=sys.stderr).returncode != 0:
            say(f"could not make the free-threaded venv: {' '.join(cmd)} failed")
            shutil.rmtree(venv, ignore_errors=True)  # so the next call starts afresh
            return None
    return str(venv_python)


def interpreter() -> str | None:
    """The free-threaded interpreter's path, found or built; or None, the reason said."""
    root = pyenv_root()
    if python := found(root):
        return python
    if root is None:
        say("no free-threaded Python: none on PATH, and no pyenv to build one with")
        return None
    sha256 = pyenv_sha256(root)
    cached = root / "cache" / f"Python-{VERSION}.tar.xz"
    if not cached.is_file():
        if sha256 is None:
            say(f"no free-threaded Python: pyenv has no {VERSION} definition to check a source by")
            return None
        say(f"building a free-threaded Python {VERSION} once for this machine")
        if not debian_tarball(cached, sha256):
            say("  no distribution source found; trying pyenv's own download")
    if not pyenv_install(root, offline=cached.is_file()):
        say(f"no free-threaded Python: pyenv install {VERSION}t failed")
        return None
    if python := found(root):
        return python
    say("no free-threaded Python: the build finished but its interpreter is not free-threaded")
    return None


def main() -> int:
    args = sys.argv[1:]
    venv = args[:1] == ["--venv"] and len(args) in (2, 3) and args[2:] in ([], ["--tests"])
    if args and not venv:
        say(f"usage: {sys.argv[0]} [--venv DIR [--tests]], got {args}")
        return 2
    python = interpreter()
    if python is not None and venv:
        python = make_venv(python, Path(args[1]), tests=args[2:] == ["--tests"])
    if python is None:
        return 1
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
