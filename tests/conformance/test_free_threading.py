"""docs/contract.md, "Free-threaded Python": on an interpreter built without the GIL, every
package that can run there declares so, in its technology's own way, and importing it leaves the
GIL off. (The pool's thread safety with the GIL off is test_threads.py's, run there too.)"""

import sys
import sysconfig
import types

import pytest

FREE_THREADED = sysconfig.get_config_var("Py_GIL_DISABLED") == 1
pytestmark = pytest.mark.skipif(not FREE_THREADED, reason="a promise of free-threaded Pythons")


def test_importing_the_package_leaves_the_gil_off(kv, import_warnings):
    # A module that does not declare it runs without the GIL makes the interpreter turn the GIL
    # back on for the whole process, with a RuntimeWarning: either fails this.
    runtime = [str(w.message) for w in import_warnings if issubclass(w.category, RuntimeWarning)]
    assert not runtime, f"importing {kv.__name__} warned: {runtime}"
    assert not sys._is_gil_enabled(), f"importing {kv.__name__} turned the GIL on"


def is_immortal(obj) -> bool:
    if hasattr(sys, "_is_immortal"):  # Python 3.14
        return sys._is_immortal(obj)
    return sys.getrefcount(obj) >= 2**32 - 1  # 3.13t reports an immortal object's count so


@pytest.mark.parametrize("name", ["count_eos", "common_prefix", "rmsnorm"])
def test_calls_from_threads_write_no_function_reference_count(kv, name):
    # Every call through `kv.<name>` takes a reference to the function: were its count a real
    # one, every calling thread would write the same shared cache line on every call
    # (packages/args/immortal.hpp). The compiled front ends make their functions immortal.
    function = getattr(kv, name)
    if isinstance(function, types.FunctionType):
        pytest.skip("a Python function: the interpreter counts its references its own way")
    assert is_immortal(function), f"{kv.__name__}.{name} has a reference count of its own"
