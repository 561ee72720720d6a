"""Find or build a Debian sid chroot holding Python 3.14 and 3.15, and run tox envs inside it
(README.md, "Which Pythons").

    python tools/sid_chroot.py              # prints the chroot's folder, found or built, or why not
    python tools/sid_chroot.py tox ENV [-- ARGS]
        # ... then `tox run -e ENV -- ARGS` inside it, the repository at its own path: what the
        # py314-*/py315-* envs of tox.ini run (they name sid-<their own name> as ENV)
    python tools/sid_chroot.py run [--with DIR]... -- COMMAND...
        # ... then COMMAND inside it, in this folder (when it is in the repository or a DIR;
        # else in /), each DIR mounted read-write at its own path too: how make report's
        # portability table reaches 3.14 and 3.15 (its wheels and venvs in a temporary folder)

Neither version can be built here, and sid's interpreters need a newer C library than this
machine's, so they run in a chroot: `debootstrap --variant=minbase sid` from the mirror this
machine's own apt sources name, then sid's python3.14/3.15 (with -dev and -venv), g++ and make,
and tox in a venv of its own. Built once per machine at $KVBRIDGE_SID_CHROOT or
~/.cache/kvbridge/debian-sid (needs root: debootstrap and chroot do); a half-built one is never
found, and a build that fails says which step failed and what to do.

Each run happens in a mount namespace of its own (`unshare --mount`), so nothing it mounts
outlives it or shows on this machine: /dev and /proc, the repository read-write at its own path
(so tox inside writes its envs to this repository's .tox, and a failing test's output names the
same files as elsewhere), and the local folders this machine's pip configuration names, read-only.
Files that configuration names (its config files, constraints, CA bundle) and the resolver
configuration are copied in first: pip inside then sees the indexes pip here sees.
Exit status: 0 with the folder on stdout (or tox's own status); 1 with the reason on stderr.
"""

from __future__ import annotations

import configparser
import fcntl
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

from free_threaded_python import apt_mirrors, apt_sources

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = ("3.14", "3.15")
PACKAGES = [f"python{v}{part}" for v in PYTHONS for part in ("", "-dev", "-venv")] + ["g++", "make"]
TOX = "/opt/kvbridge-tox"  # inside the chroot: tox's own venv
TOX_REQUIREMENT = "tox>=4.29"  # as the Makefile installs it here (toxfile.py: tox_extend_envs)
MARKER = ".kvbridge-sid"  # written last: its presence means the chroot is whole
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What passes into the chroot from this environment (everything else is left out, so a host
# path never leaks in): pip's settings, CI's flag, the project's own, colours.
PASSED = ("PIP_", "KVBRIDGE_", "CI", "FORCE_COLOR", "NO_COLOR", "PY_COLORS", "TERM")
PIP_CONFIG_FILES = ["/etc/pip.conf", "/etc/xdg/pip/pip.conf", "~/.config/pip/pip.conf",
                    "~/.pip/pip.conf"]  # fmt: skip


class Failed(Exception):
    """A step failed; the message says which and what to do."""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def chroot_dir() -> Path:
    default = Path("~/.cache/kvbridge/debian-sid").expanduser()
    return Path(os.environ.get("KVBRIDGE_SID_CHROOT") or default)


def contents() -> str:
    """The marker's last line: what the chroot was built with (another list builds it anew)."""
    return "built with: " + " ".join([*PACKAGES, TOX_REQUIREMENT])


def is_whole(root: Path) -> bool:
    wanted = [MARKER, f"{TOX[1:]}/bin/tox"] + [f"usr/bin/python{v}" for v in PYTHONS]
    if not all((root / p).exists() for p in wanted):
        return False
    return (root / MARKER).read_text().splitlines()[-1:] == [contents()]


def pip_paths() -> tuple[list[Path], list[Path]]:
    """The local files and folders this machine's pip configuration names (config files,
    constraints, certificates; find-links folders and file:// indexes), each that exists."""
    configs = [Path(p).expanduser() for p in PIP_CONFIG_FILES]
    if os.environ.get("PIP_CONFIG_FILE"):
        configs.append(Path(os.environ["PIP_CONFIG_FILE"]))
    configs = [c for c in configs if c.is_file()]
    values = [v for k, v in os.environ.items() if k.startswith("PIP_")]
    for config in configs:
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(config)
        values += [v for section in parser.sections() for v in parser[section].values()]
    named = []
    for token in (t for v in values for t in v.split()):
        # A file:// index's pages link the files beside it (../../files/x.whl): its parent
        if token.startswith("file:"):
            named.append(Path(urlparse(token).path).parent)
        elif token.startswith("/"):
            named.append(Path(token))
    named = [p for p in named if p.exists()]
    files = list(dict.fromkeys(configs + [p for p in named if p.is_file()]))
    folders = list(dict.fromkeys(p for p in named if p.is_dir()))
    return files, folders


def copy_in(root: Path, files: list[Path]) -> None:
    for source in [Path("/etc/resolv.conf"), *files]:
        if source.is_file():
            target = root / source.relative_to("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            # resolv.conf may be a link (here or there): a file at its own path, not the link
            target.unlink(missing_ok=True)
            shutil.copyfile(source, target)


def script(
    root: Path,
    command: list[str],
    cwd: Path,
    mounts: list[tuple[Path, bool]],
    settings: dict[str, str],
) -> str:
    """The shell script, run by `unshare --mount`, that mounts and then enters the chroot."""
    lines = ["set -e", f"mount --rbind /dev {shlex.quote(str(root / 'dev'))}",
             f"mount -t proc proc {shlex.quote(str(root / 'proc'))}"]  # fmt: skip
    for source, writable in mounts:
        target = shlex.quote(str(root / source.relative_to("/")))
        lines += [f"mkdir -p {target}", f"mount --bind {shlex.quote(str(source))} {target}"]
        if not writable:
            lines.append(f"mount -o remount,bind,ro {target}")
    env = {k: v for k, v in os.environ.items() if k.startswith(PASSED)}
    env.update(HOME="/root", PATH=PATH, LANG="C.UTF-8", **settings)
    inner = f"cd {shlex.quote(str(cwd))} && exec {shlex.join(command)}"
    pairs = [f"{k}={v}" for k, v in sorted(env.items())]
    enter = f"exec chroot {shlex.quote(str(root))} env -i {shlex.join(pairs)}"
    lines.append(f"{enter} sh -c {shlex.quote(inner)}")
    return "\n".join(lines)


def run(
    root: Path,
    command: list[str],
    cwd: Path = Path("/"),
    writable: tuple[Path, ...] = (),
    settings: dict[str, str] | None = None,
) -> int:
    """Run `command` inside the chroot at `cwd`, with `settings` in its environment, each
    folder of `writable` mounted read-write at its own path; its status."""
    files, folders = pip_paths()
    copy_in(root, files)
    mounts = [(f, False) for f in folders] + [(w, True) for w in writable]
    shell = ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
    text = script(root, command, cwd, mounts, settings or {})
    return subprocess.run([*shell, text], check=False).returncode


def step(root: Path, what: str, command: list[str], hint: str) -> None:
    say(f"  {what}")
    status = run(root, command)
    if status != 0:
        raise Failed(
            f"{what}: `{shlex.join(command)}` in the chroot failed (exit {status}); {hint}"
        )


def build(root: Path) -> None:
    say(f"building a Debian sid chroot with Python {' and '.join(PYTHONS)} once for this "
        f"machine, at {root}")  # fmt: skip
    if os.geteuid() != 0:
        raise Failed(
            "debootstrap and chroot need root: run this as root, or use a machine where you are"
        )
    if shutil.which("debootstrap") is None:
        if shutil.which("apt-get") is None:
            raise Failed("no debootstrap, and no apt-get to install it with: install debootstrap")
        say("  apt-get install debootstrap")
        done = subprocess.run(["apt-get", "install", "-y", "-q", "debootstrap"], check=False,
                              stdout=sys.stderr)  # fmt: skip
        if done.returncode != 0:
            raise Failed("apt-get install debootstrap failed (its output is above)")
    mirrors = apt_mirrors(apt_sources())
    if not mirrors:
        raise Failed("no Debian mirror in this machine's apt sources to bootstrap sid from")
    part = root.with_name(root.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    part.parent.mkdir(parents=True, exist_ok=True)
    say(f"  debootstrap --variant=minbase sid from {mirrors[0]} (about a minute)")
    done = subprocess.run(["debootstrap", "--variant=minbase", "sid", str(part), mirrors[0]],
                          check=False, stdout=sys.stderr)  # fmt: skip
    if done.returncode != 0:
        log = part / "debootstrap" / "debootstrap.log"
        raise Failed(f"debootstrap failed (exit {done.returncode}): its log is {log}; remove "
                     f"{part} and run this again")  # fmt: skip
    # From the package lists debootstrap fetched and checked the signature of: no `apt-get
    # update`, whose Valid-Until check refuses a mirror that lags sid by more than a week.
    apt = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q",
           "--no-install-recommends", *PACKAGES]  # fmt: skip
    step(part, f"apt-get install {' '.join(PACKAGES)}", apt,
         f"is sid still carrying these packages? remove {part} and run this again")  # fmt: skip
    newest = f"python{PYTHONS[0]}"  # tox itself on the older of the two: the more settled one
    step(part, f"{TOX_REQUIREMENT} in {TOX}", ["sh", "-c", f"{newest} -m venv {TOX} && "
         f"{TOX}/bin/python -m pip install --quiet '{TOX_REQUIREMENT}'"],
         "pip's own output is above")  # fmt: skip
    versions = subprocess.run(["chroot", str(part), "sh", "-c",
                               "; ".join(f"python{v} --version" for v in PYTHONS)],
                              check=False, capture_output=True, text=True)  # fmt: skip
    (part / MARKER).write_text(versions.stdout + contents() + "\n")
    shutil.rmtree(root, ignore_errors=True)
    part.rename(root)
    say(f"  done: {' and '.join(versions.stdout.split(chr(10))[:2])}")


def chroot() -> Path:
    """The chroot's folder, found or built (one build at a time on a machine)."""
    root = chroot_dir()
    if is_whole(root):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.with_name(root.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second caller waits, then finds it built
        if not is_whole(root):
            build(root)
    return root


def main() -> int:
    args = sys.argv[1:]
    tox = args[:1] == ["tox"] and len(args) >= 2 and (len(args) == 2 or args[2] == "--")
    extra = []
    while args[:1] == ["run"] and args[1:2] == ["--with"] and len(args) > 2:
        extra.append(Path(args[2]).resolve())
        args = ["run", *args[3:]]
    command = args[:2] == ["run", "--"] and len(args) > 2
    if args and not (tox or command) or not all(e.is_dir() for e in extra):
        say(f"usage: {sys.argv[0]} [tox ENV [-- ARGS] | run [--with DIR]... -- COMMAND...] "
            f"(each DIR a folder), got {sys.argv[1:]}")  # fmt: skip
        return 2
    try:
        root = chroot()
    except Failed as e:
        say(f"no Debian sid chroot: {e}")
        return 1
    if not args:
        print(root)
        return 0
    if command:
        mounted = (ROOT, *extra)
        here = Path.cwd()
        cwd = here if any(here.is_relative_to(m) for m in mounted) else Path("/")
        return run(root, args[2:], cwd=cwd, writable=mounted)
    # The chroot was found whole, its Pythons in it: one missing there is a failure, not a skip.
    return run(
        root,
        [f"{TOX}/bin/tox", "run", "-e", args[1], *args[2:]],
        cwd=ROOT,
        writable=(ROOT,),
        settings={"KVBRIDGE_SKIP_MISSING_INTERPRETERS": "false"},
    )


if __name__ == "__main__":
    sys.exit(main())
