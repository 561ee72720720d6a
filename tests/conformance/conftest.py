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
import sys
import warnings

import pytest
from common import PACKAGES, REGISTRY, NumpyAdapter, TorchAdapter
from gil_watch import gil_stays_off  # noqa: F401 - autouse: the GIL stays off throughout

IMPORT_WARNINGS: list[warnings.WarningMessage] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--package",
        choices=sorted(PACKAGES),
        default=os.environ.get("KVBRIDGE_PACKAGE"),
        help="which installed kvbridge package to test (default: $KVBRIDGE_PACKAGE)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    gil_on = getattr(sys, "_is_gil_enabled", lambda: True)()  # Python 3.13 and later
    gil = "" if gil_on else " (free-threaded Python, GIL off)"
    return f"kvbridge package under test: {config.getoption('--package')}{gil}"


@pytest.fixture(scope="session")
def kv(request: pytest.FixtureRequest):
    """The installed package under test (never the source tree)."""
    name = request.config.getoption("--package")
    if name is None:
        pytest.exit(f"choose a package: --package {'|'.join(PACKAGES)} or KVBRIDGE_PACKAGE", 4)
    # Imported once, here: what the import warned is kept for test_free_threading.py (on a
    # free-threaded Python a module that does not declare it runs without the GIL warns, and
    # turns the GIL back on).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(PACKAGES[name])
    IMPORT_WARNINGS.extend(caught)
    return module


@pytest.fixture(scope="session")
def import_warnings(kv) -> list[warnings.WarningMessage]:
    """The warnings importing the package raised."""
    return IMPORT_WARNINGS


@pytest.fixture(scope="session")
def adapter(kv):
    return TorchAdapter(kv) if REGISTRY[kv.BACKEND]["array"] == "torch" else NumpyAdapter(kv)


@pytest.fixture(scope="session")
def native(adapter):
    return adapter.native
