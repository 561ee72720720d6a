"""packages/registry.json is the one list of packages. Every per-package line elsewhere either
reads it (the Makefile, the suite, the benchmarks, the tools, the docs' nav) or is derived from it
here and compared: tox.ini's factor lists and lines, the docs' package pages and tables, the
free-threaded probes. `disagreements(rows)` names every place that differs from what `rows`
imply; with a row deleted it must name each place that package appears in (the last test), so
this check cannot pass by reading nothing."""

from __future__ import annotations

import ast
import itertools
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "packages"))
sys.path.insert(0, str(ROOT / "tools"))

import registry  # noqa: E402
import sid_chroot  # noqa: E402

ROWS = list(registry.PACKAGES.values())
TOX = (ROOT / "tox.ini").read_text()
ENV_LIST = TOX[TOX.index("env_list =") : TOX.index("skip_missing_interpreters")]


def braces(names: list[str]) -> str:
    return "{" + ",".join(names) + "}" if len(names) > 1 else names[0]


# The envs that are not per package, as env_list and the section headers name them.
FIXED_ENVS = {"cpp", "lint", "torch-pypi", "torch_stable-{torch214,pypi}", "asan", "tsan",
              "semantics", "docs"}  # fmt: skip
FIXED_SECTIONS = {"tox", "testenv", "testenv:torch-pypi", "testenv:torch_stable-{torch214,pypi}",
                  "testenv:cpp", "testenv:lint",
                  "testenv:{report,semantics}", "testenv:asan", "testenv:tsan",
                  "testenv:mutants", "testenv:docs"}  # fmt: skip


def minors(versions: list[str] | tuple[str, ...]) -> str:
    return braces([v.split(".")[1] for v in versions])


def env_names(rows: list[dict]) -> dict[str, str]:
    """The per-package envs the rows imply, as env_list writes them: entry -> what it is (the
    Pythons of Debian sid's chroot, sid_chroot.PYTHONS, on a line of their own)."""
    envs = {}
    by_pythons: dict[tuple, list[str]] = {}
    for p in rows:
        by_pythons.setdefault(tuple(p["pythons"]), []).append(p["name"])
    for pythons, names in by_pythons.items():
        here = [v for v in pythons if v not in sid_chroot.PYTHONS]
        sid = [v for v in pythons if v in sid_chroot.PYTHONS]
        for group in (here, sid):
            if group:
                envs[f"py3{minors(group)}-{braces(names)}"] = f"Python {', '.join(group)}"
    for field, env in (("free_threaded", "py313t"), ("stubs", "stubs"), ("sdist", "sdist")):
        names = [p["name"] for p in rows if p[field] is True]
        envs[f"{env}-{braces(names)}"] = f"{env} envs (registry field {field})"
    for p in rows:
        if p["abi3"] is True:
            envs[f"abi3-{p['name']}"] = "abi3 env (registry field abi3)"
            envs[f"abi3-{p['name']}-py3{minors(sid_chroot.PYTHONS)}"] = "abi3 env in the chroot"
    return envs


def in_chroot(env: str) -> bool:
    """An env_list entry whose Python is one of the chroot's."""
    return f"py3{minors(sid_chroot.PYTHONS)}" in env


def tox_sites(rows: list[dict]) -> dict[str, tuple[object, object]]:
    """Each per-package site of tox.ini: (what tox.ini has, what the rows imply)."""
    every = [p["name"] for p in rows]
    listed = {line.strip() for line in ENV_LIST.splitlines()[1:]} - {""}
    listed = {e for e in listed if not e.startswith("#")}
    sections = set(re.findall(r"^\[([^\]]+)\]$", TOX, re.M))
    sid = [e for e in env_names(rows) if in_chroot(e)]
    expected_sections = {f"testenv:{braces(every)}"} | {
        f"testenv:{e}" for e in env_names(rows) if not e.startswith("py3") and not in_chroot(e)
    }
    # The chroot's envs: one section runs each in the chroot, under sid-<its name> there
    expected_sections |= {"testenv:" + ",".join(sid)} | {f"testenv:sid-{e}" for e in sid}
    asan = [p["name"] for p in rows if p["asan"] is True]
    # The section of the envs named after a package alone (`tox -e pybind`), whatever it lists.
    one_env = re.search(r"^\[testenv:\{pybind,[^\]]*\]$.*?(?=^\[)", TOX, re.M | re.S)
    one_env_section = one_env.group(0) if one_env else ""

    def one(pattern: str) -> str:
        found = re.findall(pattern, TOX, re.M)
        return found[0] if len(found) == 1 else f"{len(found)} matches of {pattern!r}"

    return {
        "tox.ini env_list (the per-package envs)": (listed - FIXED_ENVS, set(env_names(rows))),
        "tox.ini [testenv:...] headers (one env per package, stubs, sdist, abi3)": (
            sections - FIXED_SECTIONS,
            expected_sections,
        ),
        "tox.ini set_env: a KVBRIDGE_PACKAGE line per package": (
            set(re.findall(r"^\s+(\w+): KVBRIDGE_PACKAGE = \1$", TOX, re.M)),
            set(every),
        ),
        "tox.ini base_python of the one-Python packages": (
            set(re.findall(r"^\s+(\w+: python3\.\d+)$", one_env_section, re.M)),
            {f"{p['name']}: python{p['pythons'][0]}" for p in rows if len(p["pythons"]) == 1},
        ),
        "tox.ini report/semantics install list": (
            one(r"\{env_dir\} \\\n\s+(.+ probes)$"),
            " ".join(every) + " probes",
        ),
        "tox.ini asan install list": (one(r"--sanitize \\\n\s+(.+)$"), " ".join(asan)),
        "tox.ini asan suite loop": (one(r"for p in (.+?); do"), " ".join(asan)),
    }


def readme_packages() -> list[str]:
    return re.findall(r"^\| `packages/(\w+)` \|", (ROOT / "README.md").read_text(), re.M)


def free_threaded_probes() -> set[str]:
    """The technologies benchmarks/free_threading.py has probe modules for (its TECHNOLOGIES)."""
    tree = ast.parse((ROOT / "benchmarks" / "free_threading.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "TECHNOLOGIES":
            return {k.value for k in node.value.keys}
    raise AssertionError("benchmarks/free_threading.py has no TECHNOLOGIES")


def disagreements(rows: list[dict]) -> list[str]:
    """Every place that differs from what `rows` (registry rows) imply, one message each."""
    found = []
    for site, (has, implied) in tox_sites(rows).items():
        if has == implied:
            continue
        if isinstance(has, set):
            found.append(f"{site}: has {sorted(has - implied)} beyond the registry's, lacks "
                         f"{sorted(implied - has)}")  # fmt: skip
        else:
            found.append(f"{site}: has {has!r}, the registry implies {implied!r}")
    names = [p["name"] for p in rows]
    if readme_packages() != names:
        found.append(f"README.md's package table: {readme_packages()} != {names}")
    # The docs' pages, nav and links per package are made from the registry by the MkDocs hook:
    # nothing in docs/ or mkdocs.yml may list them by hand.
    for doc in [ROOT / "mkdocs.yml", *(ROOT / "docs").glob("*.md")]:
        if doc.name in ("comparison.md", "health.md"):  # generated from the registry's run
            continue
        text = doc.read_text()
        listed = [n for n in names if f"packages/{n}.md" in text]
        if listed:
            found.append(f"{doc.relative_to(ROOT)} lists package pages by hand: {listed}")
    probes = free_threaded_probes()
    for p in rows:
        if p["free_threaded"] is True and p["technology"] not in probes:
            found.append(f"benchmarks/free_threading.py TECHNOLOGIES: no probe of "
                         f"{p['technology']} ({p['name']} is free_threaded)")  # fmt: skip
    return found


def test_every_site_agrees_with_the_registry():
    assert disagreements(ROWS) == []


def test_deleting_a_row_is_seen_at_every_place_it_appears():
    for row in ROWS:
        name = row["name"]
        messages = disagreements([r for r in ROWS if r is not row])
        text = "\n".join(messages)
        expected = ["README.md", "KVBRIDGE_PACKAGE line", "env_list",
                    "headers", "report/semantics install list"]  # fmt: skip
        if len(row["pythons"]) == 1:
            expected.append("base_python")
        if row["asan"] is True:
            expected += ["asan install list", "asan suite loop"]
        for place in expected:
            assert place in text, f"deleting {name}'s row is not seen at {place}:\n{text}"


def test_no_env_lists_a_binding_tool():
    """install_packages.py installs each package's own requirements: a tox deps line naming one
    would be a second list, free to drift from the package's pyproject.toml."""
    tools = {registry.requirement_name(r).lower()
             for p in ROWS for r in registry.requirements(registry.folder(p["name"]))}  # fmt: skip
    tools -= {"numpy"}  # the suite's own dependency as well
    for block in re.findall(r"^deps =\n((?:[ \t]+.*\n)+)", TOX, re.M):
        for line in block.splitlines():
            requirement = line.split("#")[0].split(":")[-1].strip()
            name = registry.requirement_name(requirement).lower()
            assert name not in tools, f"tox.ini deps list {requirement!r}: {line.strip()}"


def test_every_registered_package_has_a_folder_and_its_module():
    for p in ROWS:
        assert (ROOT / "packages" / p["name"] / "pyproject.toml").is_file(), p["name"]
        assert (ROOT / "packages" / p["name"] / "src" / p["module"]).is_dir(), p["module"]
        for shared in p["shares"]:
            assert (ROOT / shared).is_file(), shared
        assert p["family"] in ("numpy-array", "c-abi", "torch", "tvm-ffi"), p["family"]
        assert p["wheel"] in ("cpython", "none", "torch-version", "torch-stable-abi"), p["wheel"]
        for field in ("free_threaded", "stubs", "sdist", "asan"):
            assert p[field] is True or (isinstance(p[field], str) and p[field]), (p["name"], field)
    assert registry.CORE_ANSWERS in registry.PACKAGES


def test_a_reason_reads_as_no(monkeypatch):
    """A yes/no field holds true or the reason why not; a reason (a non-empty string) must read
    as no, or every package would be built where it cannot run (all eight on the free-threaded
    3.13)."""
    rows = {"yes": {"free_threaded": True}, "why": {"free_threaded": "no free-threaded torch"}}
    monkeypatch.setattr(registry, "PACKAGES", rows)
    assert registry.names(free_threaded=True) == ["yes"]
    assert registry.why_not("yes", "free_threaded") is None
    assert registry.why_not("why", "free_threaded") == "no free-threaded torch"


def test_the_makefile_reads_the_registry():
    makefile = (ROOT / "Makefile").read_text()
    assert "packages/registry.json" in makefile.split("PACKAGES :=", 1)[1].splitlines()[0]
    # The one recipe that names packages: the stub generators of the packages that have them.
    stubs = set(re.findall(r"stubs-(\w+)", makefile))
    assert stubs <= set(registry.names(stubs=True)), stubs


def expand(entry: str) -> list[str]:
    """An env_list entry's env names (tox's factor braces, not nested)."""
    groups = [g.split(",") for g in re.findall(r"\{([^}]*)\}", entry)]
    template = re.sub(r"\{[^}]*\}", "{}", entry)
    return [template.format(*c) for c in itertools.product(*groups)]


def test_the_makefile_skips_exactly_the_chroots_envs():
    """Without the chroot, make test-all skips the envs SID_ENVS matches: every env whose Python
    is the chroot's, and no other."""
    makefile = (ROOT / "Makefile").read_text()
    regex = re.search(r"^SID_ENVS := (.+)$", makefile, re.M).group(1).replace("$$", "$")
    sid = {f"py3{v.split('.')[1]}" for v in sid_chroot.PYTHONS}
    listed = [line.strip() for line in ENV_LIST.splitlines()[1:]]
    for name in (n for e in listed if e and not e.startswith("#") for n in expand(e)):
        assert bool(re.search(regex, name)) == bool(sid & set(name.split("-"))), name


def test_the_readme_names_each_packages_pythons():
    """The README's status column says which Pythons each package passes the suite on: the
    registry's (what tox.ini's envs run)."""
    readme = (ROOT / "README.md").read_text()
    for p in ROWS:
        row = re.search(rf"^\| `packages/{p['name']}` \|.*$", readme, re.M).group(0)
        pythons = p["pythons"]
        said = pythons[0] if len(pythons) == 1 else f"{pythons[0]}-{pythons[-1]}"
        assert f"on Python {said}" in row, (p["name"], said, row)


def test_the_benchmarks_know_every_technology():
    """The trap tables' columns (spec.PROBED) and the call-overhead rows (spec.FLOOR_ROWS) are
    technologies, not packages: a registered package's technology, probe and floor must be
    among them, or its column and floors would be missing from the page."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import spec

    for p in ROWS:
        assert p["technology"] in spec.PROBED, (p["name"], p["technology"])
        assert p["probe"] in spec.FLOOR_ROWS, (p["name"], p["probe"])
        assert p["floor"] in spec.FLOOR_ROWS, (p["name"], p["floor"])
        assert p["array"] in spec.ALLOCATORS, (p["name"], p["array"])
