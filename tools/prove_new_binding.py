"""The claim that a new binding is its folder and its registry row, tried (tox -e new-binding).

In a scratch copy of the repository (what git tracks, and what it would add), an existing
package's folder is copied under a new name and renamed inside (its distribution, its module,
its BACKEND: a folder copied as it is would install the same module twice), and the copy's
registry row is added, the original's with the new name and module. Nothing else is edited.
Then, in that copy, every place that should know the new package is asked:

- `tox l` lists its envs, made from its row (toxfile.py);
- `tox -e <name>` builds it, installs it and passes the conformance suite;
- the conformance suite's package list (tests/conformance/common.py) and the benchmarks'
  (benchmarks/spec.py) have it;
- the docs site makes its page and puts it in the nav (tools/docs_hooks.py).

It copies the C ABI package through ctypes, the quickest to build. Exit status 0 when every
answer is right; otherwise each wrong one is printed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from mutants import scratch_copy  # noqa: E402

SOURCE, NEW = "ctypes", "ctypes2"


def add_binding(repo: Path) -> None:
    """The new package: its folder (a renamed copy) and its registry row, nothing else."""
    old_module, new_module = f"kvbridge_{SOURCE}", f"kvbridge_{NEW}"
    folder = repo / "packages" / NEW
    shutil.copytree(repo / "packages" / SOURCE, folder)
    (folder / "src" / old_module).rename(folder / "src" / new_module)
    for path in (p for p in folder.rglob("*") if p.is_file()):
        text = path.read_text()
        text = text.replace(old_module, new_module).replace(f"kvbridge-{SOURCE}", f"kvbridge-{NEW}")
        path.write_text(text.replace(f'BACKEND = "{SOURCE}"', f'BACKEND = "{NEW}"'))
    registry = repo / "packages" / "registry.json"
    data = json.loads(registry.read_text())
    row = next(p for p in data["packages"] if p["name"] == SOURCE)
    data["packages"].append({**row, "name": NEW, "module": new_module})
    registry.write_text(json.dumps(data, indent=1) + "\n")


def run(cmd: list[str], repo: Path) -> subprocess.CompletedProcess:
    print("$", " ".join(cmd), flush=True)
    done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, check=False)
    print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", flush=True)
    return done


def main() -> int:
    wrong = []
    with tempfile.TemporaryDirectory(prefix="kvbridge-new-binding-") as tmp:
        repo = Path(tmp) / "repo"
        scratch_copy(repo)
        add_binding(repo)
        tox = [sys.executable, "-m", "tox", "--workdir", str(Path(tmp) / "tox")]
        listed = run([*tox, "l"], repo).stdout.split()
        for env in (NEW, f"py311-{NEW}", f"py313t-{NEW}", f"sdist-{NEW}"):
            if env not in listed:
                wrong.append(f"tox l does not list {env}")
        if run([*tox, "run", "-e", NEW], repo).returncode != 0:
            wrong.append(f"tox -e {NEW} failed (its output above)")
        # The suite's and the benchmarks' lists, read in the env the run made (numpy is there).
        python = Path(tmp) / "tox" / NEW / "bin" / "python"
        ask = (
            "import sys; sys.path[:0] = ['tests/conformance', 'benchmarks'];"
            "import common, spec; print(' '.join(common.PACKAGES), '|', ' '.join(spec.PACKAGES))"
        )
        suite, _, benchmarks = run([str(python), "-c", ask], repo).stdout.partition("|")
        for where, names in (("the suite's", suite), ("the benchmarks'", benchmarks)):
            if NEW not in names.split():
                wrong.append(f"{where} package list lacks {NEW}: {names.strip()}")
        # The docs: the hook's nav and pages, run on the copy (its registry).
        docs = (
            "import sys; sys.path.insert(0, 'tools'); import docs_hooks as h;"
            "nav = h.on_config({'nav': [{'Packages': []}]})['nav'][0]['Packages'];"
            f"print([p for e in nav for p in e.values()], h.package_page({NEW!r}))"
        )
        said = run([sys.executable, "-c", docs], repo).stdout
        if (
            f"'packages/{NEW}.md'" not in said
            or not (repo / "packages" / NEW / "README.md").is_file()
        ):
            wrong.append(f"the docs' nav or page lacks {NEW}: {said.strip()}")
    for line in wrong:
        print("WRONG:", line)
    print("a new binding is its folder and its registry row" if not wrong else "", flush=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    os.environ.pop("KVBRIDGE_PACKAGE", None)
    sys.exit(main())
