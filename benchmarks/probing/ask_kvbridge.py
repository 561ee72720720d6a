"""The kvbridge packages, asked every question of benchmarks/probing/questions.py the probe families
answer: what their users actually get."""

from __future__ import annotations

import gc
import importlib

import numpy as np
from common import ran_without_the_gil

import spec
from outcomes import Outcome, not_probed
from probing.asking import (
    TEMPORARY_EOS,
    arguments,
    array_inputs,
    gil_outcome,
    kinds,
    outcome,
    overflow,
    temporary_address,
    temporary_tokens,
)
from probing.questions import (
    ARRAY_VECTOR,
    ATTRIBUTE,
    CONST_REF,
    CONTIGUOUS_INT32,
    CONTIGUOUS_VIEW,
    CONTIGUOUS_WRITE,
    HANDLE_AFTER_FREE,
    LIST_VECTOR,
    RAW_LOOP,
    REFERENCE_POLICY,
    RETURNED_VECTOR,
    TEMPORARY_ROW,
    UNDECLARED,
    ZERO_COPY,
)


def kvbridge_package(name: str, kv) -> dict:
    """The same questions asked of a kvbridge package: what its users actually get."""
    to_native = spec.native(name)  # numpy arrays as the package's own array type

    pool = kv.BlockPool(4)
    tokens = to_native(np.ones(4096, np.int32))
    gc.collect()
    buffers = kv.live_buffers()
    counts = pool.refcounts()
    adopted = kv.live_buffers() == buffers + 1
    del counts
    gc.collect()
    freed = kv.live_buffers() == buffers
    pools = kv.live_pools()
    stats = kv.BlockPool(2).stats
    gc.collect()
    kept = kv.live_pools() == pools + 1
    del stats
    none_here = not_probed("the kvbridge API has no such function")
    view = to_native(np.arange(8, dtype=np.int64))[::2]  # [0, 2, 4, 6]
    x, w = to_native(np.ones((4, 8), np.float32)), to_native(np.ones(4, np.float32))
    return {
        "exceptions": {k: outcome(kv._testing.throw, k) for k in kinds()},
        "undeclared throw": {
            UNDECLARED: not_probed("every call goes through the package's one error path")
        },
        "arguments": arguments(pool.allocate),
        "overflow": overflow(
            pool.allocate, lambda v: kv.count_eos(to_native(np.zeros(2, np.int64)), v)
        ),
        # The core's gate, as the conformance suite asks it (common.ran_without_the_gil).
        "gil": gil_outcome(ran_without_the_gil(kv, lambda: kv.count_eos(tokens, 0))),
        "arrays": {
            **array_inputs(kv._testing.data_address),
            # kvbridge has no std::vector parameter; its token arguments take lists and arrays.
            LIST_VECTOR: outcome(kv.count_eos, [1, 2, 2], 2),
            ARRAY_VECTOR: outcome(kv.count_eos, to_native(np.array([1, 2, 2])), 2),
            CONTIGUOUS_VIEW: none_here,
            CONTIGUOUS_INT32: none_here,
            # count_eos over a strided view: the core reads it with its stride.
            RAW_LOOP: Outcome("read in place", detail="element-wise right")
            if kv.count_eos(view, 2) == 1
            else Outcome("misread", detail="count_eos over a strided view"),
            # rmsnorm(..., out=) into a strided view: refused, never written through a copy.
            CONTIGUOUS_WRITE: outcome(
                kv.rmsnorm, x.T, w, out=to_native(np.empty((8, 8), np.float32))[:, ::2]
            ),
            # A list: converted by the package for the call, as the temporary above.
            TEMPORARY_ROW: temporary_address(
                lambda i: kv.count_eos(temporary_tokens(i), TEMPORARY_EOS)
            ),
        },
        "returned buffer": {
            RETURNED_VECTOR: none_here,
            ZERO_COPY: Outcome("leaked", detail="never freed")
            if not freed
            else Outcome("freed" if adopted else "copied"),
        },
        "references": {
            ATTRIBUTE: Outcome("kept alive")
            if kept
            else Outcome("copied", detail="a copy: the owner may die"),
            CONST_REF: none_here,
            REFERENCE_POLICY: none_here,
            HANDLE_AFTER_FREE: freed_handle(kv),
        },
    }


def freed_handle(kv) -> Outcome:
    """A package whose pool ops take a handle (kvbridge_torch_stable's), given a freed one,
    called as its front end calls them (through its one error path)."""
    ops = getattr(kv._testing, "TYPED_OPS", None)
    if ops is None or not hasattr(ops, "pool_destroy"):
        return not_probed("no handle is handed out")
    handle = ops.pool_create(2)
    ops.pool_destroy(handle)
    return outcome(ops.pool_num_free, handle)


def ask() -> dict[str, dict]:
    found = {}
    for name in spec.PACKAGES:
        module = spec.REGISTRY[name]["module"]
        print(f"probing {module} ...", flush=True)
        found[module] = kvbridge_package(name, importlib.import_module(module))
    return found
