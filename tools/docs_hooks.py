"""MkDocs hooks.

- The packages' pages come from the registry (packages/registry.json): one page per package,
  its README included (packages/<name>.md), listed under the nav's "Packages" entry, and the
  list of links that replaces PACKAGE_LINKS on a page. A new package's docs need nothing here.
- The contract's per-package amendments live in the packages' folders (packages/<name>/contract.md,
  or that of a shared folder a package installs from: the registry's `shares`): each is put in
  the contract page in the registry's order, where AMENDMENTS stands, its links made relative to
  docs/ as the page's own are.
- The contract links each promise to the test file that proves it
  (`../tests/conformance/test_tokens.py`), a file outside docs/. The site renders every such
  file as a page of its own (source/<path>/) and points the link there, so a reader lands on the
  test itself; a link to a file that does not exist is left alone and fails the strict build.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packages"))

import registry  # noqa: E402

PACKAGE_LINKS = "<!-- the packages, from the registry -->"
AMENDMENTS = "<!-- the packages' amendments, from their folders -->"
CONTRACT = "contract.md"


def package_page(name: str) -> str:
    return f"packages/{name}.md"


def on_config(config):
    for item in config["nav"]:
        if isinstance(item, dict) and "Packages" in item:
            item["Packages"] = [{f"kvbridge-{name}": package_page(name)}
                                for name in registry.PACKAGES]  # fmt: skip
            return config
    raise SystemExit("mkdocs.yml's nav has no Packages entry for the registry's packages")


def amendments() -> str:
    """Every package's contract amendment (its folder's contract.md, then those of the shared
    folders it installs from), each once, in the registry's order, its relative links rewritten
    to point from docs/ where they pointed from its folder."""
    folders = []
    for p in registry.PACKAGES.values():
        folders.append(f"packages/{p['name']}")
        folders += [os.path.dirname(shared) for shared in p["shares"]]
    texts = []
    for folder in dict.fromkeys(folders):
        path = ROOT / folder / "contract.md"
        if path.is_file():
            rewrite = lambda m, f=folder: _from_docs(f, m.group(1))  # noqa: E731
            texts.append(RELATIVE.sub(rewrite, path.read_text()))
    return "\n".join(texts)


RELATIVE = re.compile(r"\]\((?!https?:|#|/)([^)#\s]+)\)")


def _from_docs(folder: str, target: str) -> str:
    return "](" + os.path.relpath(os.path.normpath(os.path.join(folder, target)), "docs") + ")"


def _page_text(page: Path) -> str:
    text = page.read_text()
    return text.replace(AMENDMENTS, amendments()) if page.name == CONTRACT else text


LINK = re.compile(r"\]\(\.\./((?:tests|packages|benchmarks|common_cpp|tools)/[^)#\s]+)\)")
LANGUAGES = {".py": "python", ".cpp": "cpp", ".hpp": "cpp", ".h": "c", ".c": "c",
             ".pyx": "cython", ".pxd": "cython"}  # fmt: skip
_sources: set[str] = set()


def _linked_sources(docs_dir: Path) -> set[str]:
    found = set()
    for page in docs_dir.rglob("*.md"):
        for target in LINK.findall(_page_text(page)):
            if (ROOT / target).is_file():
                found.add(target)
    return found


def on_files(files, config):
    for name in registry.PACKAGES:
        content = f'--8<-- "packages/{name}/README.md"\n'
        files.append(File.generated(config, package_page(name), content=content))
    _sources.clear()
    _sources.update(_linked_sources(Path(config["docs_dir"])))
    for target in sorted(_sources):
        language = LANGUAGES.get(Path(target).suffix, "text")
        text = (ROOT / target).read_text()
        content = f"# `{target}`\n\n```{language}\n{text}\n```\n"
        files.append(File.generated(config, f"source/{target}.md", content=content))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == CONTRACT:
        if AMENDMENTS not in markdown:
            raise SystemExit(f"docs/{CONTRACT} has no {AMENDMENTS} for the packages' amendments")
        markdown = markdown.replace(AMENDMENTS, amendments())
    depth = page.file.src_uri.count("/")
    up = "../" * depth

    def rewrite(match):
        target = match.group(1)
        if target in _sources:
            return f"]({up}source/{target}.md)"
        return match.group(0)

    links = ", ".join(f"[{p['technology']}]({up}{package_page(name)})"
                      for name, p in registry.PACKAGES.items())  # fmt: skip
    return LINK.sub(rewrite, markdown).replace(PACKAGE_LINKS, links)
