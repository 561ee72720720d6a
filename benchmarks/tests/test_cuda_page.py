"""The CUDA page (benchmarks/page/cuda.py): rendered from the recorded GPU run alone, its targets
judged by the health page's rule, and never stale. Run by `tox -e semantics`."""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import spec  # noqa: E402
from page import cuda  # noqa: E402

ROWS = ("kvbridge rmsnorm", "kvbridge rmsnorm, out=", "F.rms_norm",
        "torch.compile of the composite", "device-to-device copy")  # fmt: skip
GRAPH = spec.GPU_CHECK_TARGETS[0]


def a_run(ours_us: list[float]) -> dict:
    """A run's shape, as gpu_check.py writes it, with made-up figures (never on a page)."""
    moved = 2 * 16384 * 4096 * 2
    return {
        "schema": 1, "device": "cuda",
        "machine": {"date": "2026-01-01", "python": "3.12.3", "torch": "2.11.0+cu130",
                    "cuda": "13.0", "nvcc": "13.0.88", "cuda architectures": "90", "gpu": "GPU",
                    "capability": "9.0", "multiprocessors": 132, "memory GiB": 139.8,
                    "L2 MiB": 60.0, "driver": "580"},
        "checks": {"forward bfloat16: contiguous": {"ok": True, "detail": "max |error| 0.01"},
                   GRAPH: {"ok": True, "detail": "equal"}},
        "latency": {"shape": [1, 4096], "calls_per_graph": 100,
                    "us_per_call": {"kvbridge rmsnorm, eager": [9.0] * 7,
                                    "kvbridge rmsnorm, graph replay": [2.0] * 7}},
        "bandwidth": {"shape": [16384, 4096], "rounds": 7, "iters": 50,
                      "bytes": dict.fromkeys(ROWS, moved),
                      "us_per_call": {"kvbridge rmsnorm": ours_us, "kvbridge rmsnorm, out=": ours_us,
                                      "F.rms_norm": [90.0] * 7,
                                      "torch.compile of the composite": [80.0] * 7,
                                      "device-to-device copy": [64.0] * 7}},
    }  # fmt: skip


def verdicts(run: dict) -> dict[str, str]:
    return {row[0]: row[2] for row in cuda.targets_rows(run)}


def test_the_page_is_what_the_recorded_run_renders():
    """docs/cuda.md is rendered from docs/gpu_check.json (or from its absence) and the templates,
    with nothing typed in: a template or a rule changed without rendering again fails here."""
    assert cuda.PAGE.read_text() == cuda.render(cuda.recorded())


def test_targets_follow_the_rounds():
    fast = verdicts(a_run([68.0] * 7))  # 0.94x the copy's bandwidth, faster than both
    assert set(fast.values()) == {"met"}
    slow = verdicts(a_run([85.0] * 7))  # 0.75x the copy's: faster than F.rms_norm only
    assert slow == {spec.GPU_TARGETS[0].name: "**not met**", spec.GPU_TARGETS[1].name: "met",
                    spec.GPU_TARGETS[2].name: "**not met**", GRAPH: "met"}  # fmt: skip
    torn = verdicts(a_run([68.0, 75.0, 68.0, 75.0, 68.0, 75.0, 68.0]))  # rounds on both sides
    assert torn[spec.GPU_TARGETS[0].name] == "within noise"
    failed = a_run([68.0] * 7)
    failed["checks"][GRAPH] = {"ok": False, "detail": "replay differs"}
    assert verdicts(failed)[GRAPH] == "**not met**"


def test_a_failed_check_is_named_first():
    run = a_run([68.0] * 7)
    run["checks"]["launched on the current stream"] = {"ok": False, "detail": "differs"}
    first = cuda.render(run).split("\n## ")[0]
    assert "2 of 3" in first and "launched on the current stream (differs)" in first


def test_a_measurement_that_raised_is_said_not_hidden():
    run = copy.deepcopy(a_run([68.0] * 7))
    run["bandwidth"] = "RuntimeError: out of memory"
    page = cuda.render(run)
    assert "Not measured: RuntimeError: out of memory" in page
    assert all(v == "not measured" for k, v in ((r[0], r[1]) for r in cuda.targets_rows(run))
               if k != GRAPH)  # fmt: skip


def test_the_targets_name_rows_gpu_check_times():
    """The targets' rows are gpu_check.py's names (its JSON's keys): a renamed row there would
    leave a target judging nothing."""
    script = (cuda.ROOT / "packages" / "torch" / "gpu_check.py").read_text()
    timed = set(re.findall(r'^\s+"([^"]+)": lambda', script, re.M))
    assert set(ROWS) == timed
    for t in spec.GPU_TARGETS:
        assert {t.numerator, t.denominator} <= timed, t
    for name in spec.GPU_CHECK_TARGETS:
        assert f'"{name}"' in script


@pytest.mark.parametrize("name", [n for n, p in spec.REGISTRY.items() if p["array"] == "torch"])
def test_each_torch_package_has_kernels_or_a_reason(name):
    row = next(r for r in cuda.packages_table().splitlines()
               if r.startswith(f"| {cuda.distribution(name)} |"))  # fmt: skip
    if name in spec.CUDA_PACKAGES:
        assert f"cuda-{name}" in row and spec.registry.cuda_torch(name)[0] in row
    else:
        assert spec.REGISTRY[name]["cuda"] in row
