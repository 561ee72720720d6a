"""packages/registry.json, read: the one list of kvbridge packages, for every Python reader (the
suite, the benchmarks, the tools). registry.json's `about` says what each field means.

    import registry                      # with packages/ on sys.path
    registry.PACKAGES["pybind"]["module"]
    registry.names(free_threaded=True)   # the packages whose field is exactly True

    python packages/registry.py          # the packages' names, for a shell
    python packages/registry.py asan     # ... those whose yes/no field `asan` is true
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
DATA = json.loads((HERE / "registry.json").read_text())
PACKAGES: dict[str, dict] = {p["name"]: p for p in DATA["packages"]}
# The package whose _testing module answers for the core itself (registry.json says why).
CORE_ANSWERS: str = DATA["core_answers"]["package"]


def names(**fields) -> list[str]:
    """The packages, in the registry's order, whose fields equal the given values (`True` for a
    yes/no field whose "no" is a reason: the reason is not True)."""
    return [n for n, p in PACKAGES.items() if all(p[k] is v if v is True else p[k] == v
                                                   for k, v in fields.items())]  # fmt: skip


def why_not(name: str, field: str) -> str | None:
    """Why a package lacks a yes/no field's feature (its reason), or None when it has it."""
    value = PACKAGES[name][field]
    return None if value is True else (value or f"{field}: no")


# The name the registry's `torches` gives a free-threaded Python.
FREE_THREADED = "3.13t"


def torches(name: str) -> list[tuple[str, str]]:
    """The torch releases a package runs beside beyond the one it builds against: (version,
    Python), as its row's `torches` lists them (none for a package without torch)."""
    return [tuple(t) for t in PACKAGES[name].get("torches", [])]


def free_threaded_torch(name: str) -> str | None:
    """The torch a package is built against, or installed beside, on a free-threaded Python."""
    return next((v for v, python in torches(name) if python == FREE_THREADED), None)


def cuda_torch(name: str) -> tuple[str, str] | None:
    """The CUDA torch and Python a package's CUDA kernels are built against in its cuda-<name>
    env, or None: then its row's `cuda` says why it has none."""
    value = PACKAGES[name]["cuda"]
    return tuple(value) if isinstance(value, list) else None


def folder(name: str) -> Path:
    return HERE / name


def own_tests(name: str) -> list[Path]:
    """The tests a package runs beside the conformance suite: its family's shared ones (the
    tests folder of the first package of its family: packages/torch/tests serves both torch
    packages) and its own (packages/<name>/tests), where they exist."""
    family = [n for n, p in PACKAGES.items() if p["family"] == PACKAGES[name]["family"]]
    shared = next((folder(n) / "tests" for n in family if (folder(n) / "tests").is_dir()), None)
    own = folder(name) / "tests"
    return list(dict.fromkeys(t for t in (shared, own) if t is not None and t.is_dir()))


def pyproject(path: Path) -> dict:
    """A pyproject.toml, parsed."""
    return tomllib.loads((path / "pyproject.toml").read_text())


def requirements(path: Path) -> list[str]:
    """What building a package folder needs and what its import needs: its own
    [build-system].requires and static [project].dependencies, as it states them."""
    data = pyproject(path)
    return [*data["build-system"]["requires"], *data.get("project", {}).get("dependencies", [])]


def requirement_name(requirement: str) -> str:
    """The distribution a requirement names (`cffi>=1.17` -> `cffi`), as written."""
    return re.split(r"[<>=!~ ;\[]", requirement, maxsplit=1)[0]


if __name__ == "__main__":
    import sys

    print(" ".join(names(**{f: True for f in sys.argv[1:]})))
