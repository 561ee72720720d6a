"""No import circle among the benchmarks' modules: each module's place is above or below another,
never both (a circle is how page/cuda.py and page/render.py once needed each other, and it
breaks whichever of the two is imported first once either imports the other at the top)."""

from __future__ import annotations

import ast
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent


def module_name(path: Path) -> str:
    parts = path.relative_to(BENCHMARKS).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, known: set[str]) -> set[str]:
    """The benchmarks' modules `path` imports, wherever in it (a function's import counts)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        found |= {n for n in names if n in known}
    return found - {module_name(path)} - {module_name(path).rsplit(".", 1)[0]}


def graph() -> dict[str, set[str]]:
    files = [p for p in BENCHMARKS.rglob("*.py") if "tests" not in p.parts]
    known = {module_name(p) for p in files}
    return {module_name(p): imports(p, known) for p in files}


def circle(edges: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports, or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node], _ = "open", path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node], _ = "done", path.pop()
        return None

    return next(filter(None, (visit(n) for n in sorted(edges) if n not in state)), None)


def test_the_rule_finds_a_circle():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b"}, "b": set()}) is None


def test_no_benchmarks_module_imports_one_that_imports_it():
    edges = graph()
    assert edges["page.cuda"] and edges["page.render"], "the import graph reads nothing"
    assert circle(edges) is None, " -> ".join(circle(edges))
