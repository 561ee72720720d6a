"""kvbridge-torch's CUDA rmsnorm on a real GPU, in one short run: correctness, the tools users put
it through (opcheck, torch.compile, CUDA Graphs, streams) and its speed beside torch's own.

    bash packages/torch/gpu_run.sh                 # on a GPU machine: build, then this
    python packages/torch/gpu_check.py --json docs/gpu_check.json

It records figures and outcomes, never verdicts: the targets are judged where the page is
rendered from this file's JSON (benchmarks/page/cuda.py, docs/cuda.md). Every check runs even if
an earlier one failed, and a check that raises is recorded with its exception. `--device cpu` runs
the correctness checks that do not need CUDA on the CPU kernel (the torch tests do, so that this
script cannot rot between the rare runs on a GPU).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import kvbridge_torch as kv
import torch
import torch.nn.functional as F
from kvbridge_torch import _build_info

# The bytes rule the CPU pages use, from the checkout this script runs in.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from traffic import copy_bytes, rmsnorm_bytes  # noqa: E402

EPS = 1e-6
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# Forward tolerance against a float64 reference: a few units in the last place of each dtype.
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}
BANDWIDTH_SHAPE = (16384, 4096)  # rows x hidden: 128 MiB of bf16 each way, twice the H200's L2
LATENCY_SHAPE = (1, 4096)  # one decode step's row: launch cost, not bandwidth
ROUNDS, ITERS = 7, 100  # alternating rounds of each candidate, calls timed per round


def composite(x, w, eps=EPS):
    """RMSNorm as users write it in PyTorch: float32 math, cast back, then the weight."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def reference(x, w, eps=EPS):
    x64, w64 = x.double(), w.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w64


class Checks:
    """Named outcomes: ok and a detail (the largest error, or the exception raised)."""

    def __init__(self):
        self.results: dict[str, dict] = {}

    def run(self, name: str, fn) -> None:
        try:
            ok, detail = fn()
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
            ok, detail = False, f"{type(e).__name__}: {e}".strip()[:400]
            traceback.print_exc()
        self.results[name] = {"ok": bool(ok), "detail": str(detail)}
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)


def close(got, want, tol) -> tuple[bool, str]:
    err = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    bound = (tol * (1 + want.double().abs())).max().item() if got.numel() else 0.0
    ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
    return ok, f"max |error| {err:.3g} (bound {bound:.3g})"


def forward_cases(device, dtype):
    g = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)

    flat = randn(33 * 1024 + 1)
    return {
        "contiguous": randn(64, 3, 1024),
        "transposed (copied first)": randn(64, 3, 1024).transpose(0, 1),
        "padded rows (read in place)": randn(48, 1100)[:, :1024],
        "odd width (scalar kernel)": randn(33, 1027),
        "unaligned start (scalar kernel)": flat[1:].view(33, 1024),
        "wide row (scalar kernel)": randn(3, 70000),  # past the vector kernel's 8192 vectors
        "1-D": randn(4096),
        "no rows": randn(0, 1024),
    }


def check_forward(checks, device, dtype):
    g = torch.Generator(device="cpu").manual_seed(2)
    for case, x in forward_cases(device, dtype).items():
        w = torch.randn(x.shape[-1], generator=g).to(device=device, dtype=dtype)

        def one(x=x, w=w):
            got = kv.rmsnorm(x, w, EPS)
            if got.dtype != dtype or got.device != x.device or not got.is_contiguous():
                return False, f"{got.dtype} on {got.device}, contiguous: {got.is_contiguous()}"
            return close(got, reference(x, w), TOL[dtype])

        checks.run(f"forward {dtype_name(dtype)}: {case}", one)

    def out_variant():
        x = torch.randn(16, 512, generator=g).to(device=device, dtype=dtype)
        w = torch.randn(512, generator=g).to(device=device, dtype=dtype)
        out = torch.empty_like(x)
        got = kv.rmsnorm(x, w, EPS, out=out)
        return got is out and torch.equal(out, kv.rmsnorm(x, w, EPS)), "out= is the functional's"

    checks.run(f"out= {dtype_name(dtype)}", out_variant)


def check_backward(checks, device, dtype):
    def one():
        g = torch.Generator(device="cpu").manual_seed(1)
        x = torch.randn(32, 7, 256, generator=g).to(device, dtype).requires_grad_()
        w = torch.randn(256, generator=g).to(device, dtype).requires_grad_()
        grad = torch.randn(32, 7, 256, generator=g).to(device, dtype)
        gx, gw = torch.autograd.grad(kv.rmsnorm(x, w, EPS), (x, w), grad)
        x64 = x.detach().double().requires_grad_()
        w64 = w.detach().double().requires_grad_()
        rx, rw = torch.autograd.grad(reference(x64, w64), (x64, w64), grad.double())
        tol = 1e-4 if dtype == torch.float32 else 5e-2
        ok_x, detail_x = close(gx, rx, tol)
        ok_w, detail_w = close(gw, rw, tol * 10)  # a sum over 224 rows
        return ok_x and ok_w, f"grad x {detail_x}; grad weight {detail_w}"

    checks.run(f"backward {dtype_name(dtype)} (against the float64 composite's gradients)", one)


def check_opcheck(checks, device):
    for requires_grad in (False, True):

        def one(requires_grad=requires_grad):
            x = torch.randn(8, 128, device=device, requires_grad=requires_grad)
            w = torch.randn(128, device=device, requires_grad=requires_grad)
            torch.library.opcheck(torch.ops.kvbridge.rmsnorm.default, (x, w, EPS))
            return True, "schema, fake tensor, autograd registration, AOT dispatch"

        checks.run(f"opcheck (requires_grad={requires_grad})", one)


def check_compile(checks, device):
    def one():
        torch._dynamo.reset()
        x = torch.randn(64, 1024, device=device, dtype=torch.bfloat16)
        w = torch.randn(1024, device=device, dtype=torch.bfloat16)
        # inductor, as users compile, on the GPU; on the CPU (a check of this script) aot_eager,
        # which traces the same graph without generating and compiling C++.
        backend = "inductor" if device == "cuda" else "aot_eager"
        compiled = torch.compile(lambda x, w: kv.rmsnorm(x, w, EPS) * 2, fullgraph=True,
                                 backend=backend)  # fmt: skip
        got = compiled(x, w)
        return torch.equal(got, kv.rmsnorm(x, w, EPS) * 2), f"{backend}: equal to eager"

    checks.run("torch.compile(fullgraph=True)", one)


def check_errors(checks, device):
    def one():
        x = torch.randn(4, 8, device=device)
        try:
            kv.rmsnorm(x, torch.ones(8, device="cpu"), EPS)
        except ValueError as e:
            return "cpu" in str(e), f"ValueError: {e}"
        return False, "no error"

    checks.run("x on the GPU, weight on the CPU: ValueError naming both", one)


def check_graph(checks):
    def one():
        x = torch.randn(256, 1024, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(1024, device="cuda", dtype=torch.bfloat16)
        graph, y = graph_of(lambda: kv.rmsnorm(x, w, EPS), 1)
        fresh = torch.randn_like(x)
        x.copy_(fresh)  # replay reads the captured input's memory: new values, same tensor
        graph.replay()
        torch.cuda.synchronize()
        eager = kv.rmsnorm(fresh, w, EPS)
        return torch.equal(y, eager), "replay of new input bitwise equal to eager"

    checks.run("CUDA Graph: capture, replay equal to eager", one)


def check_current_stream(checks):
    def one():
        x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
        want = kv.rmsnorm(x, w, EPS)
        torch.cuda.synchronize()
        side = torch.cuda.Stream()  # torch's pool streams do not wait for the legacy default one
        with torch.cuda.stream(side):
            staged = torch.zeros_like(x)
            torch.cuda._sleep(50_000_000)  # the copy below lands late on this stream...
            staged.copy_(x)
            got = kv.rmsnorm(staged, w, EPS)  # ...so a kernel on another stream reads zeros
        side.synchronize()
        return torch.equal(got, want), "on a side stream, after a delayed write: equal"

    checks.run("launched on the current stream", one)


def timed(fn, iters=ITERS) -> float:
    """Microseconds per call, by CUDA events around `iters` calls."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


def alternating(candidates: dict, iters=ITERS) -> dict[str, list[float]]:
    """Every candidate timed in each of ROUNDS rounds, in turn: drift touches all alike."""
    for fn in candidates.values():
        for _ in range(3):
            fn()  # warm-up (compiles, allocator)
    torch.cuda.synchronize()
    rounds = {name: [] for name in candidates}
    for r in range(ROUNDS + 1):  # round 0 brings the clocks up, and is dropped
        for name, fn in candidates.items():
            us = timed(fn, iters)
            if r:
                rounds[name].append(round(us, 3))
    return rounds


def graph_of(fn, calls: int):
    """`calls` calls of fn captured in a CUDA Graph, and the last one's output (its static
    output: each replay writes it again)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the default stream, as capture requires
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            out = fn()
    return graph, out


def latency() -> dict:
    """Per call at one decode row: eager (Python, dispatch, launch) against a graph's replay."""
    x = torch.randn(*LATENCY_SHAPE, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(LATENCY_SHAPE[-1], device="cuda", dtype=torch.bfloat16)
    calls = 100  # kernels per graph: a replay's own launch cost is shared, as in a model's graph
    ours = lambda: kv.rmsnorm(x, w, EPS)  # noqa: E731
    torchs = lambda: F.rms_norm(x, (LATENCY_SHAPE[-1],), w, EPS)  # noqa: E731
    (ours_graph, _), (torchs_graph, _) = graph_of(ours, calls), graph_of(torchs, calls)
    rounds = alternating({
        "kvbridge rmsnorm, eager": ours,
        "kvbridge rmsnorm, graph replay": ours_graph.replay,
        "F.rms_norm, eager": torchs,
        "F.rms_norm, graph replay": torchs_graph.replay,
    }, iters=200)  # fmt: skip
    for name in rounds:
        if "graph" in name:
            rounds[name] = [round(us / calls, 4) for us in rounds[name]]
    return {"shape": list(LATENCY_SHAPE), "dtype": "bfloat16", "calls_per_graph": calls,
            "us_per_call": rounds}  # fmt: skip


def bytes_moved(x, w, names) -> dict[str, int]:
    """Each candidate's bytes, by the CPU pages' rule (benchmarks/traffic.py): a copy's, or an
    RMSNorm's."""
    nbytes = lambda t: t.numel() * t.element_size()  # noqa: E731
    return {name: copy_bytes(nbytes(x)) if "copy" in name else rmsnorm_bytes(nbytes(x), nbytes(w))
            for name in names}  # fmt: skip


def bandwidth(checks) -> dict:
    rows, cols = BANDWIDTH_SHAPE
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
    out, copy_to = torch.empty_like(x), torch.empty_like(x)
    torch._dynamo.reset()
    compiled = torch.compile(composite, fullgraph=True)
    candidates = {
        "kvbridge rmsnorm": lambda: kv.rmsnorm(x, w, EPS),
        "kvbridge rmsnorm, out=": lambda: kv.rmsnorm(x, w, EPS, out=out),
        "F.rms_norm": lambda: F.rms_norm(x, (cols,), w, EPS),
        "torch.compile of the composite": lambda: compiled(x, w),
        "device-to-device copy": lambda: copy_to.copy_(x),
    }

    def agree():  # the candidates compute the same thing (else their speeds mean nothing)
        want = reference(x[:256], w)
        worst = max(((fn()[:256].double() - want).abs() / (1 + want.abs())).max().item()
                    for name, fn in candidates.items() if "copy" not in name)  # fmt: skip
        return worst < 0.02, f"largest |difference| / (1 + |float64's|), 256 rows: {worst:.3g}"

    checks.run("the timed rmsnorms agree", agree)
    rounds = alternating(candidates)
    return {
        "shape": list(BANDWIDTH_SHAPE), "dtype": "bfloat16", "rounds": ROUNDS, "iters": ITERS,
        "bytes": bytes_moved(x, w, candidates),
        "us_per_call": rounds,
    }  # fmt: skip


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def machine(device: str) -> dict:
    about = {
        "date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "built against torch": _build_info.TORCH_VERSION,
        "cuda kernels": _build_info.CUDA_KERNELS,
        "nvcc": getattr(_build_info, "CUDA_COMPILER", None),
        "cuda architectures": getattr(_build_info, "CUDA_ARCHITECTURES", None),
    }  # fmt: skip
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        about |= {"gpu": p.name, "capability": f"{p.major}.{p.minor}",
                  "multiprocessors": p.multi_processor_count,
                  "memory GiB": round(p.total_memory / 2**30, 1),
                  "L2 MiB": round(getattr(p, "L2_cache_size", 0) / 2**20, 1) or None,
                  "driver": driver_version()}  # fmt: skip
    return about


def run(device: str) -> dict:
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --device cpu for the checks that need none")
    result = {"schema": 1, "device": device, "machine": machine(device)}
    print(json.dumps(result["machine"]), flush=True)
    checks = Checks()
    for dtype in DTYPES:
        check_forward(checks, device, dtype)
        check_backward(checks, device, dtype)
    check_opcheck(checks, device)
    check_compile(checks, device)
    if device == "cuda":
        check_errors(checks, device)
        check_graph(checks)
        check_current_stream(checks)
        for name, measure in (("latency", latency), ("bandwidth", lambda: bandwidth(checks))):
            try:
                result[name] = measure()
                for row, us in result[name]["us_per_call"].items():
                    print(f"  {name} {row}: median {statistics.median(us):.3f} us", flush=True)
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                traceback.print_exc()
                result[name] = f"{type(e).__name__}: {e}"[:400]
    result["checks"] = checks.results
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--json", type=Path, help="write the run here")
    args = parser.parse_args(argv)
    result = run(args.device)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    failed = [name for name, c in result["checks"].items() if not c["ok"]]
    print(f"{len(result['checks']) - len(failed)} checks passed, {len(failed)} failed: {failed}")
    return result


if __name__ == "__main__":
    main()
