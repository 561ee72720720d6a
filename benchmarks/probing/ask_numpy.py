"""The numpy-array probe family: each of its technologies is a compiled extension module built
with that technology's defaults (its row's `probe_module`, in benchmarks/probing/probes), asked
every question of benchmarks/probing/questions.py. What differs between them is the module and
its row (benchmarks/technologies.json): its contiguity idiom (`contiguous_idiom`) and the
reasons for the questions its module has no call for (`unasked`)."""

from __future__ import annotations

import gc

import spec
from outcomes import Outcome, not_probed
from probing.asking import (
    arguments,
    array_inputs,
    family_probes,
    floor_array,
    floor_rmsnorm_arrays,
    gil,
    in_subprocess,
    overflow,
    raw_loop,
    translated,
    vector_inputs,
    zero_copy_return,
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
    STRIDED,
    TEMPORARY_ROW,
    UNDECLARED,
    ZERO_COPY,
)

# What this family reads of a technology's row (tests/test_technologies.py checks every row of
# the family has them; `unasked` only where its module lacks a call).
ROW_FIELDS = ("probe_module", "contiguous_idiom")
PROBE_FILE = ()  # no probe file: its probe module and its row are the technology's all


def unasked(technology: str, row: str) -> Outcome:
    """A question the technology's probe module has no call for, with its row's reason."""
    return not_probed(spec.TECHNOLOGIES[technology]["unasked"][row])


def reference_into_object(technology: str, module) -> dict[str, Outcome]:
    gc.collect()
    before = module.live_owners()
    view = module.Owner().counters
    gc.collect()
    alive = module.live_owners() - before
    rows = {
        ATTRIBUTE: Outcome("kept alive") if alive else Outcome(
            "copied", detail="a copy: the owner may die"),
    }  # fmt: skip
    del view
    if hasattr(module.Owner, "get_counters"):
        owner = module.Owner()
        got = owner.get_counters()
        owner.bump()
        rows[CONST_REF] = (Outcome("copied", detail="a copy, not a view") if got.value == 0
                           else Outcome("read in place", detail="a view"))  # fmt: skip
        del owner, got
    else:
        rows[CONST_REF] = unasked(technology, CONST_REF)
    if hasattr(module.Owner, "counters_ref"):
        gc.collect()
        before = module.live_owners()
        ref = module.Owner().counters_ref()  # the `reference` policy on a temporary's member
        gc.collect()
        dangling = module.live_owners() == before
        rows[REFERENCE_POLICY] = (
            Outcome("dangled", detail="the owner is freed while the reference lives")
            if dangling
            else Outcome("kept alive")
        )
        del ref
    else:
        rows[REFERENCE_POLICY] = unasked(technology, REFERENCE_POLICY)
    rows[HANDLE_AFTER_FREE] = not_probed("no handle: a bound object owns its own")
    return rows


def undeclared_throw(module_name: str) -> Outcome:
    """A C++ throw through a declaration that says nothing of exceptions, in a subprocess."""
    code = (
        f"from kvbridge_probes import {module_name} as m\nm.throw_kind_undeclared('runtime_error')"
    )
    return in_subprocess(code, UNDECLARED)


def contiguity_opt_in(technology: str, address_of) -> dict[str, Outcome]:
    """The two array rows asked again through the technology's contiguity opt-in, its idiom
    named in each cell's detail."""
    asked = array_inputs(address_of)
    idiom = spec.TECHNOLOGIES[technology]["contiguous_idiom"]
    return {
        row: Outcome(o.kind, o.value, f"{idiom}: {o.detail}" if o.detail else idiom, o.cause)
        for row, o in ((CONTIGUOUS_VIEW, asked[STRIDED]),
                       (CONTIGUOUS_INT32, asked[INT32_ARRAY]))
    }  # fmt: skip


def numpy_technology(technology: str, module) -> dict:
    declared = hasattr(module, "throw_kind_undeclared")
    return {
        "exceptions": translated(module.throw_kind),
        "undeclared throw": {
            UNDECLARED: (
                undeclared_throw(module.__name__.rsplit(".", 1)[-1])
                if declared
                else not_probed("every bound call catches")
            )
        },
        "arguments": arguments(module.take_int32),
        "overflow": overflow(module.take_int32, module.take_int64),
        "gil": gil(module.wait_for_python),
        "arrays": {
            **array_inputs(module.array_address),
            **vector_inputs(module.take_vector),
            **contiguity_opt_in(technology, module.array_address_contiguous),
            RAW_LOOP: raw_loop(module.second_element),
            TEMPORARY_ROW: not_probed("the binding holds its conversion"),
            CONTIGUOUS_WRITE: not_probed("a torch idiom"),
        },
        "returned buffer": {
            RETURNED_VECTOR: Outcome("copied as typed", type(module.returned_vector()).__name__),
            ZERO_COPY: zero_copy_return(module),
        },
        "references": reference_into_object(technology, module),
    }


def probes() -> dict:
    """Technology -> its compiled probe module (benchmarks/probing/probes), imported: this family's rows of
    the technology table, each with its `probe_module`."""
    return family_probes(__name__, "probe_module", "kvbridge_probes")


def ask() -> dict[str, dict]:
    found = {}
    for name, module in probes().items():
        print(f"probing {name} ...", flush=True)
        found[name] = numpy_technology(name, module)
    return found


def floors() -> dict[str, dict[str, tuple[str, dict]]]:
    """Each probe module's floors: functions, and a method and a property of its class."""
    a, b = floor_array(), floor_array()
    found = {}
    for name, m in probes().items():
        owner = m.Owner()
        found[name] = {
            "no-op": ("f()", {"f": m.noop}),
            "one int": ("f(1)", {"f": m.take_int64}),
            "one array": ("f(a)", {"f": m.array_address, "a": a}),
            "one array, one int": ("f(a, 1)", {"f": m.array_and_int, "a": a}),
            "two arrays": ("f(a, b)", {"f": m.arrays_address, "a": a, "b": b}),
            "three arrays, one float": (
                "f(x, w, out, 1e-6)",
                {"f": m.three_arrays, **floor_rmsnorm_arrays()},
            ),
            "one object": ("f(o)", {"f": m.noop_object, "o": object()}),
            "method": ("owner.noop()", {"owner": owner}),
            "method, one int": ("owner.take_int64(1)", {"owner": owner}),
            "property": ("owner.value", {"owner": owner}),
        }
    return found


def compile_subject(technology: str):
    """What a technology's `compile_call` calls (ask_torch.py's torch.compile table): its probe
    module."""
    return probes()[technology]
