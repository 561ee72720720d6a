"""The tvm-ffi probe family: one library of typed functions and a reflected object, built with
tvm-ffi's defaults (probes/probe_tvm_ffi.cpp) and loaded as its users load one
(kvbridge_probes.tvm_ffi_probe), asked every question of benchmarks/probing/questions.py."""

from __future__ import annotations

import gc

import numpy as np

from outcomes import Outcome, not_probed
from probing.asking import (
    arguments,
    array_cases,
    array_inputs,
    floor_array,
    gil,
    handle_calls,
    in_subprocess,
    kinds,
    overflow,
    raw_loop,
    vector_inputs,
)
from probing.questions import (
    ATTRIBUTE,
    CONST_REF,
    CONTIGUOUS_INT32,
    CONTIGUOUS_VIEW,
    CONTIGUOUS_WRITE,
    HANDLE_AFTER_FREE,
    INT32_ARRAY,
    RAW_LOOP,
    REFERENCE_POLICY,
    RETURNED_VECTOR,
    TEMPORARY_ROW,
    TRANSLATION,
    UNDECLARED,
    ZERO_COPY,
)

LOAD = "from kvbridge_probes import tvm_ffi_probe as m\n"


def exceptions() -> dict[str, Outcome]:
    """Each kind thrown through an exported function, each in a fresh interpreter: a throw that
    is not a std::exception may end the process."""
    return {k: in_subprocess(LOAD + f"m.throw_kind({k!r})", TRANSLATION) for k in kinds()}


def arrays(m) -> dict[str, Outcome]:
    rows = {**array_inputs(m.array_address), **vector_inputs(m.take_vector)}
    # The address alone cannot say how the array is read: a TensorView hands the kernel a void*
    # data_ptr(), and the kernel's cast decides the dtype. Asked as the kernel reads it.
    int32 = array_cases()[INT32_ARRAY]
    seen = int(m.second_element(int32))
    rows[INT32_ARRAY] = (
        Outcome("read in place", detail="element 1 is right")
        if seen == int(int32[1])
        else Outcome("misread", detail=f"element 1 reads {seen}, not {int32[1]}: data_ptr() is "
                     "a void*; the DLTensor's dtype is the kernel's to check")
    )  # fmt: skip
    no_opt_in = not_probed("tvm-ffi converts no array: a kernel can only refuse one")
    return {
        **rows,
        CONTIGUOUS_VIEW: no_opt_in,
        CONTIGUOUS_INT32: no_opt_in,
        RAW_LOOP: raw_loop(m.second_element),
        TEMPORARY_ROW: not_probed("tvm-ffi holds its conversion"),
        CONTIGUOUS_WRITE: not_probed("a torch idiom"),
    }


def zero_copy(m) -> Outcome:
    """A tvm::ffi::Tensor the library allocated, taken by numpy through DLPack: copied or not,
    freed or not once the array and the tensor are gone."""
    gc.collect()
    before = m.live_adopted()
    arr = np.from_dlpack(m.adopted())
    same = arr.__array_interface__["data"][0] == m.adopted_address()
    del arr
    gc.collect()
    if m.live_adopted() != before:
        return Outcome("leaked", detail="never freed after the array died")
    return Outcome("freed" if same else "copied", detail="no copy" if same else "a copy")


def references(m) -> dict[str, Outcome]:
    """A field holding a member object: tvm-ffi fields hold FFI values, objects by counted
    reference, so the question is whether the value read is the member (live) and safe once its
    owner is gone."""
    gc.collect()
    before = m.live_owners()
    owner = m.Owner()
    got = owner.counters
    owner.bump()
    live = got.value == 1
    del owner
    gc.collect()
    owner_freed = m.live_owners() == before
    safe = got.value == 1  # the member object outlived its owner, by its own count
    del got
    if live and owner_freed and safe:
        attribute = Outcome("read in place",
                            detail="the member object by counted reference: it outlives its owner")  # fmt: skip
    elif not live:
        attribute = Outcome("copied", detail="a copy, not the member")
    else:
        attribute = Outcome("kept alive")
    return {
        ATTRIBUTE: attribute,
        CONST_REF: not_probed("tvm-ffi returns no C++ reference: objects cross counted"),
        REFERENCE_POLICY: not_probed("no return policies: objects cross counted"),
        HANDLE_AFTER_FREE: not_probed("no handle: objects cross counted"),
    }


def ask() -> dict[str, dict]:
    from kvbridge_probes import tvm_ffi_probe as m

    print("probing tvm-ffi ...", flush=True)
    return {
        "tvm-ffi": {
            "exceptions": exceptions(),
            "undeclared throw": {
                UNDECLARED: not_probed(
                    "every exported function catches std::exception; another throw is the "
                    "exceptions table's non_std row"
                )
            },
            "arguments": arguments(m.take_int32),
            "overflow": overflow(m.take_int32, m.take_int64),
            "gil": gil(m.wait_for_python),
            "arrays": arrays(m),
            "returned buffer": {
                RETURNED_VECTOR: Outcome("copied as typed", type(m.returned_vector()).__name__),
                ZERO_COPY: zero_copy(m),
            },
            "references": references(m),
        }
    }


def floors() -> dict[str, dict[str, tuple[str, dict]]]:
    """tvm-ffi's floors: typed functions, a reflected object's methods and fields as tvm-ffi
    installs them, and a Python class over a handle."""
    from kvbridge_probes import tvm_ffi_probe as tvm

    owner = tvm.Owner()
    return {
        "tvm-ffi": {
            "no-op": ("f()", {"f": tvm.noop}),
            "one int": ("f(1)", {"f": tvm.take_int64}),
            "one array": ("f(a)", {"f": tvm.array_address, "a": floor_array()}),
            "method": ("owner.noop()", {"owner": owner}),
            "method, one int": ("owner.take_int64(1)", {"owner": owner}),
            "property": ("owner.value", {"owner": owner}),
        },
        "tvm-ffi (Python class)": handle_calls(tvm.Held()),
    }
