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

It copies the C ABI package through ctypes, the quickest to build.

The same holds for a technology of an existing family: its row in benchmarks/technologies.json
and its probe file (benchmarks/probing/technologies/). In the same copy, ctypes's probe file is
copied under a new name, its floor rows renamed inside, and a row is added, ctypes's with the
new name, column, probe file and floors; nothing else is edited. Then the technology table's
own rules (benchmarks/tests/test_technologies.py: the row has what its family reads, the
family modules name no technology) pass there, and its family asks it every question
(questions.checked: none missing, none unknown) and times its floors, in a venv with the probes
and the package whose core answers for the page (the registry's `core_answers`) built.

Exit status 0 when every answer is right; otherwise each wrong one is printed.
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
TECH_SOURCE, TECH_NEW = "ctypes", "ctypes2"  # a technology of the c-abi family, and its copy


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


def add_technology(repo: Path) -> None:
    """The new technology: its probe file (a copy, its floor rows renamed) and its row."""
    table = repo / "benchmarks" / "technologies.json"
    data = json.loads(table.read_text())
    row = next(t for t in data["technologies"] if t["name"] == TECH_SOURCE)
    probes = repo / "benchmarks" / "probing" / "technologies"
    new_file = f"{row['probe_file']}_copy"
    text = (probes / f"{row['probe_file']}.py").read_text()
    for floor in row["floors"]:  # its floor rows are keys of its floors(): renamed
        text = text.replace(f'"{floor}"', f'"{floor.replace(TECH_SOURCE, TECH_NEW, 1)}"')
    (probes / f"{new_file}.py").write_text(text)
    new_row = {k: v for k, v in row.items() if k not in ("free_threaded", "compile_row",
                                                         "compile_call")}  # fmt: skip
    new_row.update(name=TECH_NEW, column=TECH_NEW, probe_file=new_file,
                   floors=[f.replace(TECH_SOURCE, TECH_NEW, 1) for f in row["floors"]])  # fmt: skip
    data["technologies"].append(new_row)
    table.write_text(json.dumps(data, indent=1) + "\n")


# Run in the copy, in a venv with the probes: the new technology asked by its family.
ASK_TECHNOLOGY = f"""
import sys
sys.path[:0] = ["benchmarks", "tests/conformance"]
import spec
from probing.asking import kinds
from probing.questions import checked
import importlib
family = importlib.import_module(spec.family_of({TECH_NEW!r}))
probe = family.technologies()[{TECH_NEW!r}]
answers = checked({TECH_NEW!r}, family.c_abi_technology(probe), kinds())
floors = probe.floors()
assert set(floors) == set(spec.TECHNOLOGIES[{TECH_NEW!r}]["floors"]), sorted(floors)
print(len([r for axis in answers.values() for r in axis]), "answers,", len(floors), "floor rows")
"""


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
        wrong += prove_technology(repo, Path(tmp))
    for line in wrong:
        print("WRONG:", line)
    print("a new binding is its folder and its registry row, a new technology its row and its "
          "probe file" if not wrong else "", flush=True)  # fmt: skip
    return 1 if wrong else 0


def prove_technology(repo: Path, tmp: Path) -> list[str]:
    """The second claim, in the same copy: a new technology is its row and its probe file."""
    add_technology(repo)
    venv = tmp / "probes-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    wrong = []
    setup = [python, "-m", "pip", "install", "--quiet", "pytest>=9", "numpy>=1.24", "cmake>=3.18",
             "ninja"]  # fmt: skip
    core = json.loads((repo / "packages" / "registry.json").read_text())["core_answers"]["package"]
    build = [python, "tools/install_packages.py", "--build-root", str(tmp / "probes-build"),
             core, "probes"]  # fmt: skip
    for step in (setup, build):
        if run(step, repo).returncode != 0:
            return [f"{' '.join(step[1:4])}... failed (its output above)"]
    rules = [python, "-m", "pytest", "benchmarks/tests/test_technologies.py", "-q",
             "-p", "no:cacheprovider"]  # fmt: skip
    if run(rules, repo).returncode != 0:
        wrong.append(f"the technology table's rules fail with {TECH_NEW} added (above)")
    asked = run([python, "-c", ASK_TECHNOLOGY], repo)
    if asked.returncode != 0 or "answers," not in asked.stdout:
        wrong.append(f"its family did not ask {TECH_NEW} every question and its floors (above)")
    return wrong


if __name__ == "__main__":
    os.environ.pop("KVBRIDGE_PACKAGE", None)
    sys.exit(main())
