"""What the benchmarks measure and what the report judges, in one place: the bench_<feature>.py
files build their cases from it and report.py reads the same names, sizes and targets."""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

# packages/ holds a folder named torch: left on sys.path, `import torch` (tvm-ffi tries it) would
# find that folder as a namespace package where torch is not installed. On it for one import only.
_PACKAGES_DIR = str(Path(__file__).resolve().parent.parent / "packages")
sys.path.insert(0, _PACKAGES_DIR)
import registry  # noqa: E402

sys.path.remove(_PACKAGES_DIR)

# The kvbridge packages, from their one list (packages/registry.json, which says each field).
REGISTRY = registry.PACKAGES
PACKAGES = tuple(REGISTRY)
# The binding technology behind each package, as the probe columns name it.
TECHNOLOGY = {name: p["technology"] for name, p in REGISTRY.items()}

# The technologies the page probes, from their one table (benchmarks/technologies.json, which
# says each field), in the order of the trap tables' columns.
_TABLE = json.loads((Path(__file__).resolve().parent / "technologies.json").read_text())
TECHNOLOGIES = {t["name"]: t for t in _TABLE["technologies"]}
# Each probe family's module under benchmarks/ (it asks the family's questions and times its
# floors), by the family's name.
FAMILIES = _TABLE["families"]
# The trap tables' columns, each with its header. A technology probed in a second mode shares its
# column (VARIANTS: the second mode, and the word that names it where its answer differs).
PROBED = {name: t["column"] for name, t in TECHNOLOGIES.items() if "variant_of" not in t}
VARIANTS = {
    t["variant_of"]: (name, t["word"]) for name, t in TECHNOLOGIES.items() if "variant_of" in t
}
# The rows of the call-overhead table, in order: the hand-written CPython C-API no-op under every
# technology, then each technology's floors (its family's floors() times them; a technology's
# variants are rows of their own there).
BASELINE_FLOOR = "C-API"
FLOOR_ROWS = (BASELINE_FLOOR, *(f for t in TECHNOLOGIES.values() for f in t["floors"]))
# Options of the decision table that no kvbridge package takes: their job, and why none does.
# Their traps and no-op are probed and measured like the others'; their build cells say this.
OTHER_OPTIONS = {name: (t["option"]["job"], t["option"]["why_no_package"])
                 for name, t in TECHNOLOGIES.items() if "option" in t}  # fmt: skip
# The technologies whose functions are extern "C": a C++ exception cannot leave them as one, so
# the exceptions table has no column for them (their row is the escape table's).
EXTERN_C = tuple(name for name, t in TECHNOLOGIES.items() if t.get("extern_c"))
# The technologies whose classes are objects of their own kind, with the name the decision table
# gives their method call (measured beside the function call, as `method[<technology>]`).
# The contiguity opt-in of each technology that has one (the arrays table's note names them).
CONTIGUOUS_IDIOMS = {name: t["contiguous_idiom"] for name, t in TECHNOLOGIES.items()
                     if "contiguous_idiom" in t}  # fmt: skip
CLASS_METHODS = {name: t["class_method"] for name, t in TECHNOLOGIES.items() if "class_method" in t}
# The free-threaded probe row (benchmarks/measuring/free_threading.py) that answers for a
# technology, where it is named otherwise there: torch's ops (classic and stable ABI) are
# loaded by torch, so whether torch installs and keeps the GIL off answers for them; a pybind11
# module in a torch extension is a pybind11 module, and pybind11's rows answer for it.
FT_PROBE = {name: t["free_threaded"]["probe"] for name, t in TECHNOLOGIES.items()
            if "probe" in t.get("free_threaded", {}) and t["free_threaded"]["probe"] != name}  # fmt: skip
# The free-threaded probes built here (benchmarks/probing/probes_ft): probe row -> (its module, None
# where there is none to build; how it declares it needs no GIL; its per-object lock).
FT_MODULES = {t["free_threaded"]["probe"]: (t["free_threaded"]["module"],
                                            t["free_threaded"]["declaration"], t["free_threaded"]["lock"])
              for t in TECHNOLOGIES.values() if "declaration" in t.get("free_threaded", {})}  # fmt: skip
# The free-threaded rows asked of pip alone: probe row -> (distribution, module to import).
PIP_ASKED = {t["free_threaded"]["probe"]: tuple(t["free_threaded"]["pip"])
             for t in TECHNOLOGIES.values() if "pip" in t.get("free_threaded", {})}  # fmt: skip


def family_of(technology: str) -> str:
    """The module (under benchmarks/) of the probe family that asks a technology."""
    return FAMILIES[TECHNOLOGIES[technology]["family"]]


def ft_reason(technology: str) -> str | None:
    """Why a decision-table option has no free-threaded answer: its row's `unprobed`, or its
    package's registry reason; None where it is asked."""
    if why := TECHNOLOGIES.get(technology, {}).get("free_threaded", {}).get("unprobed"):
        return why
    for name, p in REGISTRY.items():
        if p["technology"] == technology:
            return registry.why_not(name, "free_threaded")
    return None


# The array types the packages return (the registry's `array`), each with the peers that use the
# same allocator: what a package's allocating rmsnorm is compared with (bench_rmsnorm.py).
ALLOCATORS = {"numpy": ("numpy",), "torch": ("F.rms_norm", "torch.compile")}
# The packages whose rmsnorm takes the 16-bit formats (HALF_FORMATS): those on torch tensors.
HALF_PACKAGES = tuple(p for p in PACKAGES if REGISTRY[p]["array"] == "torch")


# The torch a wheel that needs torch is tried beside in the portability table (report.py): the
# release the torch packages build against (their pyproject.toml's pin, on their first Python)
# and each one their registry rows' `torches` name for a Python with the GIL (the free-threaded
# one is the free-threaded section's). (version, Python), oldest first.
def _torches() -> tuple[tuple[str, str], ...]:
    found = set()
    for name in HALF_PACKAGES:
        pins = [r.split("==", 1)[1] for r in registry.requirements(registry.folder(name))
                if registry.requirement_name(r) == "torch" and "==" in r]  # fmt: skip
        found |= {(pin, REGISTRY[name]["pythons"][0]) for pin in pins}
        found |= {t for t in registry.torches(name) if t[1] != registry.FREE_THREADED}
    return tuple(sorted(found, key=lambda t: tuple(int(x) for x in t[0].split("."))))


TORCHES = _torches()
# torch as the free-threaded section asks pip for it: the requirement a torch package declares
# for its users (kvbridge-torch-stable's: every torch its one wheel runs on; kvbridge-torch's is
# the exact torch it was built against, so it is built against what this finds).
TORCH_REQUIREMENT = next(r for name in HALF_PACKAGES
                         for r in registry.requirements(registry.folder(name))
                         if registry.requirement_name(r) == "torch" and "==" not in r)  # fmt: skip
# The packages with a stable-ABI build beside their version-specific one (bench_call_overhead).
ABI3_PACKAGES = tuple(registry.names(abi3=True))

# Thread counts every threaded ratio is measured at, both sides alike: one, and every CPU this
# process may run on.
ALL_THREADS = len(os.sched_getaffinity(0))
THREAD_COUNTS = (1, ALL_THREADS) if ALL_THREADS > 1 else (1,)

EOS_SIZES = (1, 1024, 1 << 20, 100 << 20)
PREFIX_SIZES = (16, 4096, 1 << 20, 100 << 20)
LIST_MAX = 4096  # lists are measured up to this many tokens (beyond, a list is not the input)
DECODE_ROW = (1, 4096)  # one row: what a call costs beyond its bytes
DECODE_SHAPE = (32, 4096)  # one decode step of a 4096-wide model: in cache
CACHED_SHAPE = (256, 4096)  # 4 MiB: in a 32 MiB last-level cache, x and y together
PREFILL_SHAPE = (2048, 4096)
# Out of cache: where `out=` must move memory at the copy's speed (targets, at every one).
LARGE_SHAPES = (PREFILL_SHAPE, (4096, 4096), (8192, 8192))
RMS_SHAPES = (DECODE_ROW, DECODE_SHAPE, CACHED_SHAPE, *LARGE_SHAPES)
# The 16-bit formats kvbridge_torch's CPU kernel takes: the name in case keys, torch's dtype.
HALF_FORMATS = {"bf16": "bfloat16", "fp16": "float16"}
# 16-bit rows are also measured with as many bytes as float32's PREFILL_SHAPE, so that their
# copy floor is out of cache as float32's is: at PREFILL_SHAPE a 16-bit copy's source and
# destination fit a large last-level cache together, and across the back-to-back calls of a
# round the copy can run from it (seen on the page: a 2-thread copy above memory bandwidth).
# Twice the rows, not twice the width: a wider row's float32 weight alone would fill L1.
HALF_SHAPE = (2 * PREFILL_SHAPE[0], PREFILL_SHAPE[1])
ZERO_COPY_BYTES = (1024, 100 << 20)
GIL_TOKENS = 32 << 20  # int32: a 128 MB call, many switch intervals long
EPS = 1e-6


def case_key(case: str, who: str) -> str:
    """A benchmark case's key, the one spelling every bench_*.py, report.py and render.py use: the
    case, then who ran it in brackets (`count_eos n=1024[pybind]`)."""
    return f"{case}[{who}]"


def who_of(key: str) -> str:
    """Who ran a case, from its key (case_key's second part)."""
    return key[key.rindex("[") + 1 : -1]


def quick_sizes(sizes, limit):
    return tuple(s for s in sizes if s <= limit)


def shape_label(shape) -> str:
    return "x".join(map(str, shape))


def installed() -> list[str]:
    """The kvbridge packages this Python can import."""
    found = []
    for name in PACKAGES:
        try:
            importlib.import_module(REGISTRY[name]["module"])
        except ImportError:
            continue
        found.append(name)
    return found


def module(package: str):
    return importlib.import_module(REGISTRY[package]["module"])


def core():
    """The core's own answers (its store policy, its kernels' paths, its exception kinds): the
    public testing hooks of the package the registry's `core_answers` names."""
    return importlib.import_module(REGISTRY[registry.CORE_ANSWERS]["module"] + "._testing")


def needs_torch(package: str) -> bool:
    """Whether a package's arrays are torch tensors (the registry's `array`): it then needs
    torch to import, and torch is part of what importing it costs."""
    return REGISTRY[package]["array"] == "torch"


def native(package: str):
    """numpy array -> the package's own array type (shared, not copied)."""
    if needs_torch(package):
        import torch

        return torch.from_numpy
    return lambda a: a


def thread_setter(package: str, threads: int):
    """A `prepare` that puts the package's kernels at `threads` threads (torch: torch's own
    setting, which kvbridge_torch follows)."""
    kv = module(package)
    return lambda: kv.set_num_threads(threads)


def torch_threads(threads: int):
    import torch

    return lambda: torch.set_num_threads(threads)


# --- targets: each a ratio of two cases measured in the same rounds -------------------------------


@dataclass(frozen=True)
class Target:
    name: str  # what the reader reads, e.g. "rmsnorm out= <= 1.15x the copy of the same bytes"
    package: str
    numerator: str  # case keys
    denominator: str
    bound: float
    at_most: bool  # True: ratio <= bound; False: ratio >= bound
    # When set, the ratio judged is (numerator / denominator) / (these two), round by round: a
    # speed-up judged against the machine's own speed-up for the same pattern, same rounds.
    over: tuple[str, str] | None = None
    # The floor for the package's side of the same work, timed in the same rounds: a plain C
    # loop (each of its store kinds: the machine's), the technology's own call given the same
    # arrays (the binding's), or a fresh copy from the same allocator (fresh memory's:
    # ALLOC_COPIES), or the call then the loop. The page puts one in the package's place (the
    # fastest of each kind, fastest first; for a target missed, the first that explains it, else
    # the slowest: render.judged_floor), so a target still missed says whose floor misses it too.
    floors: tuple[str, ...] = ()

    @property
    def own(self) -> str:
        """The package's own case: the numerator or the denominator."""
        return self.numerator if who_of(self.numerator) == self.package else self.denominator

    def floor_ratio_keys(self, floor: str) -> tuple[str, str]:
        """(numerator, denominator) with `floor` in the package's case's place."""
        if self.own == self.numerator:
            return floor, self.denominator
        return self.numerator, floor


def floor_of(package: str, call: str) -> str:
    """The floor case a package's pool call is judged against: the same kind of call ("property",
    "method, one int") into its technology's probe, made with the lookups the package's own
    class makes (the registry's `floor`)."""
    return case_key(call, REGISTRY[package]["floor"])


# kvbridge's pool calls, each with the kind of call it is (its floor) and its bound.
POOL_CALLS = {"num_free": ("property", 1.2), "refcount": ("method, one int", 1.3)}

# The call cases: what each technology's no-op floors are timed on (bench_call_overhead.py) and
# the call-overhead table's columns (render.py).
CALLS = ("no-op", "one int", "one array", "one array, one int", "two arrays", "three arrays, one float",
         "one object", "method",
         "method, one int", "property")  # fmt: skip
# The calls the one stable-ABI nanobind wheel is timed on beside its per-version build.
ABI3_CALLS = {
    "num_free": ("pool.num_free", "property"),
    "refcount": ("pool.refcount(0)", "one int"),
    "count_eos": ("kv.count_eos(one, 1)", "one array"),
    "get_num_threads": ("kv.get_num_threads()", "no argument"),
}

# The count_eos cases of free_threading.py with an array of each thread's own, at the size where
# the call's fixed cost is all, and the one of them the page's decision table quotes.
OWN_ARRAY_SIZES = (1,)
FT_SCALING_CASE = f"count_eos n={OWN_ARRAY_SIZES[0]}, own array"


# A few tokens: a call's cost beyond its bytes. At these sizes the token group also times each
# technology's own call given the arguments the feature is given, passed as the package passes
# them (its registry row's `arrays`, a floor row; the call, CALLS: an array and an int for
# count_eos, two arrays for common_prefix; bench_tokens.py),
# and the smallest is judged against it, within TINY_CALL_BOUND: like for like, since each
# argument has its own price (two arrays, two conversions; an int on the stable ABI costs what a
# tensor does), paid in the binding and in its floor alike.
TINY_TOKENS = {"count_eos": EOS_SIZES[:2], "common_prefix": PREFIX_SIZES[:2]}
TINY_CALL_BOUND = 1.3
# feature -> (its floor call, as CALLS names it; how the page names it)
TOKEN_FLOOR_CALLS = {"count_eos": ("one array, one int", "array-and-int call"),
                     "common_prefix": ("two arrays", "two-array call")}  # fmt: skip


def call_floor(feature: str, n: int, package: str) -> str:
    """The case key of a package's technology's own call given the feature's kinds of argument,
    timed in a token group."""
    return case_key(
        f"{feature} n={n}", f"{REGISTRY[package]['arrays']} {TOKEN_FLOOR_CALLS[feature][1]}"
    )


# The plain RMSNorm loop written for the check (probe_floors.rmsnorm, in float32 and in each
# 16-bit format), once per store kind (ordinary, non-temporal), timed beside the copy and
# kvbridge (bench_rmsnorm.py). `on`: the group's case, "2048x4096 1t" or "bf16 4096x4096 1t".
FLOOR_LOOPS = {"C loop": False, "C loop streamed": True}


def loop_floors(on: str) -> tuple[str, ...]:
    return tuple(case_key(f"rmsnorm {on}", loop) for loop in FLOOR_LOOPS)


# At the decode step the copy of its bytes takes microseconds, and a call's fixed cost is a
# good part of that, which the loop (called through the C API) barely pays. Its second floor is
# the package's technology's own call given rmsnorm(out=)'s arguments (x, the weight, out: three
# arrays, and eps: CALLS), then the loop, one statement timed in the same rounds: what the
# package cannot beat through its binding. (CALLS name, how the page names it.)
DECODE_FLOOR_CALL = ("three arrays, one float", "three-array call")


def call_then_loop(package: str, loop: str) -> str:
    """The package's technology's three-array call, then the loop (FLOOR_LOOPS), as the decode
    group names the case."""
    return f"{REGISTRY[package]['arrays']} {DECODE_FLOOR_CALL[1]}, then the {loop}"


def decode_floors(package: str) -> tuple[str, ...]:
    """The decode step's floors: the plain loop (the machine's) and the technology's call then
    the loop (the binding's), each store kind."""
    on = f"{shape_label(DECODE_SHAPE)} 1t"
    return loop_floors(on) + tuple(case_key(f"rmsnorm {on}", call_then_loop(package, loop))
                                   for loop in FLOOR_LOOPS)  # fmt: skip


# An allocating call's floor: a copy into a fresh array from the same allocator (`x.copy()`,
# `x.clone()`: bench_rmsnorm.py), timed in the same group. It reads x and writes a fresh output
# once, its pages faulted in as its stores reach them: what writing fresh memory costs here.
ALLOC_COPIES = ("numpy alloc copy", "torch alloc copy")


def alloc_floors(on: str, alloc: str) -> tuple[str, ...]:
    """An allocating call's floors: the fresh copy from its allocator (what writing fresh memory
    costs: fresh memory's), and the plain loop (the RMSNorm work itself, into the copy's
    resident output: the machine's). An allocating RMSNorm pays both; each bounds it alone."""
    return (case_key(f"rmsnorm {on}", alloc), *loop_floors(on))


# How far ahead of torch.compile of the composite (inductor's fused CPU kernel, through the same
# allocator) kvbridge_torch's allocating rmsnorm must be, at every shape and thread count: a
# hand-written kernel that only ties a compiler's is not worth a dependency.
COMPILE_LEAD = 1.2


def _rmsnorm_targets(package: str) -> list[Target]:
    """targets' float32 RMSNorm part: out= against the copy, allocating against its peers."""
    t: list[Target] = []
    numpy_side = not needs_torch(package)  # which allocator its allocating calls go through
    for large in LARGE_SHAPES:
        for threads in THREAD_COUNTS:
            on = f"{shape_label(large)} {threads}t"
            t.append(Target(f"`rmsnorm(out=)` {shape_label(large)}, {threads} thread(s) <= 1.15x the copy",
                            package, case_key(f"rmsnorm out= {on}", package), case_key(f"rmsnorm {on}", "copy"),
                            1.15, True, floors=loop_floors(on)))  # fmt: skip
    for threads in THREAD_COUNTS:
        shape = shape_label(PREFILL_SHAPE)
        on = f"{shape} {threads}t"
        if numpy_side and threads > 1:
            continue  # numpy, the allocating side's peer, is single-threaded
        alloc = ALLOC_COPIES[0] if numpy_side else ALLOC_COPIES[1]
        alloc_floor = alloc_floors(on, alloc)
        t.append(Target(f"`rmsnorm` {shape}, {threads} thread(s) <= 1.15x allocating a copy "
                        "(same allocator)", package, case_key(f"rmsnorm {on}", package),
                        case_key(f"rmsnorm {on}", alloc), 1.15, True, floors=loop_floors(on)))  # fmt: skip
        if numpy_side:
            t.append(Target(f"`rmsnorm` {shape}, 1 thread >= 5x numpy's composite", package,
                            case_key(f"rmsnorm {on}", "numpy"), case_key(f"rmsnorm {on}", package), 5, False,
                            floors=alloc_floor))  # fmt: skip
            continue
        t.append(Target(f"`rmsnorm` {shape}, {threads} thread(s) >= 5x `F.rms_norm`", package,
                        case_key(f"rmsnorm {on}", "F.rms_norm"), case_key(f"rmsnorm {on}", package), 5, False,
                        floors=alloc_floor))  # fmt: skip
    if not numpy_side:  # torch.compile's peer: at every shape and thread count bench_rmsnorm times
        for shape, threads in ((s, n) for s in RMS_SHAPES for n in THREAD_COUNTS):
            on = f"{shape_label(shape)} {threads}t"
            t.append(Target(f"`rmsnorm` {shape_label(shape)}, {threads} thread(s) >= {COMPILE_LEAD}x "
                            "`torch.compile`", package, case_key(f"rmsnorm {on}", "torch.compile"),
                            case_key(f"rmsnorm {on}", package), COMPILE_LEAD, False,
                            floors=alloc_floors(on, ALLOC_COPIES[1])))  # fmt: skip
    decode = f"{shape_label(DECODE_SHAPE)} 1t"
    t.append(Target(f"`rmsnorm(out=)` decode step {shape_label(DECODE_SHAPE)} <= 1.5x the copy",
                    package, case_key(f"rmsnorm out= {decode}", package), case_key(f"rmsnorm {decode}", "copy"), 1.5,
                    True, floors=decode_floors(package)))  # fmt: skip
    cached = f"{shape_label(CACHED_SHAPE)} 1t"
    t.append(Target(f"`rmsnorm(out=)` {shape_label(CACHED_SHAPE)} (in cache) <= 1.6x the copy",
                    package, case_key(f"rmsnorm out= {cached}", package), case_key(f"rmsnorm {cached}", "copy"), 1.6,
                    True, floors=loop_floors(cached)))  # fmt: skip
    return t


# The packages with CUDA kernels (the registry's `cuda`); gpu_check.py runs the first's.
CUDA_PACKAGES = tuple(n for n in PACKAGES if registry.cuda_torch(n))
GPU_PACKAGE = CUDA_PACKAGES[0]
# The CUDA page's targets (docs/cuda.md, from a GPU run of packages/torch/gpu_check.py): the
# bandwidth of one of that run's rows over another's, round by round (the rows alternate), at
# least the bound. The rows are gpu_check.py's names; rmsnorm's rows move the same bytes, so
# "faster" is a bandwidth ratio above 1.
GPU_TARGETS = tuple(
    Target(name, GPU_PACKAGE, ours, theirs, bound, False)
    for name, ours, theirs, bound in (
        ("bf16 bandwidth >= 0.90x a device-to-device copy's", "kvbridge rmsnorm",
         "device-to-device copy", 0.90),
        ("faster than F.rms_norm", "kvbridge rmsnorm", "F.rms_norm", 1.0),
        ("faster than torch.compile of the composite", "kvbridge rmsnorm",
         "torch.compile of the composite", 1.0),
    )
)  # fmt: skip
# ... and the checks of that run that are targets too: a CUDA Graph's replay equals eager.
GPU_CHECK_TARGETS = ("CUDA Graph: capture, replay equal to eager",)


def targets(package: str) -> list[Target]:
    """The project's targets for one package (the report drops those it did not measure)."""
    tech = TECHNOLOGY[package]
    t = []
    for call, (kind, bound) in POOL_CALLS.items():
        t.append(Target(f"`{call}` <= {bound}x the {tech} floor ({kind})", package,
                        case_key(call, package), floor_of(package, kind), bound, True))  # fmt: skip
    t.append(Target("zero copy: 100 MB within 1.2x of 1 KB", package,
                    case_key("data_address 104857600 B", package), case_key("data_address 1024 B", package),
                    1.2, True))  # fmt: skip
    for n in (1 << 20, 100 << 20):
        for feature, sizes in (("count_eos", EOS_SIZES), ("common_prefix", PREFIX_SIZES)):
            if n in sizes:
                t.append(Target(f"`{feature}` at {n:,} tokens <= 1.15x reading its bytes once",
                                package, case_key(f"{feature} n={n}", package), case_key(f"{feature} n={n}", "read floor"),
                                1.15, True))  # fmt: skip
    for feature, sizes in (("count_eos", EOS_SIZES), ("common_prefix", PREFIX_SIZES)):
        tiny = TINY_TOKENS[feature]
        n = tiny[0]
        t.append(Target(f"`{feature}` at {n:,} tokens <= {TINY_CALL_BOUND}x the {tech} {TOKEN_FLOOR_CALLS[feature][1]}",
                        package, case_key(f"{feature} n={n}", package), call_floor(feature, n, package),
                        TINY_CALL_BOUND, True))  # fmt: skip
        for n in sizes:
            floors = (call_floor(feature, n, package),) if n in tiny else ()
            t.append(Target(f"`{feature}` at {n:,} tokens faster than numpy", package,
                            case_key(f"{feature} n={n}", "numpy"), case_key(f"{feature} n={n}", package), 1.0,
                            False, floors=floors))  # fmt: skip
    t += _rmsnorm_targets(package)
    t.append(Target("long `count_eos` calls: the speed-up of 2 threads over 1 >= 0.9x the "
                    "machine's own (two readers, same rounds)", package,
                    case_key("gil 1 thread", package), case_key("gil 2 threads", package), 0.9, False,
                    (case_key("gil floor 1 thread", package), case_key("gil floor 2 threads", package))))  # fmt: skip
    if package == "torch":
        for fmt, dtype in HALF_FORMATS.items():
            for threads in THREAD_COUNTS:
                on = f"{shape_label(HALF_SHAPE)} {threads}t"
                t.append(Target(f"{dtype} `rmsnorm(out=)` {shape_label(HALF_SHAPE)} (float32 "
                                f"{shape_label(PREFILL_SHAPE)}'s bytes), {threads} thread(s) <= "
                                "1.15x the copy", package,
                                case_key(f"rmsnorm {fmt} out= {on}", "torch"), case_key(f"rmsnorm {fmt} {on}", "copy"),
                                1.15, True, floors=loop_floors(f"{fmt} {on}")))  # fmt: skip
    return t


# The measured cases, one module a feature, each with its groups(quick): what report.py times for
# the pages, and what benchmarks/bench_cases.py hands to pytest-benchmark (one list of cases).
BENCH_MODULES = ("measuring.bench_call_overhead", "measuring.bench_tokens",
                 "measuring.bench_ownership", "measuring.bench_rmsnorm",
                 "measuring.bench_threads")  # fmt: skip
