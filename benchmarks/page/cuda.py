"""The CUDA page, docs/cuda.md: what the last recorded GPU run of kvbridge's CUDA kernels showed.

    python benchmarks/page/cuda.py          # render docs/cuda.md from docs/gpu_check.json
    python benchmarks/page/cuda.py --check  # fail if docs/cuda.md is not what that renders

Its figures come from one file, docs/gpu_check.json, which packages/torch/gpu_run.sh writes on a
GPU machine (CI has none, so the run is recorded, dated and committed, not made by make report).
With no file, the page says no run is recorded and shows no figure. The targets are spec.py's
(GPU_TARGETS), judged by cells.verdict, the rule the health page's targets use; which packages
have CUDA kernels, and why the others have none, is the registry's `cuda`. The prose is the
templates' (cuda.md.in, cuda-not-run.md.in). make report renders this page too.
"""

from __future__ import annotations

import json
import statistics
import string
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import spec  # noqa: E402
import stats  # noqa: E402
from page.cells import distribution, said_list, table, verdict, verdict_summary  # noqa: E402

RUN = ROOT / "docs" / "gpu_check.json"
PAGE = ROOT / "docs" / "cuda.md"
HERE = Path(__file__).resolve().parent
TEMPLATES = {True: HERE / "cuda.md.in", False: HERE / "cuda-not-run.md.in"}
COPY = "device-to-device copy"


def packages_table() -> str:
    """Each package that takes torch tensors, and its CUDA kernels or the reason it has none
    (the packages of numpy arrays are one sentence of the template)."""
    rows = []
    for name, p in spec.REGISTRY.items():
        if p["array"] != "torch":
            continue
        if cuda := spec.registry.cuda_torch(name):
            rows.append([distribution(name), "rmsnorm, forward and backward",
                         f"compiled with nvcc against torch {cuda[0]} by `cuda-{name}` in "
                         f"`make test-all`"])  # fmt: skip
        else:
            rows.append([distribution(name), "none", p["cuda"]])
    return table(["package", "CUDA kernels", "where built, or why none"], rows)


def numpy_packages() -> str:
    return said_list([distribution(n) for n, p in spec.REGISTRY.items() if p["array"] != "torch"])


def median_range(values: list[float], digits: int = 1) -> str:
    lo, hi = stats.middle_80(values)
    return f"{statistics.median(values):.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def bandwidth_ratio(bw: dict, ours: str, theirs: str) -> stats.Ratio:
    """Bytes per second of `ours` over `theirs`, round by round."""
    b = bw["bytes"]
    return stats.Ratio([(b[ours] / o) / (b[theirs] / t) for o, t in
                        zip(bw["us_per_call"][ours], bw["us_per_call"][theirs], strict=True)])  # fmt: skip


def bandwidth_table(bw: dict) -> str:
    rows = []
    for name, us in bw["us_per_call"].items():
        tbs = bw["bytes"][name] / statistics.median(us) / 1e6
        r = bandwidth_ratio(bw, name, COPY)
        rows.append([name, median_range(us), f"{tbs:.2f}", f"{r.median:.2f}×"])
    return table(["", "µs per call, median (10th–90th percentile)", "TB/s", "× the copy's"],
                 rows)  # fmt: skip


def bandwidth_values(bw: dict | str | None) -> dict[str, str]:
    """The bandwidth section's values; a measurement that raised (its text) is said instead."""
    if not isinstance(bw, dict):
        return {"bandwidth_shape": "", "bandwidth_rounds": "",
                "bandwidth_table": f"Not measured: {bw}"}  # fmt: skip
    return {"bandwidth_shape": " × ".join(map(str, bw["shape"])),
            "bandwidth_rounds": f"{bw['rounds']} rounds of {bw['iters']} calls",
            "bandwidth_table": bandwidth_table(bw)}  # fmt: skip


def latency_values(lat: dict | str | None) -> dict[str, str]:
    """The launch-cost section's values, or what stopped its measurement."""
    if not isinstance(lat, dict):
        return {"latency_shape": "", "calls_per_graph": "", "latency_table": f"Not measured: {lat}"}
    rows = [[name, median_range(us, 2)] for name, us in lat["us_per_call"].items()]
    return {"latency_shape": " × ".join(map(str, lat["shape"])),
            "calls_per_graph": str(lat["calls_per_graph"]),
            "latency_table": table(["", "µs per call, median (10th–90th percentile)"], rows)}  # fmt: skip


def targets_rows(run: dict) -> list[list[str]]:
    rows = []
    bw = run.get("bandwidth")
    for t in spec.GPU_TARGETS:
        if not isinstance(bw, dict):
            rows.append([t.name, "not measured", f"the run's bandwidth: {bw}"])
            continue
        r = bandwidth_ratio(bw, t.numerator, t.denominator)
        lo, hi = r.spread
        rows.append([t.name, f"{r.median:.2f}× ({lo:.2f}–{hi:.2f})", verdict(r, t)])
    for name in spec.GPU_CHECK_TARGETS:
        check = run["checks"].get(name)
        outcome = "not run" if check is None else ("met" if check["ok"] else "**not met**")
        rows.append([name, check["detail"] if check else "", outcome])
    return rows


def architectures(cmake_list: str | None) -> str:
    """CMake's CUDA architectures ("80;90") as nvcc names them ("sm_80, sm_90")."""
    return ", ".join(a if not a.isdigit() else f"sm_{a}" for a in (cmake_list or "?").split(";"))


def machine_text(m: dict) -> str:
    parts = [f"{m['gpu']} (compute capability {m['capability']}, {m['multiprocessors']} SMs, "
             f"{m['memory GiB']} GiB" + (f", {m['L2 MiB']} MiB L2)" if m.get("L2 MiB") else ")"),
             f"driver {m['driver'] or 'unread'}", f"torch {m['torch']} (CUDA {m['cuda']})",
             f"Python {m['python']}",
             f"kernels built by nvcc {m['nvcc']} for {architectures(m['cuda architectures'])}"]  # fmt: skip
    return ", ".join(parts)


def values(run: dict | None) -> dict[str, str]:
    common = {
        "packages_table": packages_table(),
        "numpy_packages": numpy_packages(),
        "gpu_package": distribution(spec.GPU_PACKAGE),
        "cuda_env": f"cuda-{spec.GPU_PACKAGE}",
        "cuda_torch": spec.registry.cuda_torch(spec.GPU_PACKAGE)[0],
    }
    if run is None:
        return common
    checks = run["checks"]
    failed = [name for name, c in checks.items() if not c["ok"]]
    targets = targets_rows(run)
    return common | bandwidth_values(run.get("bandwidth")) | latency_values(run.get("latency")) | {
        "date": run["machine"]["date"],
        "machine": machine_text(run["machine"]),
        "checks_passed": f"{len(checks) - len(failed)} of {len(checks)}",
        "checks_failed": ("none failed" if not failed else
                          "failed: " + "; ".join(f"{n} ({checks[n]['detail']})" for n in failed)),
        "targets_summary": verdict_summary([row[2] for row in targets]),
        "targets_table": table(["target", "figure: ratio (10th–90th percentile), or the check",
                                "verdict"], targets),
        "checks_table": table(["check", "outcome", "detail"],
                              [[n, "ok" if c["ok"] else "**failed**", c["detail"]]
                               for n, c in checks.items()]),
    }  # fmt: skip


def render(run: dict | None) -> str:
    return string.Template(TEMPLATES[run is not None].read_text()).substitute(values(run))


def recorded() -> dict | None:
    return json.loads(RUN.read_text()) if RUN.is_file() else None


def write() -> None:
    PAGE.write_text(render(recorded()))


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail if the page is stale")
    if parser.parse_args().check:
        if not PAGE.is_file() or PAGE.read_text() != render(recorded()):
            sys.exit(f"{PAGE.relative_to(ROOT)} is not what {RUN.relative_to(ROOT)} and the "
                     "templates render: run python benchmarks/page/cuda.py")  # fmt: skip
        return
    write()
    print(f"wrote {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
