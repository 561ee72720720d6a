"""cffi in API mode over the extern "C" probe library: a module cffi generated and the compiler
built against the same header (probes/src/kvbridge_probes/probe_cffi_api_build.py, as
`cffi_modules` does). Asked by ask_c_abi.py; everything but the loader and its floors is its ABI
mode's (probe_cffi_abi.py)."""

from __future__ import annotations

from probing.technologies.probe_cffi_abi import AFTER_FREE, IDIOMS, cffi_floors, declared

__all__ = ["AFTER_FREE", "IDIOMS", "LOADER", "compile_subject", "declared", "floors"]

LOADER = """
from kvbridge_probes.probe_cffi_api import ffi, lib
"""


def floors() -> dict[str, dict[str, tuple[str, dict]]]:
    from kvbridge_probes.probe_cffi_api import ffi, lib

    return {"cffi API": cffi_floors(lib, ffi)}


def compile_subject():
    """What its row's `compile_call` calls: the compiled module's library."""
    from kvbridge_probes.probe_cffi_api import lib

    return lib
