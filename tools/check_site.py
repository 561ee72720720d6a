"""Open the built docs site in a real headless browser (Chromium from the system) and fail on
what a reader would hit: a console error, an image that did not load, an internal link that
returns nothing, a semantic table of the traps page that is missing or empty, the guide's
answers out of their place on the comparison page (the first screen, then 1.5 screens, and the
page at most 5 screens long, at 1366x900), and, at a
laptop's and a desktop's window size, a table wider than the content column (the reader would
scroll sideways inside it) or a table row taller than MAX_ROW_PX. Saves a screenshot of every
page it checked at every size beside the site (build/site-screenshots/).

    python tools/check_site.py build/site
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import sys
import threading
from pathlib import Path
from urllib.parse import urljoin, urlparse

# Home, the comparison (the guide), its evidence pages, the contract.
PAGES = ["", "comparison/", "traps/", "costs/", "free-threaded/", "portability/", "contract/"]
# Headings of the traps page's generated trap tables; each must be followed by a table with at
# least one row.
SEMANTIC_HEADINGS = ["C++ exceptions", "Arguments", "Arrays, returned buffers and references"]
# The guide's place on the comparison page at a laptop's window (the answer first): the first
# screen shows the first job's answer and the start of the second, every job's answer lies
# within GUIDE_SCREENS screens, and the page is at most PAGE_SCREENS screens long.
GUIDE_VIEWPORT, GUIDE_SCREENS, PAGE_SCREENS = (1366, 900), 1.5, 5
# Each job's answer: the paragraph that holds its anchor (benchmarks/page/guide.py), and its
# job's heading.
MEASURE_GUIDE = """() => [...document.querySelectorAll('[id^="pick-"]')].map(a => {
  const p = a.closest('p'), h = p && p.previousElementSibling;
  return {id: a.id, answer_bottom: p ? p.getBoundingClientRect().bottom + scrollY : -1,
          heading_top: h ? h.getBoundingClientRect().top + scrollY : -1};
})"""
# A laptop's and a desktop's browser window.
VIEWPORTS = [(1366, 900), (1920, 1080)]
# A row taller than this holds about three rows' worth of a 900 px screen's table space.
MAX_ROW_PX = 150
# Every table of the page against its content column: how far it sticks out, and its rows that
# are too tall (index, height, first cell's text).
MEASURE_TABLES = """max => {
  const column = document.querySelector('article.md-content__inner') || document.body;
  const style = getComputedStyle(column);
  const width = column.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return [...column.querySelectorAll('table')].map((t, i) => {
    const heading = [...document.querySelectorAll('h2, h3')]
      .filter(h => h.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING).pop();
    return {index: i, heading: heading ? heading.textContent.replace('¶', '').trim() : '',
            width: Math.ceil(t.scrollWidth), column: Math.floor(width),
            tall: [...t.querySelectorAll('tr')]
              .map((r, j) => [j, Math.ceil(r.getBoundingClientRect().height),
                              (r.cells[0] ? r.cells[0].textContent : '').trim().slice(0, 40)])
              .filter(r => r[1] > max)};
  });
}"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    sys.exit("no Chromium found: install Debian's `chromium` package (.ci/run does)")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per request would bury the findings
        pass


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def check_page(page, base: str, path: str, shots: Path, problems: list[str]) -> None:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    url = urljoin(base, path)
    response = page.goto(url, wait_until="networkidle")
    if response is None or response.status != 200:
        problems.append(f"{url}: status {response.status if response else 'none'}")
        return
    broken_images = page.eval_on_selector_all(
        "img", "imgs => imgs.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src)"
    )
    problems += [f"{url}: image did not load: {src}" for src in broken_images]
    links = page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)")
    for link in sorted(set(links)):
        target = urlparse(link)
        if target.netloc != urlparse(base).netloc:
            continue
        got = page.request.get(link.split("#")[0])
        if got.status != 200 or not got.body():
            problems.append(f"{url}: internal link returns nothing: {link} ({got.status})")
    if path == "comparison/":
        problems += guide_problems(page, url)
    if path == "traps/":
        for heading in SEMANTIC_HEADINGS:
            rows = page.evaluate(
                """h => { const el = [...document.querySelectorAll('h2, h3')]
                            .find(e => e.textContent.trim().startsWith(h));
                          if (!el) return -1;
                          let n = el.nextElementSibling;
                          while (n && !n.querySelector('table') && n.tagName !== 'TABLE'
                                 && !/^H[1-3]$/.test(n.tagName)) n = n.nextElementSibling;
                          const t = n && (n.tagName === 'TABLE' ? n : n.querySelector('table'));
                          return t ? t.querySelectorAll('tbody tr').length : 0; }""",
                heading,
            )
            if rows <= 0:
                problems.append(f"{url}: semantic table '{heading}' is missing or empty ({rows})")
    problems += [f"{url}: console error: {e}" for e in errors]
    width, height = page.viewport_size["width"], page.viewport_size["height"]
    for t in page.evaluate(MEASURE_TABLES, MAX_ROW_PX):
        where = f"{url} at {width}x{height}: table {t['index'] + 1} (under '{t['heading']}')"
        if t["width"] > t["column"]:
            problems.append(f"{where} is {t['width']} px wide, the column {t['column']} px")
        problems += [f"{where}: row {j} ('{text}') is {h} px tall (at most {MAX_ROW_PX})"
                     for j, h, text in t["tall"]]  # fmt: skip
    name = path.strip("/") or "home"
    page.screenshot(path=str(shots / f"{name}-{width}x{height}.png"), full_page=True)


def guide_problems(page, url: str) -> list[str]:
    """Where the guide's answers stand at GUIDE_VIEWPORT, against where a reader must find them
    (nothing at other sizes: the page is laid out for this one first)."""
    width, height = page.viewport_size["width"], page.viewport_size["height"]
    if (width, height) != GUIDE_VIEWPORT:
        return []
    where = f"{url} at {width}x{height}"
    answers = page.evaluate(MEASURE_GUIDE)
    if len(answers) < 3:
        return [f"{where}: {len(answers)} job answers found (the guide has one per job)"]
    found = []
    if answers[0]["answer_bottom"] > height:
        found.append(f"{where}: the first job's answer ends at {answers[0]['answer_bottom']:.0f}"
                     f" px, below the first screen ({height} px)")  # fmt: skip
    if answers[1]["heading_top"] > height:
        found.append(f"{where}: the second job starts at {answers[1]['heading_top']:.0f} px, "
                     f"below the first screen ({height} px)")  # fmt: skip
    limit = GUIDE_SCREENS * height
    found += [f"{where}: {a['id']} ends at {a['answer_bottom']:.0f} px, past {limit:.0f} px"
              for a in answers if a["answer_bottom"] > limit]  # fmt: skip
    total = page.evaluate("document.documentElement.scrollHeight")
    if total > PAGE_SCREENS * height:
        found.append(f"{where}: the page is {total} px, {total / height:.1f} screens "
                     f"(at most {PAGE_SCREENS})")  # fmt: skip
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    shots = args.site.parent / "site-screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    server, base = serve(args.site)
    problems: list[str] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            for path in PAGES:
                for width, height in VIEWPORTS:
                    page = browser.new_page(viewport={"width": width, "height": height})
                    check_page(page, base, path, shots, problems)
                    page.close()
            browser.close()
    finally:
        server.shutdown()
    for problem in problems:
        print(problem)
    if problems:
        sys.exit(f"{len(problems)} problem(s) in the built site")
    print(f"checked {len(PAGES)} pages at {len(VIEWPORTS)} sizes in Chromium; screenshots: {shots}")


if __name__ == "__main__":
    main()
