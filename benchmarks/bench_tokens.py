"""Copies and kernels: common_prefix, count_eos and data_address against numpy's best idioms.
Paired with tests/conformance/test_tokens.py."""

import numpy as np
import pytest

PREFIX_SIZES = [16, 4096, 1 << 20]
EOS_SIZES = [1, 1024, 1 << 20, 100 * (1 << 20)]


def numpy_common_prefix(a, b):
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


@pytest.mark.parametrize("n", PREFIX_SIZES)
@pytest.mark.parametrize("container", ["list", "array"])
def test_common_prefix(benchmark, kv, native, package, tokens_of, quick, n, container):
    if quick and n > 4096:
        pytest.skip("quick mode")
    benchmark.group = f"common_prefix n={n}"
    benchmark.extra_info.update(package=package, kind=f"kvbridge ({container})", n=n)
    a = tokens_of(n)
    b = a.copy()
    args = (a.tolist(), b.tolist()) if container == "list" else (native(a), native(b))
    assert benchmark(kv.common_prefix, *args) == n


@pytest.mark.parametrize("n", PREFIX_SIZES)
def test_common_prefix_numpy(benchmark, tokens_of, quick, n):
    if quick and n > 4096:
        pytest.skip("quick mode")
    benchmark.group = f"common_prefix n={n}"
    benchmark.extra_info.update(package="numpy", kind="numpy idiom", n=n)
    a = tokens_of(n)
    assert benchmark(numpy_common_prefix, a, a.copy()) == n


@pytest.mark.parametrize("n", EOS_SIZES)
def test_count_eos(benchmark, kv, native, package, tokens_of, quick, n):
    if quick and n > 1024:
        pytest.skip("quick mode")
    benchmark.group = f"count_eos n={n}"
    benchmark.extra_info.update(package=package, kind="kvbridge", n=n)
    tokens = native(tokens_of(n, np.int32))
    assert benchmark(kv.count_eos, tokens, 0) == 1


@pytest.mark.parametrize("n", EOS_SIZES)
def test_count_eos_numpy(benchmark, tokens_of, quick, n):
    if quick and n > 1024:
        pytest.skip("quick mode")
    benchmark.group = f"count_eos n={n}"
    benchmark.extra_info.update(package="numpy", kind="numpy idiom", n=n)
    tokens = tokens_of(n, np.int32)
    assert benchmark(lambda: int(np.count_nonzero(tokens == 0))) == 1


@pytest.mark.parametrize("nbytes", [1024, 100 * (1 << 20)])
def test_data_address(benchmark, kv, native, package, tokens_of, quick, nbytes):
    """Zero copy means the cost does not depend on the size."""
    if quick and nbytes > 1024:
        pytest.skip("quick mode")
    benchmark.group = "zero copy: _testing.data_address"
    benchmark.extra_info.update(package=package, kind="kvbridge", nbytes=nbytes)
    tokens = native(tokens_of(nbytes // 8))
    benchmark(kv._testing.data_address, tokens)


def test_count_eos_raw_torch_op(benchmark, tokens_of):
    """The torch.ops call under kvbridge_torch.count_eos, for the wrapper's cost per call."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("kvbridge_torch")
    benchmark.group = "count_eos n=1"
    benchmark.extra_info.update(package="torch (raw torch.ops call)", kind="floor", n=1)
    op = torch.ops.kvbridge.count_eos.default
    tokens = torch.from_numpy(tokens_of(1, np.int32))
    assert benchmark(op, tokens, 0) == 1
