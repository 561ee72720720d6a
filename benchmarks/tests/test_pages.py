"""The pages' shape (benchmarks/report.py): their prose lives in templates, and a page whose
prose no longer matches its template is stale. Run by `tox -e semantics`."""

from __future__ import annotations

import string
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def test_a_page_matches_its_template_whatever_the_figures():
    import report

    template = "# T\n\nMeasured: ${a}; and $b.\n\n${table}\n"
    page = string.Template(template).substitute(a="1.2 ns", b="3×", table="| x |\n|---|")
    assert report.template_mismatch(template, page) is None
    assert report.template_mismatch(template, page.replace("Measured", "Timed")) == "# T Measured:"
    assert report.template_mismatch(template + "A new sentence.\n", page) == "A new sentence."
    assert report.template_mismatch(template, page.replace("; and", ", and")) == "; and"


def test_every_placeholder_of_the_templates_is_filled_by_the_report():
    import report

    names = set()
    for template in (report.TEMPLATE, report.HEALTH_TEMPLATE):
        names |= {m["named"] or m["braced"]
                  for m in string.Template.pattern.finditer(template.read_text())
                  if m["named"] or m["braced"]}  # fmt: skip
    source = Path(report.__file__).read_text()
    missing = sorted(n for n in names if f'"{n}"' not in source)
    assert not missing, f"placeholders no code fills: {missing}"


def test_report_holds_no_page_prose():
    """Sentences of the page belong in the template: report.py's strings are cells, headers,
    short labels and its own messages, none of them prose (fifteen words or more)."""
    import ast

    import report

    tree = ast.parse(Path(report.__file__).read_text())
    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    long = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and id(n) not in docstrings
            and isinstance(n.value, str) and n.value.count(" ") >= 14]  # fmt: skip
    assert not long, long[:3]
