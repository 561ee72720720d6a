"""A package's stubs, checked (its stubs-<name> env) or rewritten (make stubs).

Where the package's pyproject.toml has [tool.kvbridge.stubs], its committed stubs are a
generator's output (pybind11-stubgen, nanobind.stubgen): the generator runs on the installed
module and its output must equal the committed files (a stale stub is worse than none), or,
with --write, replaces them. Stubs written by hand (Cython's .pyi, one per .pyx) have no
generator. Then mypy.stubtest checks the stubs against the installed module, with the package's
stubtest-allowlist.txt.

    python tools/check_stubs.py pybind --out /tmp/stubs       # check
    python tools/check_stubs.py pybind --out /tmp/s --write   # rewrite the committed stubs
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "packages"))

import registry  # noqa: E402


def differences(a: Path, b: Path) -> list[str]:
    """The files that differ between two folders, or are in only one."""
    cmp = filecmp.dircmp(a, b, ignore=["__pycache__"])
    found = [str(a / n) for n in cmp.left_only] + [str(b / n) for n in cmp.right_only]
    found += [str(a / n) for n in cmp.diff_files]
    for sub in cmp.common_dirs:
        found += differences(a / sub, b / sub)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package")
    parser.add_argument("--out", type=Path, required=True, help="a scratch folder")
    parser.add_argument("--write", action="store_true", help="rewrite the committed stubs")
    args = parser.parse_args()
    folder = registry.folder(args.package)
    stubs = registry.pyproject(folder).get("tool", {}).get("kvbridge", {}).get("stubs")
    if stubs:
        if stubs["requires"]:
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *stubs["requires"]],
                           check=True)  # fmt: skip
        shutil.rmtree(args.out, ignore_errors=True)
        command = [a.format(out=args.out, python=sys.executable) for a in stubs["generate"]]
        subprocess.run(command, check=True)
        generated, committed = args.out / stubs["generated"], folder / stubs["committed"]
        if args.write:
            shutil.rmtree(committed)
            shutil.copytree(generated, committed, ignore=shutil.ignore_patterns("__pycache__"))
            print(f"rewrote {committed}")
            return 0
        if stale := differences(committed, generated):
            subprocess.run(["diff", "-ru", str(committed), str(generated)], check=False)
            print(f"stale stubs (make stubs rewrites them): {stale}", file=sys.stderr)
            return 1
    elif args.write:
        print(f"{args.package}: its stubs are written by hand")
        return 0
    module = registry.PACKAGES[args.package]["module"]
    return subprocess.call([sys.executable, "-m", "mypy.stubtest", module, "--allowlist",
                            str(folder / "stubtest-allowlist.txt")])  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
