"""The cost of crossing the boundary: BlockPool's calls, beside the floor of each binding
technology. No conformance file shares its name: the pool calls it times are the ones
tests/conformance/test_block_pool.py proves, and the floors are the probes' (benchmarks/probing/probes).

Floors are calls into the probe modules (benchmarks/probing/probes), built with each technology's
defaults: a no-op taking nothing, one int, one array, one object; a method, one taking an int; a
property. Each probe family makes its own (`floors()` in benchmarks/probing/ask_*.py, beside its
questions). For the technologies whose classes are Python classes (ctypes and cffi over a C
handle, torch over a torch::class_ object, torch's stable ABI over an int handle, tvm-ffi's
Python methods over a reflected object's) the method and property floors are such a class, with
the same lookups kvbridge's own class makes. The hand-written CPython C-API no-op is the floor
under every technology.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

import numpy as np

import spec
from measuring.harness import Case, Group, Timing
from spec import case_key

ROOT = Path(__file__).resolve().parents[2]
CALLS = spec.CALLS


def _pool(kv):
    def setup():
        pool = kv.BlockPool(64)
        pool.allocate(1)
        return {"pool": pool}

    return setup


def floors() -> dict[str, dict[str, tuple[str, dict]]]:
    """floor row -> call -> (statement, globals): the C-API baseline, then each probe family's
    own floors (its floors(), beside its questions), in the technology table's order. A family
    whose technology this Python lacks (torch) has none; the page marks its rows so."""
    from kvbridge_probes import probe_capi

    found = {spec.BASELINE_FLOOR: {
        "no-op": ("f()", {"f": probe_capi.noop}),
        "one int": ("f(1)", {"f": probe_capi.take_int64}),
        "one object": ("f(o)", {"f": probe_capi.noop_object, "o": object()}),
    }}  # fmt: skip
    for family in dict.fromkeys(spec.family_of(t) for t in spec.TECHNOLOGIES):
        try:
            asker = importlib.import_module(family)
        except ImportError as e:
            print(f"no floors from {family}: {e}", flush=True)
            continue
        found.update(asker.floors())
    unknown = set(found) - set(spec.FLOOR_ROWS)
    if unknown:  # a row the technology table does not list would never reach the page
        raise TypeError(f"floors not in benchmarks/technologies.json: {sorted(unknown)}")
    return {row: found[row] for row in spec.FLOOR_ROWS if row in found}


@functools.cache
def technology_calls(call: str) -> dict[str, tuple[str, dict]]:
    """floor row -> its own `call` (spec.CALLS), from floors(), made once a process for each
    call that the token and RMSNorm groups time beside a feature (bench_tokens.py,
    bench_rmsnorm.py). Only that call's globals are kept: a class floor's objects, kept to the
    end, would be freed after their modules at exit."""
    return {row: calls[call] for row, calls in floors().items() if call in calls}


def groups(quick: bool) -> list[Group]:
    cases = []
    for p in spec.installed():
        kv = spec.module(p)
        meta = {"package": p}
        cases += [
            Case(case_key("num_free", p), "pool.num_free", _pool(kv), meta=meta),
            Case(case_key("refcount", p), "pool.refcount(0)", _pool(kv), meta=meta),
            Case(case_key("allocate+release", p), "pool.release(pool.allocate(1)[0])", _pool(kv),
                 meta=meta),
        ]  # fmt: skip
    for technology, calls in floors().items():
        for call, (stmt, namespace) in calls.items():
            cases.append(Case(case_key(call, technology), stmt, lambda ns=namespace: ns,
                              meta={"technology": technology, "call": call}))  # fmt: skip
    return [Group("block_pool: call overhead", cases, rounds=5 if quick else 21,
                  round_seconds=0.002 if quick else 0.01)]  # fmt: skip


# --- the stable-ABI builds beside the version-specific build -------------------------------------
# One abi3 wheel serves one Python and every later one; the price, if any, is the limited API's
# slower paths. Each package whose registry row says `abi3` builds one when KVBRIDGE_STABLE_ABI=1
# is in the build's environment (its pyproject.toml names the oldest Python: 3.12 for nanobind,
# whose stable-ABI mode needs it; 3.11 for Cython's Limited-API mode). nanobind's split mode
# (nanobind 3.1: the bindings on the stable ABI of 3.11, nanobind's own code in the per-version
# nanobind-backend package) serves 3.11 and later, and adds an indirection: every call into
# nanobind goes through the backend's function table. Every build of a package is made by the
# same Python 3.12 (the oldest every build can target) with the same build requirements, and
# timed on the same calls. Two builds of one module cannot share a process (same module name;
# nanobind's, the same domain), so each round runs each in a fresh process, in an order that
# turns, and the ratio is taken within the round, as the harness does for every other ratio.

ABI3_PYTHON = "python3.12"
# label -> (pip wheel options, the build's environment, the tag its wheel must carry: "" for
# any stable-ABI tag, as the package's pyproject names it); "split" only where the row says so.
ABI3_BUILDS = {
    "abi3": ([], {"KVBRIDGE_STABLE_ABI": "1"}, "-abi3-"),
    "cp312": (["--config-settings=wheel.py-api="], {}, "-cp312-cp312-"),
    "split": ([], {"KVBRIDGE_NANOBIND_SPLIT": "1"}, "-cp311-abi3-"),
}
ABI3_CALLS = spec.ABI3_CALLS
# What a build needs beyond scikit-build-core, CMake and ninja: the same release as this Python's.
ABI3_BUILD_REQUIRES = ("nanobind", "cython", "numpy")


def abi3_labels(package: str) -> list[str]:
    """The builds a package is made and timed in: split mode only where its row has it."""
    return [label for label in ABI3_BUILDS
            if label != "split" or spec.registry.PACKAGES[package]["split"] is True]  # fmt: skip


def abi3_builds(workdir: Path) -> tuple[str, dict[str, Path], dict[str, Path]] | str:
    """Build each of spec.ABI3_PACKAGES each way (abi3_labels) in a fresh Python 3.12 venv: (its
    python, "<package> <label>" -> install folder, "<package> <label>" -> wheel), or why it
    could not."""
    import importlib.metadata
    import os
    import shutil
    import subprocess

    base = shutil.which(ABI3_PYTHON)
    if base is None:
        return f"not measured: no {ABI3_PYTHON} on PATH"
    venv = workdir / "abi3-venv"
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "-q"]
    same = [f"{d}=={importlib.metadata.version(d)}" for d in ABI3_BUILD_REQUIRES]
    subprocess.run([*pip, "install", *same, "scikit-build-core", "cmake", "ninja"], check=True)
    targets, built = {}, {}
    for package in spec.ABI3_PACKAGES:
        for label in abi3_labels(package):
            options, env, tag = ABI3_BUILDS[label]
            name = f"{package} {label}"
            wheels = workdir / f"abi3-wheels-{package}-{label}"
            build_dir = workdir / f"abi3-build-{package}-{label}"
            subprocess.run([*pip, "wheel", "--no-build-isolation", "--no-deps", "-w", str(wheels),
                            f"--config-settings=build-dir={build_dir}", *options,
                            str(spec.registry.folder(package))],
                           env={**os.environ, **env}, check=True)  # fmt: skip
            (wheel,) = wheels.glob("*.whl")
            if tag not in wheel.name:  # the tag is what this comparison is about: check it
                return f"not measured: the {name} build made {wheel.name}"
            built[name], targets[name] = wheel, workdir / f"abi3-{package}-{label}"
            # With what its metadata requires beyond numpy (the venv's): split mode's backend.
            subprocess.run([*pip, "install", "--no-deps", "--target", str(targets[name]),
                            str(wheel),
                            *(r for r in wheel_requires(wheel) if not r.startswith("numpy"))],
                           check=True)  # fmt: skip
    return python, targets, built


def wheel_requires(wheel: Path) -> list[str]:
    """The requirements a wheel's metadata lists (Requires-Dist), markers dropped."""
    import email
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.message_from_bytes(z.read(name))
    return [r.split(";")[0].strip() for r in metadata.get_all("Requires-Dist", [])]


def abi3_timings(python: str, targets: dict[str, Path], rounds: int) -> dict[str, Timing]:
    """`<call>[<package> <label>]` -> seconds per call, one value per round."""
    import json
    import os
    import subprocess

    found: dict[str, list[float]] = {}
    for package in spec.ABI3_PACKAGES:
        names = [n for n in targets if n.split(" ")[0] == package]
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                # The wheel was installed with pip --target: the child finds it on PYTHONPATH,
                # and benchmarks/ too: the child imports spec and the harness, as this module.
                env = {
                    **os.environ,
                    "PYTHONPATH": os.pathsep.join([str(targets[name]), str(ROOT / "benchmarks")]),
                }
                done = subprocess.run([python, __file__, "--abi3-child", package], env=env,
                                      check=True, capture_output=True, text=True)  # fmt: skip
                for call, seconds in json.loads(done.stdout).items():
                    found.setdefault(case_key(call, name), []).append(seconds)
    return {key: Timing(values) for key, values in found.items()}


def _abi3_child(package: str) -> None:
    """One round in this process: each call calibrated, warmed up and timed once."""
    import json

    from measuring.harness import run_group

    kv = importlib.import_module(spec.registry.PACKAGES[package]["module"])

    def setup():
        pool = kv.BlockPool(64)
        pool.allocate(1)
        return {"kv": kv, "pool": pool, "one": np.ones(1, np.int64)}

    cases = [Case(call, stmt, setup) for call, (stmt, _) in ABI3_CALLS.items()]
    timings = run_group(Group("abi3", cases, rounds=1, round_seconds=0.02), log=lambda _: None)
    print(json.dumps({key: t.rounds[0] for key, t in timings.items()}))


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--abi3-child"]:
        _abi3_child(sys.argv[2])
