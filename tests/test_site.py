"""The rendered book in headless Chromium: every page loads cleanly and offline, charts draw
and answer hovers, tables have rows, figure downloads resolve.

Runs against `_build/html` (built by `make book`, which `make test` runs first) served by a
local http.server on a free loopback port. A missing build is a failure, not a skip.
"""
from __future__ import annotations

import csv
import functools
import http.server
import re
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
PART_DOCS = [d for d in DOCS if d.startswith("notebooks/") and not d.endswith("-evidence")]
EVIDENCE_DOCS = [d for d in DOCS if d.endswith("-evidence")]  # a part's tables and claims arithmetic


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
    """What one page load did: every request URL, console errors and warnings, page errors, failed responses."""

    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    console_warnings: list[str] = field(default_factory=list)
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
    page.on("console", lambda m: seen.console_errors.append(m.text) if m.type == "error" else
            seen.console_warnings.append(m.text) if m.type == "warning" else None)
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


# One visit per page and width: every check of a page at 1366 px runs on the same load (a load waits for every chart
# to draw and be fitted, about 2 s on the 2-core machine; one load per check cost the suite some 130 s).


def check_loaded_cleanly_and_offline(page, seen: Visit, base_url: str) -> None:
    assert page.locator("main h1, article h1").count() >= 1, "page has no title"
    assert seen.page_errors == []
    assert [e for e in seen.console_errors if e not in ALLOWED_CONSOLE_ERRORS] == []
    assert seen.bad_responses == []
    assert seen.off_machine(base_url) == [], "requests left the machine"
    assert seen.requests, "recorded no requests at all: the listener is broken"


def check_console_has_no_warnings(seen: Visit) -> None:
    """Nothing warns in the console: Vega's warnings ("Infinite extent for field ...", scales that union domains of
    different sources) each mean a chart drew something other than what its spec says, or nothing."""
    warnings = sorted(set(seen.console_warnings))
    assert warnings == [], f"{len(seen.console_warnings)} console warnings: {warnings[:5]}"


def check_every_chart_draws_marks(page, doc: str) -> None:
    charts = page.locator(CHART)
    if doc in PART_DOCS:
        assert charts.count() >= 1, "a part page without a chart"
    for i in range(charts.count()):
        chart = charts.nth(i)
        assert chart.locator(".error").count() == 0, chart.inner_text()
        drawn = chart.locator(DATA_MARKS).count() + chart.locator("canvas").count()
        assert drawn > 0, f"chart {i} drew no data marks"


def check_part_tables_have_rows(page) -> None:
    tables = page.locator("main table")
    assert tables.count() >= 1, "a part page without a table"
    for i in range(tables.count()):
        assert tables.nth(i).locator("tbody tr").count() > 0, f"table {i} has no rows"


def _fetch(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback only
        return response.status, response.headers.get("Content-Type", ""), response.read()


def check_figure_downloads_resolve(page, base_url: str, doc: str) -> None:
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


# ------------------------------------------------------------------------- reading at 1366 and 390 px
VIEWPORTS = {"desktop": {"width": 1366, "height": 900}, "phone": {"width": 390, "height": 844}}
FIT_STATES = ("as-is", "fitted", "scaled")


def visit_at(page, base_url: str, doc: str, viewport: str) -> Visit:
    """Open `doc` at a viewport and wait until _static/iw-site.js has fitted every chart to its column."""
    page.set_viewport_size(VIEWPORTS[viewport])
    seen = visit(page, base_url, doc)
    try:
        page.wait_for_function(
            """([sel, states]) => Array.from(document.querySelectorAll(sel)).every(
                   d => states.includes(d.dataset.iwFit))""",
            arg=[CHART, list(FIT_STATES)], timeout=RENDER_TIMEOUT_MS,
        )
    except PlaywrightTimeoutError:
        pytest.fail(f"{doc} at {viewport}: charts were not fitted (is _static/iw-site.js in html_js_files?)")
    return seen


def check_charts_fit_their_column(page) -> None:
    """No chart is wider than the text column it sits in (a wider one is cut off with no visible scrollbar)."""
    sizes = page.eval_on_selector_all(CHART, """divs => divs.map(d => {
        const g = d.querySelector('svg.marks, canvas.marks, svg, canvas');
        const column = d.closest('.cell_output, .output, article, main') || d.parentElement;
        return {drawn: g ? g.getBoundingClientRect().width : 0,
                column: column.getBoundingClientRect().width,
                right: g ? g.getBoundingClientRect().right : 0,
                columnRight: column.getBoundingClientRect().right,
                trail: d.dataset.iwTrail}})""")
    too_wide = [(i, round(s["drawn"]), round(s["column"]), s["trail"]) for i, s in enumerate(sizes)
                if s["drawn"] > s["column"] + 1 or s["right"] > s["columnRight"] + 1]
    assert too_wide == [], f"charts wider than their column (index, drawn px, column px, widths tried): {too_wide}"


@pytest.mark.parametrize("doc", DOCS)
def test_a_page_at_1366_px(page, base_url, doc):
    """Loads cleanly and offline, with no warning in the console; every chart draws marks and fits its column, its
    tooltips read as labels and it names what it colours; a part's tables have rows; every figure download resolves;
    a part's title, findings box and first figure start on the first screen (issue 24); the page's own checks
    (PAGE_CHECKS) hold."""
    seen = visit_at(page, base_url, doc, "desktop")
    check_loaded_cleanly_and_offline(page, seen, base_url)
    check_console_has_no_warnings(seen)
    check_every_chart_draws_marks(page, doc)
    check_charts_fit_their_column(page)
    check_tooltips_read_as_labels(page)
    check_every_colour_is_named(page)
    check_figure_downloads_resolve(page, base_url, doc)
    if doc in PART_DOCS:
        check_part_tables_have_rows(page)
        check_first_screen_at_1366(page, doc)
    for check in PAGE_CHECKS.get(doc, ()):
        check(page)


@pytest.mark.parametrize("doc", DOCS)
def test_a_page_at_390_px(page, base_url, doc):
    """On a phone: every chart fits its column at its written size (no chart text under 9 px, none taller than
    1.5 screens), nothing pans sideways, nothing warns in the console; a part's findings box ends before its first
    figure, and its "in full" switch opens the rest."""
    seen = visit_at(page, base_url, doc, "phone")
    check_console_has_no_warnings(seen)
    check_charts_fit_their_column(page)
    check_chart_text_is_readable(page)
    check_no_sideways_pan(page)
    if doc in PART_DOCS:
        check_findings_above_the_figure_at_390(page, doc)


MIN_TEXT_PX = 9  # the smallest chart text a phone may draw (a chart scaled down to fit draws its text smaller)
MAX_CHART_SCREENS = 1.5  # the tallest a chart may be on a phone, in screens

CHART_TEXT = """(sel) => Array.from(document.querySelectorAll(sel)).map(d => {
    // each drawn text's size on the screen: its font size times the scale its SVG is drawn at (CSS included)
    let least = null;
    for (const t of d.querySelectorAll('svg text')) {
        if (!t.textContent.trim() || !t.getClientRects().length) continue;
        const m = t.getScreenCTM();
        const px = parseFloat(getComputedStyle(t).fontSize) * Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
        if (least === null || px < least.px) least = {px: Math.round(px * 10) / 10, text: t.textContent.slice(0, 40)};
    }
    const g = d.querySelector('svg.marks, svg');
    return {least, height: g ? Math.round(g.getBoundingClientRect().height) : 0, fit: d.dataset.iwFit};
})"""


def check_chart_text_is_readable(page) -> None:
    """No chart's text is drawn under MIN_TEXT_PX (a chart too wide for the column is scaled down, text and all),
    and no chart is taller than MAX_CHART_SCREENS screens (a facet wrapped into one column of tall panels)."""
    charts = page.evaluate(CHART_TEXT, CHART)
    small = [(i, c["least"], c["fit"]) for i, c in enumerate(charts) if c["least"] and c["least"]["px"] < MIN_TEXT_PX]
    assert small == [], f"chart text under {MIN_TEXT_PX} px (index, smallest text, fit): {small}"
    screen = page.viewport_size["height"]
    tall = [(i, c["height"]) for i, c in enumerate(charts) if c["height"] > MAX_CHART_SCREENS * screen]
    assert tall == [], f"charts taller than {MAX_CHART_SCREENS} screens of {screen} px (index, px): {tall}"


def check_no_sideways_pan(page) -> None:
    """The page is no wider than the screen: a reader never pans sideways (a wide table or chart scrolls inside
    its own box)."""
    width = page.evaluate("() => [document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide on a {width[1]} px screen"


# Every tooltip of every drawn mark (Vega's SVG renderer keeps each element's scenegraph item as __data__): its
# entries as {title: text}, and the names of the fields of its data row.
TOOLTIPS = """(sel) => Array.from(document.querySelectorAll(sel)).map(d => {
    const seen = new Set(), out = [];
    for (const el of d.querySelectorAll('svg .role-mark > *')) {
        const item = el.__data__;
        if (!item || item.tooltip === undefined || item.tooltip === null) continue;
        const tip = typeof item.tooltip === 'object' ? item.tooltip : {'': item.tooltip};
        const entries = Object.entries(tip).map(([k, v]) => [k, String(v)]);
        const key = JSON.stringify(entries);
        if (seen.has(key)) continue;
        seen.add(key);
        out.push({entries, fields: Object.keys(item.datum || {})});
    }
    return out;
})"""
FIELD_NAME = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")
DECIMAL = re.compile(r"(?<![\w.-])\d[\d,]*\.\d+")  # a number standing alone, not inside a name (rate-x1.100)
NOT_A_VALUE = re.compile(r"^(NaN|null|undefined|None|nan|-?Infinity)$")


def tooltip_problems(entries: list[list[str]], fields: list[str]) -> list[str]:
    """What a reader should not see in a tooltip: a title that is a field's name (``output_tok_s``, ``rig``), a
    number with more than 3 significant digits after its decimal point (a float as stored), a missing value's
    code word."""
    problems = []
    for title, value in entries:
        if title in fields or FIELD_NAME.match(title):
            problems.append(f"title {title!r} is a field's name")
        if NOT_A_VALUE.match(value.strip()):
            problems.append(f"{title}: {value!r}")
        for number in DECIMAL.findall(value):
            digits = number.replace(",", "").replace(".", "").lstrip("0")
            if len(digits) > 3:
                problems.append(f"{title}: {value!r} has {len(digits)} significant digits")
    return problems


def check_tooltips_read_as_labels(page) -> None:
    charts = page.evaluate(TOOLTIPS, CHART)
    problems = sorted({f"chart {i}: {p}" for i, tips in enumerate(charts) for tip in tips
                       for p in tooltip_problems(tip["entries"], tip["fields"])})
    assert problems == [], f"{len(problems)} tooltip problems: " + "\n".join(problems[:20])


def test_tooltip_guard_catches_field_names_and_long_floats():
    found = tooltip_problems([["output_tok_s", "8734.123456"], ["rig", "h200"], ["Cap", "NaN"],
                              ["Output (tok/s)", "8,730"], ["Share", "0.0123"], ["ms", "12.3"]],
                             ["output_tok_s", "rig", "max_num_seqs"])
    assert len(found) == 4, found


def _visible(page, selector: str) -> list:
    return [el for el in page.locator(selector).all() if el.is_visible()]


def test_site_menu_and_contents_open_on_a_phone(page, base_url):
    """At 390 px the visible menu button opens the site navigation and the contents button this page's contents
    (the themes bind both to hidden duplicates in the header bar)."""
    visit_at(page, base_url, PART_DOCS[0], "phone")
    for toggle, dialog in ((".primary-toggle", "#pst-primary-sidebar-modal"),
                           (".secondary-toggle", "#pst-secondary-sidebar-modal")):
        buttons = _visible(page, toggle)
        assert len(buttons) == 1, f"{len(buttons)} visible {toggle} buttons"
        buttons[0].click()
        opened = page.locator(f"{dialog}[open]")
        opened.wait_for(state="visible", timeout=5_000)
        assert opened.locator("a").count() > 0, f"{dialog} opened empty"
        page.keyboard.press("Escape")
        page.locator(f"{dialog}[open]").wait_for(state="detached", timeout=5_000)


def test_site_menu_hides_the_sidebar_on_a_desktop(page, base_url):
    visit_at(page, base_url, PART_DOCS[0], "desktop")
    sidebar = page.locator("#pst-primary-sidebar")
    assert sidebar.is_visible()
    buttons = _visible(page, ".primary-toggle")
    assert len(buttons) == 1, f"{len(buttons)} visible menu buttons"
    buttons[0].click()
    page.wait_for_function("() => document.querySelector('#pst-primary-sidebar').classList.contains('pst-sidebar-hidden')",
                           timeout=5_000)


@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_one_search_field(page, base_url, viewport):
    visit_at(page, base_url, "book/intro", viewport)
    fields = _visible(page, ".search-button-field, .bd-search, .search-button")
    assert len(fields) == 1, f"{len(fields)} visible search fields or buttons at {viewport}"


# The first figure of a page: its first chart, or a figure image, that is drawn (one in a closed toggle is not).
FIRST_SCREEN = """() => {
    const box = el => { if (!el) return null; const r = el.getBoundingClientRect();
                        return r.width > 0 && r.height > 0 ? {top: r.top + window.scrollY, bottom: r.bottom + window.scrollY}
                                                           : null; };
    const article = document.querySelector('article.bd-article') || document.querySelector('main');
    const figures = Array.from(article.querySelectorAll(
        'div[id^="altair-viz-"], figure img, .cell_output img')).map(box).filter(b => b);
    return {title: box(article.querySelector('h1')), findings: box(article.querySelector('.iw-findings')),
            figure: figures.length ? figures[0] : null};
}"""


def check_first_screen_at_1366(page, doc: str) -> None:
    """At 1366x900 a part's title, its findings box and its first figure start on the first screen."""
    desktop = page.evaluate(FIRST_SCREEN)
    height = VIEWPORTS["desktop"]["height"]
    missing = [k for k, v in desktop.items() if v is None]
    assert not missing, f"{doc}: no {missing} on the page"
    late = {k: round(desktop[k]["top"]) for k in ("title", "findings", "figure") if desktop[k]["top"] >= height}
    assert not late, f"{doc} at 1366x{height}: tops below the first screen (px): {late}"


def check_findings_above_the_figure_at_390(page, doc: str) -> None:
    phone = page.evaluate(FIRST_SCREEN)
    assert phone["findings"] and phone["figure"], f"{doc} at 390 px: {phone}"
    assert phone["findings"]["bottom"] <= phone["figure"]["top"], f"{doc} at 390 px: the findings box is not above the figure"
    switch = page.locator(".iw-findings-switch")
    rest = page.locator(".iw-findings .iw-rest")
    if switch.count() and rest.count():
        assert not rest.first.is_visible(), f"{doc}: a finding's rest shows before the switch is on"
        switch.first.click()
        assert rest.first.is_visible(), f"{doc}: 'in full' did not show the rest"


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


# ------------------------------------------------------------------------- what a reader reads (no browser)
import json  # noqa: E402

from bs4 import BeautifulSoup  # noqa: E402

# Python's words for missing and yes/no, as a reader should never see them. "None"/"True"/"False" open an
# English sentence legitimately ("None of the ..."), so in prose they count only inside a sentence.
ALWAYS_WRONG = re.compile(r"(?<![\w-])(nan|NaN)(?![\w-])")
INSIDE_SENTENCE = re.compile(r"(?<![.!?]\s)(?<!^)(?<![\w-])(None|True|False)(?![\w-])")
CELL_WORDS = re.compile(r"(?<![\w-])(nan|NaN|None|True|False)(?![\w-])")
BLOCKS = "p, li, dt, dd, caption, h1, h2, h3, h4, h5, h6, figcaption, .admonition-title"
EMBED = re.compile(r"\}\)\((\{.*\})\s*,\s*\{\"actions\"", re.S)

# Pages whose words come from code owned elsewhere: reported to the lead, xfailed by name only (remove when fixed).
KNOWN_PAGES: dict[str, str] = {}


def page_soup(doc: str) -> BeautifulSoup:
    return BeautifulSoup((SITE / f"{doc}.html").read_text(encoding="utf-8"), "html.parser")


def chart_specs(soup: BeautifulSoup) -> list[dict]:
    """The Vega-Lite spec of every Altair chart on the page (the first argument of its inline embed call)."""
    specs = []
    for script in soup.find_all("script"):
        text = script.string or ""
        if "vegaEmbed" not in text:
            continue
        start = text.rfind("})(")
        spec, _ = json.JSONDecoder().raw_decode(text[start + 3:])
        specs.append(spec)
    return specs


def visible_text_problems(soup: BeautifulSoup) -> list[str]:
    article = soup.select_one("article.bd-article") or soup.select_one("main") or soup
    for hidden in article.select("script, style, pre, code, .vega-embed"):
        hidden.decompose()
    problems = []
    for cell in article.select("td, th"):
        text = cell.get_text(" ", strip=True)
        if CELL_WORDS.search(text):
            problems.append(f"table cell: {text[:80]!r}")
    for block in article.select(BLOCKS):
        text = " ".join(block.get_text(" ", strip=True).split())
        for m in list(ALWAYS_WRONG.finditer(text)) + list(INSIDE_SENTENCE.finditer(text)):
            problems.append(f"text: {text[max(0, m.start() - 50):m.end() + 30]!r}")
    return problems


def _encodings(node, out: list[tuple[str, dict]], channel: str | None = None):
    """Every (channel, field definition) under any 'encoding' of a spec, tooltip lists and conditions included."""
    if isinstance(node, list):
        for item in node:
            _encodings(item, out, channel)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("datasets", "data", "config"):
                continue
            if key == "encoding" and isinstance(value, dict):
                for ch, definition in value.items():
                    for d in definition if isinstance(definition, list) else [definition]:
                        if isinstance(d, dict) and "field" in d:
                            out.append((ch, d))
                        if isinstance(d, dict) and isinstance(d.get("condition"), dict) and "field" in d["condition"]:
                            out.append((ch, d["condition"]))
            else:
                _encodings(value, out, channel)


def _rows(spec: dict) -> list[dict]:
    rows = [r for values in (spec.get("datasets") or {}).values() for r in values if isinstance(r, dict)]

    def inline(node):
        if isinstance(node, dict):
            data = node.get("data")
            if isinstance(data, dict) and isinstance(data.get("values"), list):
                rows.extend(r for r in data["values"] if isinstance(r, dict))
            for v in node.values():
                inline(v)
        elif isinstance(node, list):
            for v in node:
                inline(v)

    inline(spec)
    return rows


def spec_problems(spec: dict) -> list[str]:
    """A text field typed quantitative (its tooltip shows "NaN"), a yes/no or Python word in a shown field, a log
    axis whose title does not say log, a colour by rig without the book's rig colours."""
    from inference_wall import figures

    rows, encodings, problems = _rows(spec), [], []
    _encodings(spec, encodings)
    for channel, d in encodings:
        field = d["field"]
        values = [r[field] for r in rows if field in r and r[field] is not None]
        texts = [v for v in values if isinstance(v, str)]
        if d.get("type") == "quantitative" and texts:
            problems.append(f"{channel} {field!r} typed quantitative holds text ({texts[0]!r})")
        if any(isinstance(v, bool) for v in values):
            problems.append(f"{channel} {field!r} shows true/false")
        words = [v for v in texts if CELL_WORDS.search(v)]
        if words:
            problems.append(f"{channel} {field!r} shows {words[0]!r}")
        scale = d.get("scale") or {}
        if channel in ("x", "y") and scale.get("type") in ("log", "symlog"):
            title = d.get("title") if "title" in d else field
            if not (isinstance(title, str) and "log" in title.lower()):
                problems.append(f"{channel} {field!r} is a log axis titled {title!r}")
        if channel == "color" and field == "rig":
            domain, colours = scale.get("domain"), scale.get("range")
            if not domain or colours != [figures.rig_palette(domain)[r] for r in domain]:
                problems.append("colour by rig without the book's rig colours")
    return sorted(set(problems))


def _docs_with_known(docs):
    return [pytest.param(d, marks=pytest.mark.xfail(reason=KNOWN_PAGES[d], strict=False))
            if d in KNOWN_PAGES else d for d in docs]


@pytest.mark.parametrize("doc", _docs_with_known(DOCS))
def test_no_python_words_where_a_reader_looks(site, doc):
    """No nan/NaN/None/True/False in a page's text, tables or chart data; no text field typed quantitative; log
    axes say log; a colour by rig is the book's rig colour."""
    soup = page_soup(doc)
    problems = [f"chart {i}: {p}" for i, spec in enumerate(chart_specs(soup)) for p in spec_problems(spec)]
    problems += visible_text_problems(soup)
    assert problems == [], "\n".join(problems)


def test_guard_catches_the_old_faults():
    """The guard itself fails on what issue 24 found: 'Config: NaN' tooltips, a bare 'nan' in prose, True in a cell."""
    spec = {"datasets": {"d": [{"config": "chunked", "x": 1.0, "flood": True}]}, "data": {"name": "d"},
            "mark": "point", "encoding": {"x": {"field": "x", "type": "quantitative", "scale": {"type": "log"},
                                                "title": "x (ms)"},
                                          "tooltip": [{"field": "config", "type": "quantitative"},
                                                      {"field": "flood", "type": "nominal"}]}}
    found = " ".join(spec_problems(spec))
    assert "'config' typed quantitative" in found and "true/false" in found and "log axis" in found
    soup = BeautifulSoup("<main><p>intervals of decode alone nan</p><table><tr><td>True</td></tr></table>"
                         "<p>None of the rigs. It was None here.</p></main>", "html.parser")
    found = visible_text_problems(soup)
    assert len(found) == 3, found


def test_rigs_page_keeps_flags_whole(site):
    """A command-line flag keeps its two ASCII hyphens (Sphinx's smartquotes made "--flag" an en dash)."""
    text = page_soup("book/rigs").get_text(" ")
    assert re.search(r"(?<![\w-])--[a-z][a-z0-9-]+", text), "no --flag on the rigs page"
    assert not re.search(r"[\u2013\u2014][a-z]+(-[a-z]+)+", text), "a flag printed with a dash"


NOTEBOOK_DOCS = [d for d in DOCS if (ROOT / f"{d}.md").is_file() and "kernelspec" in (ROOT / f"{d}.md").read_text()[:2000]]


@pytest.mark.parametrize("doc", NOTEBOOK_DOCS)
def test_download_menu_offers_the_executed_notebook(site, base_url, doc):
    """A page made from a notebook offers its executed .ipynb (outputs included), not only its .md source."""
    soup = page_soup(doc)
    hrefs = [a["href"] for a in soup.select(".dropdown-download-buttons a[href], a.btn-download-notebook-button[href]")
             if a["href"].endswith(".ipynb")]
    assert hrefs, f"{doc}: the download menu has no .ipynb"
    status, _, body = _fetch(urljoin(urljoin(base_url, f"{doc}.html"), hrefs[0]))
    notebook = json.loads(body)
    assert status == 200 and notebook["cells"]
    assert any(cell.get("outputs") for cell in notebook["cells"] if cell["cell_type"] == "code"), "not executed"



@pytest.mark.parametrize("doc", PART_DOCS)
def test_part_page_links_its_tables_as_csv_and_keys_its_rigs(site, doc):
    """Every part page links at least one table as CSV (figures.table(csv=...)); each link resolves, within the
    site, to a CSV with a header row of named columns; and the page shows its rig key (rigkey.rig_key)."""
    soup = page_soup(doc)
    hrefs = [a["href"] for a in soup.select("a.iw-csv[href]")]
    assert hrefs, f"{doc}: no table offered as CSV"
    page = (SITE / f"{doc}.html").resolve()
    for href in hrefs:
        assert not urlsplit(href).scheme and href.endswith(".csv"), href
        target = (page.parent / href).resolve()
        assert target.is_relative_to(SITE.resolve()) and target.is_file(), f"{doc}: {href} does not resolve"
        with target.open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), [])
        assert header and all(name.strip() for name in header), f"{doc}: {href} has no header row"
    assert "Rig key" in soup.get_text(" "), f"{doc}: no rig key"


# ------------------------------------------------------------------------- checks of one page's charts
def _view_eval(page, index: int, body: str, arg=None):
    """Run `body` (a JS function of the chart's Vega view and `arg`) on chart `index` of the page."""
    return page.evaluate(f"""([sel, i, arg]) => {{ const view = document.querySelectorAll(sel)[i].iwView;
                                                   return ({body})(view, arg); }}""", [CHART, index, arg])


# The values of each chart's colour scales (by name, as Vega-Lite names them; a continuous scale is left out) with
# their colours, and every text the chart draws (legends, axes, headers, titles), whitespace removed.
COLOURS = """(sel) => Array.from(document.querySelectorAll(sel)).map(d => {
    const scales = {};
    for (const name of ['color', 'fill', 'stroke']) {
        let s = null;
        try { s = d.iwView.scale(name); } catch (e) { continue; }
        if (s && ['ordinal', 'band', 'point'].includes(s.type))
            scales[name] = s.domain().map(v => [String(v), String(s(v)).toLowerCase()]);
    }
    const texts = Array.from(d.querySelectorAll('svg text')).map(t => t.textContent.replace(/\\s+/g, ''));
    return {scales, texts};
})"""


def chart_colours(page) -> list[dict]:
    return page.evaluate(COLOURS, CHART)


def check_every_colour_is_named(page) -> None:
    """A chart that colours two or more things names each of them on the chart (a legend, or the header or axis
    label it colours): part 4's first chart drew three coloured lines and no legend."""
    unnamed = []
    for i, chart in enumerate(chart_colours(page)):
        texts = set(chart["texts"])
        for name, pairs in chart["scales"].items():
            if len(pairs) > 1:
                unnamed += [(i, name, value) for value, _ in pairs if re.sub(r"\s+", "", value) not in texts]
    assert unnamed == [], f"colours a chart does not name (index, scale, value): {unnamed}"


def check_one_colour_per_meaning(page) -> None:
    """Across the page's charts a thing has one colour, and a colour means one thing (part 2: each configuration in
    the same colour in every figure, and no configuration's colour reused for a kernel family or a step's kind)."""
    colours_of, meanings_of = {}, {}
    for chart in chart_colours(page):
        for pairs in chart["scales"].values():
            for value, colour in pairs:
                colours_of.setdefault(value, set()).add(colour)
                meanings_of.setdefault(colour, set()).add(value)
    assert colours_of, "no chart on the page has a colour scale"
    assert {v: c for v, c in colours_of.items() if len(c) > 1} == {}, "a thing drawn in two colours"
    assert {c: v for c, v in meanings_of.items() if len(v) > 1} == {}, "a colour that means two things"


def check_part3_headline_shows_the_a10g_cliff(page) -> None:
    """Part 3's headline chart (its first) draws the published A10G's climb, from its least throughput to its most,
    over at least a quarter of the chart's height: on a linear axis to the fastest rig's throughput it was a flat line
    at the bottom."""
    from inference_wall.schema import PUBLISHED_RIG

    with (SITE / "_static" / "tables" / "part3-sweep.csv").open(newline="", encoding="utf-8") as handle:
        tok = [float(r["output_tok_s"]) for r in csv.DictReader(handle) if r["rig"] == PUBLISHED_RIG and r["output_tok_s"]]
    assert len(tok) >= 2, "no published A10G sweep on part 3"
    share = _view_eval(page, 0, """(view, v) => { const y = view.scale('y'), r = y.range();
                                             return Math.abs(y(v[1]) - y(v[0])) / Math.abs(r[0] - r[1]); }""",
                       [min(tok), max(tok)])
    assert share >= 0.25, f"the A10G's climb spans {share:.0%} of the chart's height"


# The bars and rules of a chart: each mark item's datum's variant (and rig) with its drawn x, width and x2, and the
# cost a bar draws.
BAR_ENDS = """(d) => {
    const out = {};
    for (const el of d.querySelectorAll('svg .mark-rect.role-mark > path, svg .mark-rule.role-mark > line')) {
        const item = el.__data__;
        if (!item || !item.datum || item.datum.variant === undefined) continue;
        const key = item.datum.rig + ' / ' + item.datum.variant;
        out[key] = out[key] || {};
        if (el.tagName.toLowerCase() === 'path') { out[key].end = item.x + item.width; out[key].cost = item.datum.usd_per_million; }
        else out[key].rule = [item.x, item.x2];
    }
    return out;
}"""


def check_part5_cost_range_follows_the_slider(page) -> None:
    """Part 5's cost chart: moving the price slider changes each variant's cost, and its range (the listing's tiers)
    follows: it stays where it was against the bar (each panel's axis fits its longest bar, so a bar's end in pixels
    need not move)."""
    charts = page.locator(CHART)
    index = page.evaluate("""(sel) => Array.from(document.querySelectorAll(sel)).findIndex(d => {
        try { d.iwView.signal('price'); return true; } catch (e) { return false; } })""", CHART)
    assert index >= 0, "no chart on part 5 has a price slider"
    chart = charts.nth(index)
    before = chart.evaluate(BAR_ENDS)
    price = _view_eval(page, index, "(view) => view.signal('price')")
    slider = chart.locator("input[type=range]")
    slider.evaluate("(el, v) => { el.value = v; el.dispatchEvent(new Event('input', {bubbles: true})); }", str(price * 2))
    _view_eval(page, index, "(view) => view.runAsync().then(() => view.signal('price'))")
    after = chart.evaluate(BAR_ENDS)
    ranged = {k: v for k, v in before.items() if "rule" in v and "end" in v}
    assert ranged, "no variant has a listed range"
    for key, b in ranged.items():
        a = after[key]
        assert a["cost"] == pytest.approx(2 * b["cost"], rel=1e-6), f"{key}: the bar's cost did not follow the price"
        assert [x / a["end"] for x in a["rule"]] == pytest.approx([x / b["end"] for x in b["rule"]], rel=0.02), \
            f"{key}: the range did not follow the bar (before {b}, after {a})"


def check_primer_prefill_is_drawn_in_proportion(page) -> None:
    """The primer's prefill chart (its first) draws the prompt lengths in proportion from zero, as its caption
    reads them ("so many times the time for so many times the tokens"): each point's distance from the axis's zero
    is its length times one factor (a log axis drew each doubling of the prompt the same width apart)."""
    points = page.evaluate("""(sel) => Array.from(document.querySelectorAll(sel)[0].querySelectorAll(
        'svg .mark-symbol.role-mark > path')).map(el => el.__data__).filter(i => i && i.datum && i.datum.prompt_len)
        .map(i => [i.datum.prompt_len, i.x])""", CHART)
    assert len(points) >= 2, "no points on the primer's prefill chart"
    factors = [x / n for n, x in points]
    assert max(factors) == pytest.approx(min(factors), rel=0.02), points


# Checks of one page's own charts, run on the page's visit at 1366 px (test_a_page_at_1366_px).
PAGE_CHECKS: dict[str, tuple] = {
    "book/primer": (check_primer_prefill_is_drawn_in_proportion,),
    "notebooks/02-prefill-freeze": (check_one_colour_per_meaning,),
    "notebooks/03-batching-cliff": (check_part3_headline_shows_the_a10g_cliff,),
    "notebooks/05-four-bits": (check_part5_cost_range_follows_the_slider,),
}


@pytest.mark.parametrize("doc", DOCS)
def test_no_unrendered_role_where_a_reader_looks(site, doc):
    """A MyST role typed into a code cell's Markdown output is not rendered ('{ref}`the evidence page <...>`' showed
    as text on part 2's page): no '{ref}' or '{glue' in a page's visible text."""
    text = page_soup(doc).select_one("main").get_text(" ")
    assert "{ref}" not in text and "{glue" not in text, doc
