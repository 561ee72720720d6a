"""MkDocs hooks: the contract links each promise to the test file that proves it
(`../tests/conformance/test_tokens.py`), a file outside docs/. The site renders every such file
as a page of its own (source/<path>/) and points the link there, so a reader lands on the test
itself; a link to a file that does not exist is left alone and fails the strict build."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(\.\./((?:tests|packages|benchmarks|common_cpp|tools)/[^)#\s]+)\)")
LANGUAGES = {".py": "python", ".cpp": "cpp", ".hpp": "cpp", ".h": "c", ".c": "c",
             ".pyx": "cython", ".pxd": "cython"}  # fmt: skip
_sources: set[str] = set()


def _linked_sources(docs_dir: Path) -> set[str]:
    found = set()
    for page in docs_dir.rglob("*.md"):
        for target in LINK.findall(page.read_text()):
            if (ROOT / target).is_file():
                found.add(target)
    return found


def on_files(files, config):
    _sources.clear()
    _sources.update(_linked_sources(Path(config["docs_dir"])))
    for target in sorted(_sources):
        language = LANGUAGES.get(Path(target).suffix, "text")
        text = (ROOT / target).read_text()
        content = f"# `{target}`\n\n```{language}\n{text}\n```\n"
        files.append(File.generated(config, f"source/{target}.md", content=content))
    return files


def on_page_markdown(markdown, page, config, files):
    depth = page.file.src_uri.count("/")
    up = "../" * depth

    def rewrite(match):
        target = match.group(1)
        if target in _sources:
            return f"]({up}source/{target}.md)"
        return match.group(0)

    return LINK.sub(rewrite, markdown)
