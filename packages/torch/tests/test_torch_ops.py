"""torch-only behaviour (packages/torch/contract.md, "The torch package, in addition"): schemas,
opcheck, gradients, torch.compile, CUDA. Run against both torch packages (KVBRIDGE_PACKAGE:
torch, the classic TORCH_LIBRARY one, or torch_stable, its stable-ABI twin); the tests of what
only the classic one has say so."""

import functools
import importlib
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
_REGISTRY = json.loads((ROOT / "packages" / "registry.json").read_text())["packages"]
MODULE = {p["name"]: p["module"] for p in _REGISTRY}[os.environ.get("KVBRIDGE_PACKAGE", "torch")]
kv = importlib.import_module(MODULE)
OPS = kv._testing.OPS  # torch.ops.<the package's namespace>
NAMESPACE = OPS.name
classic_only = pytest.mark.skipif(
    kv.BACKEND != "torch",
    reason="kvbridge-torch's own: custom classes, CUDA kernels, its torch pin",
)


def composite(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def test_every_function_is_an_op_with_a_schema():
    for name in ("common_prefix", "count_eos", "rmsnorm", "live_buffers", "live_pools"):
        assert isinstance(getattr(OPS, name).default, torch._ops.OpOverload)
    assert str(OPS.rmsnorm.default._schema) == (
        f"{NAMESPACE}::rmsnorm(Tensor x, Tensor weight, float eps) -> Tensor"
    )
    assert str(OPS.rmsnorm.out._schema) == (
        f"{NAMESPACE}::rmsnorm.out(Tensor x, Tensor weight, float eps, *, Tensor(a!) out)"
        " -> Tensor(a!)"
    )


def test_a_kernels_exception_leaves_tagged_and_is_raised_as_its_type():
    """torch 2.15 raises whatever a kernel throws as RuntimeError (2.13 and 2.14 let the
    standard exceptions through to the contract's types): each package's library tags it with
    that type (kvbridge::rethrow_tagged) and its front end raises that type
    (_torch_glue.typed), so the types hold beside every torch make test-all runs it with."""
    with pytest.raises(RuntimeError, match=r"^\[ValueError\] num_blocks must be >= 0, got -1$"):
        OPS.pool_create.default(-1)
    with pytest.raises(ValueError, match=r"^num_blocks must be >= 0, got -1$"):
        kv.BlockPool(-1)
    with pytest.raises(RuntimeError, match=r"^\[IndexError\] "):
        OPS.throw_kind.default("out_of_range")


def test_per_step_token_ops_are_called_past_the_overloads_python_frame():
    """count_eos and common_prefix call the overload's C++ callable (`_op`: OpOverload.__call__
    is a Python frame that does nothing but call it) on every torch these tests run beside; an
    overload without one is called as it is."""
    front = importlib.import_module(f"{MODULE}._torch_ops")
    glue = importlib.import_module(f"{MODULE}._torch_glue")
    assert front._count_eos is OPS.count_eos.default._op
    assert front._common_prefix is OPS.common_prefix.default._op
    assert glue.bound(OPS.count_eos.default)(torch.tensor([3, 0, 0]), 0) == 2
    assert glue.bound(len) is len


@classic_only
def test_block_pool_is_a_custom_class():
    # Created and changed through ops (ops.cpp says why), read through its methods.
    pool = torch.ops.kvbridge.pool_create(4)
    assert isinstance(pool, torch.ScriptObject)
    assert torch.ops.kvbridge.pool_allocate(pool, 2) == [0, 1]
    assert pool.num_free() == 2
    assert isinstance(kv.BlockPool(4)._pool, torch.ScriptObject)


DTYPES = [torch.float32, torch.bfloat16, torch.float16]  # every dtype the op takes


# torch 2.14.1's opcheck reads .grad of a non-leaf tensor of its own making in
# test_aot_dispatch_dynamic and warns (a plain Python torch.library.custom_op warns the same
# there; 2.13.0 does not): the warning is torch's, not this op's, so it is not made an error.
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.compiler  # opcheck traces through dynamo (tests/conformance/gil_watch.py)
def test_opcheck(requires_grad, dtype):
    # The fake kernel too: a fake that returns float32 for a 16-bit input fails here.
    x = torch.randn(4, 7, 32).to(dtype).requires_grad_(requires_grad)
    w = torch.randn(32).to(dtype).requires_grad_(requires_grad)
    torch.library.opcheck(OPS.rmsnorm.default, (x, w, 1e-6))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_is_float32_math_rounded_to_nearest_even(dtype):
    """The 16-bit kernels compute what the float32 kernel computes on the widened values, and
    round once, to nearest even (torch's own conversion): truncation differs in about half the
    elements. 250 columns: a vector pass of any width leaves a tail to the scalar code."""
    x, w = torch.randn(64, 250).to(dtype), torch.randn(250).to(dtype)
    want = kv.rmsnorm(x.float(), w.float(), 1e-6).to(dtype)
    assert torch.equal(kv.rmsnorm(x, w, 1e-6).view(torch.int16), want.view(torch.int16))


# Two checks of the 16-bit kernels on every hand-written path this CPU runs, under one
# kernel-path cap and store policy (KVBRIDGE_KERNELS and KVBRIDGE_STORES are read once per
# process, so each setting is a fresh interpreter; the two tests below share one per setting,
# as a torch process is mostly torch's import). Each check prints "<name>: ok" or what it saw.
# rounding: the rounding test above, each path giving the float32 kernel rounded to nearest
# even, the same bits as the portable path (rmsnorm_paths names the path).
# odd: x and weight, or out=, or all three at odd addresses (a uint16 numpy view at a byte
# offset, viewed as the 16-bit dtype: torch itself refuses to make one; an aligned x keeps the
# rows-in-one-pass loop, which reads x in place, in play): the bits of the same call on
# aligned tensors.
PATHS_CHILD = f"""
import numpy as np, torch, {MODULE} as kv

def rounding():
    torch.manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16):
        x, w = torch.randn(64, 250).to(dtype), torch.randn(250).to(dtype)
        want = kv.rmsnorm(x.float(), w.float(), 1e-6).to(dtype)
        for out in (kv.rmsnorm(x, w, 1e-6), kv.rmsnorm(x, w, 1e-6, out=torch.empty_like(x))):
            if not torch.equal(out.view(torch.int16), want.view(torch.int16)):
                return f"{{dtype}} is not the float32 kernel rounded"
    return "ok"

def at_odd_address(t):
    raw = np.zeros(t.numel() * 2 + 2, np.uint8)
    start = 1 - raw.ctypes.data % 2
    a = raw[start:start + t.numel() * 2].view(np.uint16).reshape(t.shape)
    view = torch.from_numpy(a).view(t.dtype)
    view.copy_(t)
    assert view.data_ptr() % 2 == 1
    return view

def odd():
    torch.manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16):
        x, w = torch.randn(2200, 1000).to(dtype), torch.randn(1000).to(dtype)
        want = kv.rmsnorm(x, w, 1e-6).view(torch.int16)
        for inputs_odd, out_odd in ((True, False), (False, True), (True, True)):
            xs, ws = (at_odd_address(x), at_odd_address(w)) if inputs_odd else (x, w)
            out = at_odd_address(torch.zeros_like(x)) if out_odd else torch.zeros_like(x)
            got = [kv.rmsnorm(xs, ws, 1e-6, out=out), kv.rmsnorm(xs, ws, 1e-6)]
            if not all(torch.equal(g.view(torch.int16), want) for g in got):
                return f"{{dtype}}, inputs odd {{inputs_odd}}, out odd {{out_odd}}: other bits"
    return "ok"

print(kv._testing.rmsnorm_paths())
print("rounding:", rounding())
print("odd:", odd())
"""
KERNEL_PATHS = ["portable", "avx2", "avx512", "avx512-bf16"]


@functools.cache
def paths_child(paths: str, policy: str) -> str:
    """PATHS_CHILD's output under KVBRIDGE_KERNELS=paths and KVBRIDGE_STORES=policy."""
    env = {**os.environ, "KVBRIDGE_KERNELS": paths, "KVBRIDGE_STORES": policy}
    done = subprocess.run([sys.executable, "-c", PATHS_CHILD], env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"KVBRIDGE_KERNELS={paths}" in done.stdout  # the cap was read
    return done.stdout


@pytest.mark.parametrize("paths", KERNEL_PATHS)
def test_every_kernel_path_rounds_to_nearest_even(paths):
    said = paths_child(paths, "cache")  # what auto picks at this size
    assert "rounding: ok" in said.splitlines(), said


@pytest.mark.parametrize("policy", ["stream", "cache"])
@pytest.mark.parametrize("paths", KERNEL_PATHS)
def test_16_bit_tensors_at_odd_addresses_on_every_kernel_path(paths, policy):
    said = paths_child(paths, policy)
    assert "odd: ok" in said.splitlines(), said


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_low_precision_dtypes(dtype):
    x, w = torch.randn(8, 64).to(dtype), torch.randn(64).to(dtype)
    y = kv.rmsnorm(x, w)
    assert y.dtype == dtype
    want = composite(x.double(), w.double(), 1e-6)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(y.double(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_out_matches_allocating(dtype):
    # An existing output of 8 MiB and more is timed both ways at the first call of its size
    # (stores.hpp), ending with the streamed way (from the scale pass itself where rows start on
    # a line, as torch's allocations do); a fresh one is written in place. Same bits either way,
    # and no element left as it was.
    x, w = torch.randn(2100, 2048).to(dtype), torch.randn(2048).to(dtype)
    out = torch.full_like(x, float("nan"))
    assert kv.rmsnorm(x, w, 1e-6, out=out) is out
    assert torch.equal(out.view(torch.int16), kv.rmsnorm(x, w, 1e-6).view(torch.int16))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("with_out", [False, True])
def test_low_precision_argument_errors_are_float32s(dtype, with_out):
    """Every argument error the contract lists for float32 rmsnorm, for each 16-bit format,
    allocating and out=: the same ValueError naming the value, and an out= left as it was (the
    16-bit kernels are the core's own path, with checks of their own)."""
    x, w = torch.randn(4, 8).to(dtype), torch.randn(8).to(dtype)
    out = torch.full_like(x, 7.0)
    cases = [
        (x, w[:5], 1e-6, "weight has length 5, expected x.shape[-1] = 8"),
        (x, w.reshape(1, 8), 1e-6, "weight must be 1-D, got shape (1, 8)"),
        (x, w, -1.0, "eps must be finite and >= 0, got -1"),
        (x, w, float("nan"), "eps must be finite and >= 0, got nan"),
        (x, w, float("inf"), "eps must be finite and >= 0, got inf"),
        (x[0, 0], w, 1e-6, "x must have at least 1 dimension, got a 0-d array"),
    ]
    for xs, ws, eps, message in cases:
        target = out if with_out and xs.dim() == 2 else None
        with pytest.raises(ValueError, match=re.escape(message)):
            kv.rmsnorm(xs, ws, eps, out=target)
        assert torch.equal(out, torch.full_like(x, 7.0)), message


def test_gradients_match_the_composite():
    x = torch.randn(6, 5, 48, dtype=torch.float32, requires_grad=True)
    w = torch.randn(48, dtype=torch.float32, requires_grad=True)
    g = torch.randn(6, 5, 48)
    gx, gw = torch.autograd.grad(kv.rmsnorm(x, w, 1e-5), (x, w), g)
    rx, rw = torch.autograd.grad(composite(x, w, 1e-5), (x, w), g)
    torch.testing.assert_close(gx, rx, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(gw, rw, rtol=1e-4, atol=1e-4)


def test_gradients_of_mixed_dtypes_keep_each_inputs_precision():
    """bfloat16 activations with float32 weights, as a model in mixed precision has them: each
    gradient comes in its own input's dtype, the weight's at float32 precision (bfloat16's
    rounding, about 4e-3 relative, would fail the comparison with the float64 composite)."""
    x = torch.randn(6, 5, 48).to(torch.bfloat16).requires_grad_()
    w = torch.randn(48, dtype=torch.float32, requires_grad=True)
    g = torch.randn(6, 5, 48).to(torch.bfloat16)
    gx, gw = torch.autograd.grad(kv.rmsnorm(x, w, 1e-5), (x, w), g)
    assert (gx.dtype, gw.dtype) == (torch.bfloat16, torch.float32)
    x64 = x.detach().double().requires_grad_()
    w64 = w.detach().double().requires_grad_()
    rx, rw = torch.autograd.grad(composite(x64, w64, 1e-5), (x64, w64), g.double())
    torch.testing.assert_close(gw.double(), rw, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gx.double(), rx, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("wanted", ["x", "weight"])
def test_gradients_when_only_one_input_requires_grad(wanted):
    """A frozen weight (only x requires grad) or frozen activations (only the weight): the one
    gradient asked for is that input's own."""
    x = torch.randn(6, 48, requires_grad=wanted == "x")
    w = torch.randn(48, requires_grad=wanted == "weight")
    g = torch.randn(6, 48)
    which = x if wanted == "x" else w
    (got,) = torch.autograd.grad(kv.rmsnorm(x, w, 1e-5), (which,), g)
    (want,) = torch.autograd.grad(composite(x, w, 1e-5), (which,), g)
    assert got.shape == which.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.compiler  # FakeTensorMode loads the compiler's modules too
def test_fake_kernel_has_the_real_kernels_strides():
    """torch.compile plans memory from the fake kernel: for a non-contiguous x its output must
    have the real kernel's layout (contiguous), not x's strides."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    x, w = torch.randn(48, 6).t(), torch.randn(48)  # x: shape (6, 48), strides (1, 6)
    real = OPS.rmsnorm.default(x, w, 1e-5)
    with FakeTensorMode() as mode:
        fake = OPS.rmsnorm.default(mode.from_tensor(x), mode.from_tensor(w), 1e-5)
    assert (fake.shape, fake.stride(), fake.dtype) == (real.shape, real.stride(), real.dtype)
    assert real.is_contiguous()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.compiler
def test_compile_fullgraph_has_no_graph_breaks(dtype):
    # pytorch#157363-style regressions show up as graph breaks around custom ops.
    torch._dynamo.reset()

    def f(x, w):
        return kv.rmsnorm(x, w, 1e-6) * 2

    x, w = torch.randn(16, 64).to(dtype), torch.randn(64).to(dtype)
    explanation = torch._dynamo.explain(f)(x, w)
    assert explanation.graph_break_count == 0
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    got = compiled(x, w)
    assert got.dtype == dtype  # traced through the fake kernel
    torch.testing.assert_close(got, f(x, w))


def test_numpy_inputs_are_shared():
    tokens = np.arange(100, dtype=np.int64)
    assert kv._testing.data_address(tokens) == tokens.__array_interface__["data"][0]


@classic_only
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_rmsnorm():
    x, w = torch.randn(4, 64, device="cuda"), torch.randn(64, device="cuda")
    torch.testing.assert_close(kv.rmsnorm(x, w).cpu(), kv.rmsnorm(x.cpu(), w.cpu()))


@classic_only
def test_import_against_another_torch_says_how_to_rebuild():
    # An extension built against one torch fails with undefined symbols in another; the package
    # checks first and says how to fix it. Simulated in a fresh interpreter by changing the
    # version torch reports before kvbridge_torch is imported.
    import subprocess
    import sys

    code = "import torch; torch.__version__ = '0.0.1'; import kvbridge_torch"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode != 0
    assert "ImportError" in result.stderr
    assert "built against torch" in result.stderr and "0.0.1" in result.stderr
    assert "--no-build-isolation" in result.stderr


@classic_only
@pytest.mark.gil_back_on  # on a free-threaded Python, asserted below
def test_pybind11_module_in_a_torch_extension_maps_standard_exceptions(tmp_path):
    """The comparison page's "pybind11 in a torch extension" column is a hand-written
    PYBIND11_MODULE built with torch.utils.cpp_extension.load, as most extensions bind their
    functions (load_inline(functions=...) routes every exception through torch's handler and is
    a column of its own). Rebuilt here the same way, it must map as pybind11 does; and on a
    free-threaded Python, declaring nothing (pybind11's default), importing it turns the GIL
    back on, as kvbridge_torch._C, which declares it, does not."""
    from torch.utils.cpp_extension import load

    root = ROOT
    gil_was_on = getattr(sys, "_is_gil_enabled", lambda: True)()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = load(
            name="kvprobe_pybind_conformance",
            sources=[
                str(root / "benchmarks" / "probing" / "probes" / "torch" / "kvprobe_pybind.cpp"),
                str(root / "common_cpp" / "src" / "testing.cpp"),
            ],
            extra_include_paths=[str(root / "common_cpp" / "include")],
            build_directory=str(tmp_path),
            verbose=False,
        )
    if not gil_was_on:  # a free-threaded Python, the GIL off until now
        said = [str(w.message) for w in caught if "global interpreter lock" in str(w.message)]
        assert sys._is_gil_enabled() and said and "'kvprobe_pybind_conformance'" in said[0]
    with pytest.raises(ValueError, match="invalid_argument"):
        module.throw_kind("invalid_argument")
    with pytest.raises(IndexError, match="out_of_range"):
        module.throw_kind("out_of_range")


def test_out_variant_on_inputs_that_require_grad_returns_out_without_grad_fn():
    """rmsnorm(..., out=o) writes o and returns it, untracked, as torch's custom ops with
    out-variants do: autograd is registered for the functional op only."""
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, requires_grad=True)
    out = torch.empty(4, 8)
    got = kv.rmsnorm(x, w, out=out)
    assert got is out
    assert got.grad_fn is None
    torch.testing.assert_close(out, kv.rmsnorm(x, w).detach())


@classic_only
@pytest.mark.skipif(
    "KVBRIDGE_EXPECT_CUDA_KERNELS" not in os.environ,
    reason="the env that builds this package says whether it expects the CUDA kernels",
)
def test_build_records_whether_the_cuda_kernels_were_built():
    from kvbridge_torch import _build_info

    assert _build_info.CUDA_KERNELS == (os.environ["KVBRIDGE_EXPECT_CUDA_KERNELS"] == "1")
    # What a GPU run names (gpu_check.py): the compiler and the GPUs they were built for.
    if _build_info.CUDA_KERNELS:
        assert re.fullmatch(r"\d+\.\d+\.\d+", _build_info.CUDA_COMPILER)
        assert re.fullmatch(r"\d+(;\d+)*|native|all|all-major", _build_info.CUDA_ARCHITECTURES)
    else:
        assert _build_info.CUDA_COMPILER is None and _build_info.CUDA_ARCHITECTURES is None
    if not _build_info.CUDA_KERNELS:  # CPU kernels only: they still run on the CPU
        torch.testing.assert_close(kv.rmsnorm(torch.ones(2, 4), torch.ones(4)), torch.ones(2, 4))


# opcheck's warning on torch 2.14 is torch's own (test_opcheck says so)
@classic_only
@pytest.mark.compiler  # the script's torch.compile check
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_gpu_check_runs_its_checks_that_need_no_gpu(tmp_path):
    """packages/torch/gpu_check.py runs on a GPU only when one is lent, rarely; its checks that
    need no CUDA run here on the CPU kernel, so the script cannot rot between those runs. A check
    that raises is recorded as failed with its exception, never ends the run."""
    import importlib.util

    script = ROOT / "packages" / "torch" / "gpu_check.py"
    gpu_check = importlib.util.module_from_spec(
        importlib.util.spec_from_file_location("gpu_check", script)
    )
    gpu_check.__spec__.loader.exec_module(gpu_check)
    result = gpu_check.main(["--device", "cpu", "--json", str(tmp_path / "run.json")])
    assert json.loads((tmp_path / "run.json").read_text()) == result
    assert result["machine"]["built against torch"] == torch.__version__
    assert {k: c for k, c in result["checks"].items() if not c["ok"]} == {}
    names = " ".join(result["checks"])
    for dtype in ("float32", "bfloat16", "float16"):
        assert f"forward {dtype}: transposed" in names and f"backward {dtype}" in names
    assert "opcheck" in names and "torch.compile" in names

    checks = gpu_check.Checks()  # a check that raises: recorded, named, and the run goes on
    checks.run("raises", lambda: 1 / 0)
    assert checks.results["raises"] == {
        "ok": False,
        "detail": "ZeroDivisionError: division by zero",
    }
