"""Every test is bounded, so a hang fails by name instead of running into CI's limit.

- pytest: the repository's settings (pyproject.toml) give every test faulthandler's watchdog,
  which prints every thread's traceback and ends the run. A test that hangs on purpose, once in
  Python and once in C with the GIL held (where no Python-level timer could run), must fail
  with its name in the output, run with those settings and only the limit shortened.
- ctest: every test of the core has a TIMEOUT (read from ctest itself after configuring).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]

HANGS = textwrap.dedent(
    """
    import ctypes
    import threading

    def test_hangs_in_python():
        threading.Event().wait()

    def test_hangs_in_c_holding_the_gil():
        ctypes.PyDLL(None).sleep(3600)  # PyDLL: the GIL stays held through the call
    """
)


def test_the_settings_bound_every_test():
    assert float(SETTINGS["faulthandler_timeout"]) > 0
    assert SETTINGS["faulthandler_exit_on_timeout"] is True


@pytest.mark.parametrize("name", ["test_hangs_in_python", "test_hangs_in_c_holding_the_gil"])
def test_a_test_that_hangs_fails_by_name(tmp_path, name):
    (tmp_path / "test_hang.py").write_text(HANGS)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", f"test_hang.py::{name}", "-p", "no:cacheprovider",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
         "-o", "faulthandler_timeout=2"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Timeout" in output and f"in {name}" in output, output
    assert time.monotonic() - started < 60


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake (tox -e lint has it)")
def test_every_ctest_test_has_a_timeout(tmp_path):
    subprocess.run(
        ["cmake", "-S", str(ROOT / "common_cpp"), "-B", str(tmp_path), "-DKVBRIDGE_CUDA=OFF"],
        capture_output=True, check=True, timeout=300,
    )  # fmt: skip
    listed = subprocess.run(
        ["ctest", "--test-dir", str(tmp_path), "--show-only=json-v1"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    tests = json.loads(listed.stdout)["tests"]
    assert tests
    unbounded = [
        t["name"]
        for t in tests
        if not any(p["name"] == "TIMEOUT" and p["value"] > 0 for p in t.get("properties", []))
    ]
    assert not unbounded, f"ctest tests without a TIMEOUT: {unbounded}"
