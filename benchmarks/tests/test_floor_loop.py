"""The plain C RMSNorm loop the health page blames the machine with (probes/probe_floors.c): a
floor is only a floor if it does the work. Its result in every dtype and with both store kinds
is numpy's float64 RMSNorm to within the format's rounding, on rows with a tail past its vectors
and an output off the 64-byte line, at one thread and two. Run by `tox -e semantics`."""

from __future__ import annotations

import numpy as np
import pytest

probe_floors = pytest.importorskip("kvbridge_probes.probe_floors")

EPS = 1e-6
# Per dtype: the 2-byte (or float32) storage of float32 values, back to float32, and the
# tolerance of one rounding to that format relative to the result (with float32 math before it).
FORMATS = {
    "float32": (lambda f: f.astype(np.float32), lambda s: s, 1e-5),
    "float16": (
        lambda f: f.astype(np.float16).view(np.int16),
        lambda s: s.view(np.float16).astype(np.float32),
        2e-3,
    ),
    "bfloat16": (  # the top half of a float32, rounded to nearest even
        lambda f: ((f.astype(np.float32).view(np.uint32) + 0x7FFF
                    + ((f.astype(np.float32).view(np.uint32) >> 16) & 1)) >> 16)
        .astype(np.uint16).view(np.int16),
        lambda s: (s.view(np.uint16).astype(np.uint32) << 16).view(np.float32),
        1e-2,
    ),
}  # fmt: skip


@pytest.mark.parametrize("dtype", FORMATS)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_floor_loop_computes_rmsnorm(dtype, stream, threads):
    store, load, tolerance = FORMATS[dtype]
    rng = np.random.default_rng(7)
    rows, width = 37, 4096 + 45  # a tail past every vector width; rows split unevenly
    x = store(rng.standard_normal((rows, width)) * 3)
    w = store(rng.standard_normal(width))
    # out one element past a 64-byte line: the streamed stores' head and tail both run
    backing = np.zeros(x.size + 64, x.dtype)
    offset = (-backing.ctypes.data // x.itemsize) % (64 // x.itemsize) + 1
    out = backing[offset : offset + x.size].reshape(x.shape)
    probe_floors.rmsnorm(out, x, w, EPS, threads, stream, dtype)
    xf, wf = load(x).astype(np.float64), load(w).astype(np.float64)
    expected = xf / np.sqrt((xf * xf).mean(axis=-1, keepdims=True) + EPS) * wf
    got = load(out).astype(np.float64)
    scale = np.abs(expected) + np.abs(expected).mean()  # relative, floored near zero
    assert np.all(np.abs(got - expected) <= tolerance * scale), dtype
    assert not backing[:offset].any() and not backing[offset + x.size :].any()  # nothing else


def test_the_floor_loop_refuses_what_it_cannot_do():
    x = np.ones((2, 8), np.float32)
    with pytest.raises(ValueError, match="w .d. of 64"):
        probe_floors.rmsnorm(np.empty_like(x), x, np.ones(8), EPS, 1, False)
    with pytest.raises(ValueError, match="'int8' is not"):
        probe_floors.rmsnorm(np.empty_like(x), x, np.ones(8, np.float32), EPS, 1, False, "int8")
