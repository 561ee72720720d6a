"""tox.ini names the packages in its factor lists; packages/registry.json is their one list.
Each list that runs something per package must name exactly the registry's packages (torch's
pinned conformance env and its sdist-less build are listed apart, so their lists say which), and
every registered package has its folder and its module."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
REGISTRY = json.loads((ROOT / "packages" / "registry.json").read_text())["packages"]
NAMES = {p["name"] for p in REGISTRY}
TOX = (ROOT / "tox.ini").read_text()


def factors(pattern: str) -> set[str]:
    """The {a,b,c} list of the one tox.ini line that matches `pattern` (a regex with a group)
    and names packages."""
    (match,) = [m for m in re.findall(pattern, TOX, re.M) if NAMES & set(m.split(","))]
    return set(match.split(","))


def test_every_package_has_its_conformance_env():
    numpy_versions = factors(r"^\s+py3\{[\d,]+\}-\{([a-z,]+)\}$")
    torch = {p["name"] for p in REGISTRY if p["array"] == "torch"}
    assert numpy_versions | torch == NAMES
    for name in torch:
        assert re.search(rf"^\s+py3\d+-{name}$", TOX, re.M), f"no pinned env for {name}"


def test_every_package_has_its_own_env_and_factor_lines():
    assert factors(r"^\[testenv:\{([a-z,]+)\}\]$") == NAMES
    for name in NAMES:
        assert re.search(rf"^\s+{name}: KVBRIDGE_PACKAGE = {name}$", TOX, re.M), name


def test_sdist_envs_cover_every_package_built_alone():
    # torch's sdist needs the exact torch it was built against: it is not built alone.
    torch = {p["name"] for p in REGISTRY if p["array"] == "torch"}
    assert factors(r"^\s+sdist-\{([a-z,]+)\}$") == NAMES - torch


def test_every_registered_package_has_a_folder_and_its_module():
    for p in REGISTRY:
        assert (ROOT / "packages" / p["name"] / "pyproject.toml").is_file(), p["name"]
        assert (ROOT / "packages" / p["name"] / "src" / p["module"]).is_dir(), p["module"]
        for shared in p["shares"]:
            assert (ROOT / shared).is_file(), shared
