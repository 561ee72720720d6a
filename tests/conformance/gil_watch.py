"""A pytest plugin: on a free-threaded Python, every test leaves the GIL as it found it, off
(docs/contract.md, "Free-threaded Python": the GIL stays off throughout, not only at import).
The conformance suite loads it from its conftest.py, and tools/own_tests.py loads it (-p
gil_watch) for the packages' own tests.

Two allowances, each named, for a module that is not kvbridge's and has not declared that it
runs without the GIL, so that importing it turns the GIL on for the whole process:
- `compiler`: the test loads torch's compiler (dynamo and inductor: opcheck, torch.compile,
  FakeTensorMode), which imports triton (seen: PyPI's torch 2.12.0 on 3.13t). Such a test loads
  the compiler first, here, and fails unless the warning that turned the GIL on names triton.
- `gil_back_on`: the test builds and imports a module with its technology's defaults, which
  declare nothing; the test itself asserts that the GIL came back on and who turned it on.
Every such test runs after all the others, so that no other test runs with the GIL it brought
back: `gil_back_on` first, then `compiler` (only the first to turn the GIL on can see who did:
kvbridge-torch's env sees its probe module do it, kvbridge-torch-stable's, which has no such
test, sees triton do it).
"""

from __future__ import annotations

import sys
import sysconfig
import warnings

import pytest

FREE_THREADED = sysconfig.get_config_var("Py_GIL_DISABLED") == 1


# The markers (declared in pyproject.toml), in the order their tests run, after every other test.
LAST = ("gil_back_on", "compiler")


def last(item: pytest.Item) -> int:
    """0 for a test that must leave the GIL off, else 1 + its marker's place in LAST."""
    return next((1 + i for i, m in enumerate(LAST) if item.get_closest_marker(m)), 0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if FREE_THREADED:  # a stable sort: those that may turn the GIL on last, in their order
        items.sort(key=last)


@pytest.fixture(autouse=True)
def gil_stays_off(request: pytest.FixtureRequest):
    if not FREE_THREADED or sys._is_gil_enabled():
        yield  # a GIL build, or a session run with PYTHON_GIL=1: nothing to watch
        return
    if not last(request.node):
        yield
        assert not sys._is_gil_enabled(), f"the GIL was turned on during {request.node.name}"
        return
    if request.node.get_closest_marker("compiler") is None:
        yield  # gil_back_on: the test asserts what turned it on
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch._dynamo  # noqa: F401
        import torch._inductor  # noqa: F401
    if sys._is_gil_enabled():
        said = [str(w.message) for w in caught if "global interpreter lock" in str(w.message)]
        assert said and all("'triton." in m for m in said), f"loading torch's compiler: {said}"
    yield
