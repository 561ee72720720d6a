"""ctypes over the extern "C" probe library (probes/probe_c_abi.h), as its users write it:
CDLL with argtypes and restype declared (llama-cpp-python's way). Asked by ask_c_abi.py."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np

from probing.ask_c_abi import array_floors, over_handle
from probing.asking import TEMPORARY_EOS, handle_calls, temporary_tokens

LOADER = """
import ctypes
from kvbridge_probes import c_abi_library
lib = ctypes.CDLL(c_abi_library())
lib.kvbp_throw_kind.argtypes = [ctypes.c_char_p]
"""

# Binding the library from nothing, as a user's package does at import: loading it is all.
BIND = LOADER

# A create/destroy pair used as a C library's classes are, then the freed handle: its pointer
# types declared, as a ctypes user must.
AFTER_FREE = """
lib.kvbp_object_create.restype = ctypes.c_void_p
lib.kvbp_object_destroy.argtypes = [ctypes.c_void_p]
lib.kvbp_object_value.argtypes, lib.kvbp_object_value.restype = [ctypes.c_void_p], ctypes.c_int64
o = lib.kvbp_object_create()
lib.kvbp_object_destroy(o)
print(lib.kvbp_object_value(o))
"""

# A temporary array's address: numpy's documented idiom, which holds the array for the call,
# and a bare address, which holds nothing (full, short, full).
IDIOMS = ("`arr.ctypes.data_as(POINTER(c_int64))`", "`.data`", "`arr.ctypes.data`, an int")


def declared(namespace: dict) -> SimpleNamespace:
    """The calls the family asks, after LOADER ran in `namespace`: each function's argtypes and
    restype declared, and the ways a user hands it an array."""
    c, lib = ctypes, namespace["lib"]
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
    lib.kvbp_count_eos.argtypes = [c.c_void_p, c.c_int64, c.c_int64]
    lib.kvbp_count_eos.restype = c.c_int64

    def address(p):
        return c.cast(p, c.c_void_p).value

    def pointer(arr):  # numpy's ctypes idiom
        return arr.ctypes.data_as(c.POINTER(c.c_int64))

    def temporary(i):  # numpy's documented idiom: the pointer holds the array
        arr = np.array(temporary_tokens(i), np.int64).ctypes.data_as(c.POINTER(c.c_int64))
        return lib.kvbp_count_eos(arr, 8, TEMPORARY_EOS)

    def bare_temporary(i):  # an address from numpy's ctypes interface: an int, holding nothing
        arr = np.array(temporary_tokens(i), np.int64).ctypes.data
        return lib.kvbp_count_eos(arr, 8, TEMPORARY_EOS)

    return SimpleNamespace(lib=lib, address=address, pointer=pointer, temporary=temporary,
                           bare_temporary=bare_temporary)  # fmt: skip


def compile_subject():
    """What its row's `compile_call` calls: the library with its int function declared."""
    from kvbridge_probes import c_abi_library

    lib = ctypes.CDLL(c_abi_library())
    lib.kvbp_take_int64.argtypes, lib.kvbp_take_int64.restype = [ctypes.c_int64], ctypes.c_int64
    return lib


def declare_arrays(lib, int64s, floats) -> None:
    """The array floors' argtypes (probe_c_abi.h), each array's address as `int64s` or `floats`
    and its length an int64."""
    n = ctypes.c_int64
    for name, argtypes in (
        ("kvbp_array", [int64s, n]),
        ("kvbp_array_and_int", [int64s, n, n]),
        ("kvbp_arrays", [int64s, n] * 2),
        ("kvbp_three_arrays", [floats, n] * 3 + [ctypes.c_double]),
    ):
        getattr(lib, name).argtypes, getattr(lib, name).restype = argtypes, ctypes.c_size_t


def floors() -> dict[str, dict[str, tuple[str, dict]]]:
    """Its floors: declared, undeclared, and its array idioms."""
    from kvbridge_probes import c_abi_library

    declared = ctypes.CDLL(c_abi_library())
    declared.kvbp_noop.argtypes, declared.kvbp_noop.restype = [], None
    declared.kvbp_take_int64.argtypes = [ctypes.c_int64]
    declared.kvbp_take_int64.restype = ctypes.c_int64
    int64s, floats = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_float)
    declare_arrays(declared, int64s, floats)
    undeclared = ctypes.CDLL(c_abi_library())  # a second handle: no argtypes on its functions
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
        **array_floors(declared, "{}.ctypes.data_as(p)", {"p": int64s}, {"p": floats}),
        **handle_calls(over_handle(declared, declared.kvbp_object_get())),
    }
    # Two cheaper ctypes idioms for an array, each passed to a c_void_p parameter, against
    # numpy's .ctypes object above: its address from the array interface, and a ctypes array of
    # no length laid over its buffer (what kvbridge_ctypes passes: it also holds the array).
    by_address = ctypes.CDLL(c_abi_library())  # a third handle: its own argtypes
    declare_arrays(by_address, ctypes.c_void_p, ctypes.c_void_p)
    found["ctypes (array interface address)"] = array_floors(
        by_address, "{}.__array_interface__['data'][0]", {}, {}
    )
    found["ctypes (buffer)"] = array_floors(
        by_address, "B.from_buffer({})", {"B": ctypes.c_char * 0}, {"B": ctypes.c_char * 0}
    )
    found["ctypes (no argtypes)"] = {
        "no-op": ("f()", {"f": undeclared.kvbp_noop}),
        "one int": ("f(1)", {"f": undeclared.kvbp_take_int64}),
    }
    return found
