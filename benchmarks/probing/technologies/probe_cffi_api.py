"""cffi in API mode over the extern "C" probe library: a module cffi generated and the compiler
built against the same header (probes/src/kvbridge_probes/probe_cffi_api_build.py, as
`cffi_modules` does). Asked by ask_c_abi.py; everything but the loader and its floors is its ABI
mode's (probe_cffi_abi.py)."""

from __future__ import annotations

from probing.technologies.probe_cffi_abi import AFTER_FREE, IDIOMS, cffi_floors, declared

__all__ = ["AFTER_FREE", "BIND", "IDIOMS", "LOADER", "compile_subject", "declared", "floors"]

LOADER = """
from kvbridge_probes.probe_cffi_api import ffi, lib
"""

# Binding the library from nothing, as `cffi_modules` does when a user's package is built or
# installed from source: the module generated, compiled against the header and linked to the
# library (here in the current directory), then imported.
BIND = """
import sys
from pathlib import Path
from cffi import FFI
from kvbridge_probes import c_abi_declarations, c_abi_library
here = str(Path(c_abi_library()).parent)
ffi = FFI()
ffi.cdef(c_abi_declarations())
ffi.set_source("bound_here", '#include "probe_c_abi.h"', include_dirs=[here],
               library_dirs=[here], runtime_library_dirs=[here],
               libraries=[":" + Path(c_abi_library()).name])
ffi.compile(tmpdir=".")
sys.path.insert(0, ".")
from bound_here import lib
"""


def floors() -> dict[str, dict[str, tuple[str, dict]]]:
    from kvbridge_probes.probe_cffi_api import ffi, lib

    return {"cffi API": cffi_floors(lib, ffi)}


def compile_subject():
    """What its row's `compile_call` calls: the compiled module's library."""
    from kvbridge_probes.probe_cffi_api import lib

    return lib
