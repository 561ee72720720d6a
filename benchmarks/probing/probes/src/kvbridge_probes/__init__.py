"""Probe modules: each binding technology with its defaults and no kvbridge translation."""

from pathlib import Path

_HERE = Path(__file__).parent


def c_abi_library() -> str:
    """Path of the extern "C" probe library (probe_c_abi.h), for ctypes and cffi to load."""
    return str(_HERE / "libkvbridge_probe_c_abi.so")


def c_abi_declarations() -> str:
    """probe_c_abi.h as cffi's cdef() takes it: without preprocessor lines and the
    `#ifdef __cplusplus` blocks (cdef reads declarations; it has no preprocessor)."""
    kept, skipping = [], False
    for line in (_HERE / "probe_c_abi.h").read_text().splitlines():
        if line.startswith("#ifdef __cplusplus"):
            skipping = True
        elif skipping and line.startswith("#endif"):
            skipping = False
        elif not skipping and not line.startswith("#"):
            kept.append(line)
    return "\n".join(kept)
