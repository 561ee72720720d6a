"""The tox envs each package of packages/registry.json makes: the one rule, read by toxfile.py
(which declares them to tox) and by tools/tests/test_registry.py. tox.ini holds the defaults
([testenv], the conformance run of the package in KVBRIDGE_PACKAGE) and each family's own
settings in a section `[kvbridge:<family>]` that an env of that family reads before [testenv].
No line of tox.ini names a package.

    env                           family          made when the registry row says
    <name>                        (none)          always: its conformance run, on the Python
                                                  running tox, or on its one Python if it has one
                                                  (not listed: a py3XX-<name> runs the same)
    py3XX-<name>                  (none)          3.XX in `pythons`
    py314-<name>, py315-<name>    sid             ... the chroot's Pythons: each runs sid-<env>
                                                  in tox inside Debian sid's chroot
    py313t-<name>                 (none)          free_threaded: true
                                  torch-built,    ... a torch package's: as <name>-torchXYZ
                                  torch-beside    below, beside its `torches` 3.13t torch
    <name>-torch2150              torch-built     a torch-version package's `torches`: built
                                                  against that torch, on its Python
    <name>-torch2110              torch-beside    a torch-stable-abi package's `torches`: the
                                                  one wheel its first Python's env built,
                                                  installed unchanged beside that torch
    cuda-<name>                   cuda            cuda: [torch, Python]: built with its CUDA
                                                  kernels against that CUDA torch, run on the CPU
    stubs-<name>                  stubs           stubs: true
    sdist-<name>                  sdist           sdist: true
    abi3-<name>                   abi3            abi3: true
    abi3-<name>-py314, -py315     sid             abi3: true (the same wheel, in the chroot)
    split-<name>                  split           split: true (its first Python)
    split-<name>-py3XX            split-install   ... its other Pythons but the chroot's
    split-<name>-py314, -py315    sid             ... the chroot's (the same wheel)
    sid-<env of the chroot>       sid-inside,     (not listed: what the chroot's envs run there)
                                  sid-abi3,
                                  sid-split
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packages"))
sys.path.insert(0, str(ROOT / "tools"))

import registry  # noqa: E402
from sid_chroot import PYTHONS as CHROOT_PYTHONS  # noqa: E402


@dataclass(frozen=True)
class Env:
    name: str
    package: str  # KVBRIDGE_PACKAGE in the env
    family: str | None  # the tox.ini section [kvbridge:<family>] read before [testenv]
    listed: bool = True  # in env_list: `tox` and `make test-all` run it
    base_python: str | None = None  # where the env's name does not say it
    depends: tuple[str, ...] = ()  # envs that must run first (the one file it installs)
    torch: str | None = None  # KVBRIDGE_TORCH in the env: the torch it builds against or beside


# What an env beside another torch does, by the package's `wheel`: build against that torch, or
# install the one wheel (built by the env of its first Python) beside it.
TORCH_FAMILY = {"torch-version": "torch-built", "torch-stable-abi": "torch-beside"}


def tag(version: str) -> str:
    """ "3.14" -> "py314"."""
    return "py" + version.replace(".", "")


def _in_chroot(env: str, name: str, inside: str, depends: tuple[str, ...] = ()) -> list[Env]:
    """An env whose Python is the chroot's (family sid, which runs sid-<env> there), and that
    sid-<env>, of family `inside`."""
    return [Env(env, name, "sid", depends=depends), Env(f"sid-{env}", name, inside, listed=False)]


def torch_tag(version: str) -> str:
    """ "2.15.0" -> "torch2150"."""
    return "torch" + version.replace(".", "")


def _torch_envs(p: dict) -> list[Env]:
    name = p["name"]
    made = []
    if cuda := registry.cuda_torch(name):  # its CUDA kernels, compiled
        version, python = cuda
        made.append(Env(f"cuda-{name}", name, "cuda", base_python=f"python{python}",
                        torch=version))  # fmt: skip
    if not p.get("torches"):
        return made
    family = TORCH_FAMILY[p["wheel"]]
    built_by = (f"{tag(p['pythons'][0])}-{name}",) if family == "torch-beside" else ()
    return made + [
        Env(f"{tag(python[:-1])}t-{name}" if python == registry.FREE_THREADED
            else f"{name}-{torch_tag(version)}", name, family, base_python=f"python{python}",
            depends=built_by, torch=version)
        for version, python in registry.torches(name)
    ]  # fmt: skip


def _package_envs(p: dict) -> list[Env]:
    name = p["name"]
    one = f"python{p['pythons'][0]}" if len(p["pythons"]) == 1 else None
    made = [Env(name, name, None, listed=False, base_python=one)]  # py3XX-<name> once more
    for version in p["pythons"]:
        env = f"{tag(version)}-{name}"
        if version in CHROOT_PYTHONS:
            made += _in_chroot(env, name, "sid-inside")
        else:
            made.append(Env(env, name, None))
    torch = _torch_envs(p)  # a torch package's py313t env is one of these
    made += torch
    if p["free_threaded"] is True and not any(e.name == f"py313t-{name}" for e in torch):
        made.append(Env(f"py313t-{name}", name, None))
    for field in ("stubs", "sdist"):
        if p[field] is True:
            made.append(Env(f"{field}-{name}", name, field))
    if p["abi3"] is True:
        made.append(Env(f"abi3-{name}", name, "abi3"))
        for version in CHROOT_PYTHONS:
            env = f"abi3-{name}-{tag(version)}"
            made += _in_chroot(env, name, "sid-abi3", depends=(f"abi3-{name}",))
    if p["split"] is True:
        first, *others = p["pythons"]
        built_by = f"split-{name}"
        made.append(Env(built_by, name, "split", base_python=f"python{first}"))
        for version in others:
            env = f"split-{name}-{tag(version)}"
            if version in CHROOT_PYTHONS:
                made += _in_chroot(env, name, "sid-split", depends=(built_by,))
            else:
                made.append(Env(env, name, "split-install", base_python=f"python{version}",
                                depends=(built_by,)))  # fmt: skip
    return made


def envs(rows: list[dict] | None = None) -> list[Env]:
    """Every per-package env the registry's rows (or `rows`) make, in the registry's order."""
    return [e for p in (rows if rows is not None else registry.PACKAGES.values())
            for e in _package_envs(p)]  # fmt: skip


def run_order(made: list[Env]) -> list[Env]:
    """The envs in the order `tox` (and so make test-all, a few at a time) starts them: the torch
    packages' first (some minutes each, most a download of gigabytes), then the rest, each group
    in the registry's order. A long env started last keeps one worker busy while the others have
    nothing left to do; started first, the short ones fill in around it."""
    return sorted(made, key=lambda e: registry.PACKAGES[e.package]["wheel"] not in TORCH_FAMILY)
