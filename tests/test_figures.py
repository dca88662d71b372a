"""figures.table_html and format_number: a number a table does not have reads as words."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from inference_wall.figures import MISSING_NUMBER, format_number, table_html


def _cells(html: str) -> list[tuple[str, str]]:
    return re.findall(r'<td class="([^"]*)">([^<]*)</td>', html)


def test_a_missing_number_reads_not_measured():
    assert MISSING_NUMBER == "not measured"
    for value in (None, math.nan, np.nan, pd.NA, np.float64("nan")):
        assert format_number(value) == "not measured"
        assert format_number(value, 2) == "not measured"
    assert format_number(0.0) == "0" and format_number(math.inf) == "∞"  # zero and a flood are numbers


def test_tables_show_missing_numbers_as_words_and_missing_text_as_a_dash():
    frame = pd.DataFrame({"rig": ["a10g", None], "tok_s": [1234.5, math.nan],
                          "ttft_ms": pd.Series([np.int64(12), None], dtype=object)})
    cells = _cells(table_html(frame))
    assert cells[:3] == [("iw-text", "a10g"), ("iw-num", "1,230"), ("iw-num", "12")]
    assert cells[3:] == [("iw-text iw-missing", "–"), ("iw-num iw-missing", "not measured"),
                         ("iw-num iw-missing", "not measured")]
    assert '<th class="iw-num">TTFT (ms)</th>' in table_html(frame)


def test_a_text_column_is_a_nominal_tooltip():
    """A text field typed quantitative shows "NaN" on hover (part 2's "Config: NaN"): typed by the frame's dtype."""
    from inference_wall.figures import tooltips

    frame = pd.DataFrame({"config": ["chunked, budget 512"], "odd_name": ["x"], "freeze_ms": [12.0]})
    kinds = {t.to_dict()["field"]: t.to_dict()["type"] for t in tooltips(["config", "odd_name", "freeze_ms"], data=frame)}
    assert kinds == {"config": "nominal", "odd_name": "nominal", "freeze_ms": "quantitative"}
    assert tooltips(["config"])[0].to_dict()["type"] == "nominal"  # by name where no frame is given


def test_a_tooltip_shows_three_significant_digits_and_counts_whole():
    """A measured number shows 3 significant digits (not 1,087.442 nor 11 digits); a count or a length stays whole
    (a prompt of 32,768 tokens is not 32,800)."""
    from inference_wall.figures import COUNT, NUMBER, tooltips

    frame = pd.DataFrame({"prompt_len": [32768], "freeze_ms": [1087.4421]})
    formats = {t.to_dict()["field"]: t.to_dict()["format"] for t in tooltips(["prompt_len", "freeze_ms"], data=frame)}
    assert formats == {"prompt_len": COUNT, "freeze_ms": NUMBER}
    assert [t.to_dict()["title"] for t in tooltips(["prompt_len", "freeze_ms"], data=frame)] == ["Prompt len", "Freeze (ms)"]


def test_a_log_axis_says_log_and_legends_are_not_cut():
    from inference_wall.figures import log_x, log_y, theme_config

    assert log_x("rate", "Offered rate (req/s)").to_dict()["title"] == "Offered rate (req/s, log)"
    assert log_y("ms", "ITL").to_dict()["title"] == "ITL (log)"
    assert log_y("ms", "ITL (ms, log)").to_dict()["title"] == "ITL (ms, log)"
    assert theme_config()["config"]["legend"]["labelLimit"] >= 400  # Vega's default cuts at 160 px with "…"


def test_part2_charts_type_their_text_nominal():
    from inference_wall import figures

    freezes = pd.DataFrame({"rig": ["r", "r"], "config": ["chunking off", "chunked, budget 512"], "budget": [0, 512],
                            "prompt_len": [4096, 4096], "freeze_ms": [10.0, 5.0], "freeze_min_ms": [9.0, 4.0],
                            "freeze_max_ms": [11.0, 6.0], "repeats": [3, 3], "ttft_ms": [100.0, 120.0],
                            "predicted_low_ms": [8.0, 4.0], "predicted_high_ms": [12.0, 6.0], "solo_ttft_ms": [90.0, 90.0]})
    for chart in (figures.p02.freeze_vs_length(freezes), figures.p02.ttft_vs_freeze(freezes)):
        spec = chart.to_dict()
        tips = [t for layer in spec["spec"].get("layer", [spec["spec"]]) for t in layer.get("encoding", {}).get("tooltip", [])]
        assert {t["field"]: t["type"] for t in tips}["config"] == "nominal"


def test_a_yes_no_reads_as_a_word():
    frame = pd.DataFrame({"fits": [True, False], "mixed": pd.Series([True, "x"], dtype=object)})
    texts = [text for _, text in _cells(table_html(frame))]
    assert texts == ["yes", "yes", "no", "x"]


def test_a_table_saved_as_csv_is_linked(tmp_path):
    from inference_wall import figures

    df = pd.DataFrame({"rig": ["h200", "a10g"], "tok_s": [1234.5678, float("nan")]})
    path = figures.save_csv(df, "part9-demo", tmp_path / "_static" / "tables")
    assert path.read_text().splitlines() == ["rig,tok_s", "h200,1234.5678", "a10g,"]
    link = figures.csv_link_html(path, base=tmp_path / "notebooks")
    assert 'href="../_static/tables/part9-demo.csv"' in link and "iw-download" in link
    with __import__('pytest').raises(ValueError, match="table name"):
        figures.save_csv(df, "Bad Name")


SRC = Path(__file__).resolve().parents[1] / "src" / "inference_wall"
ROOT = SRC.parents[1]
IMPORTS_ALTAIR = re.compile(r"^\s*(import altair\b|from altair\b)", re.MULTILINE)


def test_only_the_figures_package_imports_altair():
    """Every chart has one home (issue 25): no module of the package outside figures/ imports Altair."""
    outside = [str(p.relative_to(SRC)) for p in sorted(SRC.rglob("*.py"))
               if "figures" not in p.relative_to(SRC).parts[:1] and IMPORTS_ALTAIR.search(p.read_text())]
    assert outside == []
    assert IMPORTS_ALTAIR.search((SRC / "figures" / "__init__.py").read_text())  # the pattern does find one


def test_no_chart_is_built_in_a_notebook_cell():
    """Notebook 1 built its running-batch chart in a cell, out of the tests' reach: no notebook or book page imports
    Altair; each page shows the charts its figures module builds."""
    pages = sorted([*(ROOT / "notebooks").glob("*.md"), *(ROOT / "book").glob("*.md")])
    assert pages
    assert [p.name for p in pages if IMPORTS_ALTAIR.search(p.read_text()) or "alt.Chart(" in p.read_text()] == []


def test_each_part_that_draws_charts_has_its_figures_module():
    """A part whose notebook shows a chart has figures/pNN.py, named like parts/pNN.py, and it imports."""
    import importlib

    from inference_wall import figures

    # a part is parts/pNN.py or, since the parts moved into folders, parts/pNN/ (a package)
    parts = sorted({p.stem for p in (SRC / "parts").glob("p[0-9][0-9]*")
                    if p.suffix == ".py" or (p / "__init__.py").is_file()})
    assert parts, "no part modules found"
    drawn = [n for n in parts
             if any("figures.show(" in nb.read_text() for nb in (ROOT / "notebooks").glob(f"{n[1:]}-*.md"))]
    assert drawn, "no part notebook shows a chart"
    for name in drawn:
        assert (SRC / "figures" / f"{name}.py").is_file(), f"parts/{name}.py draws charts but figures/{name}.py is missing"
        assert getattr(figures, name) is importlib.import_module(f"inference_wall.figures.{name}")


def test_every_chart_a_page_names_is_in_its_figures_module():
    """figures.<module>.<function> in a notebook or book page resolves (no caller left on a moved name)."""
    from inference_wall import figures

    pages = sorted((ROOT / "notebooks").glob("*.md")) + sorted((ROOT / "book").glob("*.md"))
    named = {(m, f) for p in pages for m, f in re.findall(r"\bfigures\.(\w+)\.(\w+)", p.read_text())}
    assert named
    missing_ = [f"figures.{m}.{f}" for m, f in sorted(named) if not hasattr(getattr(figures, m), f)]
    assert missing_ == []


def test_a_chart_whose_spec_is_unchanged_is_not_converted_again(tmp_path, monkeypatch):
    """save() skips vl-convert when the spec that last wrote both files is the same (its hash under _build), and
    converts again when the chart, or a file, changes."""
    import altair as alt
    import pandas as pd
    import vl_convert

    from inference_wall import figures

    (tmp_path / "_config.yml").write_text("title: t\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    monkeypatch.chdir(tmp_path)
    calls = []
    for fn in ("vegalite_to_svg", "svg_to_png"):
        real = getattr(vl_convert, fn)
        monkeypatch.setattr(vl_convert, fn, lambda *a, _r=real, _n=fn, **k: (calls.append(_n), _r(*a, **k))[1])
    chart = alt.Chart(pd.DataFrame({"x": [1, 2], "y": [3, 4]})).mark_line().encode(x="x:Q", y="y:Q")
    paths = figures.save(chart, "part9-cache")
    assert len(calls) == 2 and all(p.exists() for p in paths.values())
    assert figures.save(chart, "part9-cache") == paths and len(calls) == 2  # unchanged: not converted
    figures.save(chart.mark_point(), "part9-cache")
    assert len(calls) == 4  # another spec: converted
    paths["png"].unlink()
    figures.save(chart.mark_point(), "part9-cache")
    assert len(calls) == 6 and paths["png"].exists()  # a file gone: converted again


def test_a_folded_table_opens_under_its_summary():
    """Reference tables on the method and rigs pages fold under one line (issue 41: pages a reader finishes)."""
    import pandas as pd

    from inference_wall import figures

    df = pd.DataFrame({"rig": ["a"], "value": [1.0]})
    folded = figures.table(df, fold="Every server start (table)").data
    assert folded.startswith('<details class="iw-fold"><summary>Every server start (table)</summary>')
    assert folded.endswith("</details>") and "<table" in folded
    assert "<details" not in figures.table(df).data


def test_a_table_prints_three_figures_and_no_column_of_nothing():
    """Issue 41: a measured quantity in a table has at most three significant figures (8,340 tok/s, not 8,339), a
    count stays exact, and a column that no shown row has a number for is left out (no column of 'not measured')."""
    import pandas as pd

    from inference_wall import figures

    df = pd.DataFrame({"rig": ["a", "b"], "output_tok_s": [8339.2, 1091.6], "pool_pages": [20481, 586],
                       "cold_ms": [float("nan"), None]})
    out = figures.table_html(df)
    assert "8,340" in out and "1,090" in out and "8,339" not in out
    assert "20,481" in out  # a count, exact
    assert "Cold" not in out and "not measured" not in out


def test_a_column_lines_up_without_a_fourth_significant_figure():
    frame = pd.DataFrame({"step_ms": [0.283, 4.71, 18.64, 255.9], "ratio": [1.206, 0.764, 0.5, 0.9]})
    texts = [text for _, text in _cells(table_html(frame))]
    # step_ms: the median (11.7) asks one decimal; 255.9 would show four figures at it
    assert texts[0::2] == ["0.3", "4.7", "18.6", "256"]
    assert texts[1::2] == ["1.21", "0.764", "0.500", "0.900"]  # three decimals (median 0.83): 1.206 keeps three figures
    # a caller's explicit decimals are kept as asked
    assert [t for _, t in _cells(table_html(frame[["step_ms"]], digits={"step_ms": 2}))] == ["0.28", "4.71", "18.64", "255.90"]
