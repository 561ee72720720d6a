"""The cost of crossing the boundary: BlockPool's calls, beside the floor of each binding
technology. No conformance file shares its name: the pool calls it times are the ones
tests/conformance/test_block_pool.py proves, and the floors are the probes' (benchmarks/probes).

Floors are calls into the probe modules (benchmarks/probes), built with each technology's
defaults: a no-op taking nothing, one int, one array, one object; a method, one taking an int; a
property. For the technologies whose classes are Python classes (ctypes and cffi over a C handle,
torch over a torch::class_ object, torch's stable ABI over an int handle, tvm-ffi's Python
methods over a reflected object's) the method
and property floors are such a class, with the same lookups kvbridge's own class makes. The hand-written CPython C-API no-op is the floor under
every technology.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import spec
from harness import Case, Group, Timing
from spec import case_key

ROOT = Path(__file__).resolve().parent.parent
CALLS = spec.CALLS

# A class over a C handle, written as kvbridge's C ABI front end (packages/c_abi/api.py) and every
# user of a C library write one: slots, the handle in an attribute, `lib` a module global. The
# floors of a method and a property for ctypes and cffi, with the lookups kvbridge's calls make.
OVER_HANDLE = """
class OverHandle:
    __slots__ = ("_handle",)

    def __init__(self, handle):
        self._handle = handle

    def noop(self):
        lib.kvbp_object_noop(self._handle)

    def take_int64(self, x):
        return lib.kvbp_object_take_int64(self._handle, x)

    @property
    def value(self):
        return lib.kvbp_object_value(self._handle)
"""


def over_handle(lib, handle):
    namespace = {"lib": lib}
    exec(OVER_HANDLE, namespace)  # noqa: S102 - a class whose methods see `lib` as a global
    return namespace["OverHandle"](handle)


class CachedMethods:
    """A Python class over a torch::class_ object that looks its methods up once, as
    kvbridge_torch's BlockPool does (a ScriptObject resolves a method name on every access):
    the floors of a method and a property for torch, with the lookups kvbridge's calls make."""

    __slots__ = ("_noop", "_take_int", "_value")

    def __init__(self, holder):
        self._noop, self._take_int, self._value = holder.noop, holder.take_int, holder.value

    def noop(self):
        self._noop()

    def take_int64(self, x):
        return self._take_int(x)

    @property
    def value(self):
        return self._value()


# A class over a stable-ABI handle, written as kvbridge_torch_stable's BlockPool is: slots, the
# handle in an attribute, each op's OpOverload a module global looked up once at import.
OVER_STABLE_HANDLE = """
_noop = ops.counter_noop.default
_take_int = ops.counter_take_int.default
_value = ops.counter_value.default


class OverStableHandle:
    __slots__ = ("_handle",)

    def __init__(self, handle):
        self._handle = handle

    def noop(self):
        _noop(self._handle)

    def take_int64(self, x):
        return _take_int(self._handle, x)

    @property
    def value(self):
        return _value(self._handle)
"""


def over_stable_handle(ops, handle):
    namespace = {"ops": ops}
    exec(OVER_STABLE_HANDLE, namespace)  # noqa: S102 - its methods see the ops as globals
    return namespace["OverStableHandle"](handle)


def _pool(kv):
    def setup():
        pool = kv.BlockPool(64)
        pool.allocate(1)
        return {"pool": pool}

    return setup


def floors() -> dict[str, dict[str, tuple[str, dict]]]:
    """technology -> call -> (statement, globals). A call a technology cannot make is absent;
    the report marks it so."""
    import ctypes

    from cffi import FFI
    from kvbridge_probes import (
        c_abi_declarations,
        c_abi_library,
        numpy_probes,
        probe_capi,
        probe_cffi_api,
    )

    a = np.arange(8, dtype=np.int64)
    found = {"C-API": {
        "no-op": ("f()", {"f": probe_capi.noop}),
        "one int": ("f(1)", {"f": probe_capi.take_int64}),
        "one object": ("f(o)", {"f": probe_capi.noop_object, "o": object()}),
    }}  # fmt: skip
    for name, m in numpy_probes().items():
        owner = m.Owner()
        found[name] = {
            "no-op": ("f()", {"f": m.noop}),
            "one int": ("f(1)", {"f": m.take_int64}),
            "one array": ("f(a)", {"f": m.array_address, "a": a}),
            "one object": ("f(o)", {"f": m.noop_object, "o": object()}),
            "method": ("owner.noop()", {"owner": owner}),
            "method, one int": ("owner.take_int64(1)", {"owner": owner}),
            "property": ("owner.value", {"owner": owner}),
        }
    try:
        import torch
        from ask_torch import build_torch_probes  # the torch probes' one builder

        handwritten, _ = build_torch_probes(ROOT / "build" / "torch_probes")
        ops, holder = torch.ops.kvprobe, torch.classes.kvprobe.Holder()
        found["torch ops"] = {
            "no-op": ("f()", {"f": ops.noop.default}),
            "one int": ("f(1)", {"f": ops.take_int.default}),
            "one array": ("f(t)", {"f": ops.numel_of.default, "t": torch.from_numpy(a)}),
            "method": ("h.noop()", {"h": holder}),
            "method, one int": ("h.take_int(1)", {"h": holder}),
            "property": ("h.value()", {"h": holder}),  # custom classes have methods only
        }
        found["pybind11 in a torch extension"] = {
            "no-op": ("f()", {"f": handwritten.noop}),
            "one int": ("f(1)", {"f": handwritten.take_int64}),
        }
        stable = torch.ops.kvprobe_stable
        found["torch stable ABI"] = {
            "no-op": ("f()", {"f": stable.noop.default}),
            "one int": ("f(1)", {"f": stable.take_int.default}),
            "one array": ("f(t)", {"f": stable.numel_of.default, "t": torch.from_numpy(a)}),
        }
        found["torch stable ABI (Python class)"] = handle_calls(
            over_stable_handle(stable, stable.counter_create())
        )
        cached = CachedMethods(holder)
        found["torch ops (methods cached)"] = {
            "method": ("h.noop()", {"h": cached}),
            "method, one int": ("h.take_int64(1)", {"h": cached}),
            "property": ("h.value", {"h": cached}),
        }
    except ImportError:
        pass
    declared = ctypes.CDLL(c_abi_library())
    declared.kvbp_noop.argtypes, declared.kvbp_noop.restype = [], None
    declared.kvbp_take_int64.argtypes = [ctypes.c_int64]
    declared.kvbp_take_int64.restype = ctypes.c_int64
    declared.kvbp_array_address.argtypes = [ctypes.POINTER(ctypes.c_int64)]
    declared.kvbp_array_address.restype = ctypes.c_size_t
    undeclared = ctypes.CDLL(c_abi_library())  # a second handle: no argtypes on its functions
    ffi = FFI()
    ffi.cdef(c_abi_declarations())
    abi = ffi.dlopen(c_abi_library())
    ptr = ctypes.POINTER(ctypes.c_int64)
    for name, argtypes, restype in (
        ("kvbp_object_get", [], ctypes.c_void_p),
        ("kvbp_object_noop", [ctypes.c_void_p], None),
        ("kvbp_object_take_int64", [ctypes.c_void_p, ctypes.c_int64], ctypes.c_int64),
        ("kvbp_object_value", [ctypes.c_void_p], ctypes.c_int64),
    ):
        getattr(declared, name).argtypes = argtypes
        getattr(declared, name).restype = restype
    found["ctypes"] = {
        "no-op": ("f()", {"f": declared.kvbp_noop}),
        "one int": ("f(1)", {"f": declared.kvbp_take_int64}),
        "one array": ("f(a.ctypes.data_as(p))", {"f": declared.kvbp_array_address, "a": a,
                                                 "p": ptr}),
        **handle_calls(over_handle(declared, declared.kvbp_object_get())),
    }  # fmt: skip
    # Two cheaper ctypes idioms for an array, each passed to a c_void_p parameter, against
    # numpy's .ctypes object above: its address from the array interface, and a ctypes array of
    # no length laid over its buffer (what kvbridge_ctypes passes: it also holds the array).
    by_address = ctypes.CDLL(c_abi_library())  # a third handle: its own argtypes
    by_address.kvbp_array_address.argtypes = [ctypes.c_void_p]
    by_address.kvbp_array_address.restype = ctypes.c_size_t
    found["ctypes (array interface address)"] = {
        "one array": ("f(a.__array_interface__['data'][0])",
                      {"f": by_address.kvbp_array_address, "a": a}),
    }  # fmt: skip
    found["ctypes (buffer)"] = {
        "one array": ("f(B.from_buffer(a))",
                      {"f": by_address.kvbp_array_address, "a": a, "B": ctypes.c_char * 0}),
    }  # fmt: skip
    found["ctypes (no argtypes)"] = {
        "no-op": ("f()", {"f": undeclared.kvbp_noop}),
        "one int": ("f(1)", {"f": undeclared.kvbp_take_int64}),
    }
    for name, lib, f in (("cffi ABI", abi, ffi), ("cffi API", probe_cffi_api.lib,
                                                  probe_cffi_api.ffi)):  # fmt: skip
        found[name] = {
            "no-op": ("f()", {"f": lib.kvbp_noop}),
            "one int": ("f(1)", {"f": lib.kvbp_take_int64}),
            "one array": ("f(ffi.from_buffer('int64_t[]', a))",
                          {"f": lib.kvbp_array_address, "ffi": f, "a": a}),
            **handle_calls(over_handle(lib, lib.kvbp_object_get())),
        }  # fmt: skip
    from kvbridge_probes import tvm_ffi_probe as tvm

    owner = tvm.Owner()  # a reflected object: its methods and fields, as tvm-ffi installs them
    found["tvm-ffi"] = {
        "no-op": ("f()", {"f": tvm.noop}),
        "one int": ("f(1)", {"f": tvm.take_int64}),
        "one array": ("f(a)", {"f": tvm.array_address, "a": a}),
        "method": ("owner.noop()", {"owner": owner}),
        "method, one int": ("owner.take_int64(1)", {"owner": owner}),
        "property": ("owner.value", {"owner": owner}),
    }
    found["tvm-ffi (Python class)"] = handle_calls(tvm.Held())
    return found


def handle_calls(obj) -> dict[str, tuple[str, dict]]:
    return {
        "method": ("h.noop()", {"h": obj}),
        "method, one int": ("h.take_int64(1)", {"h": obj}),
        "property": ("h.value", {"h": obj}),
    }


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


# --- nanobind's stable-ABI build beside its version-specific build -----------------------------
# One abi3 wheel serves Python 3.12 and every later Python; the price, if any, is the limited
# API's slower paths. Both builds are made from packages/nanobind by the same Python >= 3.12 and
# timed on the same calls. Two builds of one module cannot share a process (same module name,
# same nanobind domain), so each round runs both in fresh processes, in alternating order, and
# the ratio is taken within the round, as the harness does for every other ratio.

ABI3_PYTHON = "python3.12"
ABI3_BUILDS = {"abi3": [], "cp312": ["--config-settings=wheel.py-api="]}  # pip wheel options
ABI3_CALLS = spec.ABI3_CALLS


def abi3_builds(workdir: Path) -> tuple[str, dict[str, Path], dict[str, Path]] | str:
    """Build kvbridge-nanobind both ways in a fresh Python 3.12 venv: (its python, label ->
    install folder, label -> wheel), or why it could not."""
    import importlib.metadata
    import shutil
    import subprocess

    base = shutil.which(ABI3_PYTHON)
    if base is None:
        return f"not measured: no {ABI3_PYTHON} on PATH"
    venv = workdir / "abi3-venv"
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "-q"]
    same = [f"{d}=={importlib.metadata.version(d)}" for d in ("nanobind", "numpy")]
    subprocess.run([*pip, "install", *same, "scikit-build-core", "cmake", "ninja"], check=True)
    targets, built = {}, {}
    for label, options in ABI3_BUILDS.items():
        wheels = workdir / f"abi3-wheels-{label}"
        subprocess.run([*pip, "wheel", "--no-build-isolation", "--no-deps", "-w", str(wheels),
                        f"--config-settings=build-dir={workdir / ('abi3-build-' + label)}",
                        *options, str(ROOT / "packages" / "nanobind")], check=True)  # fmt: skip
        (wheel,) = wheels.glob("*.whl")
        if label not in wheel.name:  # the tag is what this comparison is about: check it
            return f"not measured: the {label} build made {wheel.name}"
        built[label], targets[label] = wheel, workdir / f"abi3-{label}"
        subprocess.run([*pip, "install", "--no-deps", "--target", str(targets[label]),
                        str(wheel)], check=True)  # fmt: skip
    return python, targets, built


def abi3_timings(python: str, targets: dict[str, Path], rounds: int) -> dict[str, Timing]:
    """`<call>[nanobind <label>]` -> seconds per call, one value per round."""
    import json
    import os
    import subprocess

    found: dict[str, list[float]] = {}
    labels = list(targets)
    for r in range(rounds):
        for label in labels[r % 2 :] + labels[: r % 2]:
            # The wheel was installed with pip --target: the child finds it on PYTHONPATH.
            env = {**os.environ, "PYTHONPATH": str(targets[label])}
            done = subprocess.run([python, __file__, "--abi3-child"], env=env,
                                  check=True, capture_output=True, text=True)  # fmt: skip
            for call, seconds in json.loads(done.stdout).items():
                found.setdefault(case_key(call, f"nanobind {label}"), []).append(seconds)
    return {key: Timing(values) for key, values in found.items()}


def _abi3_child() -> None:
    """One round in this process: each call calibrated, warmed up and timed once."""
    import json

    import kvbridge_nanobind as kv
    from harness import run_group

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
        _abi3_child()
