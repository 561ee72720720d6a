"""The typed-FFI probe family: a library of typed functions and a reflected object, built with
its technology's defaults and loaded as that technology's users load one (its row's
`probe_module`, in benchmarks/probing/probes), asked every question of
benchmarks/probing/questions.py. What its module has no call for, its row's `unasked` says why;
its floors are its row's first floor row (functions and the reflected object as the technology
installs them) and "<name> (Python class)" (a Python class over a handle)."""

from __future__ import annotations

import gc

import numpy as np

import spec
from outcomes import Outcome, not_probed
from probing.asking import (
    arguments,
    array_cases,
    array_inputs,
    family_probes,
    floor_array,
    floor_rmsnorm_arrays,
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

# What this family reads of a technology's row (tests/test_technologies.py checks them).
ROW_FIELDS = ("probe_module", "unasked")
PROBE_FILE = ()  # no probe file: its probe module and its row are the technology's all


def probes() -> dict:
    """Technology -> its probe module, imported, in the table's order."""
    return family_probes(__name__, "probe_module", "kvbridge_probes")


def load(technology: str) -> str:
    """The import that gives a technology's probe module as `m`."""
    return f"from kvbridge_probes import {spec.TECHNOLOGIES[technology]['probe_module']} as m\n"


def unasked(technology: str, row: str) -> Outcome:
    """A question the technology's probe has no call for, with its row's reason."""
    return not_probed(spec.TECHNOLOGIES[technology]["unasked"][row])


def exceptions(technology: str) -> dict[str, Outcome]:
    """Each kind thrown through an exported function, each in a fresh interpreter: a throw that
    is not a std::exception may end the process."""
    return {k: in_subprocess(load(technology) + f"m.throw_kind({k!r})", TRANSLATION)
            for k in kinds()}  # fmt: skip


def arrays(technology: str, m) -> dict[str, Outcome]:
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
    return {
        **rows,
        CONTIGUOUS_VIEW: unasked(technology, CONTIGUOUS_VIEW),
        CONTIGUOUS_INT32: unasked(technology, CONTIGUOUS_INT32),
        RAW_LOOP: raw_loop(m.second_element),
        TEMPORARY_ROW: unasked(technology, TEMPORARY_ROW),
        CONTIGUOUS_WRITE: not_probed("a torch idiom"),
    }


def zero_copy(m) -> Outcome:
    """A tensor the library allocated, taken by numpy through DLPack: copied or not, freed or
    not once the array and the tensor are gone."""
    gc.collect()
    before = m.live_adopted()
    arr = np.from_dlpack(m.adopted())
    same = arr.__array_interface__["data"][0] == m.adopted_address()
    del arr
    gc.collect()
    if m.live_adopted() != before:
        return Outcome("leaked", detail="never freed after the array died")
    return Outcome("freed" if same else "copied", detail="no copy" if same else "a copy")


def references(technology: str, m) -> dict[str, Outcome]:
    """A field holding a member object: fields hold FFI values, objects by counted reference, so
    the question is whether the value read is the member (live) and safe once its owner is
    gone."""
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
        **{
            row: unasked(technology, row)
            for row in (CONST_REF, REFERENCE_POLICY, HANDLE_AFTER_FREE)
        },
    }


def answers(technology: str, m) -> dict:
    return {
        "exceptions": exceptions(technology),
        "undeclared throw": {UNDECLARED: unasked(technology, UNDECLARED)},
        "arguments": arguments(m.take_int32),
        "overflow": overflow(m.take_int32, m.take_int64),
        "gil": gil(m.wait_for_python),
        "arrays": arrays(technology, m),
        "returned buffer": {
            RETURNED_VECTOR: Outcome("copied as typed", type(m.returned_vector()).__name__),
            ZERO_COPY: zero_copy(m),
        },
        "references": references(technology, m),
    }


def ask() -> dict[str, dict]:
    found = {}
    for technology, m in probes().items():
        print(f"probing {technology} ...", flush=True)
        found[technology] = answers(technology, m)
    return found


def compile_subject(technology: str):
    """What a technology's `compile_call` calls (ask_torch.py's torch.compile table)."""
    return probes()[technology]


def floors() -> dict[str, dict[str, tuple[str, dict]]]:
    """Each technology's floors: typed functions, a reflected object's methods and fields as the
    technology installs them, and a Python class over a handle."""
    found = {}
    for technology, m in probes().items():
        owner = m.Owner()
        found[technology] = {
            "no-op": ("f()", {"f": m.noop}),
            "one int": ("f(1)", {"f": m.take_int64}),
            "one array": ("f(a)", {"f": m.array_address, "a": floor_array()}),
            "one array, one int": ("f(a, 1)", {"f": m.array_and_int, "a": floor_array()}),
            "two arrays": (
                "f(a, b)",
                {"f": m.arrays_address, "a": floor_array(), "b": floor_array()},
            ),
            "three arrays, one float": (
                "f(x, w, out, 1e-6)",
                {"f": m.three_arrays, **floor_rmsnorm_arrays()},
            ),
            "method": ("owner.noop()", {"owner": owner}),
            "method, one int": ("owner.take_int64(1)", {"owner": owner}),
            "property": ("owner.value", {"owner": owner}),
        }
        found[f"{technology} (Python class)"] = handle_calls(m.Held())
    return found
