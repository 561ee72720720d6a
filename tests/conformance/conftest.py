"""One conformance suite for every kvbridge package.

The package under test comes from ``--package`` (or ``KVBRIDGE_PACKAGE``): one of
common.PACKAGES. Test names never carry the package name, so the same test ids run for every
package and a feature x package pass matrix falls out of the results. Tests build their data
with numpy and hand it to the package through ``native``, which turns it into the package's own
array type. Shared helpers live in common.py.
"""

from __future__ import annotations

import importlib
import os

import pytest
from common import PACKAGES, REGISTRY, NumpyAdapter, TorchAdapter


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--package",
        choices=sorted(PACKAGES),
        default=os.environ.get("KVBRIDGE_PACKAGE"),
        help="which installed kvbridge package to test (default: $KVBRIDGE_PACKAGE)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    return f"kvbridge package under test: {config.getoption('--package')}"


@pytest.fixture(scope="session")
def kv(request: pytest.FixtureRequest):
    """The installed package under test (never the source tree)."""
    name = request.config.getoption("--package")
    if name is None:
        pytest.exit(f"choose a package: --package {'|'.join(PACKAGES)} or KVBRIDGE_PACKAGE", 4)
    return importlib.import_module(PACKAGES[name])


@pytest.fixture(scope="session")
def adapter(kv):
    return TorchAdapter(kv) if REGISTRY[kv.BACKEND]["array"] == "torch" else NumpyAdapter(kv)


@pytest.fixture(scope="session")
def native(adapter):
    return adapter.native
