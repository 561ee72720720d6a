"""The bytes behind every GB/s (benchmarks/traffic.py): one rule, and both the CPU pages'
RMSNorm cases and the GPU check count by it. Each count is checked against the arrays a pass
touches, counted here independently."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import traffic  # noqa: E402


def test_an_rmsnorm_moves_x_in_y_out_and_w_in_and_a_copy_x_twice():
    x, w, y = (
        np.ones((32, 4096), np.float32),
        np.ones(4096, np.float32),
        np.empty((32, 4096), np.float32),
    )
    assert traffic.rmsnorm_bytes(x.nbytes, w.nbytes) == x.nbytes + y.nbytes + w.nbytes
    assert traffic.copy_bytes(x.nbytes) == x.nbytes + y.nbytes


# torch's own, when its cases import inductor (torch.compile of the composite)
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_the_cpu_pages_rmsnorm_cases_count_by_the_rule():
    pytest.importorskip("kvbridge_probes")
    from measuring import bench_rmsnorm

    shape = (8, 256)
    x, w, _ = bench_rmsnorm._inputs(shape)
    copies = ("copy", "numpy alloc copy", "numpy one pass", "torch alloc copy", "torch one pass")
    counted = [c for c in bench_rmsnorm._group(shape, 1, quick=True).cases if "bytes" in c.meta]
    assert any(c.meta["package"] == "copy" for c in counted), [c.key for c in counted]
    for case in counted:
        copy_like = case.meta["package"] in copies
        want = 2 * x.nbytes if copy_like else 2 * x.nbytes + w.nbytes
        assert case.meta["bytes"] == want, case.key


def test_the_gpu_check_counts_by_the_same_rule():
    """Its count is the CPU pages' (three times x's bytes, say, would overstate every GPU
    bandwidth by half, and the 90 % target with it)."""
    torch = pytest.importorskip("torch")
    script = ROOT / "packages" / "torch" / "gpu_check.py"
    if importlib.util.find_spec("kvbridge_torch") is None:
        pytest.skip("kvbridge_torch is not installed in this environment")
    spec = importlib.util.spec_from_file_location("gpu_check", script)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    x, w = torch.ones(16, 4096, dtype=torch.bfloat16), torch.ones(4096, dtype=torch.bfloat16)
    found = gpu_check.bytes_moved(x, w, ["kvbridge rmsnorm", "device-to-device copy"])
    assert found == {"kvbridge rmsnorm": 2 * 16 * 4096 * 2 + 4096 * 2,
                     "device-to-device copy": 2 * 16 * 4096 * 2}  # fmt: skip
