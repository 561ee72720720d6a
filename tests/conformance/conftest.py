"""One conformance suite for every kvbridge package.

The package under test comes from ``--package`` (or ``KVBRIDGE_PACKAGE``): pybind, cython or
torch. Test names never carry the package name, so the same test ids run for every package and a
feature x package pass matrix falls out of the results. Tests build their data with numpy and
hand it to the package through ``native``, which turns it into the package's own array type.
"""

from __future__ import annotations

import importlib
import os
import tracemalloc

import numpy as np
import pytest

PACKAGES = {
    name: f"kvbridge_{name}" for name in ("pybind", "nanobind", "cython", "torch", "ctypes", "cffi")
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--package",
        choices=sorted(PACKAGES),
        default=os.environ.get("KVBRIDGE_PACKAGE"),
        help="which installed kvbridge package to test (default: $KVBRIDGE_PACKAGE)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    return f"kvbridge package under test: {config.getoption('--package')}"


class NumpyAdapter:
    """How the suite talks to a package whose native array is numpy.ndarray."""

    native_type = np.ndarray

    def __init__(self, module):
        self.module = module

    def native(self, a: np.ndarray):
        return a

    def to_numpy(self, a) -> np.ndarray:
        return np.asarray(a)

    def data_address(self, a) -> int:
        return a.__array_interface__["data"][0]

    def bytes_allocated(self, fn) -> int:
        """Bytes of array memory allocated (and still traced at the peak) while fn runs."""
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            fn()
            return tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()


class TorchAdapter(NumpyAdapter):
    """How the suite talks to kvbridge_torch, whose native array is torch.Tensor."""

    def __init__(self, module):
        import torch

        super().__init__(module)
        self.torch = torch
        self.native_type = torch.Tensor

    def native(self, a: np.ndarray):
        # from_numpy shares memory; it cannot express negative strides, which tests pass as
        # plain numpy arrays instead (the torch package accepts those too).
        return self.torch.from_numpy(a)

    def to_numpy(self, a) -> np.ndarray:
        return a.detach().cpu().numpy() if isinstance(a, self.torch.Tensor) else np.asarray(a)

    def data_address(self, a) -> int:
        if isinstance(a, self.torch.Tensor):
            return a.data_ptr()
        return super().data_address(a)

    def bytes_allocated(self, fn) -> int:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
        return sum(max(e.cpu_memory_usage, 0) for e in prof.events())


@pytest.fixture(scope="session")
def kv(request: pytest.FixtureRequest):
    """The installed package under test (never the source tree)."""
    name = request.config.getoption("--package")
    if name is None:
        pytest.exit("choose a package: --package pybind|cython|torch or KVBRIDGE_PACKAGE", 4)
    return importlib.import_module(PACKAGES[name])


@pytest.fixture(scope="session")
def adapter(kv):
    return TorchAdapter(kv) if kv.BACKEND == "torch" else NumpyAdapter(kv)


@pytest.fixture(scope="session")
def native(adapter):
    return adapter.native
