"""RMSNorm against torch, torch.compile, numpy and the copy floor of the same bytes.
Paired with tests/conformance/test_rmsnorm.py."""

import numpy as np
import pytest

SHAPES = [(4, 7, 4096), (32, 4096), (2048, 4096), (8192, 8192)]
EPS = 1e-6


def inputs(shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal(shape[-1], dtype=np.float32)
    return x, w, np.empty_like(x)


def label(shape):
    return "x".join(map(str, shape))


def tag(benchmark, shape, package, kind):
    benchmark.group = f"rmsnorm {label(shape)}"
    # Bytes that must move: read x, write y (the weight is one row, negligible).
    benchmark.extra_info.update(package=package, kind=kind, bytes=2 * int(np.prod(shape)) * 4)


def skip_big(quick, shape):
    if quick and np.prod(shape) > 4096 * 32:
        pytest.skip("quick mode")


@pytest.mark.parametrize("shape", SHAPES, ids=label)
@pytest.mark.parametrize("with_out", [False, True], ids=["new output", "out="])
def test_rmsnorm(benchmark, kv, native, package, quick, shape, with_out):
    skip_big(quick, shape)
    tag(benchmark, shape, package, "kvbridge (out=)" if with_out else "kvbridge")
    x, w, out = (native(a) for a in inputs(shape))
    if with_out:
        benchmark(lambda: kv.rmsnorm(x, w, EPS, out=out))
    else:
        benchmark(kv.rmsnorm, x, w, EPS)


@pytest.mark.parametrize("shape", SHAPES, ids=label)
def test_rmsnorm_copy_floor(benchmark, quick, shape):
    skip_big(quick, shape)
    tag(benchmark, shape, "numpy", "copy floor")
    x, _, out = inputs(shape)
    benchmark(np.copyto, out, x)


@pytest.mark.parametrize("shape", SHAPES, ids=label)
def test_rmsnorm_numpy_composite(benchmark, quick, shape):
    skip_big(quick, shape)
    tag(benchmark, shape, "numpy", "numpy composite")
    x, w, _ = inputs(shape)
    benchmark(lambda: x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w)


@pytest.mark.parametrize("shape", SHAPES, ids=label)
@pytest.mark.parametrize("impl", ["F.rms_norm", "torch.compile composite"])
def test_rmsnorm_torch(benchmark, quick, shape, impl):
    torch = pytest.importorskip("torch")
    skip_big(quick, shape)
    tag(benchmark, shape, "torch", impl)
    x, w, _ = (torch.from_numpy(a) for a in inputs(shape))
    if impl == "F.rms_norm":
        fn = lambda: torch.nn.functional.rms_norm(x, (shape[-1],), w, EPS)  # noqa: E731
    else:
        compiled = torch.compile(
            lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w
        )
        compiled(x, w)  # compile outside the timed region
        fn = lambda: compiled(x, w)  # noqa: E731
    benchmark(fn)
