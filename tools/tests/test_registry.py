"""packages/registry.json is the one list of packages. Every per-package line elsewhere either
reads it (the Makefile, the suite, the benchmarks, the tools, the docs' nav, the tox envs through
toxfile.py and tools/envs.py) or is checked against it here: the README's table, the docs' pages,
the free-threaded probes. `disagreements(rows)` names every place that differs from what `rows`
imply; with a row deleted it must name each place that package is still written by hand, so
this check cannot pass by reading nothing."""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "packages"))
sys.path.insert(0, str(ROOT / "tools"))

import envs  # noqa: E402
import registry  # noqa: E402
import sid_chroot  # noqa: E402

ROWS = list(registry.PACKAGES.values())
ROWS_BY_NAME = registry.PACKAGES
TOX = (ROOT / "tox.ini").read_text()
ENV_LIST = TOX[TOX.index("env_list =") : TOX.index("skip_missing_interpreters")]


def test_the_registry_makes_every_per_package_env():
    """tools/envs.py's rule, row by row: the conformance run on each of a package's Pythons (the
    chroot's in the chroot), and each yes/no field's env only where the field is true; a reason
    makes no env."""
    made = {e.name: e for e in envs.envs()}
    for p in ROWS:
        name = p["name"]
        assert made[name].package == name and not made[name].listed
        for version in p["pythons"]:
            env = made[f"{envs.tag(version)}-{name}"]
            assert env.listed and env.family == ("sid" if version in envs.CHROOT_PYTHONS else None)
        for field, env in (("free_threaded", f"py313t-{name}"), ("stubs", f"stubs-{name}"),
                           ("sdist", f"sdist-{name}"), ("abi3", f"abi3-{name}")):  # fmt: skip
            assert (env in made) == (p[field] is True), (name, field)
    # Listed (make test-all runs it) unless the chroot runs it, or a py3XX-<name> runs the same.
    assert all(e.listed != (e.name.startswith("sid-") or e.name in ROWS_BY_NAME)
               for e in made.values())  # fmt: skip
    # A chroot env runs its sid- twin there, which the rule makes too.
    assert all(f"sid-{e.name}" in made for e in made.values() if e.family == "sid")


def test_a_torch_package_runs_beside_each_torch_its_row_names():
    """A torch package's `torches`: an env for each, listed, with that torch, doing what its
    `wheel` says (built against it, or its one wheel installed beside it); a free-threaded one is
    its py313t env, which a torch package that is free_threaded must have (no torch its
    pyproject pins has a free-threaded wheel)."""
    made = {e.name: e for e in envs.envs()}
    for p in ROWS:
        name = p["name"]
        for version, python in registry.torches(name):
            env = made[f"py313t-{name}" if python == registry.FREE_THREADED
                       else f"{name}-{envs.torch_tag(version)}"]  # fmt: skip
            assert env.listed and env.torch == version, env
            assert env.family == envs.TORCH_FAMILY[p["wheel"]], env
            assert env.depends == ((f"{envs.tag(p['pythons'][0])}-{name}",)
                                   if env.family == "torch-beside" else ())  # fmt: skip
        if p["free_threaded"] is True and p["array"] == "torch":
            assert registry.free_threaded_torch(name), f"{name}: which torch on 3.13t?"


def test_a_package_with_cuda_kernels_compiles_them_in_its_cuda_env():
    """A row's `cuda`: a [torch, Python] pair makes cuda-<name>, listed, building its CUDA
    kernels against that torch there (tox.ini's [kvbridge:cuda]); anything else is its reason."""
    made = {e.name: e for e in envs.envs()}
    for p in ROWS:
        name, cuda = p["name"], registry.cuda_torch(p["name"])
        assert (f"cuda-{name}" in made) == (cuda is not None), name
        if cuda is None:
            assert isinstance(p["cuda"], str) and p["cuda"], f"{name}: why no CUDA kernels?"
            continue
        env = made[f"cuda-{name}"]
        assert env.listed and env.family == "cuda", env
        assert (env.torch, env.base_python) == (cuda[0], f"python{cuda[1]}"), env


def test_install_packages_builds_against_the_envs_torch(monkeypatch):
    import install_packages

    monkeypatch.setenv("KVBRIDGE_TORCH", "2.15.0")
    assert install_packages.torch_for("torch", "torch==2.13.0") == "torch==2.15.0"
    assert install_packages.torch_for("torch", "numpy>=1.24") == "numpy>=1.24"
    monkeypatch.delenv("KVBRIDGE_TORCH")
    monkeypatch.setattr(install_packages.sysconfig, "get_config_var", lambda name: 1)
    assert install_packages.torch_for("torch_stable", "torch==2.13.0") == (
        f"torch=={registry.free_threaded_torch('torch_stable')}"
    )
    monkeypatch.setattr(install_packages.sysconfig, "get_config_var", lambda name: 0)
    assert install_packages.torch_for("torch_stable", "torch==2.13.0") == "torch==2.13.0"


def test_tox_ini_names_no_per_package_env():
    """tox.ini holds the defaults, the families' sections and the envs that are not per package:
    no env_list entry, section or factor condition of its names a package's env (toxfile.py
    makes those), so a new binding needs no line here."""
    made = {e.name for e in envs.envs()}
    listed = {line.strip() for line in ENV_LIST.splitlines()[1:]} - {""}
    listed = {n for e in listed if not e.startswith("#") for n in expand(e)}
    sections = {n for h in re.findall(r"^\[testenv:([^\]]+)\]$", TOX, re.M) for n in expand(h)}
    assert not (listed | sections) & made, (listed | sections) & made
    factors = set(re.findall(r"^\s+([\w,]+): ", TOX, re.M))
    names = {f for group in factors for f in group.split(",")} & set(registry.PACKAGES)
    assert not names, f"tox.ini has settings for these packages' factors: {names}"
    for family in {e.family for e in envs.envs()} - {None}:
        assert f"[kvbridge:{family}]" in TOX, family


def readme_packages() -> list[str]:
    return re.findall(r"^\| `packages/(\w+)` \|", (ROOT / "README.md").read_text(), re.M)


def free_threaded_probes() -> set[str]:
    """The technologies benchmarks/measuring/free_threading.py answers for: those it has probe
    modules for (the technology table's rows that say how they declare it, spec.FT_MODULES) and
    those another row answers for (spec.FT_PROBE: every torch option is first whether torch
    installs, asked of pip)."""
    spec = benchmarks_spec()
    return set(spec.FT_MODULES) | {t for t, probe in spec.FT_PROBE.items() if probe == "torch"}


def benchmarks_spec():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import spec

    return spec


# The pages make report writes, one per template in benchmarks/page: each names every package.
GENERATED = {t.name.removesuffix(".in") for t in (ROOT / "benchmarks" / "page").glob("*.md.in")}


def disagreements(rows: list[dict]) -> list[str]:
    """Every place that differs from what `rows` (registry rows) imply, one message each."""
    found = []
    names = [p["name"] for p in rows]
    if readme_packages() != names:
        found.append(f"README.md's package table: {readme_packages()} != {names}")
    # The docs' pages, nav and links per package are made from the registry by the MkDocs hook:
    # nothing in docs/ or mkdocs.yml may list them by hand.
    for doc in [ROOT / "mkdocs.yml", *(ROOT / "docs").glob("*.md")]:
        if doc.name in GENERATED:  # generated from the registry's run
            continue
        text = doc.read_text()
        listed = [n for n in names if f"packages/{n}.md" in text]
        if listed:
            found.append(f"{doc.relative_to(ROOT)} lists package pages by hand: {listed}")
    probes = free_threaded_probes()
    for p in rows:
        if p["free_threaded"] is True and p["technology"] not in probes:
            found.append(f"benchmarks/technologies.json: no free-threaded probe of "
                         f"{p['technology']} ({p['name']} is free_threaded)")  # fmt: skip
    return found


def test_every_site_agrees_with_the_registry():
    assert disagreements(ROWS) == []


def test_deleting_a_row_is_seen_at_every_place_it_appears():
    for row in ROWS:
        name = row["name"]
        messages = disagreements([r for r in ROWS if r is not row])
        text = "\n".join(messages)
        expected = ["README.md"]
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


def test_shares_names_the_python_each_package_installs():
    """A package's Python from packages/python is what its CMakeLists.txt installs with
    kvbridge_install_python, and its registry row's `shares` lists exactly those files (the
    docs, the glue-line counts and a reader follow `shares`)."""
    for p in ROWS:
        cmake = (ROOT / "packages" / p["name"] / "CMakeLists.txt").read_text()
        calls = re.findall(r"^kvbridge_install_python\((\S+)((?: \S+)+)\)", cmake, re.M)
        installed = {f"packages/python/{f}" for _, files in calls for f in files.split()}
        listed = {f for f in p["shares"] if f.startswith("packages/python/") and f.endswith(".py")}
        assert installed == listed, (p["name"], installed, listed)
        assert all(module == p["module"] for module, _ in calls), (p["name"], calls)
        assert len(calls) <= 1, p["name"]  # one call: the package's Python in one place
        if calls:
            assert "packages/python/install.cmake" in p["shares"], p["name"]


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
    assert "packages/registry.py" in makefile.split("PACKAGES :=", 1)[1].splitlines()[0]
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
    fixed = [n for e in listed if e and not e.startswith("#") for n in expand(e)]
    for name in fixed + [e.name for e in envs.envs() if e.listed]:
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
    technologies, not packages (benchmarks/technologies.json): a registered package's
    technology, probe, floor and arrays must be among them, or its column and floors would be
    missing from the page; its family is its technology's."""
    spec = benchmarks_spec()
    for p in ROWS:
        assert p["technology"] in spec.PROBED, (p["name"], p["technology"])
        assert p["family"] == spec.TECHNOLOGIES[p["technology"]]["family"], p["name"]
        assert p["probe"] in spec.FLOOR_ROWS, (p["name"], p["probe"])
        assert p["floor"] in spec.FLOOR_ROWS, (p["name"], p["floor"])
        assert p["arrays"] in spec.FLOOR_ROWS, (p["name"], p["arrays"])
        assert p["array"] in spec.ALLOCATORS, (p["name"], p["array"])


def test_the_stable_abi_target_is_one_version():
    """kvbridge-torch-stable's oldest torch: CMakeLists.txt's KVBRIDGE_TORCH_TARGET (the import
    checks it, from the _build_info.py the build writes), pyproject.toml's torch>= and the
    oldest torch the registry runs it beside (so the range's lower end is tested)."""
    for name in registry.names(wheel="torch-stable-abi"):
        cmake = (registry.folder(name) / "CMakeLists.txt").read_text()
        (target,) = re.findall(r'set\(KVBRIDGE_TORCH_TARGET "([\d.]+)"\)', cmake)
        floors = [r.split(">=", 1)[1] for r in registry.requirements(registry.folder(name))
                  if registry.requirement_name(r) == "torch" and ">=" in r]  # fmt: skip
        oldest = min((v for v, _ in registry.torches(name)),
                     key=lambda v: tuple(map(int, v.split("."))))  # fmt: skip
        assert floors == [target], (name, target, floors)
        assert oldest.rsplit(".", 1)[0] == target, (name, target, oldest)
