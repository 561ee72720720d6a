"""The C ABI's probe family: one extern "C" library (probes/probe_c_abi.h), loaded and called as
each technology's users load and call one, asked every question of
benchmarks/probing/questions.py.

Its technologies are the rows of benchmarks/technologies.json whose family is c-abi; what is a
technology's own is its probe file (benchmarks/probing/technologies/<row's probe_file>.py):
- LOADER: the source a user writes to load the library with its defaults (it binds `lib`);
- BIND: the source that binds the library from nothing, build step included, as a user's
  package does when it is built or imported (it binds `lib`): asked on a machine with no
  compiler;
- AFTER_FREE: the source, run after LOADER, that frees an object and reads it by its handle;
- IDIOMS: a temporary array's address handed over by the documented idiom and by a bare
  address: (the documented one in full, the bare one's short name, in full);
- declared(namespace): after LOADER ran in `namespace`, the calls asked here (`lib`, with what
  a user declares before calling) and `address`, `pointer`, `temporary`, `bare_temporary`;
- floors(): its floor rows (its row's `floors`);
- compile_subject(), where its row has a `compile_call`: what that call calls.
"""

from __future__ import annotations

import gc
from types import ModuleType

from outcomes import Outcome, not_probed
from probing.asking import (
    after_free,
    arguments,
    array_cases,
    family_probes,
    floor_array,
    floor_rmsnorm_arrays,
    gil,
    in_subprocess,
    kinds,
    overflow,
    temporary_address,
    without_compiler,
)
from probing.questions import (
    ARRAY_VECTOR,
    ATTRIBUTE,
    CONST_REF,
    CONTIGUOUS_INT32,
    CONTIGUOUS_VIEW,
    CONTIGUOUS_WRITE,
    ESCAPE,
    HANDLE_AFTER_FREE,
    LIST_VECTOR,
    NO_COMPILER,
    RAW_LOOP,
    REFERENCE_POLICY,
    RETURNED_VECTOR,
    TEMPORARY_ROW,
    UNDECLARED,
    ZERO_COPY,
)

# What this family reads of a technology's row, and what its probe file must define (the
# docstring says what each is; tests/test_technologies.py checks them without running either).
ROW_FIELDS = ("probe_file",)
PROBE_FILE = ("LOADER", "BIND", "AFTER_FREE", "IDIOMS", "declared", "floors")
# Its table of whether each technology binds a library on a machine with no compiler (its probe
# file's BIND), questions.NO_COMPILER: shown beside the trap tables, and a must-have of the
# comparison's C library job (benchmarks/page/guide.py).


def technologies() -> dict[str, ModuleType]:
    """This family's technologies, in the table's order, each with its probe file."""
    return family_probes(__name__, "probe_file", "probing.technologies")


def escaping_exception(probe: ModuleType, kind: str) -> Outcome:
    """What a C++ exception escaping an extern "C" function does to the process: in a
    subprocess, since the answer may be that the process dies."""
    code = probe.LOADER + f"lib.kvbp_throw_kind({kind!r}.encode())"
    return in_subprocess(code, ESCAPE)


def c_abi_arrays(lib, pointer) -> dict[str, Outcome]:
    """The rows of `array_inputs`, asked of an `int64_t*` parameter: a pointer carries no dtype
    and no strides, so the question is which values the library reads (element 1 of each)."""
    rows = {}
    for name, arr in array_cases().items():
        try:
            p = pointer(arr)
            address, seen = int(lib.kvbp_array_address(p)), int(lib.kvbp_element(p, 1))
        except BaseException as e:  # noqa: BLE001
            rows[name] = Outcome("refused", type(e).__name__, str(e)[:120])
            continue
        in_place = address == arr.__array_interface__["data"][0]
        if seen != int(arr[1]):  # one cause: a C pointer carries no dtype and no strides
            rows[name] = Outcome("misread", detail=f"element 1 reads {seen}, not {arr[1]}",
                                 cause="a C pointer carries no dtype and no strides")  # fmt: skip
        else:
            rows[name] = Outcome("read in place" if in_place else "copied")
    no_vector = not_probed("a C ABI has no std::vector")
    no_layout = not_probed("a C pointer has no layout to opt into")
    return {
        **rows,
        RAW_LOOP: not_probed("a C pointer has no strides"),
        CONTIGUOUS_WRITE: not_probed("a torch idiom"),
        LIST_VECTOR: no_vector,
        ARRAY_VECTOR: no_vector,
        CONTIGUOUS_VIEW: no_layout,
        CONTIGUOUS_INT32: no_layout,
    }


# The two ways users pass a temporary array's address to a C ABI function (a probe file's
# `temporary` and `bare_temporary`): the idiom the technology documents, which holds the array
# for the call, and a bare address, which holds nothing. Both are asked; the cell counts the
# documented one, the bare one beside it.


def idioms_side_by_side(idioms: tuple, documented: Outcome, bare: Outcome) -> Outcome:
    """The documented idiom's outcome, which the cell counts, with the bare address's beside it
    (its label in the cell, both idioms in full on hover: a probe file's IDIOMS)."""
    doc_full, bare_short, bare_full = idioms

    def said(o: Outcome) -> str:
        return o.label() + (f" ({o.detail})" if o.detail else "")

    detail = f"{doc_full}: {said(documented)}; {bare_full}: {said(bare)}"
    if documented.kind == "returned":  # the documented idiom named on hover: a short cell
        return Outcome("returned", f"{documented.value}; {bare_short}: {bare.label()}", detail)
    return Outcome(documented.kind, documented.value, detail)


def returned_pointer(lib, address) -> Outcome:
    """A buffer the library allocated, returned as a pointer: is it freed once the pointer
    object is gone and nobody called the library's free? (The library counts its buffers.)"""
    before = lib.kvbp_live_buffers()
    returned = lib.kvbp_returned_buffer()
    kept = address(returned)  # to free it ourselves afterwards
    kind = type(returned).__name__
    del returned
    gc.collect()
    leaked = lib.kvbp_live_buffers() - before
    lib.kvbp_free(kept)
    if leaked:
        return Outcome("leaked", detail=f"a {kind} died and the buffer stayed allocated")
    return Outcome("freed", detail=f"a {kind}'s buffer was freed with it")


def c_abi_technology(probe: ModuleType) -> dict:
    namespace: dict = {}
    exec(probe.LOADER, namespace)  # noqa: S102 - the loader a user writes, verbatim
    calls = probe.declared(namespace)
    lib = calls.lib
    no_objects = not_probed("a C ABI has no objects")
    return {
        "exceptions": {k: escaping_exception(probe, k) for k in kinds()},
        "undeclared throw": {UNDECLARED: escaping_exception(probe, "runtime_error")},
        "arguments": arguments(lib.kvbp_take_int32),
        "overflow": overflow(lib.kvbp_take_int32, lib.kvbp_take_int64),
        "gil": gil(lib.kvbp_wait_for_python),
        "arrays": {
            **c_abi_arrays(lib, calls.pointer),
            TEMPORARY_ROW: idioms_side_by_side(
                probe.IDIOMS,
                temporary_address(calls.temporary),
                temporary_address(calls.bare_temporary),
            ),
        },
        "returned buffer": {
            RETURNED_VECTOR: not_probed("a C ABI returns pointers, not vectors"),
            ZERO_COPY: returned_pointer(lib, calls.address),
        },
        "references": {
            ATTRIBUTE: no_objects,
            CONST_REF: no_objects,
            REFERENCE_POLICY: no_objects,
            HANDLE_AFTER_FREE: after_free(probe.LOADER + probe.AFTER_FREE),
        },
    }


def ask() -> dict[str, dict]:
    found = {}
    for technology, probe in technologies().items():
        print(f'probing {technology} over an extern "C" library ...', flush=True)
        found[technology] = c_abi_technology(probe)
        found.setdefault(NO_COMPILER, {})[technology] = without_compiler(probe.BIND)
    return found


def compile_subject(technology: str):
    """What a technology's `compile_call` calls (ask_torch.py's torch.compile table)."""
    return technologies()[technology].compile_subject()


# A class over a C handle, written as kvbridge's C ABI front end and every user of a C library
# write one: slots, the handle in an attribute, `lib` a module global. The floors of a method and
# a property, with the lookups kvbridge's calls make (the probe files' floors use it).
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


def array_floors(lib, passed: str, ints: dict, floats: dict) -> dict[str, tuple[str, dict]]:
    """The array floors (spec.CALLS) of `lib`, the probe library as a technology declares it:
    each array passed as `passed` passes it (`{}` its name), then its length, since a C function
    is given an array as its address and its length (probe_c_abi.h). `ints` and `floats` are the
    names the idiom itself uses, for the int64 arrays and for RMSNorm's float32 ones."""

    def given(*arrays: str) -> str:
        return ", ".join(f"{passed.format(name)}, {name}.size" for name in arrays)

    a, b = floor_array(), floor_array()
    return {
        "one array": (f"f({given('a')})", {"f": lib.kvbp_array, "a": a, **ints}),
        "one array, one int": (f"f({given('a')}, 1)", {"f": lib.kvbp_array_and_int, "a": a, **ints}),
        "two arrays": (f"f({given('a', 'b')})", {"f": lib.kvbp_arrays, "a": a, "b": b, **ints}),
        "three arrays, one float": (f"f({given('x', 'w', 'out')}, 1e-6)",
                                    {"f": lib.kvbp_three_arrays, **floor_rmsnorm_arrays(), **floats}),
    }  # fmt: skip


def floors() -> dict[str, dict[str, tuple[str, dict]]]:
    """Each technology's floors (its probe file's), over the same extern "C" library."""
    return {
        row: calls for probe in technologies().values() for row, calls in probe.floors().items()
    }
