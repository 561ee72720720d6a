"""cffi in ABI mode over the extern "C" probe library (probes/probe_c_abi.h), as its users write
it: the header's declarations cdef'd, the library dlopen'ed. Asked by ask_c_abi.py; its API
mode (probe_cffi_api.py) shares the rest of this file."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from probing.ask_c_abi import array_floors, over_handle
from probing.asking import TEMPORARY_EOS, handle_calls, temporary_tokens

LOADER = """
from cffi import FFI
from kvbridge_probes import c_abi_declarations, c_abi_library
ffi = FFI()
ffi.cdef(c_abi_declarations())
lib = ffi.dlopen(c_abi_library())
"""

# Binding the library from nothing, as a user's package does at import: cdef and dlopen are all.
BIND = LOADER

# A create/destroy pair used as a C library's classes are, then the freed handle: cffi reads
# the pointer types from the declarations.
AFTER_FREE = """
o = lib.kvbp_object_create()
lib.kvbp_object_destroy(o)
print(lib.kvbp_object_value(o))
"""

# A temporary array's address: cffi's documented idiom, whose buffer object holds the array, and
# a bare address cast from it, which holds nothing (full, short, full).
IDIOMS = ('`ffi.from_buffer("int64_t[]", arr)`', "a cast",
          '`ffi.cast("int64_t *", ffi.from_buffer(arr))`')  # fmt: skip


def declared(namespace: dict) -> SimpleNamespace:
    """The calls the family asks, after the loader ran in `namespace` (cffi needs no more
    declarations), and the ways a user hands a function an array."""
    ffi, lib = namespace["ffi"], namespace["lib"]

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

    return SimpleNamespace(lib=lib, address=address, pointer=pointer, temporary=temporary,
                           bare_temporary=bare_temporary)  # fmt: skip


def cffi_floors(lib, ffi) -> dict[str, tuple[str, dict]]:
    """A cffi library's floors, in either mode."""
    return {
        "no-op": ("f()", {"f": lib.kvbp_noop}),
        "one int": ("f(1)", {"f": lib.kvbp_take_int64}),
        **array_floors(lib, "ffi.from_buffer(T, {})", {"ffi": ffi, "T": "int64_t[]"},
                       {"ffi": ffi, "T": "float[]"}),
        **handle_calls(over_handle(lib, lib.kvbp_object_get())),
    }  # fmt: skip


def compile_subject():
    """What its row's `compile_call` calls: the library as its loader gives it."""
    namespace: dict = {}
    exec(LOADER, namespace)  # noqa: S102 - the loader a user writes, verbatim
    return namespace["lib"]


def floors() -> dict[str, dict[str, tuple[str, dict]]]:
    namespace: dict = {}
    exec(LOADER, namespace)  # noqa: S102 - the loader a user writes, verbatim
    return {"cffi ABI": cffi_floors(namespace["lib"], namespace["ffi"])}
