"""docs/contract.md, "RMSNorm": the kernels' settings read from the environment, seen from
Python: the store policy of a large `out=` (KVBRIDGE_STORES) and the cap on the hand-written
kernel paths (KVBRIDGE_KERNELS). Paired with common_cpp/tests/test_stores.cpp (and
test_rmsnorm.cpp's kernel_paths_are_the_ones_asked). Each is read once per process, so each
setting runs in a fresh interpreter with the variable set."""

import functools
import os
import subprocess
import sys

from common import PACKAGES, REGISTRY

# One process per setting (each is read once per process): x, weight and out= aligned, then 0 to
# 3 bytes past a float32's alignment (views at a byte offset, which numpy allows), out's bytes
# hashed each time. 1000 columns: rows end mid-line, 4.4 MB. The tests below share the
# processes (a process of the torch packages is mostly torch's import): one run per package and
# setting.
CODE = """
import hashlib
import numpy as np
import {module} as kv
native = __import__("torch").from_numpy if "{array}" == "torch" else (lambda a: a)

def at_offset(a, offset):
    raw = np.zeros(a.nbytes + 128, np.uint8)
    start = -raw.ctypes.data % 64 + offset  # offset bytes past a 64-byte line
    view = raw[start:start + a.nbytes].view(np.float32).reshape(a.shape)
    view[...] = a
    assert view.ctypes.data % 64 == offset and view.flags.aligned == (offset == 0)
    return view

x = np.random.default_rng(0).standard_normal((1100, 1000), dtype=np.float32)
w = np.random.default_rng(1).standard_normal(1000, dtype=np.float32)
out = np.full_like(x, np.nan)
kv.rmsnorm(native(x), native(w), 1e-6, out=native(out))
print(hashlib.sha256(out.tobytes()).hexdigest())
for offset in (0, 1, 2, 3):
    out = at_offset(np.zeros_like(x), offset)
    xs, ws = at_offset(x, (offset + 1) % 4), at_offset(w, (offset + 2) % 4)
    kv.rmsnorm(native(xs), native(ws), 1e-6, out=native(out))
    print(hashlib.sha256(out.tobytes()).hexdigest())
"""
PATHS = ("portable", "avx2", "avx512", "auto")
POLICIES = ("stream", "cache", "auto")


@functools.cache
def run(backend: str, paths: str, policy: str) -> subprocess.CompletedProcess:
    """The process above under KVBRIDGE_KERNELS=paths and KVBRIDGE_STORES=policy."""
    code = CODE.format(module=PACKAGES[backend], array=REGISTRY[backend]["array"])
    env = {**os.environ, "KVBRIDGE_KERNELS": paths, "KVBRIDGE_STORES": policy}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip


def hashes(kv, paths: str, policy: str) -> list[str]:
    """out's hashes: aligned, then at each byte offset."""
    done = run(kv.BACKEND, paths, policy)
    assert done.returncode == 0, (
        f"KVBRIDGE_KERNELS={paths} KVBRIDGE_STORES={policy}: exit {done.returncode} {done.stderr}"
    )
    return done.stdout.split()


def test_the_store_policy_changes_no_bits(kv):
    """Streamed or cached stores (KVBRIDGE_STORES=stream / cache / auto) write the same bytes."""
    aligned = {policy: hashes(kv, "auto", policy)[0] for policy in POLICIES}
    assert len(set(aligned.values())) == 1, aligned


def test_arrays_at_any_byte_offset_are_read_and_written_right_under_every_store_policy(kv):
    """x, weight and out= at any byte offset, not even 4-byte aligned: the same bytes as for
    aligned arrays, and never a crash (streaming stores need an aligned address) or an access
    C++ calls undefined (the asan env's UBSan reports a misaligned float load or store), whichever
    way the store policy writes out, on every kernel path this CPU runs (a cap above the CPU is
    the CPU's)."""
    seen = {h for paths in PATHS for policy in POLICIES for h in hashes(kv, paths, policy)}
    assert len(seen) == 1, seen


def test_a_bad_store_policy_is_a_value_error_naming_it(kv):
    done = run(kv.BACKEND, "auto", "fast")
    assert done.returncode != 0
    assert "ValueError: KVBRIDGE_STORES='fast' is not auto, stream or cache" in done.stderr


def test_every_kernel_path_writes_the_same_bits(kv):
    """Each cap of the hand-written paths (KVBRIDGE_KERNELS; a cap above the CPU is the CPU's)
    writes the bytes the portable path writes."""
    aligned = {paths: hashes(kv, paths, "auto")[0] for paths in PATHS}
    assert len(set(aligned.values())) == 1, aligned


def test_a_bad_kernel_cap_is_a_value_error_naming_it(kv):
    done = run(kv.BACKEND, "fast", "auto")
    assert done.returncode != 0
    assert (
        "ValueError: KVBRIDGE_KERNELS='fast' is not auto, portable, avx2, avx512 or avx512-bf16"
        in done.stderr
    )
