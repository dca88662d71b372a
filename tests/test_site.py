"""The rendered book in headless Chromium: every page loads cleanly and offline, charts draw
and answer hovers, tables have rows, figure downloads resolve.

Runs against `_build/html` (built by `make book`, which `make test` runs first) served by a
local http.server on a free loopback port. A missing build is a failure, not a skip.
"""
from __future__ import annotations

import functools
import http.server
import threading
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
import yaml
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
HOST = "127.0.0.1"
# Console errors known to be harmless, matched exactly. Keep this empty unless one is explained.
ALLOWED_CONSOLE_ERRORS: frozenset[str] = frozenset()
LOCAL_SCHEMES = {"data", "blob", "about"}
CHART = 'div[id^="altair-viz-"]'
DATA_MARKS = "svg g.role-mark > *"
RENDER_TIMEOUT_MS = 20_000


def toc_docs(toc_file: Path = ROOT / "_toc.yml") -> list[str]:
    """Document names in the TOC, in reading order (e.g. 'book/intro')."""
    toc = yaml.safe_load(toc_file.read_text())
    docs = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                docs.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return [d.removesuffix(".md").removesuffix(".ipynb") for d in docs]


DOCS = toc_docs()
PART_DOCS = [d for d in DOCS if d.startswith("notebooks/")]


@pytest.fixture(scope="session")
def site() -> Path:
    if not (SITE / "index.html").is_file():
        pytest.fail(f"{SITE} has no index.html: build the book first (make book, or make test)")
    missing = [d for d in DOCS if not (SITE / f"{d}.html").is_file()]
    if missing:
        pytest.fail(f"pages in _toc.yml missing from {SITE}: {missing}")
    return SITE


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature fixed by the base class
        pass


@pytest.fixture(scope="session")
def base_url(site: Path):
    """Serve the built site on a free loopback port for the whole session."""
    server = http.server.ThreadingHTTPServer((HOST, 0), functools.partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://{HOST}:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@dataclass
class Visit:
    """What one page load did: every request URL, console errors, page errors, failed responses."""

    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    bad_responses: list[str] = field(default_factory=list)

    def off_machine(self, base_url: str) -> list[str]:
        origin = urlsplit(base_url).netloc
        return [u for u in self.requests
                if urlsplit(u).scheme not in LOCAL_SCHEMES and urlsplit(u).netloc != origin]


def visit(page, base_url: str, doc: str) -> Visit:
    """Open a page, record its traffic and errors, and wait until every chart has rendered."""
    seen = Visit()
    page.context.on("request", lambda r: seen.requests.append(r.url))
    page.on("console", lambda m: seen.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.page_errors.append(str(e)))
    page.on("response", lambda r: seen.bad_responses.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(urljoin(base_url, f"{doc}.html"), wait_until="load")
    try:
        page.wait_for_function(
            """(sel) => Array.from(document.querySelectorAll(sel)).every(
                   d => d.querySelector('svg, canvas') || d.querySelector('.error'))""",
            arg=CHART, timeout=RENDER_TIMEOUT_MS,
        )
    except PlaywrightTimeoutError:
        pytest.fail(
            f"{doc}: charts did not render in {RENDER_TIMEOUT_MS} ms; off-machine requests "
            f"{seen.off_machine(base_url)}, errors {seen.page_errors + seen.console_errors}"
        )
    page.wait_for_load_state("networkidle")
    return seen


@pytest.mark.parametrize("doc", DOCS)
def test_page_loads_cleanly_and_offline(page, base_url, doc):
    seen = visit(page, base_url, doc)
    assert page.locator("main h1, article h1").count() >= 1, "page has no title"
    assert seen.page_errors == []
    assert [e for e in seen.console_errors if e not in ALLOWED_CONSOLE_ERRORS] == []
    assert seen.bad_responses == []
    assert seen.off_machine(base_url) == [], "requests left the machine"
    assert seen.requests, "recorded no requests at all: the listener is broken"


@pytest.mark.parametrize("doc", DOCS)
def test_every_chart_draws_marks(page, base_url, doc):
    visit(page, base_url, doc)
    charts = page.locator(CHART)
    if doc in PART_DOCS:
        assert charts.count() >= 1, "a part page without a chart"
    for i in range(charts.count()):
        chart = charts.nth(i)
        assert chart.locator(".error").count() == 0, chart.inner_text()
        drawn = chart.locator(DATA_MARKS).count() + chart.locator("canvas").count()
        assert drawn > 0, f"chart {i} drew no data marks"


@pytest.mark.parametrize("doc", PART_DOCS)
def test_hover_shows_tooltip(page, base_url, doc):
    visit(page, base_url, doc)
    charts = page.locator(CHART)
    for i in range(charts.count()):
        chart = charts.nth(i)
        target = chart.locator("svg g.mark-symbol.role-mark > path, svg g.mark-rect.role-mark > path")
        if target.count() == 0:
            continue  # lines or areas only: nothing reliably hoverable at an element's centre
        chart.scroll_into_view_if_needed()
        target.first.hover(force=True)
        tooltip = page.locator("#vg-tooltip-element")
        tooltip.wait_for(state="visible", timeout=5_000)
        assert tooltip.inner_text().strip(), f"chart {i}: empty tooltip"
        page.mouse.move(0, 0)
        return
    pytest.fail("no chart on the page has points or bars to hover")


@pytest.mark.parametrize("doc", PART_DOCS)
def test_part_tables_have_rows(page, base_url, doc):
    visit(page, base_url, doc)
    tables = page.locator("main table")
    assert tables.count() >= 1, "a part page without a table"
    for i in range(tables.count()):
        assert tables.nth(i).locator("tbody tr").count() > 0, f"table {i} has no rows"


def _fetch(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback only
        return response.status, response.headers.get("Content-Type", ""), response.read()


@pytest.mark.parametrize("doc", DOCS)
def test_figure_downloads_resolve(page, base_url, doc):
    visit(page, base_url, doc)
    hrefs = page.eval_on_selector_all("a.iw-download", "links => links.map(a => a.href)")
    if doc in PART_DOCS:
        assert any(h.endswith(".png") for h in hrefs) and any(h.endswith(".svg") for h in hrefs), \
            "a part page without PNG and SVG downloads"
    for href in hrefs:
        assert urlsplit(href).netloc == urlsplit(base_url).netloc, href
        status, ctype, body = _fetch(href)
        assert status == 200, href
        if href.endswith(".png"):
            assert body.startswith(b"\x89PNG\r\n\x1a\n"), href
        elif href.endswith(".svg"):
            assert b"<svg" in body[:2000] and ctype.startswith("image/svg"), href
