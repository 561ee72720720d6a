"""The C ABI's probe family: one extern "C" library (probes/probe_c_abi.h) through ctypes and
through cffi (ABI and API mode), loaded as users load it, asked every question of
benchmarks/probing/questions.py."""

from __future__ import annotations

import gc

import numpy as np

from outcomes import Outcome, not_probed
from probing.asking import (
    TEMPORARY_EOS,
    after_free,
    arguments,
    array_cases,
    floor_array,
    gil,
    handle_calls,
    in_subprocess,
    kinds,
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
    ESCAPE,
    HANDLE_AFTER_FREE,
    LIST_VECTOR,
    RAW_LOOP,
    REFERENCE_POLICY,
    RETURNED_VECTOR,
    TEMPORARY_ROW,
    UNDECLARED,
    ZERO_COPY,
)

# How each technology loads the library with its defaults, as a user writes it. ctypes: CDLL with
# argtypes/restype declared (llama-cpp-python's way); cffi: ABI mode over the same declarations.
C_ABI_LOADERS = {
    "ctypes": """
import ctypes
from kvbridge_probes import c_abi_library
lib = ctypes.CDLL(c_abi_library())
lib.kvbp_throw_kind.argtypes = [ctypes.c_char_p]
""",
    "cffi ABI": """
from cffi import FFI
from kvbridge_probes import c_abi_declarations, c_abi_library
ffi = FFI()
ffi.cdef(c_abi_declarations())
lib = ffi.dlopen(c_abi_library())
""",
    # API mode: a module cffi generated and the compiler built against the same header
    # (probes/src/kvbridge_probes/probe_cffi_api_build.py, as `cffi_modules` does).
    "cffi API": """
from kvbridge_probes.probe_cffi_api import ffi, lib
""",
}


def escaping_exception(technology: str, kind: str) -> Outcome:
    """What a C++ exception escaping an extern "C" function does to the process: in a
    subprocess, since the answer may be that the process dies."""
    code = C_ABI_LOADERS[technology] + f"lib.kvbp_throw_kind({kind!r}.encode())"
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


# The two ways users pass a temporary array's address to a C ABI function (`temporary` below):
# the idiom the technology documents, which holds the array for the call, and a bare address,
# which holds nothing. Both are asked; the cell counts the documented one, the bare one beside it.
IDIOMS = {
    "ctypes": ("`arr.ctypes.data_as(POINTER(c_int64))`", "`.data`", "`arr.ctypes.data`, an int"),
    "cffi": ("`ffi.from_buffer(\"int64_t[]\", arr)`", "a cast",
             "`ffi.cast(\"int64_t *\", ffi.from_buffer(arr))`"),
}  # fmt: skip


def idioms_side_by_side(family: str, documented: Outcome, bare: Outcome) -> Outcome:
    """The documented idiom's outcome, which the cell counts, with the bare address's beside it
    (its label in the cell, both idioms in full on hover)."""
    doc_full, bare_short, bare_full = IDIOMS[family]

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


# A create/destroy pair used as a C library's classes are, then the freed handle, as each
# technology's user writes it after the loader above (ctypes: its pointer types declared).
AFTER_FREE = {
    "ctypes": """
lib.kvbp_object_create.restype = ctypes.c_void_p
lib.kvbp_object_destroy.argtypes = [ctypes.c_void_p]
lib.kvbp_object_value.argtypes, lib.kvbp_object_value.restype = [ctypes.c_void_p], ctypes.c_int64
o = lib.kvbp_object_create()
lib.kvbp_object_destroy(o)
print(lib.kvbp_object_value(o))
""",
    "cffi": """
o = lib.kvbp_object_create()
lib.kvbp_object_destroy(o)
print(lib.kvbp_object_value(o))
""",
}


def c_abi_technology(technology: str) -> dict:
    import ctypes

    namespace: dict = {}
    exec(C_ABI_LOADERS[technology], namespace)  # noqa: S102 - the loader a user writes, verbatim
    lib = namespace["lib"]
    family = "ctypes" if technology == "ctypes" else "cffi"  # cffi's ABI and API modes alike
    if technology == "ctypes":
        c = ctypes
        lib.kvbp_take_int32.argtypes, lib.kvbp_take_int32.restype = [c.c_int32], c.c_int32
        lib.kvbp_take_int64.argtypes, lib.kvbp_take_int64.restype = [c.c_int64], c.c_int64
        lib.kvbp_wait_for_python.argtypes = [c.c_int64, c.c_double]
        lib.kvbp_wait_for_python.restype = c.c_int
        lib.kvbp_array_address.argtypes = [c.POINTER(c.c_int64)]
        lib.kvbp_array_address.restype = c.c_size_t
        lib.kvbp_element.argtypes = [c.POINTER(c.c_int64), c.c_int64]
        lib.kvbp_element.restype = c.c_int64
        lib.kvbp_returned_buffer.restype = c.POINTER(c.c_int32)
        lib.kvbp_free.argtypes = [c.c_void_p]
        lib.kvbp_live_buffers.restype = c.c_int64

        def address(p):
            return c.cast(p, c.c_void_p).value

        lib.kvbp_count_eos.argtypes = [c.c_void_p, c.c_int64, c.c_int64]
        lib.kvbp_count_eos.restype = c.c_int64

        def pointer(arr):  # numpy's ctypes idiom
            return arr.ctypes.data_as(c.POINTER(c.c_int64))

        def temporary(i):  # numpy's documented idiom: the pointer holds the array
            arr = np.array(temporary_tokens(i), np.int64).ctypes.data_as(c.POINTER(c.c_int64))
            return lib.kvbp_count_eos(arr, 8, TEMPORARY_EOS)

        def bare_temporary(i):  # an address from numpy's ctypes interface: an int, holding nothing
            arr = np.array(temporary_tokens(i), np.int64).ctypes.data
            return lib.kvbp_count_eos(arr, 8, TEMPORARY_EOS)
    else:
        ffi = namespace["ffi"]

        def address(p):
            return ffi.cast("void *", p)

        def pointer(arr):  # cffi's idiom for a numpy array
            return ffi.from_buffer("int64_t[]", arr)

        def temporary(i):  # cffi's documented idiom: the buffer object holds the array
            arr = ffi.from_buffer("int64_t[]", np.array(temporary_tokens(i), np.int64))
            return lib.kvbp_count_eos(arr, 8, TEMPORARY_EOS)

        def bare_temporary(i):  # from_buffer cast to the parameter's type: the cast holds nothing
            arr = ffi.cast("int64_t *", ffi.from_buffer(np.array(temporary_tokens(i), np.int64)))
            return lib.kvbp_count_eos(arr, 8, TEMPORARY_EOS)

    no_objects = not_probed("a C ABI has no objects")
    return {
        "exceptions": {k: escaping_exception(technology, k) for k in kinds()},
        "undeclared throw": {UNDECLARED: escaping_exception(technology, "runtime_error")},
        "arguments": arguments(lib.kvbp_take_int32),
        "overflow": overflow(lib.kvbp_take_int32, lib.kvbp_take_int64),
        "gil": gil(lib.kvbp_wait_for_python),
        "arrays": {
            **c_abi_arrays(lib, pointer),
            TEMPORARY_ROW: idioms_side_by_side(
                family, temporary_address(temporary), temporary_address(bare_temporary)
            ),
        },
        "returned buffer": {
            RETURNED_VECTOR: not_probed("a C ABI returns pointers, not vectors"),
            ZERO_COPY: returned_pointer(lib, address),
        },
        "references": {
            ATTRIBUTE: no_objects,
            CONST_REF: no_objects,
            REFERENCE_POLICY: no_objects,
            HANDLE_AFTER_FREE: after_free(C_ABI_LOADERS[technology] + AFTER_FREE[family]),
        },
    }


def ask() -> dict[str, dict]:
    found = {}
    for technology in C_ABI_LOADERS:
        print(f'probing {technology} over an extern "C" library ...', flush=True)
        found[technology] = c_abi_technology(technology)
    return found


# A class over a C handle, written as kvbridge's C ABI front end and every user of a C library
# write one: slots, the handle in an attribute, `lib` a module global. The floors of a method and
# a property for ctypes and cffi, with the lookups kvbridge's calls make.
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


def floors() -> dict[str, dict[str, tuple[str, dict]]]:
    """ctypes's floors (declared, undeclared, and its array idioms) and cffi's in both modes,
    over the same extern "C" library."""
    import ctypes

    from cffi import FFI
    from kvbridge_probes import c_abi_declarations, c_abi_library
    from kvbridge_probes.probe_cffi_api import ffi as api_ffi
    from kvbridge_probes.probe_cffi_api import lib as api_lib

    a = floor_array()
    declared = ctypes.CDLL(c_abi_library())
    declared.kvbp_noop.argtypes, declared.kvbp_noop.restype = [], None
    declared.kvbp_take_int64.argtypes = [ctypes.c_int64]
    declared.kvbp_take_int64.restype = ctypes.c_int64
    declared.kvbp_array_address.argtypes = [ctypes.POINTER(ctypes.c_int64)]
    declared.kvbp_array_address.restype = ctypes.c_size_t
    undeclared = ctypes.CDLL(c_abi_library())  # a second handle: no argtypes on its functions
    abi_ffi = FFI()
    abi_ffi.cdef(c_abi_declarations())
    abi = abi_ffi.dlopen(c_abi_library())
    ptr = ctypes.POINTER(ctypes.c_int64)
    for name, argtypes, restype in (
        ("kvbp_object_get", [], ctypes.c_void_p),
        ("kvbp_object_noop", [ctypes.c_void_p], None),
        ("kvbp_object_take_int64", [ctypes.c_void_p, ctypes.c_int64], ctypes.c_int64),
        ("kvbp_object_value", [ctypes.c_void_p], ctypes.c_int64),
    ):
        getattr(declared, name).argtypes = argtypes
        getattr(declared, name).restype = restype
    found = {}
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
    for name, lib, f in (("cffi ABI", abi, abi_ffi), ("cffi API", api_lib, api_ffi)):
        found[name] = {
            "no-op": ("f()", {"f": lib.kvbp_noop}),
            "one int": ("f(1)", {"f": lib.kvbp_take_int64}),
            "one array": ("f(ffi.from_buffer('int64_t[]', a))",
                          {"f": lib.kvbp_array_address, "ffi": f, "a": a}),
            **handle_calls(over_handle(lib, lib.kvbp_object_get())),
        }  # fmt: skip
    return found
