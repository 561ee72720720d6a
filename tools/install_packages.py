"""Build and install kvbridge packages into the running Python: the one install step every tox
env uses.

Each package's own requirements come first ([build-system].requires and [project].dependencies
of its pyproject.toml, so no tox env lists a binding tool), then the package is built from its
folder against them (--no-build-isolation: fast, offline once cached, and required for torch,
whose extension is tied to the installed torch) into a wheel file, <build-root>/wheels/<name>/,
with a build folder per package under --build-root so reruns are incremental; that file is
reinstalled every time, so a test never runs an old build.

    python tools/install_packages.py --build-root .tox/x pybind cython
    python tools/install_packages.py --build-root .tox/x --sanitize pybind   # ASan + UBSan
    python tools/install_packages.py --build-root .tox/x --all probes        # every package
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packages"))

import pip_pins  # noqa: E402
import registry  # noqa: E402

# Folders that are not packages/<name>: the report's probe modules (those for a free-threaded
# Python apart), and the asan env's numpy allocator.
FOLDERS = {
    "probes": ROOT / "benchmarks" / "probing" / "probes",
    "probes-ft": ROOT / "benchmarks" / "probing" / "probes_ft",
    "plain-malloc": ROOT / "tests" / "plain_malloc",
}


def folder(name: str) -> Path:
    if name in FOLDERS:
        return FOLDERS[name]
    if name not in registry.PACKAGES:
        sys.exit(f"install_packages.py: {name!r} is neither a package in packages/registry.json "
                 f"({', '.join(registry.PACKAGES)}) nor one of {', '.join(FOLDERS)}")  # fmt: skip
    return registry.folder(name)


def torch_for(name: str, requirement: str) -> str:
    """A package's requirement, its torch one replaced where this env builds against another
    torch: KVBRIDGE_TORCH (the torch-built envs, tools/envs.py), else, on a free-threaded
    Python, the torch its registry row names for one (no release its pyproject pins has a
    free-threaded wheel). The build then pins what it built against, as always."""
    if registry.requirement_name(requirement) != "torch":
        return requirement
    free_threaded = sysconfig.get_config_var("Py_GIL_DISABLED") == 1
    pin = os.environ.get("KVBRIDGE_TORCH") or (
        registry.free_threaded_torch(name) if free_threaded and name in registry.PACKAGES else None
    )
    return f"torch=={pin}" if pin else requirement


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", help="names from packages/registry.json, or "
                        + ", ".join(FOLDERS))  # fmt: skip
    parser.add_argument("--all", action="store_true", help="every package of the registry")
    parser.add_argument("--all-with", metavar="FIELD", help="every package whose yes/no field "
                        "FIELD is true (asan: those the sanitizers can run)")  # fmt: skip
    parser.add_argument("--build-root", type=Path, required=True)
    parser.add_argument("--sanitize", action="store_true", help="Debug build with ASan + UBSan")
    args = parser.parse_args()
    chosen = registry.names(**({args.all_with: True} if args.all_with else {}))
    names = [*(chosen if args.all or args.all_with else []), *args.packages]
    if not names:
        parser.error("name the packages, or --all, or --all-with FIELD")
    folders = {name: folder(name) for name in names}
    wanted = list(dict.fromkeys(torch_for(name, r) for name, f in folders.items()
                                for r in registry.requirements(f)))  # fmt: skip
    print(f"requirements: {' '.join(wanted)}", flush=True)
    # --no-compile: a CUDA torch is some 30,000 Python files, and compiling them all takes
    # minutes on 2 cores; the few that run compile on import. An exact pin (the torch this env
    # builds against) holds whatever cap the machine's pip configuration sets (pip_pins.py).
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", *wanted],
                   check=True, env=pip_pins.environ(wanted, args.build_root / "pins"))  # fmt: skip
    for name, path in folders.items():
        # A wheel file first, then that file installed: what a user's pip installs, and a file
        # other envs can install unchanged (torch_stable-* install py311-torch_stable's).
        wheels = args.build_root / "wheels" / name
        shutil.rmtree(wheels, ignore_errors=True)
        cmd = [
            sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--quiet",
            f"--config-settings=build-dir={args.build_root / ('skbuild-' + name)}",
            "--wheel-dir", str(wheels),
        ]  # fmt: skip
        if args.sanitize:
            cmd += [
                "--config-settings=cmake.define.KVBRIDGE_SANITIZE=address,undefined",
                "--config-settings=cmake.build-type=Debug",
            ]
        cmd.append(str(path))
        print(f"building {name}", flush=True)
        subprocess.run(cmd, check=True)
        (wheel,) = wheels.glob("*.whl")
        print(f"installing {wheel.name}", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--force-reinstall",
                        "--quiet", str(wheel)], check=True)  # fmt: skip


if __name__ == "__main__":
    main()
