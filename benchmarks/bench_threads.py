"""GIL: throughput of long calls from 1 vs 2 threads. Paired with
tests/conformance/test_threads.py."""

import threading

import numpy as np
import pytest

N = 32 * (1 << 20)  # 128 MB of int32: a long call


@pytest.fixture(scope="module")
def long_tokens():
    return np.ones(N, np.int32)


@pytest.mark.parametrize("threads", [1, 2])
def test_count_eos_threads(benchmark, kv, native, package, long_tokens, threads):
    """Each round does 2 calls: in sequence on one thread, or one per thread at once."""
    benchmark.group = f"GIL: count_eos x2 ({package})"
    benchmark.extra_info.update(package=package, kind=f"{threads} thread(s)", threads=threads)
    tokens = native(long_tokens)

    def sequential():
        kv.count_eos(tokens, 0)
        kv.count_eos(tokens, 0)

    def parallel():
        t = threading.Thread(target=kv.count_eos, args=(tokens, 0))
        t.start()
        kv.count_eos(tokens, 0)
        t.join()

    benchmark.pedantic(sequential if threads == 1 else parallel, rounds=15, warmup_rounds=2)
