"""make report: probe, measure and build, keep everything in docs/data/run.json, and render
every page and its plots from it (benchmarks/page/render.py: the comparison, its evidence pages,
the health page, and the CUDA page from its recorded GPU run).

    python benchmarks/report.py                     # full run
    python benchmarks/report.py --quick             # small sizes, few rounds (a smoke run)
    python benchmarks/report.py --check-semantics   # CI: probe again, fail if the semantic
                                                    # tables in docs/traps.md are stale
    python benchmarks/report.py --render-only       # render docs/data/run.json again (as
                                                    # benchmarks/page/render.py does)

Every cell comes from a probe or a measurement of this run (benchmarks/measuring/harness.py says how
figures are measured), or says why it could not be probed. This file runs things; the page's
rules are render.py's.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

import pip_pins  # noqa: E402

import spec  # noqa: E402
import stats  # noqa: E402
from measuring import bench_call_overhead, harness  # noqa: E402
from page import render  # noqa: E402
from spec import case_key  # noqa: E402


def log(message: str) -> None:
    print(f"[report {time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(*cmd: str, **kwargs) -> None:
    log(" ".join(cmd))
    subprocess.run(cmd, check=True, **kwargs)


# --- probes and measurements -------------------------------------------------------------------


def probe(workdir: Path) -> dict:
    out = workdir / "semantics.json"
    run(
        sys.executable,
        str(ROOT / "benchmarks" / "probing" / "probe_semantics.py"),
        "--json",
        str(out),
    )
    return json.loads(out.read_text())


def free_threaded(workdir: Path, quick: bool) -> dict | str:
    """benchmarks/measuring/free_threading.py's answers, run on a free-threaded Python (found or built by
    tools/free_threaded_python.py) in a venv of its own, with the packages and probe modules
    built for it; or why there are none."""
    found = subprocess.run([sys.executable, str(ROOT / "tools" / "free_threaded_python.py"),
                            "--venv", str(workdir / "ft-venv")],
                           check=False, capture_output=True, text=True)  # fmt: skip
    if found.returncode != 0:
        return f"no free-threaded Python here ({found.stderr.strip().splitlines()[-1:]})"
    python = found.stdout.strip()
    # The torch packages are built against the torch their rows name for this interpreter
    # (install_packages.py), CPU kernels only, as make test-all's py313t envs build them: with
    # no CUDA compiler on PATH (the CUDA kernels are not asked about here, and take minutes).
    no_nvcc = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(python).parent), "/usr/bin", "/bin"]),
    }
    run(python, str(ROOT / "tools" / "install_packages.py"), "--build-root",
        str(workdir / "ft-build"), *spec.registry.names(free_threaded=True), "probes-ft",
        env=no_nvcc)  # fmt: skip
    out = workdir / "free_threading.json"
    # torch is asked for on that Python as the torch packages' users ask for it
    run(python, str(ROOT / "benchmarks" / "measuring" / "free_threading.py"), "--json", str(out),
        "--torch", spec.TORCH_REQUIREMENT, *(["--quick"] if quick else []))  # fmt: skip
    result = json.loads(out.read_text())
    # What that venv built them with: it installs each one's requirements unpinned
    folders = [*map(spec.registry.folder, spec.registry.names(free_threaded=True)),
               ROOT / "benchmarks" / "probing" / "probes_ft"]  # fmt: skip
    dists = list(dict.fromkeys(spec.registry.requirement_name(r)
                               for f in folders for r in spec.registry.requirements(f)))  # fmt: skip
    asked = subprocess.run([python, "-c", "import importlib.metadata as m, json, sys; "
                            "print(json.dumps({d: m.version(d) for d in sys.argv[1:]}))", *dists],
                           check=True, capture_output=True, text=True)  # fmt: skip
    result["versions"] = json.loads(asked.stdout)
    # Each technology pip would not install on this interpreter, asked of the index for the
    # next free-threaded CPython, which no machine here has: what exists, not what runs.
    refused = [t for t, rows in result["probes"].items()
               if rows.get("a module that declares nothing", {}).get("kind") == "refused"]  # fmt: skip
    requirement = {
        **{t: r for t, (r, _) in spec.PIP_ASKED.items()},
        "torch": spec.TORCH_REQUIREMENT,
    }
    result["cp314t"] = {t: index_answer(requirement[t]) for t in refused if t in requirement}
    return result


# The interpreter the index is asked about where none can be had here: a free-threaded CPython
# 3.14 (pip's own spelling of a target it does not run on), on this machine's platforms.
CP314T = ["--python-version", "3.14", "--implementation", "cp", "--abi", "cp314t"]


def index_answer(requirement: str) -> dict[str, str]:
    """Which wheel pip's resolver picks for `requirement` on CP314T, from the index alone: no
    configuration file (a machine's cap or mirror would answer in the index's place), no
    dependencies (each is its own question), nothing installed or cached. {"wheel": file name}
    or {"none": pip's last words}."""
    import os
    import tempfile

    from packaging.tags import platform_tags

    # pip takes a --platform as given, no older manylinux with it: every one this machine runs.
    platforms = [f"--platform={p}" for p in platform_tags()]
    # The index as it comes: no machine's configuration, find-links or mirror.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-cache-dir",
             "--ignore-installed", "--no-deps", "--only-binary=:all:", *CP314T, *platforms,
             "--report", str(report), requirement],
            env=env, check=False, capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode or not report.is_file():
            said = [line for line in done.stderr.splitlines() if line.strip()]
            return {"requirement": requirement, "none": (said or ["pip failed"])[-1][:200]}
        (item,) = json.loads(report.read_text())["install"]
        return {"requirement": requirement, "wheel": item["download_info"]["url"].rsplit("/", 1)[1]}


# The whole suite runs this many times, one pass after another, and every figure pools the rounds
# of all passes: the machine drifts over minutes (other tenants, frequency), and a spread taken
# from one pass alone is narrower than the difference between two runs, so verdicts flipped.
PASSES = 2


def measure(quick: bool) -> tuple[dict[str, stats.Timing], dict[str, dict]]:
    import timeit

    from kvbridge_probes import probe_capi

    pooled: dict[str, stats.Timing] = {}
    metas = {}
    for n in range(1 if quick else PASSES):
        log(f"pass {n + 1} of {1 if quick else PASSES}")
        for name in spec.BENCH_MODULES:
            for group in importlib.import_module(name).groups(quick):
                for key, timing in harness.run_group(group, log).items():
                    pooled.setdefault(key, stats.Timing([])).extend(timing)
                metas.update({c.key: c.meta for c in group.cases})
                if group.name == "block_pool: call overhead":
                    # Checked against a bare timeit of the same call, right after it.
                    number = 200_000
                    bare = timeit.repeat("f()", globals={"f": probe_capi.noop}, number=number,
                                         repeat=7)  # fmt: skip
                    pooled.setdefault(
                        case_key("bare timeit", "C-API"), stats.Timing([])
                    ).rounds.append(min(bare) / number)
    bare_timeit = pooled[case_key("bare timeit", "C-API")]
    bare_timeit.rounds = [min(bare_timeit.rounds)]
    return pooled, metas


def glue_lines() -> dict[str, int]:
    """Non-blank lines of binding code and build files kvbridge needed per package (stubs,
    tests, READMEs and its mutants excluded), with every shared file it installs or compiles
    counted in full for each package that uses it (the registry's `shares`: its Python front end,
    _args.py, args.hpp, ...).
    Only files git tracks: a build or tox folder left inside a package is not glue."""
    counts = {}
    for p in spec.PACKAGES:
        tracked = subprocess.run(["git", "ls-files", "-z", f"packages/{p}"], cwd=ROOT,
                                 check=True, capture_output=True, text=True).stdout  # fmt: skip
        files = [ROOT / f for f in tracked.split("\0") if f]
        files = [f for f in files if f.suffix in {".py", ".pyx", ".pxd", ".cpp", ".hpp", ".h",
                                                  ".txt", ".toml"}
                 and "tests" not in f.parts and "gpu_check" not in f.name
                 and f.name not in ("stubtest-allowlist.txt", "mutants.toml")]  # fmt: skip
        files += [ROOT / shared for shared in spec.REGISTRY[p]["shares"]]
        counts[p] = sum(1 for f in files for line in f.read_text().splitlines() if line.strip())
    return counts


def builds(workdir: Path) -> dict[str, dict]:
    """A clean wheel of each package: build time, wheel size and tag, what it needs at run time,
    and the best of five fresh-interpreter imports."""
    figures = {}
    for name in spec.installed():
        wheels = workdir / f"wheels-{name}"
        start = time.perf_counter()
        run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
            "--config-settings", f"build-dir={workdir / ('build-' + name)}", "-w", str(wheels),
            str(ROOT / "packages" / name))  # fmt: skip
        seconds = time.perf_counter() - start
        (wheel,) = wheels.glob("*.whl")
        with zipfile.ZipFile(wheel) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            requires = [line.split(":", 1)[1].strip() for line in z.read(meta).decode().splitlines()
                        if line.startswith("Requires-Dist:")]  # fmt: skip
        imports = []
        links = linked_libraries(wheel, workdir / f"unpacked-{name}")
        # A package over numpy arrays is timed as its users import it, where torch is not
        # installed: this venv has torch, and a technology that imports torch whenever it is
        # there (tvm-ffi does) would be charged torch's import. Unimportable here, as if absent.
        no_torch = "import sys; sys.modules['torch'] = None; " if not spec.needs_torch(name) else ""
        for _ in range(5):
            t = subprocess.run(
                [sys.executable, "-c",
                 f"{no_torch}import time; t = time.perf_counter(); "
                 f"import {spec.REGISTRY[name]['module']}; print(time.perf_counter() - t)"],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            imports.append(float(t.stdout))
        figures[name] = {
            "path": str(wheel),
            "build_s": seconds,
            "wheel_bytes": wheel.stat().st_size,
            "tag": "-".join(wheel.stem.split("-")[-3:]),
            "requires": requires,
            "import_s": min(imports),
            "links": links,
        }
    for name, built in figures.items():
        if spec.needs_torch(name):  # a wheel that needs torch: what it weighs
            import torch

            lib = Path(torch.__file__).parent / "lib"
            built["torch_lib_bytes"] = sum(f.stat().st_size for f in lib.rglob("*"))
            built["torch_version"] = torch.__version__
    return figures


# --- what one built wheel runs on ---------------------------------------------------------------

# Every function of the contract called once: what "runs" means in the portability table.
SMOKE = """
import numpy as np
import {module} as kv
pool = kv.BlockPool(4)
pool.release(pool.allocate(2)[0])
pool.retain(pool.allocate_many([1])[0][0])
pool.refcount(1), pool.refcounts(), pool.stats.peak_in_use, repr(pool), pool.num_free
kv.common_prefix([1, 2], [1, 3]), kv.count_eos([1, 2, 2], 2)
kv.rmsnorm(np.ones((2, 8), np.float32), np.ones(8, np.float32))
kv.set_num_threads(kv.get_num_threads()), kv.live_buffers(), kv.live_pools()
"""


def interpreters(workdir: Path) -> tuple[dict[str, list[str]], list[str]]:
    """Every CPython the matrix names that this machine reaches (the registry's `pythons`; 3.14
    and 3.15 in Debian sid's chroot, tools/sid_chroot.py, where it is found or can be built), and
    the free-threaded 3.13 (tools/free_threaded_python.py): label -> the command that runs it
    (with `workdir` in reach), and the labels that run in the chroot."""
    import shutil

    import sid_chroot

    tools = ROOT / "tools"

    versions = sorted({v for p in spec.REGISTRY.values() for v in p["pythons"]},
                      key=lambda v: tuple(map(int, v.split("."))))  # fmt: skip
    found = {v: [path] for v in versions
             if v not in sid_chroot.PYTHONS and (path := shutil.which(f"python{v}"))}  # fmt: skip
    sid = [v for v in versions if v in sid_chroot.PYTHONS]
    if sid:
        got = subprocess.run([sys.executable, str(tools / "sid_chroot.py")], check=False,
                             capture_output=True, text=True)  # fmt: skip
        if got.returncode != 0:
            why = (got.stderr.strip().splitlines() or ["no reason given"])[-1]
            log(f"portability: no columns for the chroot's Pythons: {why}")
            sid = []
    enter = [sys.executable, str(tools / "sid_chroot.py"), "run", "--with", str(workdir), "--"]
    found |= {v: [*enter, f"python{v}"] for v in sid}
    ft = subprocess.run([sys.executable, str(tools / "free_threaded_python.py")],
                        check=False, capture_output=True, text=True)  # fmt: skip
    if ft.returncode == 0:
        found["3.13t"] = [ft.stdout.strip()]
    return found, sid


def _said(done: subprocess.CompletedProcess) -> str:
    """The line a failed pip or import says why in: its first ERROR line or its last line."""
    lines = [x.strip() for x in (done.stderr + done.stdout).splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("ERROR")]
    return (errors[:1] or lines[-1:] or ["no output"])[0][:300]


def linked_libraries(wheel: Path, folder: Path) -> dict[str, list[str]]:
    """What each native library in a wheel links (its ELF NEEDED entries, as ldd starts from):
    library file name -> sonames (render.py leaves the C runtime's out)."""
    with zipfile.ZipFile(wheel) as z:
        z.extractall(folder)
    found = {}
    for lib in sorted(folder.rglob("*.so*")):
        dynamic = subprocess.run(["readelf", "-d", str(lib)], check=True, capture_output=True,
                                 text=True).stdout  # fmt: skip
        needed = re.findall(r"Shared library: \[([^\]]+)\]", dynamic)
        found[lib.name] = needed
    return found


def portability(workdir: Path, wheels: dict[str, Path]) -> dict:
    """Each wheel this run built, installed unchanged into a fresh venv of every interpreter here
    (from wheels only: its dependencies too, so the answer is the wheel's, not a source build's),
    then every function called once (SMOKE). A wheel that needs torch goes beside each torch the
    run can reach (spec.TORCHES), that torch held where it is (pinned beside the wheel: pip refuses
    what would replace it). label -> interpreter -> an Outcome as JSON: passed, refused (pip's own
    reason), failed (the import's or the call's error), or not probed (no such torch there)."""
    from outcomes import Outcome, not_probed

    pythons, sid = interpreters(workdir)

    def in_venv(version: str, venv: Path) -> list[str]:
        """The command that runs the venv's python the way its interpreter runs (the same
        command, the venv's python for the interpreter: inside the chroot for its Pythons)."""
        return [*pythons[version][:-1], str(venv / "bin" / "python")]

    plain = {k: w for k, w in wheels.items() if not spec.needs_torch(k.split(" ")[0])}
    torch_wheels = {k: w for k, w in wheels.items() if k not in plain}
    labels, found = {}, {}

    def pip_install(python: str, venv: Path, *args: str) -> subprocess.CompletedProcess:
        """pip install in the venv; an exact pin among `args` holds whatever cap the machine's
        pip configuration sets (tools/pip_pins.py: this machine's caps torch)."""
        python_cmd = in_venv(python, venv)
        return subprocess.run([*python_cmd, "-m", "pip", "install", "-q", *args], check=False,
                              capture_output=True, text=True,
                              env=pip_pins.environ(args, workdir / "pins", python_cmd))  # fmt: skip

    def install_and_call(python: str, venv: Path, label: str, wheel: Path, pins: list) -> dict:
        log(f"portability: {wheel.name} on Python {python}" + (f" beside {pins}" if pins else ""))
        done = pip_install(python, venv, "--only-binary", ":all:", *pins, str(wheel))
        if done.returncode:
            return Outcome("refused", "pip", _said(done)).to_json()
        module = spec.REGISTRY[label.split(" ", maxsplit=1)[0]]["module"]
        ran = subprocess.run([*in_venv(python, venv), "-c", SMOKE.format(module=module)],
                             check=False, capture_output=True, text=True)  # fmt: skip
        return (Outcome("passed", "runs", "installs, and every function runs") if ran.returncode == 0
                else Outcome("failed", "fails", _said(ran))).to_json()  # fmt: skip

    exact = {}
    for version, python in pythons.items():
        venv = workdir / f"port-{version}"
        subprocess.run([*python, "-m", "venv", str(venv)], check=True)
        exact[version] = subprocess.run(
            [*in_venv(version, venv), "-c", "import platform; print(platform.python_version())"],
            check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
        for label, wheel in plain.items():
            labels[label] = wheel.name
            found.setdefault(label, {})[version] = install_and_call(version, venv, label, wheel, [])
    for pin, on in spec.TORCHES:
        venv = workdir / f"port-{on}-torch-{pin}"
        torch_here, why = None, "no such Python here"
        if on in pythons:
            subprocess.run([*pythons[on], "-m", "venv", str(venv)], check=True)
            log(f"portability: torch=={pin} on Python {on}")
            # --no-compile: a CUDA torch's 30,000 Python files take minutes to compile
            got = pip_install(on, venv, "--no-compile", f"torch=={pin}")
            why = _said(got)  # pip's own words, where it failed
            if got.returncode == 0:
                torch_here = subprocess.run(
                    [*in_venv(on, venv), "-c", "import torch; print(torch.__version__)"],
                    check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
        for label, wheel in torch_wheels.items():
            row = f"{label} beside torch {torch_here or pin}"
            labels[row] = wheel.name
            cells = found.setdefault(row, {})
            for version in pythons:
                if version != on:
                    cells[version] = not_probed(f"this torch for {on} only").to_json()
                elif torch_here is None:
                    cells[version] = not_probed(f"torch=={pin} did not install: {why}").to_json()
                else:
                    # Pinned beside the wheel, so that pip keeps this torch. Its public
                    # version: pip cannot match a local one (+cpu) against the index's files,
                    # and the installed torch satisfies it either way.
                    cells[version] = install_and_call(version, venv, label, wheel,
                                                      [f"torch=={torch_here.split('+')[0]}"])  # fmt: skip
        shutil.rmtree(venv, ignore_errors=True)  # a CUDA torch: 5 GiB each, one at a time
    return {"pythons": list(pythons), "exact": exact, "sid": sid, "wheels": labels, "found": found}


def store_timings() -> dict:
    """The core's store policy as it stands after the benchmarks: its rule and, under auto, the
    sizes it timed both ways in the benchmarks' calls (the core of the package the page asks:
    each package links a core of its own)."""
    try:
        return {"stores": spec.core().store_choice(), "stores_package": spec.registry.CORE_ANSWERS}
    except ImportError as e:
        return {"stores": f"not read: {e}", "stores_package": spec.registry.CORE_ANSWERS}


def machine() -> dict:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    versions = {}
    # What built the packages and the probes: every requirement their pyproject.toml files name.
    folders = [spec.registry.folder(p) for p in spec.PACKAGES] + [
        ROOT / "benchmarks" / "probing" / "probes"
    ]
    dists = ["numpy", *(spec.registry.requirement_name(r)
                        for f in folders for r in spec.registry.requirements(f))]  # fmt: skip
    for dist in dict.fromkeys(dists):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    caches = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        kind = (index / "type").read_text().strip()
        if kind != "Instruction":
            level = (index / "level").read_text().strip()
            name = f"L{level}d" if kind == "Data" else f"L{level}"
            caches.append(f"{name} {(index / 'size').read_text().strip()}")
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    # The instruction sets the core has paths for (simd.hpp, rmsnorm_half.cpp, line_stores.cpp).
    isa = [name for flag, name in (("avx512f", "AVX-512"), ("avx512_bf16", "AVX512-BF16"),
                                   ("avx2", "AVX2"), ("f16c", "F16C")) if flag in flags]  # fmt: skip
    cxx = subprocess.run(["c++", "--version"], check=False, capture_output=True, text=True)
    # The core's own answers: the store policy and the paths its kernels take.
    try:
        stores, paths = spec.core().store_choice(), spec.core().rmsnorm_paths()
    except ImportError as e:
        stores = paths = f"not read: {e}"
    versions["C++ compiler"] = cxx.stdout.splitlines()[0] if cxx.stdout else "unknown"
    return {
        "cpu": cpu, "cores": os.cpu_count(), "usable": spec.ALL_THREADS,
        "python": platform.python_version(), "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": os.getloadavg()[0], "versions": versions,
        "caches": ", ".join(caches) or "not described by this kernel",
        "stores": stores, "paths": paths,
        "isa": ", ".join(isa) or "none of AVX-512, AVX2, F16C: the portable paths",
    }  # fmt: skip


def decision_sections(workdir: Path, quick: bool, skip_build: bool, timings: dict) -> tuple:
    """The sections only a decision needs, each minutes long: clean builds, the stable-ABI
    builds (their timings added to `timings`), the free-threaded interpreter's section and the
    portability table. A smoke run (--quick) skips them, and each says so."""
    skipped = QUICK_SKIPS if quick else ""
    build = None if skip_build or skipped else (log("timing clean builds") or builds(workdir))
    abi3 = f"not measured: {skipped}"
    if not skipped:
        log(
            f"{', '.join(spec.ABI3_PACKAGES)}: the stable-ABI builds beside the "
            "version-specific build, by 3.12"
        )
        abi3 = bench_call_overhead.abi3_builds(workdir)
    if not isinstance(abi3, str):
        timings.update(bench_call_overhead.abi3_timings(abi3[0], abi3[1], 5 if quick else 21))
    ft = skipped
    if not skipped:
        log("free-threaded Python: probes and calls from 1 and 2 threads")
        ft = free_threaded(workdir, quick)
    port = skipped or "the wheels were not built (--skip-build)"
    if build:
        log("portability: each wheel built above, on every interpreter here")
        wheels = {name: Path(b.pop("path")) for name, b in build.items()}
        if not isinstance(abi3, str):  # the stable-ABI (and split-mode) wheels, by 3.12
            kinds = {"abi3": "abi3", "split": "split-mode"}
            for name, wheel in abi3[2].items():
                package, label = name.split(" ")
                if label in kinds:
                    wheels[f"{package} ({kinds[label]} wheel)"] = wheel
        port = portability(workdir, wheels)
    if not isinstance(abi3, str):  # the wheels' names and sizes: the build folder goes
        abi3 = {"wheels": [{"build": name, "name": w.name, "bytes": w.stat().st_size}
                           for name, w in abi3[2].items()]}  # fmt: skip
    return build, abi3, ft, port


# Why a smoke run leaves a section out, on that section of its pages.
QUICK_SKIPS = "skipped by make report-quick, a smoke run (make report measures it)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--check-semantics", action="store_true")
    parser.add_argument("--skip-build", action="store_true", help="don't time clean builds")
    parser.add_argument("--render-only", action="store_true",
                        help=f"render the pages again from the last run ({render.RUN.relative_to(ROOT)}),"
                        " after a template edit: measures and probes nothing")  # fmt: skip
    args = parser.parse_args()
    if args.render_only:
        return render.write_pages(json.loads(render.RUN.read_text()))
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        log("probing native behaviour")
        sem = probe(workdir)
        if args.check_semantics:
            fresh = render.semantic_section(sem)
            written = render.PAGES[render.SEMANTIC_PAGE]
            page = written.read_text()
            current = page[
                page.index(render.SEMANTIC_BEGIN) : page.index(render.SEMANTIC_END)
                + len(render.SEMANTIC_END)
            ]
            if current != fresh:
                sys.stdout.writelines(difflib.unified_diff(
                    current.splitlines(True), fresh.splitlines(True),
                    str(written.relative_to(ROOT)), "probed now"))  # fmt: skip
                sys.exit(
                    f"{written.relative_to(ROOT)}'s semantic tables are stale: run make report"
                )
            for name, template in render.TEMPLATES.items():
                written = render.PAGES[name]
                if missing := render.template_mismatch(template.read_text(), written.read_text()):
                    sys.exit(f"{written.relative_to(ROOT)}'s prose differs from its template "
                             f"{template.relative_to(ROOT)} at {missing!r}: run make report")  # fmt: skip
            log("semantic tables and the pages' prose are up to date")
            return
        info = machine()
        log("measuring")
        timings, metas = measure(args.quick)
        info.update(store_timings())  # what auto timed, in the benchmarks' own calls
        info["settle_seconds"] = harness.SETTLE_SECONDS  # the method line quotes it
        build, abi3, ft, port = decision_sections(workdir, args.quick, args.skip_build, timings)
        run_data = {"sem": sem, "rounds": {k: t.rounds for k, t in timings.items()},
                    "faults": {k: t.faults for k, t in timings.items() if t.faults},
                    "stalls": {k: t.stalls for k, t in timings.items() if t.stalls},
                    "metas": metas, "build": build, "glue": glue_lines(), "info": info,
                    "quick": args.quick, "passes": 1 if args.quick else PASSES, "abi3": abi3, "ft": ft,
                    "portability": port}  # fmt: skip
        # Written compactly and rendered from the file as written, so that a re-render of the
        # committed file gives the committed pages byte for byte.
        render.RUN.parent.mkdir(parents=True, exist_ok=True)
        render.RUN.write_text(json.dumps(run_data, separators=(",", ":")) + "\n")
        render.write_pages(json.loads(render.RUN.read_text()))


if __name__ == "__main__":
    main()
