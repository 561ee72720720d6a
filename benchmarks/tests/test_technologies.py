"""The technology table (benchmarks/technologies.json) is whole: every list of technologies in
benchmarks/ is made from it, so a row that names a family, a base or a floor that does not exist
would drop a column or a row from the page without an error. Run by `tox -e semantics`."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

import spec  # noqa: E402

REQUIRED = {"name", "family", "floors"}


def defined(module: str) -> set[str]:
    """The functions a benchmarks module defines, read without importing it (torch's family
    imports torch)."""
    tree = ast.parse((HERE / f"{module.replace('.', '/')}.py").read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_row_names_a_family_that_asks_and_times_it():
    for name, row in spec.TECHNOLOGIES.items():
        assert REQUIRED <= set(row), (name, REQUIRED - set(row))
        assert row["family"] in spec.FAMILIES, (name, row["family"])
    for family, module in spec.FAMILIES.items():
        assert {"ask", "floors"} <= defined(module), (family, module)


def test_a_variant_shares_the_column_of_a_row_that_has_one():
    for name, row in spec.TECHNOLOGIES.items():
        assert ("column" in row) != ("variant_of" in row), name
        if "variant_of" in row:
            assert "column" in spec.TECHNOLOGIES[row["variant_of"]], name
            assert row["word"], name


def test_each_floor_row_is_one_technologys():
    floors = spec.FLOOR_ROWS[1:]
    assert spec.FLOOR_ROWS[0] == spec.BASELINE_FLOOR
    assert len(floors) == len(set(floors)) and spec.BASELINE_FLOOR not in floors, floors


def test_every_free_threaded_row_is_probed_or_asked_of_pip():
    """A technology's free-threaded row is a probe built here, pip's answer, or the row of
    another technology that is one of those (every torch option answers as torch, which the
    report asks pip for with its own torch)."""
    answered = set(spec.FT_MODULES) | set(spec.PIP_ASKED) | {"torch"}
    for name, row in spec.TECHNOLOGIES.items():
        if "free_threaded" in row:
            assert row["free_threaded"]["probe"] in answered, name


def test_an_allocating_rmsnorm_is_judged_against_its_own_allocator():
    """Each package's allocating rmsnorm against its own allocator ("same allocator"): torch
    tensors against torch's allocating copy and torch's peers, numpy arrays against numpy's; by
    the registry's `array`, never a package's name (kvbridge-torch-stable was once numpy's)."""
    for package in spec.PACKAGES:
        array = spec.REGISTRY[package]["array"]
        peers = {case.rsplit("[", 1)[1].rstrip("]")
                 for t in spec.targets(package) if t.name.startswith("`rmsnorm` ")
                 for case in (t.numerator, t.denominator)}  # fmt: skip
        assert f"{array} alloc copy" in peers, (package, peers)
        assert set(spec.ALLOCATORS[array]) <= peers, (package, peers)
        for other, theirs in spec.ALLOCATORS.items():
            if other != array:
                assert not {f"{other} alloc copy", *theirs} & peers, (package, peers)
