"""Benchmarks: feature x package, with the floors each result is compared against.

Every benchmark's name carries its feature group; `--packages` picks which installed kvbridge
packages run (default: all that import). report.py turns the pytest-benchmark JSON into
docs/comparison.md.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # probe_semantics: builds the torch probes

PACKAGES = ("pybind", "nanobind", "cython", "torch", "ctypes", "cffi")
MODULES = {name: f"kvbridge_{name}" for name in PACKAGES}


def pytest_addoption(parser):
    parser.addoption("--packages", default=",".join(PACKAGES))
    parser.addoption("--quick", action="store_true", help="small sizes only (CI smoke run)")


def installed(config):
    names = []
    for name in config.getoption("--packages").split(","):
        try:
            importlib.import_module(MODULES[name])
        except ImportError:
            continue
        names.append(name)
    return names


def pytest_generate_tests(metafunc):
    if "package" in metafunc.fixturenames:
        metafunc.parametrize("package", installed(metafunc.config))


@pytest.fixture
def kv(package):
    return importlib.import_module(MODULES[package])


@pytest.fixture
def native(package):
    if package == "torch":
        import torch

        return torch.from_numpy
    return lambda a: a


@pytest.fixture(scope="session")
def quick(request):
    return request.config.getoption("--quick")


@pytest.fixture(scope="session")
def torch_probes():
    """The TORCH_LIBRARY no-op probe (compiled once; cached in build/torch_probes)."""
    torch = pytest.importorskip("torch")
    import probe_semantics

    probe_semantics.build_torch_probes(Path(__file__).parent.parent / "build" / "torch_probes")
    return torch.ops.kvprobe


def bytes_label(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:g} {unit}"
        n /= 1024
    return str(n)


@pytest.fixture
def tokens_of():
    """int64 tokens 0..n-1 (touched memory), cached per size."""
    cache = {}

    def make(n, dtype=np.int64):
        key = (n, dtype)
        if key not in cache:
            cache[key] = np.arange(n, dtype=dtype)
        return cache[key]

    return make
