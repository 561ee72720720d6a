"""make mutants: break each promise of docs/contract.md on purpose, one at a time, and check that
a test fails.

Every mutant is one small edit of the real source (a check loosened, a GIL release removed, an
off-by-one). The core's and the shared code's are listed here; each package's own live in its
folder, packages/<name>/mutants.toml, collected by its registry name. For each, a scratch copy
of the repository gets the edit, the package that carries the code is rebuilt (incrementally:
one build folder per package for the whole run), and the tests run until the first failure:
the C++ tests first for edits of the core (built with ThreadSanitizer when the mutant is a
race, where only a sanitizer sees it reliably), then the conformance suite. A mutant is caught
when a test fails (or the process dies); the run prints which test caught each one, fails if
any survived, and prints how long it took.

    python tools/mutants.py                 # every mutant
    python tools/mutants.py --only gil      # those whose id contains "gil"
    python tools/mutants.py --only gil,bf16 # ... "gil" or "bf16"
    python tools/mutants.py --check-texts   # only: does each mutant's text occur once (lint)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packages"))

import registry  # noqa: E402


@dataclass(frozen=True)
class Mutant:
    id: str
    promise: str  # the docs/contract.md section and promise it breaks
    path: str
    find: str  # must occur exactly once in the file
    replace: str
    package: str = "pybind"  # the package whose suite runs
    cpp: bool = False  # an edit of the core: its C++ tests run first
    tsan: bool = False  # ... built with ThreadSanitizer
    free_threaded: bool = False  # the suite runs on a free-threaded Python (the GIL off)
    # A CPU flag (/proc/cpuinfo) the mutated code needs to run at all: on a CPU without it the
    # mutant is reported as not runnable here, never as caught or survived.
    needs: str = ""
    # Test paths run instead of the conformance suite (the package is still installed): for
    # code the suite never reaches, such as the registry's reader and the page's rules.
    tests: tuple[str, ...] = ()


POOL = "common_cpp/src/block_pool.cpp"
ERRORS = "common_cpp/src/errors.cpp"
RMS = "common_cpp/src/rmsnorm.cpp"
RMS_PARTS = "common_cpp/src/rmsnorm_parts.hpp"
RMS_HALF = "common_cpp/src/rmsnorm_half.cpp"
ONE_PASS = "common_cpp/src/one_pass.hpp"
STORES = "common_cpp/src/line_stores.cpp"
STORE_POLICY = "common_cpp/src/stores.cpp"
TOKENS = "common_cpp/src/tokens.cpp"
# The shared code's mutants; each package's own are in its folder (packages/<name>/mutants.toml).
ARGS_HPP = "packages/args/args.hpp"  # built and tested with the pybind package
RMSNORM_CALL = "packages/args/rmsnorm_call.hpp"  # the same
ARGS_PY = "packages/python/_args.py"
C_ABI_PY = "packages/python/_c_abi.py"  # the front end kvbridge-ctypes and kvbridge-cffi share
TORCH_GLUE = "packages/python/_torch_glue.py"  # built and tested with the torch package
THREADS = "common_cpp/src/threads.cpp"
REGISTRY_PY = "packages/registry.py"
PAGE_RULES = ("benchmarks/tests",)  # asking.kinds() reads the core's kinds from kvbridge_ctypes

RETAIN_UNLOCKED = '  require_allocated_locked(id, "retain");'
RETAIN_LOCKED = "  std::lock_guard<std::mutex> lock(mutex_);\n" + RETAIN_UNLOCKED

MUTANTS = [
    # Errors: every row of the error table.
    Mutant("negative-num-blocks", "Errors: negative num_blocks is a ValueError", POOL,
           "if (num_blocks < 0) {", "if (num_blocks < -1) {", cpp=True),
    Mutant("negative-count", "Errors: negative allocate / allocate_many entry is a ValueError",
           POOL, "if (n < 0) throw", "if (n < -1) throw", cpp=True),
    Mutant("int32-overflow", "Errors: an int that does not fit int32 is an OverflowError",
           ERRORS, "value > std::numeric_limits<std::int32_t>::max()) {",
           "value > std::numeric_limits<std::int64_t>::max()) {", cpp=True),
    Mutant("block-out-of-range", "Errors: a block id outside [0, num_blocks) is an IndexError",
           POOL, "id >= num_blocks_", "id > num_blocks_", cpp=True),
    Mutant("release-free-block", "Errors: retain/release of a free block is a RuntimeError",
           POOL, "if (refcounts_[id].load(std::memory_order_relaxed) == 0) {",
           "if (refcounts_[id].load(std::memory_order_relaxed) < 0) {", cpp=True),
    Mutant("bool-is-an-int", "Errors: a wrong Python type (a bool) is a TypeError", ARGS_HPP,
           "return PyBool_Check(obj) ||", "return false &&"),
    Mutant("tokens-not-1d", "Errors: token arrays that are not 1-D are a ValueError", ARGS_HPP,
           'if (ndim != "1") {', 'if (ndim == "3") {'),
    Mutant("weight-length", "Errors: weight of the wrong length is a ValueError", RMS,
           "if (weight.shape[0] != x_shape.back()) {", "if (weight.shape[0] > x_shape.back()) {",
           cpp=True),
    Mutant("eps-nan", "Errors: eps negative or NaN is a ValueError", RMS,
           "if (!(eps >= 0) || std::isinf(eps)) {", "if (eps < 0 || std::isinf(eps)) {", cpp=True),
    Mutant("float64-dtype", "Errors: x of an unsupported dtype is a TypeError", ARGS_HPP,
           'if (kind != "f" || PyLong_AsLong(itemsize.ptr) != 4) {', 'if (kind != "f") {'),
    Mutant("catch-chain-order", "Errors: out_of_range becomes IndexError (the one catch chain)",
           ERRORS, "return {KVB_OUT_OF_RANGE, e.what()};", "return {KVB_RUNTIME_ERROR, e.what()};",
           package="cython", cpp=True),
    Mutant("overflow-python-type", "Errors: overflow_error becomes OverflowError (the one table)",
           ERRORS, "    case KVB_OVERFLOW_ERROR:\n      return \"OverflowError\";",
           "    case KVB_OVERFLOW_ERROR:\n      return \"RuntimeError\";", package="ctypes",
           cpp=True),
    # Ownership.
    Mutant("input-kept", "Ownership: inputs are never kept after a call", ARGS_HPP,
           "    return true;  // the per-call fast path",
           "    Py_INCREF(obj);\n    return true;  // the per-call fast path"),
    Mutant("int32-copied", "Ownership: int32 tokens are read in place (zero copy)", ARGS_HPP,
           "if (c == 'i' && v.itemsize == 4) return",
           "if (c == 'i' && v.itemsize == 4 && false) return"),
    # The GIL and threads.
    Mutant("rmsnorm-holds-gil-pybind", "Threads: rmsnorm releases the GIL", RMSNORM_CALL,
           "    gil.release();\n    kvbridge::rmsnorm(x.view", "    kvbridge::rmsnorm(x.view"),
    Mutant("fresh-rmsnorm-holds-gil", "Threads: rmsnorm releases the GIL (a fresh output too)",
           RMSNORM_CALL, "      gil.release();\n      return static_cast<float*>",
           "      return static_cast<float*>"),
    Mutant("pool-without-lock", "Threads: BlockPool is safe under concurrent use", POOL,
           "  std::lock_guard<std::mutex> lock(mutex_);\n  if (static_cast<std::size_t>(count)",
           "  if (static_cast<std::size_t>(count)", package="ctypes", cpp=True, tsan=True),
    # The same lock gone, seen by the suite itself: on a free-threaded Python nothing else
    # serialises the pool's callers.
    Mutant("pool-without-lock-free-threaded", "Free-threaded Python: BlockPool is safe with the "
           "GIL off", POOL,
           "  std::lock_guard<std::mutex> lock(mutex_);\n  if (static_cast<std::size_t>(count)",
           "  if (static_cast<std::size_t>(count)", package="ctypes", free_threaded=True),
    # retain's lock gone: only a test whose threads retain and release the same blocks sees it
    # (under TSan in C++; with the GIL off, by the counts).
    Mutant("pool-retain-without-lock", "Threads: BlockPool is safe under concurrent use", POOL,
           RETAIN_LOCKED, RETAIN_UNLOCKED, package="ctypes", cpp=True, tsan=True),
    Mutant("pool-retain-without-lock-free-threaded", "Free-threaded Python: BlockPool is safe "
           "with the GIL off", POOL,
           RETAIN_LOCKED, RETAIN_UNLOCKED, package="ctypes", free_threaded=True),
    # Counting and comparing tokens at a narrower width than the contract's.
    Mutant("count-eos-narrow-counter", "Tokens: count_eos counts every match", TOKENS,
           "using LaneCounter = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;",
           "using LaneCounter = std::uint16_t;", cpp=True),
    Mutant("prefix-compared-narrow", "Tokens: common_prefix compares as int64", TOKENS,
           "  using Wide = std::conditional_t<(sizeof(A) > sizeof(B)), A, B>;",
           "  using Wide = std::int32_t;", cpp=True),
    Mutant("rmsnorm-half-unchecked", "RMSNorm: a 16-bit call's bad arguments are a ValueError",
           RMS, "  check_args(x.shape, weight, eps);\n  run_half(format, x, weight, eps, allocate(",
           "  run_half(format, x, weight, eps, allocate(", package="torch", cpp=True),
    Mutant("read-only-out-written", "Errors: a read-only out= is a ValueError, left unchanged",
           ARGS_PY, "        if flags.c_contiguous and flags.writeable:\n            return out",
           "        if flags.c_contiguous:\n            return out", package="ctypes"),
    Mutant("float-fast-path-ignores-strides", "RMSNorm: any stride, in bytes or elements, is "
           "read by its strides", ARGS_PY, "obj.dtype is FLOAT32 and obj.flags.aligned:",
           "obj.dtype is FLOAT32:", package="ctypes"),
    Mutant("threads-ignored", "Threads: kernels use at most get_num_threads() threads",
           "common_cpp/src/threads.cpp", "const std::int64_t threads = get_num_threads();",
           "const std::int64_t threads = 4;", cpp=True),
    Mutant("pool-caller-leaves-early", "Threads: a kernel call returns after every chunk is done",
           "common_cpp/src/threads.cpp",
           "    finished_.wait(lock, finished);\n", "", cpp=True),
    # Kernels and pool semantics.
    Mutant("allocate-not-all-or-nothing", "BlockPool: allocate(n) is all or nothing", POOL,
           "if (static_cast<std::size_t>(count) > free_list_.size()) return std::nullopt;",
           "if (static_cast<std::size_t>(count) > free_list_.size() + 1) return std::nullopt;",
           cpp=True),
    Mutant("allocate-many-partial", "BlockPool: allocate_many is all or nothing over the batch",
           POOL, "if (total > static_cast<std::int64_t>(free_list_.size())) return std::nullopt;",
           "if (total > static_cast<std::int64_t>(free_list_.size()) + 1) return std::nullopt;",
           cpp=True),
    Mutant("fifo-reuse", "BlockPool: a released block is handed out again first (LIFO)", POOL,
           "    free_list_.push_back(id);", "    free_list_.insert(free_list_.begin(), id);",
           cpp=True),
    Mutant("prefix-off-by-one", "Tokens: common_prefix is the longest common prefix", TOKENS,
           "        static_cast<std::int64_t>(b.data[i * b.stride])) {\n      return i;",
           "        static_cast<std::int64_t>(b.data[i * b.stride])) {\n      return i + 1;",
           cpp=True),
    Mutant("prefix-contiguous-mixed-dtypes",
           "Tokens: common_prefix compares as int64", C_ABI_PY,
           "if kernel is not None and b.dtype is a.dtype:", "if kernel is not None:",
           package="cffi"),
    Mutant("eos-truncated", "Tokens: eos is compared as int64, never truncated", TOKENS,
           "if (eos < std::numeric_limits<T>::min() || eos > std::numeric_limits<T>::max()) "
           "return 0;",
           "(void)0;", cpp=True),
    Mutant("eos-ignored", "RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight", RMS_PARTS,
           "std::sqrt(sum_of_squares / static_cast<double>(cols) + eps);",
           "std::sqrt(sum_of_squares / static_cast<double>(cols));", cpp=True),
    Mutant("weight-ignored", "RMSNorm: the result is scaled by weight", RMS,
           "(std::int64_t i = 0; i < cols; ++i) y[i] = x[i] * scale * w[i];",
           "(std::int64_t i = 0; i < cols; ++i) y[i] = x[i] * scale;", cpp=True),
    Mutant("weight-ignored-one-pass", "RMSNorm: the result is scaled by weight (rows in one pass)",
           ONE_PASS,
           "_mm256_mul_ps(_mm256_mul_ps(Format::load(x + at), s), _mm256_loadu_ps(w + at));",
           "_mm256_mul_ps(Format::load(x + at), s);", cpp=True),
    Mutant("no-float64-fallback", "RMSNorm: matches the float64 reference for tiny/huge rows",
           RMS, "inverse_rms(is_normal_float32(sum) ? sum : sum_of_squares_f64(x, cols), cols",
           "inverse_rms(sum, cols", cpp=True),
    # Found by breaking the code by hand: each survived every test until its test was added.
    Mutant("fake-kernel-float32", "torch: the fake kernel has the real kernel's dtype",
           TORCH_GLUE,
           "        return torch.empty_like(x, memory_format=torch.contiguous_format)\n",
           "        return torch.empty_like(x, dtype=torch.float32, "
           "memory_format=torch.contiguous_format)\n", package="torch"),
    Mutant("bf16-truncated", "torch: 16-bit results are rounded to nearest even", RMS_HALF,
           "const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;",
           "const std::uint32_t rounded = bits >> 16;", package="torch"),
    # The hand-written paths, each run wherever the CPU can (ctest once per KVBRIDGE_KERNELS
    # cap; the torch tests once per cap in fresh interpreters), not only the widest one.
    Mutant("bf16-truncated-avx2", "torch: 16-bit results are rounded to nearest even (AVX2)",
           RMS_HALF,
           "_mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));",
           "bits;", package="torch", cpp=True, needs="avx2"),
    Mutant("bf16-nan-weights-unasked", "torch: a NaN weight gives a NaN result (AVX2, rows in "
           "one pass)", RMS_HALF,
           "for (std::int64_t c = 0; c < cols; ++c) finite &= std::isfinite(w[c]);", "(void)w;",
           package="torch", cpp=True, needs="avx2"),
    Mutant("bf16-even-odd-weights-shifted", "torch: 16-bit results are the float32 kernel's "
           "rounded (AVX2, a row whose stores start on an odd element)", RMS_HALF,
           "even + at / 2 + 1;", "even + at / 2;", package="torch", cpp=True, needs="avx2"),
    Mutant("f16-truncated-one-pass", "torch: 16-bit results are rounded to nearest even "
           "(F16C, rows in one pass)", RMS_HALF,
           "_mm256_cvtps_ph(v[2 * k], _MM_FROUND_TO_NEAREST_INT)",
           "_mm256_cvtps_ph(v[2 * k], _MM_FROUND_TO_ZERO)", package="torch", cpp=True,
           needs="avx2"),
    Mutant("bf16-native-subnormals-flushed", "torch: 16-bit subnormal results are rounded, "
           "not flushed (AVX512-BF16, both of its loops)", RMS_HALF,
           "  if ((_mm512_fpclass_ps_mask(y_low, kSubnormalOrNaN) |\n"
           "       _mm512_fpclass_ps_mask(y_high, kSubnormalOrNaN)) != 0) {",
           "  if (false) {", package="torch", cpp=True, needs="avx512_bf16"),
    Mutant("stream-tail-unwritten", "RMSNorm: a streamed out= is written to its last element",
           STORES, "  std::memcpy(dst + i, src + i, bytes - i);\n}", "}", cpp=True),
    Mutant("f32-avx512-scale-reassociated", "RMSNorm: float32 results are the portable bits "
           "(AVX-512 scale pass)", RMS,
           "_mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), s), _mm512_loadu_ps(w + i))",
           "_mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_mul_ps(s, _mm512_loadu_ps(w + i)))",
           cpp=True, needs="avx512f"),
    Mutant("f32-avx512-head-unwritten", "RMSNorm: out= is written from its first element "
           "(AVX-512 scale pass)", RMS, "  scale_row(x, w, head, scale, y);\n", "",
           cpp=True, needs="avx512f"),
    Mutant("one-pass-head-unwritten", "RMSNorm: out= is written from its first element "
           "(the one-pass loop)",
           ONE_PASS, "for (std::int64_t j = 0; j < head; ++j)",
           "for (std::int64_t j = 1; j < head; ++j)", cpp=True),
    Mutant("fresh-output-not-huge", "RMSNorm: a fresh output is advised huge pages where whole "
           "ones fit", STORE_POLICY, "if (!advise_huge_pages(out, bytes) || ", "if (false || ",
           cpp=True),
    Mutant("fresh-huge-pages-populated", "RMSNorm: a fresh output's huge pages are left to its "
           "stores, the rest faulted in first", STORE_POLICY, "|| !huge_pages_on_advice()) {",
           "|| true) {", cpp=True),
    Mutant("store-timing-keeps-slower", "RMSNorm: auto writes a large out= the way it timed faster",
           STORE_POLICY, "Timed{best[1] < best[0],", "Timed{best[1] > best[0],", cpp=True),
    Mutant("store-timing-trusts-a-large-cache", "RMSNorm: auto times an out= of 8 MiB or more "
           "whatever the cache the OS describes", STORE_POLICY,
           "std::min(last_level_bytes / 4, kTimedFromAtMost)", "last_level_bytes / 4", cpp=True),
    Mutant("out-overlap-unchecked", "RMSNorm: out may not overlap an input", RMS,
           "  if (overlaps(out_extent, extent_of(x_data",
           "  if (false && overlaps(out_extent, extent_of(x_data",
           cpp=True),
    # Kinds of bug the whole suite once passed (issue 54), each with the test added for it.
    Mutant("backward-gradients-swapped", "torch: only the gradients asked for, each its own "
           "input's", TORCH_GLUE,
           "grad_x if ctx.needs_input_grad[0] else None,\n"
           "            grad_weight if ctx.needs_input_grad[1] else None,",
           "grad_x if ctx.needs_input_grad[1] else None,\n"
           "            grad_weight if ctx.needs_input_grad[0] else None,", package="torch"),
    Mutant("fake-kernel-strides-of-x", "torch: the fake kernel has the real kernel's strides",
           TORCH_GLUE,
           "        return torch.empty_like(x, memory_format=torch.contiguous_format)\n",
           "        return torch.empty_like(x)\n", package="torch"),
    Mutant("unaligned-out-streamed", "RMSNorm: an out= at any byte offset is written, never a "
           "crash", RMS,
           "streaming && (one_pass || avx512) && out_aligned;",
           "streaming && (one_pass || avx512);", cpp=True, needs="avx2"),
    Mutant("idle-worker-spins", "Threads: workers sleep between calls", THREADS,
           "      spin_until(woken);\n", "      while (!woken()) cpu_relax();\n", cpp=True),
    Mutant("registry-reason-read-as-yes", "registry: a reason in a yes/no field reads as no",
           REGISTRY_PY, "p[k] is v if v is True else p[k] == v",
           "bool(p[k]) if v is True else p[k] == v", package="ctypes",
           tests=("tools/tests/test_registry.py",)),
    Mutant("severity-mildest", "page: a row's severity is its worst trap",
           "benchmarks/outcomes.py", "return min(found, key=SEVERITY_ORDER.index) if found",
           "return max(found, key=SEVERITY_ORDER.index) if found", package="ctypes",
           tests=PAGE_RULES),
    Mutant("probed-counts-every-question", "page: (N of M probed) counts the questions a probe "
           "answered", "benchmarks/page/render.py",
           'return sum(o.kind != "not probed" for o in asked), len(asked)',
           "return len(asked), len(asked)", package="ctypes", tests=PAGE_RULES),
    Mutant("slower-floor-excuses", "page: a slower floor of a kind excuses nothing its faster "
           "one does not", "benchmarks/page/render.py", "fastest.setdefault(floor_kind(k), k)",
           "fastest[floor_kind(k)] = k", package="ctypes", tests=PAGE_RULES),
    Mutant("unexplained-miss-beside-fastest", "page: a miss no floor explains is set beside its "
           "slowest floor, the least it can leave to kvbridge's code", "benchmarks/page/render.py",
           "    return candidates[-1]\n", "    return candidates[0]\n", package="ctypes",
           tests=PAGE_RULES),
    Mutant("faults-counted-around-settling", "page: a round's page faults are its timed calls'",
           "benchmarks/measuring/harness.py",
           "                timer.timeit(settle)  # untimed: SETTLE_SECONDS\n"
           "                faults, stalls = page_faults(), compaction_stalls()",
           "                faults, stalls = page_faults(), compaction_stalls()\n"
           "                timer.timeit(settle)  # untimed: SETTLE_SECONDS",
           package="ctypes", tests=PAGE_RULES),
    Mutant("guide-ignores-must-haves", "page: the guide's pick passes the job's must-haves",
           "benchmarks/page/guide.py",
           "passed = {t: sum(answers[k][t].ok is True for k in job.must) for t in order}",
           "passed = dict.fromkeys(order, 0)", package="ctypes", tests=PAGE_RULES),
    Mutant("guide-runner-up-reasons-reversed", "page: the runner-up is worth it where it is "
           "better", "benchmarks/page/guide.py", "a, b = per[v.runner_up], per[v.pick]",
           "b, a = per[v.runner_up], per[v.pick]", package="ctypes", tests=PAGE_RULES),
    Mutant("guide-refused-is-gil-off", "page: an option pip refuses on the free-threaded Python "
           "does not run with the GIL off there", "benchmarks/page/guide.py",
           'return Answer(False, None, f"does not install on {on}", link)',
           'return Answer(True, None, f"does not install on {on}", link)', package="ctypes",
           tests=PAGE_RULES),
    Mutant("guide-compile-with-breaks", "page: torch.compile's must-have needs 0 graph breaks",
           "benchmarks/page/guide.py", 'ok = o.kind == "passed" and breaks == 0',
           'ok = o.kind == "passed"', package="ctypes", tests=PAGE_RULES),
    Mutant("guide-one-wheel-for-any", "page: one wheel for every Python means every one tried",
           "benchmarks/page/guide.py", "return Answer(best == len(tried), None,",
           "return Answer(best > 0, None,", package="ctypes", tests=PAGE_RULES),
    Mutant("guide-no-ties", "page: a cost within noise or under the threshold is a tie",
           "benchmarks/page/guide.py", "return r.spread[0] > 1 and r.median >= DECISIVE",
           "return r.median > 1", package="ctypes", tests=PAGE_RULES),
    Mutant("guide-throw-that-kills-passes", "page: a C++ throw that ends the process fails the "
           "classes' must-have", "benchmarks/page/guide.py",
           'died = [(axis, row, o) for axis, row, o in asked if o.kind == "crashed"]',
           "died = []", package="ctypes", tests=PAGE_RULES),
    Mutant("guide-compiler-needed-passes", "page: needing a compiler fails the C library's "
           "must-have", "benchmarks/page/guide.py",
           'return Answer(o.kind == "passed", None, o.value, link)',
           "return Answer(True, None, o.value, link)", package="ctypes", tests=PAGE_RULES),
    Mutant("health-machine-never-blamed", "page: a target its floor (the plain C loop, the "
           "technology's call) misses too says so", "benchmarks/page/cells.py",
           'if floor_verdict == "**not met**":', 'if floor_verdict == "never":', package="ctypes",
           tests=PAGE_RULES),
    Mutant("health-behind-a-noisy-floor-excused", "page: a floor within noise of its bound "
           "excuses only a package not clearly behind it", "benchmarks/page/cells.py",
           'return floor_verdict == "within noise" and lo <= 1 <= hi',
           'return floor_verdict == "within noise"', package="ctypes", tests=PAGE_RULES),
    Mutant("guide-stability-always-holds", "page: a verdict's stability is counted over "
           "resampled rounds", "benchmarks/page/guide.py",
           "draw = draws.setdefault(n, [rng.randrange(n) for _ in range(n)])",
           "draw = draws.setdefault(n, list(range(n)))", package="ctypes", tests=PAGE_RULES),
]  # fmt: skip


def package_mutants() -> list[Mutant]:
    """Each package's own mutants, from its folder (packages/<name>/mutants.toml), collected by
    its registry name: its code broken, its tests run. A new binding brings its own."""
    found = []
    for name in registry.PACKAGES:
        path = registry.folder(name) / "mutants.toml"
        if path.is_file():
            for m in tomllib.loads(path.read_text())["mutant"]:
                # A path relative to the package's folder (its front end is in packages/python).
                where = os.path.normpath(f"packages/{name}/{m['path']}")
                found.append(Mutant(m["id"], m["promise"], where, m["find"], m["replace"],
                                    package=name,
                                    free_threaded=m.get("free_threaded", False)))  # fmt: skip
    return found


MUTANTS += package_mutants()


def run(cmd: list[str], cwd: Path, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def scratch_copy(dest: Path) -> None:
    """The working tree as git sees it (tracked and untracked-but-not-ignored files)."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def first_failure(output: str) -> str | None:
    """The test that caught a mutant, from pytest's or ctest's output."""
    if m := re.search(r"^FAILED (.+?)(?: - .*)?$", output, re.M):
        return m.group(1).split("::", 1)[-1]
    if m := re.search(r'File "[^"]*(test_\w+\.py)", line \d+ in (test_\w+)', output):
        return f"{m.group(2)} (process died)"
    if m := re.search(r"^\s*\d+ - (\w+) \(", output, re.M):
        return f"ctest {m.group(1)}"
    return None


def stranded(root: Path) -> list[str]:
    """The mutants whose text does not occur exactly once in their file under `root`: a
    refactor that moved the code strands them (tox -e lint checks this on every run)."""
    ids = [m.id for m in MUTANTS]
    twice = [f"{i}: more than one mutant has this id" for i in sorted(set(ids)) if ids.count(i) > 1]
    counts = {m.id: (root / m.path).read_text().count(m.find) for m in MUTANTS}
    return twice + [f"{m.id}: the text to mutate occurs {counts[m.id]} times in {m.path}; "
                    "update the mutant" for m in MUTANTS if counts[m.id] != 1]  # fmt: skip


def check(mutant: Mutant, scratch: Path, builds: Path) -> str | None:
    """Apply, rebuild, test, revert. Returns the test that caught it, or None."""
    path = scratch / mutant.path
    original = path.read_text()
    path.write_text(original.replace(mutant.find, mutant.replace))
    try:
        return run_tests(mutant, scratch, builds)
    finally:
        path.write_text(original)


def free_threaded_venv(builds: Path) -> str:
    """A venv of a free-threaded Python that builds the packages and runs the suite, made once
    per run (tools/free_threaded_python.py finds or builds the interpreter and makes it): its
    python."""
    made = run([sys.executable, str(ROOT / "tools" / "free_threaded_python.py"), "--venv",
                str(builds / "ft-venv"), "--tests"], ROOT)  # fmt: skip
    if made.returncode != 0:
        sys.exit(f"a free-threaded mutant needs a free-threaded venv: {made.stderr[-500:]}")
    return made.stdout.strip()


def run_tests(mutant: Mutant, scratch: Path, builds: Path) -> str | None:
    """The tests for one mutant's code, on the tree as it is now: the first failure, or None."""
    if mutant.cpp:
        cpp = builds / ("cpp-tsan" if mutant.tsan else "cpp")
        configure = ["cmake", "-S", str(scratch / "common_cpp"), "-B", str(cpp), "-G", "Ninja",
                     "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DKVBRIDGE_CUDA=OFF"]  # fmt: skip
        if mutant.tsan:
            configure.append("-DKVBRIDGE_SANITIZE=thread")
        done = run(configure, scratch)
        done = run(["cmake", "--build", str(cpp)], scratch) if done.returncode == 0 else done
        if done.returncode != 0:
            return "the core no longer builds"
        env = {**os.environ, "TSAN_OPTIONS": "halt_on_error=1"}
        done = run(["ctest", "--test-dir", str(cpp), "--output-on-failure"], scratch, env)
        if done.returncode != 0:
            return first_failure(done.stdout) or "ctest"
        if mutant.tsan:
            return None  # a race only a sanitizer sees; the suite cannot be asked to
    python = free_threaded_venv(builds) if mutant.free_threaded else sys.executable
    build_root = builds / "ft" if mutant.free_threaded else builds
    done = run([python, str(scratch / "tools" / "install_packages.py"), "--build-root",
                str(build_root), mutant.package], scratch)  # fmt: skip
    if done.returncode != 0:
        return "the package no longer builds"
    pytest = ["-X", "faulthandler", "-m", "pytest"]
    suites = [[*pytest, str(scratch / "tests" / "conformance"), "--package", mutant.package]]
    # ... then its own tests and its family's (torch's), run as its tox env runs them
    if registry.own_tests(mutant.package):
        suites.append([str(scratch / "tools" / "own_tests.py"), mutant.package])
    if mutant.tests:
        suites = [[*pytest, *(str(scratch / t) for t in mutant.tests)]]
    env = {**os.environ, "KVBRIDGE_PACKAGE": mutant.package}
    for suite in suites:
        done = run([python, *suite, "-x", "-q", "-p", "no:cacheprovider", f"--rootdir={scratch}"],
                   scratch, env)  # fmt: skip
        if done.returncode != 0:
            return first_failure(done.stdout + done.stderr) or "the suite (no test named)"
    return None


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        default="",
        help="run the mutants whose id contains this (or, comma-separated, any of these)",
    )
    parser.add_argument(
        "--check-texts", action="store_true", help="only check each mutant's text occurs once"
    )
    args = parser.parse_args()
    if problems := stranded(ROOT):
        sys.exit("\n".join(problems))
    if args.check_texts:
        print(f"every one of the {len(MUTANTS)} mutants' texts occurs once in its file")
        return
    started = time.perf_counter()
    chosen = [m for m in MUTANTS if any(part in m.id for part in args.only.split(","))]
    flags = cpu_flags()
    for m in [m for m in chosen if m.needs and m.needs not in flags]:
        print(f"not run  {m.id:28s} its code needs {m.needs}, which this CPU lacks", flush=True)
    chosen = [m for m in chosen if not m.needs or m.needs in flags]
    survived = []
    with tempfile.TemporaryDirectory(prefix="kvbridge-mutants-") as tmp:
        scratch, builds = Path(tmp) / "repo", Path(tmp) / "builds"
        scratch_copy(scratch)
        # Unmutated, every test that judges a mutant must pass, or a failure would be credited
        # to a mutant it has nothing to do with.
        for base in {(m.package, m.cpp, m.tsan, m.free_threaded, m.tests): m
                     for m in chosen}.values():  # fmt: skip
            if failed := run_tests(base, scratch, builds):
                sys.exit(f"the unmutated tree already fails ({base.package}): {failed}")
        print(f"unmutated: every test used below passes ({len(chosen)} mutants to run)")
        for mutant in chosen:
            caught = check(mutant, scratch, builds)
            print(f"{'caught  ' if caught else 'SURVIVED'} {mutant.id:28s} {mutant.promise}"
                  + (f"\n         by {caught}" if caught else ""), flush=True)  # fmt: skip
            if not caught:
                survived.append(mutant.id)
    minutes = (time.perf_counter() - started) / 60
    print(f"\n{len(chosen) - len(survived)} of {len(chosen)} mutants caught in {minutes:.1f} min")
    if survived:
        sys.exit(f"survived: {', '.join(survived)}")


if __name__ == "__main__":
    main()
