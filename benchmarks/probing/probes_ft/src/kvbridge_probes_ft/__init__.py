"""Free-threaded Python probes: each technology's module declared free-threaded and plain."""

from pathlib import Path


def c_abi_library() -> str:
    """Path of the extern "C" seed-pool library, for ctypes."""
    return str(Path(__file__).parent / "libkvbridge_probe_ft_c_abi.so")
