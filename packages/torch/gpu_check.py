"""The CUDA rmsnorm on a real GPU: correctness, opcheck and bandwidth, in one short run.

    pip install --no-build-isolation ./packages/torch && python packages/torch/gpu_check.py

CI has no GPU (the CUDA tests skip there); run this where one is. It prints one line per check
and a JSON summary last. `--device cpu` runs the correctness checks on the CPU kernel instead.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import kvbridge_torch as kv
import torch
import torch.nn.functional as F

EPS = 1e-6
TOL = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


def composite(x, w, eps=EPS):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def check_forward(device, dtype, results):
    g = torch.Generator(device="cpu").manual_seed(0)
    base = torch.randn(64, 3, 1024, generator=g).to(device=device, dtype=dtype)
    w = torch.randn(1024, generator=g).to(device=device, dtype=dtype)
    padded = torch.randn(48, 1100, generator=g).to(device=device, dtype=dtype)[:, :1024]
    cases = {
        "contiguous": base,
        "transposed": base.transpose(0, 1),  # not collapsible: copied, then the fast path
        "padded rows": padded,  # rows 1100 apart, read in place
        "odd width": torch.randn(33, 1027, generator=g).to(device=device, dtype=dtype),
        "1-D": torch.randn(4096, generator=g).to(device=device, dtype=dtype),
    }
    for name, x in cases.items():
        wx = w if x.shape[-1] == 1024 else torch.randn(x.shape[-1], generator=g).to(device, dtype)
        want = composite(x.double(), wx.double())
        got = kv.rmsnorm(x, wx, EPS)
        ok = got.dtype == dtype and got.is_contiguous()
        tol = TOL[dtype]
        ok = ok and torch.allclose(got.double(), want, rtol=tol, atol=tol)
        out = torch.empty_like(got)
        ok = ok and kv.rmsnorm(x, wx, EPS, out=out) is out and torch.equal(out, got)
        results[f"forward {dtype} {name}"] = bool(ok)


def check_backward(device, dtype, results):
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(32, 7, 256, generator=g).to(device, dtype).requires_grad_()
    w = torch.randn(256, generator=g).to(device, dtype).requires_grad_()
    grad = torch.randn(32, 7, 256, generator=g).to(device, dtype)
    gx, gw = torch.autograd.grad(kv.rmsnorm(x, w, EPS), (x, w), grad)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    rx, rw = torch.autograd.grad(composite(x64, w64), (x64, w64), grad.double())
    tol = 1e-4 if dtype == torch.float32 else 5e-2
    ok = torch.allclose(gx.double(), rx, rtol=tol, atol=tol)
    ok = ok and torch.allclose(gw.double(), rw, rtol=tol, atol=tol * 10)
    results[f"backward {dtype}"] = bool(ok)


def check_opcheck(device, results):
    for requires_grad in (False, True):
        x = torch.randn(8, 128, device=device, requires_grad=requires_grad)
        w = torch.randn(128, device=device, requires_grad=requires_grad)
        try:
            torch.library.opcheck(torch.ops.kvbridge.rmsnorm.default, (x, w, EPS))
            results[f"opcheck requires_grad={requires_grad}"] = True
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            print("opcheck failed:", e)
            results[f"opcheck requires_grad={requires_grad}"] = False


def bandwidth(fn, bytes_moved, warmup=10, iters=100):
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3 / iters
    return bytes_moved / seconds / 1e12, seconds * 1e6


def benchmark(results):
    rows, cols, dtype = 16384, 4096, torch.bfloat16
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    w = torch.randn(cols, device="cuda", dtype=dtype)
    out = torch.empty_like(x)
    moved = 2 * x.numel() * x.element_size() + w.numel() * w.element_size()  # read x, write y
    op = torch.ops.kvbridge.rmsnorm.out
    figures = {
        "kvbridge rmsnorm (out=)": bandwidth(lambda: op(x, w, EPS, out=out), moved),
        "kvbridge rmsnorm": bandwidth(lambda: kv.rmsnorm(x, w, EPS), moved),
        "torch F.rms_norm": bandwidth(lambda: F.rms_norm(x, (cols,), w, EPS), moved),
        "device-to-device copy": bandwidth(lambda: out.copy_(x), 2 * x.numel() * x.element_size()),
    }
    for name, (tbps, us) in figures.items():
        print(f"  {name:28s} {tbps:5.2f} TB/s  {us:8.1f} us")
    results["bandwidth TB/s"] = {k: round(v[0], 3) for k, v in figures.items()}
    results["bandwidth target 3.8 TB/s met"] = figures["kvbridge rmsnorm (out=)"][0] >= 3.8


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    device = parser.parse_args().device
    results: dict = {}
    if device == "cuda":
        assert torch.cuda.is_available(), "no CUDA device"
        results["device"] = torch.cuda.get_device_name()
    results.update(
        torch=torch.__version__,
        cuda=torch.version.cuda,
        python=platform.python_version(),
        date=time.strftime("%Y-%m-%d"),
    )
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        check_forward(device, dtype, results)
        check_backward(device, dtype, results)
    check_opcheck(device, results)
    if device == "cuda":
        benchmark(results)
    for key, value in results.items():
        print(f"{key}: {value}")
    checks = [v for k, v in results.items() if isinstance(v, bool) and "target" not in k]
    print(json.dumps(results))
    print(f"{sum(checks)} passed, {len(checks) - sum(checks)} failed")


if __name__ == "__main__":
    main()
