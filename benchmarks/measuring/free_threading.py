"""Free-threaded Python: what each technology gives with the GIL off, probed and measured on a
free-threaded interpreter, with the probe modules of benchmarks/probing/probes_ft (each built twice:
declaring that it runs without the GIL, and declaring nothing) and the kvbridge packages built
for that interpreter. report.py runs it there and puts its answers on the page:

    python benchmarks/measuring/free_threading.py --json out.json [--quick]

Every question that depends on the GIL's state runs in a fresh process of this interpreter:
importing a module that declares nothing turns the GIL back on for the whole process, and a
lock-free pool called from 4 threads may kill it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: run as a script
import spec  # noqa: E402
from outcomes import Outcome, not_probed  # noqa: E402
from spec import case_key, registry  # noqa: E402

# Each technology's free-threaded probe module (its plain twin is <module>_plain), how it
# declares that it needs no GIL, and its per-object lock: the technology table's rows
# (benchmarks/technologies.json, through spec.py).
TECHNOLOGIES = spec.FT_MODULES
# The kvbridge packages measured here: those the registry says run free-threaded.
PACKAGES = {name: registry.PACKAGES[name]["module"] for name in registry.names(free_threaded=True)}
# 16 runs a technology: at 4, the pool's deaths moved between pages of unchanged code (pybind11
# 4, 3, 1, 3 of 4); the page states the race over all technologies' runs together.
POOL_THREADS, POOL_ROUNDS, POOL_BLOCKS, POOL_RUNS = 4, 20_000, 64, 16

# --- probes -------------------------------------------------------------------------------------

IMPORT = """
import json, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    {load}
print(json.dumps({{"gil": sys._is_gil_enabled(),
                  "warnings": [str(w.message) for w in caught
                               if issubclass(w.category, RuntimeWarning)]}}))
"""
CTYPES_LOAD = ("import ctypes; from kvbridge_probes_ft import c_abi_library; "
               "ctypes.CDLL(c_abi_library())")  # fmt: skip

# The seed pool from POOL_THREADS threads at once: allocate 2, release them, over and over.
HAMMER = """
import json, sys, threading
{pool}
barrier = threading.Barrier({threads})
def work():
    barrier.wait()
    for _ in range({rounds}):
        for b in allocate(2):
            release(b)
threads = [threading.Thread(target=work) for _ in range({threads})]
for t in threads:
    t.start()
for t in threads:
    t.join()
twice, allocated, released = counters()
print(json.dumps({{"gil": sys._is_gil_enabled(), "free": num_free(), "twice": twice,
                  "allocated": allocated, "released": released}}))
"""
MODULE_POOL = """
import importlib
pool = getattr(importlib.import_module("kvbridge_probes_ft.{module}"), "{cls}")({blocks})
allocate, release, counters = pool.allocate, pool.release, pool.counters
def num_free():
    return pool.num_free
"""
CTYPES_POOL = """
import ctypes
from kvbridge_probes_ft import c_abi_library
lib = ctypes.CDLL(c_abi_library())
lib.kvbp_seed_create.restype = ctypes.c_void_p
lib.kvbp_seed_create.argtypes = [ctypes.c_int32]
lib.kvbp_seed_allocate.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]
lib.kvbp_seed_release.argtypes = [ctypes.c_void_p, ctypes.c_int32]
lib.kvbp_seed_num_free.argtypes = [ctypes.c_void_p]
lib.kvbp_seed_num_free.restype = ctypes.c_int64
lib.kvbp_seed_counters.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)]
pool = lib.kvbp_seed_create({blocks})
def allocate(n):
    out = (ctypes.c_int32 * n)()
    return out[: lib.kvbp_seed_allocate(pool, n, out)]
def release(b):
    lib.kvbp_seed_release(pool, b)
def num_free():
    return lib.kvbp_seed_num_free(pool)
def counters():
    out = (ctypes.c_int64 * 3)()
    lib.kvbp_seed_counters(pool, out)
    return list(out)
"""


def child(code: str, env: dict | None = None, timeout: float = 120) -> tuple[int, dict | str]:
    """Run `code` in a fresh process of this interpreter: (exit status, its JSON or stderr)."""
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)  # fmt: skip
    if done.returncode != 0:
        return done.returncode, done.stderr.strip()[-500:]
    return 0, json.loads(done.stdout.strip().splitlines()[-1])


def signal_name(status: int) -> str:
    import signal

    try:
        return signal.Signals(-status).name
    except ValueError:
        return f"exit status {status}"


def gil_after(load: str) -> Outcome:
    """Whether the GIL is on after `load` ran in a fresh process (and the warning it gave)."""
    status, found = child(IMPORT.format(load=load))
    if status != 0:
        return Outcome("failed", "import failed", str(found)[-200:])
    if found["gil"]:
        warning = " ".join(found["warnings"]).split(", which")[0]
        return Outcome("GIL enabled", detail=warning or "no warning")
    return Outcome("GIL disabled")


def hammered(pool: str, runs: int, counts: dict[str, int]) -> Outcome:
    """The pool from POOL_THREADS threads, in `runs` fresh processes: how many died, and in
    those that finished, whether every block came back and the counters add up (each count
    also added to `counts`: the page states the race once, over every technology's runs)."""
    died, wrong, twice, gil = [], 0, 0, False
    code = HAMMER.format(pool=pool, threads=POOL_THREADS, rounds=POOL_ROUNDS)
    for _ in range(runs):
        status, found = child(code)
        if status != 0:
            died.append(signal_name(status))
            continue
        gil |= found["gil"]
        twice += found["twice"]
        expected = POOL_THREADS * POOL_ROUNDS * 2
        wrong += (found["free"] != POOL_BLOCKS or found["allocated"] != expected
                  or found["released"] != expected or found["twice"] != 0)  # fmt: skip
    finished = runs - len(died)
    for key, n in (("runs", runs), ("died", len(died)), ("wrong", wrong),
                   ("right", finished - wrong)):  # fmt: skip
        counts[key] = counts.get(key, 0) + n
    where = f"{POOL_THREADS} threads, {POOL_ROUNDS:,} allocations of 2 each, {runs} runs"
    survivors = (f"; of the {finished} that finished, {finished - wrong} right, {wrong} wrong"
                 if finished else "")  # fmt: skip
    if died:
        return Outcome("crashed", f"{', '.join(sorted(set(died)))} in {len(died)} of {runs} runs",
                       f"{where}; the GIL was {'on' if gil else 'off'}{survivors}")  # fmt: skip
    if wrong:
        return Outcome("misread", detail=f"{where}: {wrong} of {runs} runs ended wrong; "
                       f"{twice} blocks handed out twice")  # fmt: skip
    return Outcome("passed", f"every block back, counters right ({runs} of {runs} runs)",
                   f"{where}; the GIL was {'on' if gil else 'off'}")  # fmt: skip


# The technologies asked through pip alone: whether it installs them on this interpreter, and,
# where it does, whether importing the technology turns the GIL back on. Each: what a user asks
# pip for, and the module that import loads. torch is asked as the torch packages' users ask
# for it (main's --torch, spec.TORCH_REQUIREMENT). From the technology table's `pip`
# (benchmarks/technologies.json): row -> (distribution, module).
PIP_ASKED = spec.PIP_ASKED


def pip_asked(requirement: str, module: str) -> Outcome:
    """pip's answer for a requirement on this interpreter (installed into a scratch folder, as a
    user's `pip install` would: from a wheel, or from its sdist where it has no wheel), then the
    GIL after importing it from there. pip as it comes, reading no configuration file: a
    machine's cap or mirror (this workplace's caps torch) would answer in the technology's place."""
    import tempfile

    plain = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    distribution = registry.requirement_name(requirement)
    with tempfile.TemporaryDirectory() as scratch:
        # --no-compile: compiling torch's 30,000 Python files takes minutes on 2 cores
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-compile",
                               "--target", scratch, requirement],
                              check=False, capture_output=True, text=True, env=plain)  # fmt: skip
        if done.returncode == 0:
            found = gil_after(f"sys.path.insert(0, {scratch!r}); import {module}")
            got = next(importlib.metadata.distributions(name=distribution, path=[scratch])).version
            return Outcome(found.kind, found.value, "; ".join(
                filter(None, [f"pip installed {distribution} {got}", found.detail])))  # fmt: skip
    # Its own words where it says why (cffi names free-threading; a failed sdist build, its
    # compiler's first error; no file for this interpreter, the releases that have one), else
    # pip's last line naming it.
    lines = [line.strip() for line in done.stderr.splitlines()]
    said = (
        [x for x in lines if "free-threaded" in x or "(from versions:" in x]
        + [  # a compiler's, without its path
            x[x.index(" error: ") + 1 :] for x in lines if " error: " in x
        ]
    )
    named = [x for x in lines if distribution in x.lower().replace("_", "-")]
    return Outcome("refused", "pip", (said + named[-1:] + ["pip failed"])[0])


def probes(
    runs: int, race: dict[str, int], pip: dict[str, tuple[str, str]]
) -> dict[str, dict[str, Outcome]]:
    """Every technology's rows (`pip`: those asked through pip alone, as PIP_ASKED); `race`
    gathers the lock-free pool's runs of them all."""
    found = {}
    for tech, (module, _, _) in TECHNOLOGIES.items():
        print(f"probing {tech} on the free-threaded interpreter ...", flush=True)
        if module is None:  # ctypes: a library loaded by CPython's own module
            found[tech] = {
                "a module that declares nothing": gil_after(CTYPES_LOAD),
                "its declaration": not_probed("ctypes is part of CPython: nothing to declare"),
                "the lock-free pool": hammered(CTYPES_POOL.format(blocks=POOL_BLOCKS), runs, race),
                "the same pool with its lock": not_probed("ctypes has no lock of its own: a "
                                                          "`threading.Lock` in Python"),
            }  # fmt: skip
            continue
        pool = MODULE_POOL.format(module=module, cls="SeedPool", blocks=POOL_BLOCKS)
        locked = MODULE_POOL.format(module=module, cls="LockedPool", blocks=POOL_BLOCKS)
        found[tech] = {
            "a module that declares nothing": gil_after(f"import kvbridge_probes_ft.{module}_plain"),
            "its declaration": gil_after(f"import kvbridge_probes_ft.{module}"),
            "the lock-free pool": hammered(pool, runs, race),
            "the same pool with its lock": hammered(locked, runs, {}),
        }  # fmt: skip
    for tech, (requirement, module) in pip.items():
        print(f"probing {tech} on the free-threaded interpreter (pip install {requirement}) ...",
              flush=True)  # fmt: skip
        installs = pip_asked(requirement, module)
        reason = (f"{tech} does not install here (its first row)" if installs.kind == "refused"
                  else f"{tech} installed (its first row: importing it), but not probed further")  # fmt: skip
        found[tech] = {row: not_probed(reason) for row in found["ctypes"]}
        found[tech]["a module that declares nothing"] = installs
    for name, module in PACKAGES.items():
        found.setdefault("kvbridge", {})[name] = gil_after(f"import {module}")
    return found


# --- benchmarks: calls from 1 thread and from 2 at once, the GIL off and on ------------------------

# case -> (setup code, the call). Every case runs in one process per GIL setting; PYTHON_GIL=1
# turns the GIL on for the same modules.
CASES = {
    "no-op": ("from kvbridge_probes_ft import {module} as m\nf = m.noop", "f()"),
    "method": ("from kvbridge_probes_ft import {module} as m\no = m.SeedPool(4)\nf = o.noop",
               "f()"),
    # The classes job's decisive call (benchmarks/page/guide.py), asked on the interpreter its
    # must-have names: a method taking one int, looked up on the object at each call as the
    # GIL build's "method, one int" floor is.
    "method, one int": ("from kvbridge_probes_ft import {module} as m\no = m.SeedPool(4)",
                        "o.take_int64(1)"),
}  # fmt: skip
EOS_SIZES = (1, 1024)
RATE = """
import json, threading, time
import numpy as np
{setup}
{rates}
calls = {{}}
for name, rate in RATES.items():
    calls[name] = 1
    while calls[name] / rate(1, calls[name]) < {seconds}:  # per thread, about `seconds` alone
        calls[name] *= 2
# One thread, then two, {pairs} times: the round's ratio is the median of each pair's, its rate
# the median one-thread rate. A shared machine's speed drifts between tries; a pair's two tries
# are adjacent, so the drift mostly cancels in its ratio, where the best of a few tries each
# kept it (the commit that made this change has the spreads of both). With the read floor
# asked, its pair follows each of the call's, so that both ratios come from the same minutes.
pairs = {{name: [] for name in RATES}}
for _ in range({pairs}):
    for name, rate in RATES.items():
        pairs[name].append((rate(1, calls[name]), rate(2, calls[name])))
found = {{}}
for name, tries in pairs.items():
    ones = sorted(one for one, _ in tries)
    ratios = sorted(two / one for one, two in tries)
    found.update({{name + "one": ones[len(ones) // 2], name + "ratio": ratios[len(ratios) // 2]}})
print(json.dumps(found))
"""
# One timed loop, its call written into the loop's body (a call through a helper would add a
# Python frame to every call and change what is measured).
RATE_LOOP = """
def rate_{name}(threads, calls):
    # Timed by the workers themselves, from the first one's start to the last one's end: a
    # thread's wake-up from the barrier or its join is not the calls' time.
    barrier, spans = threading.Barrier(threads), []
    def work():
        {own}
        barrier.wait()
        start = time.perf_counter()
        for _ in range(calls):
            {call}
        spans.append((start, time.perf_counter()))
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return threads * calls / (max(e for _, e in spans) - min(s for s, _ in spans))
RATES["{name}"] = rate_{name}
"""
# The machine's own two readers of the same bytes (probes/probe_floors.c), asked beside a case.
FLOOR = ("from kvbridge_probes_ft import probe_floors", "probe_floors.read(t, 1)")


def rate_code(setup: str, call: str, own: str, seconds: float, floor: bool = False) -> str:
    """A child's code that prints the call's 1-thread rate and 2-thread ratio ("one", "ratio"),
    and with `floor` the read floor's from the same tries ("floor_one", "floor_ratio")."""
    loops = [RATE_LOOP.format(name="", own=own, call=call)]
    if floor:
        setup += "\n" + FLOOR[0]
        loops.append(RATE_LOOP.format(name="floor_", own=own, call=FLOOR[1]))
    return RATE.format(
        setup=setup + "\nRATES = {}", rates="".join(loops), seconds=seconds, pairs=PAIRS
    )


PAIRS = 9  # odd: a median that is one of the pairs


# The count_eos cases again with an array of each thread's own (at the size where the call's
# fixed cost is all: spec.OWN_ARRAY_SIZES), made in that thread, and made by the main thread and
# handed over. They tell two causes apart: both threads writing one shared object's reference
# count (every call takes a reference to its array), and a free-threaded CPython's counting of
# references from a thread other than the object's maker on an atomic count (biased reference
# counting). The page's decision table quotes spec.FT_SCALING_CASE.
OWN_ARRAY_SIZES, FT_SCALING_CASE = spec.OWN_ARRAY_SIZES, spec.FT_SCALING_CASE
HANDED = 256  # arrays the main thread makes for its workers: one per thread per rate() call


def bench_cases() -> dict[str, tuple[str, str, str, bool]]:
    """case -> (setup code, the call, what each thread runs first, whether the read floor is
    timed in the same tries): every case but the own-array ones shares one callable and one
    array between both threads."""
    cases = {}
    for tech, (module, _, _) in TECHNOLOGIES.items():
        if module is None:
            cases[case_key("no-op", tech)] = (
                "import ctypes\nfrom kvbridge_probes_ft import c_abi_library\n"
                "f = ctypes.CDLL(c_abi_library()).kvbp_noop\nf.argtypes, f.restype = [], None",
                "f()",
                "pass",
                False,
            )
            continue
        for case, (setup, call) in CASES.items():
            cases[case_key(case, tech)] = (setup.format(module=module), call, "pass", False)
    # (case, size, what each thread runs first, whether it calls through a callable of its own)
    shared = [(f"count_eos n={n}", n, "pass", False) for n in EOS_SIZES]
    own = [(f"count_eos n={n}, own array", n, f"t = np.ones({n}, np.int32)", False)
           for n in OWN_ARRAY_SIZES]  # fmt: skip
    handed = [(f"count_eos n={n}, own array made by the main thread", n, "t = made.pop()", False)
              for n in OWN_ARRAY_SIZES]  # fmt: skip
    # Each thread's own callable too (a functools.partial made in the thread): what is left
    # serialised then is neither an argument's nor the function object's reference count, but
    # something every call of the binding shares (a lock).
    callable_own = [(f"count_eos n={n}, own array and callable", n,
                     f"t = np.ones({n}, np.int32); f = functools.partial(shared_f)", True)
                    for n in OWN_ARRAY_SIZES]  # fmt: skip
    for case, n, first, own_callable in shared + own + handed + callable_own:
        arrays = (
            f"t = np.ones({n}, np.int32)\nmade = [np.ones({n}, np.int32) for _ in range({HANDED})]"
        )
        for name, module in PACKAGES.items():
            if spec.needs_torch(name) and case != FT_SCALING_CASE:
                continue  # each process imports torch (seconds): the case the page quotes only
            cases[case_key(case, name)] = (
                f"import functools\nimport {module} as kv\n{arrays}\nkv.set_num_threads(1)\n"
                "shared_f = kv.count_eos",
                "f(t, 0)" if own_callable else "kv.count_eos(t, 0)",
                first,
                # The case the decision table quotes: beside the machine's floor, measured in
                # the same minutes, since what two threads get drifts with the host's load.
                case == FT_SCALING_CASE,
            )
        cases[case_key(case, "read floor")] = (
            f"import functools\nfrom kvbridge_probes_ft import probe_floors\n{arrays}\n"
            "shared_f = probe_floors.read",
            "f(t, 1)" if own_callable else "probe_floors.read(t, 1)",
            first,
            False,
        )
    return cases


def benchmarks(rounds: int, seconds: float) -> dict[str, dict]:
    """case -> GIL setting -> the 2-thread / 1-thread throughput ratio per round, and the
    1-thread rate (report.py reads them as harness ratios, like every other figure). Each round runs each case once per GIL setting, settings alternating."""
    found: dict[str, dict] = {}
    settings = {"off": {"PYTHON_GIL": "0"}, "on": {"PYTHON_GIL": "1"}}
    for key, (setup, call, own, floor) in bench_cases().items():
        print(f"measuring {key} from 1 and 2 threads, the GIL off and on ...", flush=True)
        code = rate_code(setup, call, own, seconds, floor)
        for r in range(rounds):
            order = list(settings)[r % 2 :] + list(settings)[: r % 2]
            for gil in order:
                status, out = child(code, settings[gil])
                if status != 0:  # its last line: what the traceback ends with
                    found.setdefault(key, {})[gil] = {"error": str(out).splitlines()[-1][-200:]}
                    continue
                entry = found.setdefault(key, {}).setdefault(gil, {})
                if "error" not in entry:
                    for field, value in out.items():  # one, ratio (and floor_one, floor_ratio)
                        entry.setdefault(field, []).append(value)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--torch", help="torch as the torch packages' users ask for it "
                        "(spec.TORCH_REQUIREMENT)")  # fmt: skip
    args = parser.parse_args()
    pip = {**PIP_ASKED, **({"torch": (args.torch, "torch")} if args.torch else {})}
    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        sys.exit("free_threading.py runs on a free-threaded Python")
    race: dict[str, int] = {}  # the lock-free pool's runs, every technology's together
    result = {
        "python": sys.version.split()[0] + " (free-threaded)",
        "declarations": {t: d for t, (_, d, _) in TECHNOLOGIES.items()},
        "locks": {t: lock for t, (_, _, lock) in TECHNOLOGIES.items() if lock},
        "pool": {
            "threads": POOL_THREADS,
            "rounds": POOL_ROUNDS,
            "blocks": POOL_BLOCKS,
            "race": race,
        },
        "pip_asked": {tech: requirement for tech, (requirement, _) in pip.items()},
        "pairs": PAIRS,
        "probes": probes(1 if args.quick else POOL_RUNS, race, pip),
        "benchmarks": benchmarks(3 if args.quick else 7, 0.005 if args.quick else 0.02),
    }
    args.json.write_text(json.dumps(result, indent=1, default=Outcome.to_json))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
