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
        if "unprobed" in row.get("free_threaded", {}):  # no probe answers for it: it says why
            assert spec.ft_reason(name) == row["free_threaded"]["unprobed"], name
        elif "free_threaded" in row:
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


def constant(module: str, name: str):
    """A literal a benchmarks module assigns at its top level, read without importing it."""
    tree = ast.parse((HERE / f"{module.replace('.', '/')}.py").read_text())
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(t, "id", None) == name for t in node.targets)]  # fmt: skip
    return ast.literal_eval(value)


def names_in(path: Path) -> set[str]:
    """The top-level names a file defines, assigns or imports."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom):
            found |= {a.asname or a.name for a in node.names}
    return found


def test_each_row_has_what_its_family_asks_of_a_technology():
    """A family module's ROW_FIELDS are in every row of its family, and its PROBE_FILE names are
    defined by each row's probe file: a row or a probe file that lacks one fails here, at
    `tox -e semantics`'s first minute, not half an hour into `make report`."""
    for name, row in spec.TECHNOLOGIES.items():
        module = spec.FAMILIES[row["family"]]
        missing = [f for f in constant(module, "ROW_FIELDS") if f not in row]
        assert not missing, f"{name}: its row lacks {missing}, which {module} reads"
        if needs := constant(module, "PROBE_FILE"):
            path = HERE / "probing" / "technologies" / f"{row['probe_file']}.py"
            assert path.is_file(), f"{name}: no probe file {path}"
            lacking = set(needs) - names_in(path)
            assert not lacking, f"{name}: {path.name} lacks {sorted(lacking)}"


def test_a_rows_unasked_reasons_are_for_questions_and_its_compile_call_has_a_row():
    from probing.questions import QUESTIONS

    rows = {row for axis in QUESTIONS.values() for row in axis}
    for name, row in spec.TECHNOLOGIES.items():
        assert not set(row.get("unasked", {})) - rows, (name, set(row["unasked"]) - rows)
        if "compile_call" in row:
            assert "compile_row" in row, name


def technology_words() -> set[str]:
    """What names a technology in code: each row's name, column, probe module and probe file,
    its floor rows, and its name's first word (its tool: "pybind11", "cffi", "tvm-ffi", with
    "tvm_ffi" as Python spells it), but "torch", the torch family's own library."""
    words = set()
    for row in spec.TECHNOLOGIES.values():
        first = row["name"].split()[0]
        words |= {row["name"], first, first.replace("-", "_"), *row["floors"]}
        words |= {row[k] for k in ("column", "probe_module", "probe_file") if k in row}
    return {w.lower() for w in words} - {"torch"}


def test_the_family_modules_name_no_technology():
    """Every fact about one technology is its row's or its probe file's: the family modules
    (probing/ask_*.py) and the questions keep the askers, for any technology of their family."""
    words = technology_words()
    assert {"ctypes", "pybind11", "cython", "tvm_ffi", "torch ops"} <= words  # the rule reads rows
    modules = [*sorted((HERE / "probing").glob("ask_*.py")), HERE / "probing" / "questions.py"]
    for path in modules:
        text = path.read_text().lower()
        named = sorted(w for w in words if w in text)
        assert not named, f"{path.relative_to(HERE)} names {named}"
