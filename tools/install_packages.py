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
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packages"))

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
    wanted = list(dict.fromkeys(r for f in folders.values() for r in registry.requirements(f)))
    print(f"requirements: {' '.join(wanted)}", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *wanted], check=True)
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
