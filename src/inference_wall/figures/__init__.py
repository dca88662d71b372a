"""Shared look and plumbing for the book's figures and tables (Altair, offline), and the home of every chart.

Each page's chart functions live in this package's module named like the page's own module (``figures.p00`` ..
``figures.p06`` for the parts' ``parts.pNN``, ``figures.variants`` for ``parts.variants``, ``figures.primer``,
``figures.glance``), loaded when first named
(``figures.p03.throughput_vs_cap``), and build on these helpers:

* :func:`use_theme` (called on import): one size, local fonts, tooltips on every mark.
* :func:`rig_colour` / :func:`rig_color`: a fixed colour per rig name, the same in every figure
  (``a10g-published`` is always the same blue).
* :func:`log_x` / :func:`log_y`: log-scale positional encodings with readable ticks.
* :func:`tip` / :func:`tooltips`: tooltip entries titled in words (``TTFT p50 (ms)``), a measured number to 3
  significant digits (:data:`NUMBER`), a count or a setting whole (:data:`COUNT`).
* :func:`show`: saves PNG and SVG (vl-convert, no network) under ``_static/figures/`` at the book
  root, displays the interactive chart and, under it, links to both files.
* :func:`table_html` / :func:`table`: a tidy frame as an HTML table, units in the headers,
  numbers rounded for reading.

The interactive chart uses Altair's default renderer; the page gets Vega from
``_static/vega-bundle.js`` (see :mod:`inference_wall.pages.book_static`), never from a CDN.
"""
from __future__ import annotations

import hashlib
import html
import json
import math
import os
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from .. import words
from ..schema import PUBLISHED_RIG, STATIC_DIR_ENV
from ..words import known_number, missing

THEME_NAME = "inference_wall"
WIDTH, HEIGHT = 480, 280  # fits the book column with the legend below
# Generic families only: the browser and vl-convert resolve them to installed fonts, nothing downloads.
FONT = "system-ui, -apple-system, 'Segoe UI', 'DejaVu Sans', 'Liberation Sans', Arial, sans-serif"
FIGURES_DIR_NAME = "figures"  # under <book root>/_static/, copied verbatim into _build/html/_static/
TABLES_DIR_NAME = "tables"  # the same for each page's tables as CSV

# Fixed colours for rigs the book knows; any other rig gets one from USER_RIG_PALETTE, chosen by
# a hash of its name so that it keeps its colour from figure to figure.
RIG_COLOURS: dict[str, str] = {
    PUBLISHED_RIG: "#4c78a8",  # blue: the series' own published numbers
    "h200": "#e45756",  # red
    "h100": "#f58518",  # orange: the second measured GPU
    "cpu-tiny": "#54a24b",  # green
}
USER_RIG_PALETTE: tuple[str, ...] = (
    "#b279a2",  # purple
    "#72b7b2",  # teal
    "#9d755d",  # brown
    "#eeca3b",  # yellow
    "#ff9da6",  # pink
    "#79706e",  # grey
    "#17becf",  # cyan
)


# --------------------------------------------------------------------------------------- theme
def theme_config() -> dict:
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "config": {
            "font": FONT,
            "view": {"stroke": "#ddd"},
            "axis": {
                "labelFontSize": 12,
                "titleFontSize": 13,
                "titleFontWeight": "normal",
                "gridColor": "#eee",
                "domainColor": "#888",
                "tickColor": "#888",
            },
            # labelLimit: a legend's labels are whole, never cut with "…" (Vega's default stops at 160 px)
            "legend": {"labelFontSize": 12, "titleFontSize": 12, "orient": "bottom", "direction": "horizontal",
                       "labelLimit": 600},
            "header": {"labelLimit": 600},
            "title": {"fontSize": 14, "anchor": "start", "fontWeight": "normal"},
            "mark": {"tooltip": True},  # every mark shows its encoded fields on hover
            "point": {"size": 60, "filled": True},
            "line": {"strokeWidth": 2},
        },
    }


def use_theme() -> None:
    """Register and enable the book's theme (idempotent)."""

    @alt.theme.register(THEME_NAME, enable=True)
    def _theme() -> alt.theme.ThemeConfig:
        return theme_config()  # type: ignore[return-value]


use_theme()
# The chart menu offers local PNG/SVG export only: no "Open in Vega Editor" (an external site).
alt.renderers.set_embed_options(actions={"export": True, "source": False, "compiled": False, "editor": False})


# ---------------------------------------------------------------------------------- rig colours
def rig_colour(rig: str) -> str:
    """The colour of ``rig`` in every figure: fixed for known rigs, hashed from the name otherwise."""
    if rig in RIG_COLOURS:
        return RIG_COLOURS[rig]
    return USER_RIG_PALETTE[zlib.crc32(rig.encode("utf-8")) % len(USER_RIG_PALETTE)]


def rig_order(rigs: Iterable[str]) -> list[str]:
    """Rigs in legend order: the published rig first, then the known rigs, then the rest by name."""
    unique = sorted(set(rigs))
    known = [r for r in RIG_COLOURS if r in unique]
    return known + [r for r in unique if r not in RIG_COLOURS]


def rig_palette(rigs: Iterable[str]) -> dict[str, str]:
    """{rig: colour} for one figure. Unknown rigs keep their hashed colour unless two collide in
    this figure; then the later one (by name) takes the next free palette colour."""
    palette: dict[str, str] = {}
    for rig in rig_order(rigs):
        colour = rig_colour(rig)
        if rig not in RIG_COLOURS and colour in palette.values():
            start = USER_RIG_PALETTE.index(colour)
            for step in range(1, len(USER_RIG_PALETTE)):
                candidate = USER_RIG_PALETTE[(start + step) % len(USER_RIG_PALETTE)]
                if candidate not in palette.values():
                    colour = candidate
                    break
        palette[rig] = colour
    return palette


def rig_scale(rigs: Iterable[str]) -> alt.Scale:
    palette = rig_palette(rigs)
    return alt.Scale(domain=list(palette), range=list(palette.values()))


def rig_color(rigs: Iterable[str], field: str = "rig", title: str = "Rig", **kwargs) -> alt.Color:
    """A colour encoding by rig with the book's fixed rig colours (pass the rigs in the data)."""
    return alt.Color(f"{field}:N", title=title, scale=rig_scale(rigs), **kwargs)


TEXT_COLUMNS = frozenset({"rig", "model", "part", "mode", "key", "note", "unit", "config", "window", "family", "variant",
                          "format", "label", "what", "stat", "who", "series", "quantity", "panel", "workload", "kind",
                          "gpu", "point", "source", "line", "requests", "reference", "request"})


def _column_kind(name: str, data: pd.DataFrame | None) -> str:
    """'N' for a column of text (by the frame's dtype where a frame is given, else by its name), else 'Q'."""
    if data is not None and name in data.columns:
        values = data[name]
        numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
        return "Q" if numeric else "N"
    return "N" if split_unit(name)[1] is None and name in TEXT_COLUMNS else "Q"


# d3 formats of a tooltip's numbers (and an axis's): a measured number to three significant digits (8,730 / 56.8 /
# 0.392), a count or a setting whole (20,481 pages, cap 256).
NUMBER = ",.3~r"
COUNT = ",d"


def tip(field: str, title: str, fmt: str | None = NUMBER) -> alt.Tooltip:
    """One tooltip entry titled in words: ``field`` is ``name`` (quantitative, formatted with ``fmt``: NUMBER, or
    COUNT for a count or a setting) or ``name:N`` (text, shown as it is)."""
    name, _, kind = field.partition(":")
    if kind and kind != "Q":
        return alt.Tooltip(f"{name}:{kind}", title=title)
    return alt.Tooltip(f"{name}:Q", title=title, format=fmt) if fmt else alt.Tooltip(f"{name}:Q", title=title)


def tooltips(columns: Sequence[str], units: Mapping[str, str] | None = None,
             labels: Mapping[str, str] | None = None, fmt: str = NUMBER,
             data: pd.DataFrame | None = None) -> list[alt.Tooltip]:
    """Tooltip entries with the same readable, unit-bearing titles as the tables.

    Columns may carry an Altair type (``"rig:N"``); without one, a column of ``data`` that holds text is
    nominal (a text field typed quantitative shows "NaN" on hover), and without ``data`` text-like names
    (``rig``, ``config``, ...) are; the rest are quantitative: a column of ``data`` that holds whole numbers only
    (a count, a length) as whole numbers (COUNT), any other with ``fmt`` (three significant digits)."""
    entries = []
    for column in columns:
        name, _, kind = column.partition(":")
        kind = kind or _column_kind(name, data)
        title = header_label(name, units, labels)
        if kind == "Q":
            whole = data is not None and name in data.columns and pd.api.types.is_integer_dtype(data[name])
            entries.append(tip(name, title, COUNT if whole else fmt))
        else:
            entries.append(tip(f"{name}:{kind}", title))
    return entries


# ------------------------------------------------------------------------------------ log axes
def log_title(title: str) -> str:
    """A log axis says so: 'Offered rate (req/s)' -> 'Offered rate (req/s, log)'; a title that names it stays."""
    if "log" in title.lower():
        return title
    if title.endswith(")"):
        return title[:-1] + ", log)"
    return f"{title} (log)"


def log_ticks(values) -> list[float]:
    """Ticks for a log axis over `values`: 1, 3 and 10 times each power of ten from below the least to above the
    largest (a few labels that do not crowd a phone's width)."""
    numbers = pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").astype(float)
    v = [float(x) for x in numbers if known_number(float(x)) and x > 0]
    if not v:
        return [1.0, 10.0]
    lo, hi = math.floor(math.log10(min(v))), math.ceil(math.log10(max(v)))
    return [m * 10.0 ** e for e in range(lo, hi + 1) for m in (1, 3) if m * 10.0 ** e <= 10.0 ** hi]


def _log_kwargs(title: str | None, domain: Sequence[float] | None, fmt: str | None,
                ticks: Sequence[float] | None = None) -> dict:
    scale = alt.Scale(type="log", domain=list(domain), nice=False) if domain else alt.Scale(type="log")
    axis = alt.Axis(format=fmt or "~s", grid=True, **({"values": list(ticks)} if ticks is not None else {}))
    kwargs: dict = {"scale": scale, "axis": axis}
    if title is not None:
        kwargs["title"] = log_title(title)
    return kwargs


def log_x(field: str, title: str | None = None, domain: Sequence[float] | None = None,
          fmt: str | None = None, ticks: Sequence[float] | None = None, **kwargs) -> alt.X:
    """A log-scale x encoding (values must be > 0; drop or map zero/inf before plotting); ``ticks``: its
    labelled values (:func:`log_ticks`), else Vega's."""
    return alt.X(field if ":" in field else f"{field}:Q", **_log_kwargs(title, domain, fmt, ticks), **kwargs)


def log_y(field: str, title: str | None = None, domain: Sequence[float] | None = None,
          fmt: str | None = None, ticks: Sequence[float] | None = None, **kwargs) -> alt.Y:
    """A log-scale y encoding (values must be > 0)."""
    return alt.Y(field if ":" in field else f"{field}:Q", **_log_kwargs(title, domain, fmt, ticks), **kwargs)


# ------------------------------------------------------------------------------ save and show
# One panel per rig, the rig's name in bold above it (part 1's figures, the primer's).
RIG_FACET = alt.Facet("rig:N", title=None, header=alt.Header(labelFontWeight="bold"))


def panels(charts: Mapping[str, alt.TopLevelMixin], columns: int, width: int = 260,
           height: int | alt.Step = 220) -> alt.ConcatChart:
    """Small multiples as a facet draws them (`columns` to a row, each panel titled in bold, its own scales), from one
    chart per panel: where a facet would give a panel a layer with no rows of its own (a rig with no measured
    points, a quantity with no floor), Vega warns of an infinite extent and of scales that union different sources;
    a panel built alone simply leaves that layer out. The site's fitter wraps the rows like a facet's."""
    titled = [chart.properties(width=width, height=height,
                               title=alt.TitleParams(key, anchor="middle", fontWeight="bold", fontSize=11))
              for key, chart in charts.items()]
    return alt.concat(*titled, columns=columns).resolve_scale(x="independent", y="independent")


def vl_version() -> str:
    """The Vega-Lite version Altair writes its specs for, as vl-convert names it (what :func:`save` renders
    with and what :mod:`inference_wall.pages.book_static` bundles)."""
    from altair.utils._importers import vl_version_for_vl_convert

    return vl_version_for_vl_convert()


def template_versions() -> dict[str, str]:
    """The version strings Altair's default HTML renderer writes into every chart's script."""
    from altair.vegalite.v6 import display

    return {
        "vega_version": display.VEGA_VERSION,
        "vegalite_version": display.VEGALITE_VERSION,
        "vegaembed_version": display.VEGAEMBED_VERSION,
    }


def book_root(start: Path | None = None) -> Path:
    """The folder holding ``_config.yml``, searched upwards from ``start`` (default: the cwd).

    Jupyter Book runs each notebook in the notebook's own folder; papermill runs it wherever
    the Makefile does (the repo root). Either way the root is found by walking up."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "_config.yml").is_file() and (folder / "_toc.yml").is_file():
            return folder
    raise FileNotFoundError(f"no _config.yml/_toc.yml above {here}: not inside the book")


# $IW_STATIC_DIR (schema.STATIC_DIR_ENV): a run into a data dir other than the repository's data/ (a test's, or a
# scratch run) writes its figures and CSVs there, never over the book's in _static/ (a test run's part-3 page once
# left its cpu-tiny figures and tables there, which a later `make book` that re-executed nothing would have served).


def static_dir(root: Path | None = None) -> Path:
    """The folder a page's figures/ and tables/ are written into: $IW_STATIC_DIR, else the book's _static/."""
    env = os.environ.get(STATIC_DIR_ENV)
    return Path(env) if env else (root or book_root()) / "_static"


def figures_dir(root: Path | None = None) -> Path:
    return static_dir(root) / FIGURES_DIR_NAME


_SAFE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def save(chart: alt.TopLevelMixin, name: str, out_dir: Path | None = None,
         scale_factor: float = 2.0) -> dict[str, Path]:
    """Write ``<name>.png`` and ``<name>.svg`` into ``out_dir`` (default: ``_static/figures``).

    Files whose bytes are unchanged are not rewritten, and a chart whose spec (with the Vega-Lite version and the
    scale) is the one that last wrote both files is not converted again: its hash is kept in
    ``<book root>/_build/figure-specs/``, outside the site (vl-convert is the slowest step of a page, about 0.6 s a
    chart, and a rebuild after a change to the package re-executes every page with mostly unchanged charts).
    Returns {"png": path, "svg": path}."""
    if not _SAFE_NAME.match(name):
        raise ValueError(f"figure name {name!r}: use lower-case letters, digits, '.', '_' and '-'")
    try:
        import vl_convert as vlc
    except ImportError:  # a GPU host that runs a part in run mode need not carry vl-convert (33 MB)
        return {}

    out = Path(out_dir) if out_dir is not None else figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    spec = chart.to_dict()
    version = vl_version()
    paths = {ext: out / f"{name}.{ext}" for ext in ("svg", "png")}
    digest = hashlib.sha256(json.dumps([spec, version, scale_factor], sort_keys=True, default=str)
                            .encode("utf-8")).hexdigest()
    stamp = _spec_stamp(name, out)
    if stamp is not None and all(p.exists() for p in paths.values()):
        try:
            if stamp.read_text() == digest:
                return paths
        except OSError:
            pass
    svg = vlc.vegalite_to_svg(spec, vl_version=version)
    # the PNG rasterised from that SVG: the same bytes as vegalite_to_png, without drawing the chart twice
    payloads = {"svg": svg.encode("utf-8"), "png": vlc.svg_to_png(svg, scale=scale_factor)}
    for ext, data in payloads.items():
        path = paths[ext]
        if not (path.exists() and path.read_bytes() == data):
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
    if stamp is not None:
        try:
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.write_text(digest)
        except OSError:
            pass
    return paths


def _spec_stamp(name: str, out: Path) -> Path | None:
    """Where save() keeps the spec hash of `name` written into `out`: under the book's _build, one folder per folder
    of figures (a test's own folder gets its own); None outside a book (no _config.yml above the cwd)."""
    try:
        root = book_root()
    except FileNotFoundError:
        return None
    tag = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:12]
    return root / "_build" / "figure-specs" / tag / f"{name}.sha256"


def download_links_html(paths: Mapping[str, Path], base: Path | None = None) -> str:
    """HTML links to the saved files, relative to ``base`` (default: the cwd).

    A page is built at the same depth below ``_build/html`` as its source below the book root,
    and ``_static`` is copied to ``_build/html/_static``; so a link relative to the notebook's
    folder in the source tree is also right in the built site."""
    base = (base or Path.cwd()).resolve()
    links = []
    for ext in ("png", "svg"):
        if ext in paths:
            href = Path(os.path.relpath(Path(paths[ext]).resolve(), base)).as_posix()
            links.append(
                f'<a class="iw-download" href="{html.escape(href)}" download>{ext.upper()}</a>'
            )
    return '<p class="iw-figure-downloads">Download this figure: ' + " · ".join(links) + "</p>"


def show(chart: alt.TopLevelMixin, name: str, out_dir: Path | None = None,
         links: bool = True) -> None:
    """Save ``chart`` as PNG and SVG, display it interactively, and display download links.

    ``name`` becomes the file stem (``_static/figures/<name>.png``); make it unique in the book,
    e.g. ``part1-throughput-vs-rate``. Returns None so that nothing else lands in the cell's
    output; call :func:`save` for the paths."""
    from IPython.display import HTML, display

    paths = save(chart, name, out_dir)
    display(chart)
    if links and paths:
        display(HTML(download_links_html(paths)))


# ------------------------------------------------------------------------------------- tables
# Column-name suffix -> unit shown in the header. Longest suffixes first.
UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_tok_s", "tok/s"),
    ("_rps", "req/s"),
    ("_ms", "ms"),
    ("_us", "µs"),
    ("_gib", "GiB"),
    ("_gb_s", "GB/s"),
    ("_gb", "GB"),
    ("_mib", "MiB"),
    ("_pct", "%"),
    ("_tflops", "TFLOP/s"),
    ("_s", "s"),
)
# Whole headers for columns whose name does not read well word by word (the unit is still added).
DEFAULT_LABELS = {"max_num_seqs": "max_num_seqs", "running_max": "Largest running batch",
                  "offered_rate": "Offered rate", "completed": "Completed"}
# Words that read better in capitals in a header.
HEADER_WORDS = {"ttft": "TTFT", "itl": "ITL", "e2el": "E2E", "e2e": "E2E", "kv": "KV",
                "hbm": "HBM", "gpu": "GPU", "rps": "req/s", "id": "ID"}


def split_unit(column: str) -> tuple[str, str | None]:
    """'ttft_p50_ms' -> ('ttft_p50', 'ms'); columns without a known unit suffix -> (column, None)."""
    for suffix, unit in UNIT_SUFFIXES:
        if column.endswith(suffix) and len(column) > len(suffix):
            return column[: -len(suffix)], unit
    return column, None


def header_label(column: str, units: Mapping[str, str] | None = None,
                 labels: Mapping[str, str] | None = None) -> str:
    """A readable header with its unit: 'ttft_p50_ms' -> 'TTFT p50 (ms)'."""
    stem, unit = split_unit(column)
    if units and column in units:
        unit = units[column]
    if labels and column in labels:
        text = labels[column]
    elif column in DEFAULT_LABELS or stem in DEFAULT_LABELS:
        text = DEFAULT_LABELS.get(column, DEFAULT_LABELS.get(stem, stem))
    else:
        words = [HEADER_WORDS.get(w, w) for w in stem.split("_") if w]
        text = " ".join(words)
        text = text[:1].upper() + text[1:]
    return f"{text} ({unit})" if unit else text


MISSING_NUMBER = "not measured"  # what a table's number cell says where the rig has no such number (None, NaN, NA)


def format_number(value, digits: int | None = None) -> str:
    """Round for reading: 1,234 / 56.8 / 7.05 / 0.392; inf -> '∞' (a flood); missing -> 'not measured'.

    With ``digits`` given, exactly that many decimals (thousands separated)."""
    if missing(value):
        return MISSING_NUMBER
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        return str(value)
    x = float(value)
    if math.isnan(x):
        return MISSING_NUMBER
    if digits == 0 and abs(x) >= 1000:  # a measured quantity (its column is not whole numbers): three figures
        return words.sig(x)
    return words.fixed(x, digits) if digits is not None else words.table_number(x)


def column_decimals(values: pd.Series) -> int | None:
    """Decimals for a whole numeric column, so that its numbers line up: None (integers) if every
    finite value is whole, else what :func:`format_number` would use for the column's median size."""
    finite = pd.to_numeric(values, errors="coerce").replace([math.inf, -math.inf], math.nan).dropna()
    if finite.empty or (finite == finite.round()).all():
        return None
    median = float(finite.abs().median())
    if median >= 100:
        return 0
    if median >= 10:
        return 1
    if median >= 1 or median == 0:
        return 2
    return min(6, 2 - math.floor(math.log10(median)))


def table_html(df: pd.DataFrame, units: Mapping[str, str] | None = None,
               labels: Mapping[str, str] | None = None, digits: Mapping[str, int] | None = None,
               caption: str | None = None, index: bool = False) -> str:
    """Render ``df`` as an HTML table: unit-bearing headers, rounded numbers right-aligned.

    ``units`` overrides or adds units per column, ``labels`` replaces header text, ``digits``
    fixes decimals per column (default: one choice per column, see :func:`column_decimals`, cut per cell where it
    would show a fourth significant figure: :func:`words.cell_decimals`).
    Units are otherwise read from the column-name suffix."""
    frame = df.reset_index() if index else df
    if len(frame):  # a column with no number on any row says nothing the caption does not: left out
        frame = frame[[c for c in frame.columns if not all(missing(v) for v in frame[c])]]
    numeric = {c: pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
               for c in frame.columns}
    decimals = {c: (digits or {}).get(c, column_decimals(frame[c])) for c in frame.columns if numeric[c]}
    chosen = {c for c in frame.columns if numeric[c] and c not in (digits or {})}  # cut to three figures per cell
    # a column of numbers with gaps can arrive as objects: its gaps are missing numbers too
    numbers_only = {c: not numeric[c] and frame[c].notna().any() and all(
                        pd.api.types.is_number(v) and not pd.api.types.is_bool(v) for v in frame[c] if not missing(v))
                    for c in frame.columns}
    head = "".join(
        f'<th class="{"iw-num" if numeric[c] or numbers_only[c] else "iw-text"}">{html.escape(header_label(str(c), units, labels))}</th>'
        for c in frame.columns
    )
    rows = []
    for record in frame.itertuples(index=False, name=None):
        cells = []
        for column, value in zip(frame.columns, record):
            gap = ' iw-missing' if missing(value) else ''
            if numeric[column]:
                places = words.cell_decimals(value, decimals[column]) if column in chosen else decimals[column]
                text = format_number(value, places)
                cells.append(f'<td class="iw-num{gap}">{html.escape(text)}</td>')
            elif numbers_only[column]:
                text = format_number(value)
                cells.append(f'<td class="iw-num{gap}">{html.escape(text)}</td>')
            else:
                # a yes/no reads as a word, never Python's True/False (a bool column, or bools among text)
                text = words.MISSING if gap else ("yes" if value else "no") if isinstance(value, (bool, np.bool_)) else str(value)
                cells.append(f'<td class="iw-text{gap}">{html.escape(text)}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (
        f'<table class="dataframe iw-table">{cap}<thead><tr>{head}</tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table>'
    )


def save_csv(df: pd.DataFrame, name: str, out_dir: Path | None = None) -> Path:
    """Write ``df`` as ``<name>.csv`` into ``out_dir`` (default ``_static/tables`` at the book root, copied into
    ``_build/html/_static/tables``): the numbers as measured, unrounded, a missing one as an empty field.
    Name it after the page, e.g. ``part1-rates``; an unchanged file is not rewritten."""
    if not _SAFE_NAME.match(name):
        raise ValueError(f"table name {name!r}: use lower-case letters, digits, '.', '_' and '-'")
    out = Path(out_dir) if out_dir is not None else static_dir() / TABLES_DIR_NAME
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.csv"
    data = df.to_csv(index=False, na_rep="").encode("utf-8")
    if not (path.exists() and path.read_bytes() == data):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path


def csv_link_html(path: Path, base: Path | None = None) -> str:
    """A download link to a saved CSV, relative to ``base`` (default: the cwd; see :func:`download_links_html`)."""
    href = Path(os.path.relpath(Path(path).resolve(), (base or Path.cwd()).resolve())).as_posix()
    return (f'<p class="iw-figure-downloads">Download this table: '
            f'<a class="iw-download iw-csv" href="{html.escape(href)}" download>CSV</a></p>')


def csv_link(df: pd.DataFrame, name: str, out_dir: Path | None = None) -> str:
    """Save ``df`` as CSV (:func:`save_csv`) and return the HTML link to it."""
    return csv_link_html(save_csv(df, name, out_dir))


def table(df: pd.DataFrame, csv: str | None = None, fold: str | None = None, **kwargs):
    """:func:`table_html` wrapped for display in a notebook (returns an ``IPython.display.HTML``); with ``csv``
    (a file stem such as ``part1-rates``) the frame is also saved as CSV and linked under the table; with ``fold``
    (a summary line) the table is folded under it (a reference table a reader opens when needed)."""
    from IPython.display import HTML

    link = csv_link(df, csv) if csv else ""
    body = table_html(df, **kwargs) + link
    if fold:
        body = f'<details class="iw-fold"><summary>{html.escape(fold)}</summary>{body}</details>'
    return HTML(body)


def glue_number(name: str, value) -> None:
    """Glue a number for the page's prose ({glue:text}`name:fmt`) as a plain float (numpy scalars
    warn in the book build). Outside a book build without myst-nb (a GPU host in run mode) it does
    nothing: the prose is rendered by the book, not by the run."""
    try:
        from myst_nb import glue
    except ImportError:
        return
    glue(name, float(value), display=False)


def glue(name: str, value, display: bool = True) -> None:
    """myst-nb's glue where myst-nb is installed (the book build); elsewhere (a GPU host in run mode, which stages no
    book toolchain) nothing: the run keeps its raw data, and the prose is rendered by the book."""
    try:
        from myst_nb import glue as _glue
    except ImportError:
        return
    _glue(name, value, display=display)


# ------------------------------------------------------------------------------ each page's charts
PAGE_MODULES = ("p00", "p01", "p02", "p03", "p04", "p05", "p06", "variants", "primer", "glance")


def __getattr__(name: str):
    """``figures.p03`` and the like: a page's chart module, imported when first named."""
    if name in PAGE_MODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
