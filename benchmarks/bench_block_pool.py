"""BlockPool: the cost of a call, beside the floor of each binding technology.
Paired with tests/conformance/test_block_pool.py.

Floors are calls into the probe modules (benchmarks/probes), built with each technology's
defaults: a no-op taking nothing, one int, one array, one object; a method; a property. The
hand-written CPython C-API no-op is the floor under every technology.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import spec
from harness import Case, Group

ROOT = Path(__file__).resolve().parent.parent
CALLS = ("no-op", "one int", "one array", "one object", "method", "property")


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
        probe_capi,
        probe_cffi_api,
        probe_cython,
        probe_nanobind,
        probe_pybind,
    )

    a = np.arange(8, dtype=np.int64)
    found = {"C-API": {
        "no-op": ("f()", {"f": probe_capi.noop}),
        "one int": ("f(1)", {"f": probe_capi.take_int64}),
        "one object": ("f(o)", {"f": probe_capi.noop_object, "o": object()}),
    }}  # fmt: skip
    for name, m in (("pybind11", probe_pybind), ("nanobind", probe_nanobind),
                    ("Cython", probe_cython)):  # fmt: skip
        owner = m.Owner()
        found[name] = {
            "no-op": ("f()", {"f": m.noop}),
            "one int": ("f(1)", {"f": m.take_int64}),
            "one array": ("f(a)", {"f": m.array_address, "a": a}),
            "one object": ("f(o)", {"f": m.noop_object, "o": object()}),
            "method": ("owner.noop()", {"owner": owner}),
            "property": ("owner.value", {"owner": owner}),
        }
    try:
        import probe_semantics
        import torch

        probe_semantics.build_torch_probes(ROOT / "build" / "torch_probes")
        ops, holder = torch.ops.kvprobe, torch.classes.kvprobe.Holder()
        found["torch ops"] = {
            "no-op": ("f()", {"f": ops.noop.default}),
            "one int": ("f(1)", {"f": ops.take_int.default}),
            "one array": ("f(t)", {"f": ops.numel_of.default, "t": torch.from_numpy(a)}),
            "method": ("h.noop()", {"h": holder}),
            "property": ("h.value()", {"h": holder}),  # custom classes have methods only
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
    found["ctypes"] = {
        "no-op": ("f()", {"f": declared.kvbp_noop}),
        "one int": ("f(1)", {"f": declared.kvbp_take_int64}),
        "one array": ("f(a.ctypes.data_as(p))", {"f": declared.kvbp_array_address, "a": a,
                                                 "p": ptr}),
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
        }  # fmt: skip
    return found


def groups(quick: bool) -> list[Group]:
    cases = []
    for p in spec.installed():
        kv = spec.module(p)
        meta = {"package": p}
        cases += [
            Case(f"num_free[{p}]", "pool.num_free", _pool(kv), meta=meta),
            Case(f"refcount[{p}]", "pool.refcount(0)", _pool(kv), meta=meta),
            Case(f"allocate+release[{p}]", "pool.release(pool.allocate(1)[0])", _pool(kv),
                 meta=meta),
        ]  # fmt: skip
    for technology, calls in floors().items():
        for call, (stmt, namespace) in calls.items():
            cases.append(Case(f"{call}[{technology}]", stmt, lambda ns=namespace: ns,
                              meta={"technology": technology, "call": call}))  # fmt: skip
    return [Group("block_pool: call overhead", cases, rounds=5 if quick else 21,
                  round_seconds=0.002 if quick else 0.01)]  # fmt: skip
