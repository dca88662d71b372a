"""The series at a glance (inference_wall.pages.glance, book/glance.md): the verdict matrix and the per-GPU chart."""
from __future__ import annotations

import html
import json
import math

import pandas as pd
import pytest

from inference_wall.pages import glance
from inference_wall.measure.claims import DIFFERS, HOLDS, INCONCLUSIVE, NOT_MEASURED
from inference_wall.parts import p00, p01, p02, p03, p04, p05, p06


# ------------------------------------------------------------------------------------------ the matrix
@pytest.fixture(scope="module")
def committed():
    """The matrix over the committed data/runs, as the page builds it."""
    rows, ids = glance.claim_rows()
    rigs = glance.shown_rigs(rows)
    return rows, ids, rigs, glance.matrix(rows, ids, rigs)


def test_matrix_has_one_row_per_claim_of_each_part(committed):
    rows, ids, rigs, m = committed
    expected = {0: [c.id for c in p00.CLAIMS], 1: [c.id for c in p01.CLAIMS], 3: [c.id for c in p03.CLAIMS],
                4: [c.id for c in p04.CLAIMS], 5: [c.id for c in p05.CLAIMS], 6: [c.id for c in p06.CLAIMS]}
    for part, want in expected.items():
        assert list(m[m["part"] == part]["claim"]) == want, part
    two = list(m[m["part"] == 2]["claim"])
    assert len(two) == len(set(two))
    assert [c.id for c in p02.OTHER_CLAIMS] == [c for c in two if not c.startswith("freeze-is-prefill-")]
    assert any(c.startswith("freeze-is-prefill-") for c in two)
    assert list(dict.fromkeys(m["part"])) == [0, 1, 2, 3, 4, 5, 6]  # inside a step first, as in the book
    assert rigs[0] == "a10g-published" and "h200" in rigs
    # the series ran no inside-a-step chapter: its claims are judged on measured rigs only
    assert set(m[m["part"] == 0]["a10g-published"]) == {"not measured"}
    assert set(m[m["part"] == 0]["h200"]) - {"not measured"}, "part 0's claims judged nothing on h200"


def test_every_cell_is_a_verdict_word(committed):
    rows, ids, rigs, m = committed
    assert set(glance.VERDICT_WORDS) == {"holds", "differs", "inconclusive", "not measured", "not comparable"}
    cells = {w for rig in rigs for w in m[rig]}
    assert cells <= set(glance.VERDICT_WORDS)
    assert "holds" in cells and "differs" in cells  # the committed runs judge, not only miss
    # the page's HTML says no Python word where a reader looks
    text = glance.matrix_html(m, rigs)
    for word in ("nan", "NaN", "None", "True", "False"):
        assert f">{word}<" not in text


def test_matrix_fills_unjudged_rigs_and_keeps_the_parts_order():
    rows = pd.DataFrame([
        {"part": 1, "claim": "b", "post": "B says", "rig": "h200", "verdict": "differs", "detail": ""},
        {"part": 1, "claim": "a", "post": "A says", "rig": "h200", "verdict": "holds", "detail": ""},
        {"part": 1, "claim": "a", "post": "A says", "rig": "x", "verdict": "inconclusive", "detail": ""},
        {"part": 4, "claim": "c", "post": "", "rig": "h200", "verdict": "holds", "detail": "3 of 3 points"},
    ])
    m = glance.matrix(rows, {1: ["a", "b"], 4: ["c"], 6: ["d"]}, ["h200", "x"])
    assert list(m["claim"]) == ["a", "b", "c", "d"]
    assert list(m["h200"]) == ["holds", "differs", "holds", "not measured"]
    assert list(m["x"]) == ["inconclusive", "not measured", "not measured", "not measured"]
    assert m.set_index("claim").loc["c", "h200 detail"] == "3 of 3 points"
    html = glance.matrix_html(m, ["h200", "x"])
    assert 'href="../notebooks/01-hit-the-wall.html#claims"' in html
    assert 'href="../notebooks/06-past-one-gpu.html"' in html
    assert html.count('class="iw-v iw-v-not-measured"') == 4 and html.count("iw-v-holds") == 2
    assert ">Part 1: Hit the wall</a>" in html and ">Part 6: Past one GPU</a>" in html


def test_part_0_is_named_by_its_title_and_links_its_page():
    assert glance.part_label(0) == "Inside a step" and glance.part_label(3) == "Part 3: The batching cliff"
    rows = pd.DataFrame([{"part": 0, "claim": "k", "post": "", "rig": "h200", "verdict": "holds", "detail": ""}])
    html = glance.matrix_html(glance.matrix(rows, {0: ["k"]}, ["h200"]), ["h200"])
    assert '<a href="../notebooks/00-inside-a-step.html">Inside a step</a>' in html
    assert "Part 0" not in html


def test_a_verdict_without_a_word_is_an_error():
    assert glance.word(NOT_MEASURED) == "not measured"
    with pytest.raises(ValueError, match="unknown verdict 'maybe'"):
        glance.word("maybe")


def test_part4_points_make_one_verdict():
    assert glance.point_verdict([HOLDS, HOLDS, NOT_MEASURED]) == ("holds", "holds on 2 of 2 points")
    # the cell counts every verdict, as part 4's own table does (not "differs (1 of 3)" beside "holds on 1 of 2")
    assert glance.point_verdict([HOLDS, INCONCLUSIVE, DIFFERS]) == ("differs",
                                                                      "holds on 1 of 3 points, differs on 1, inconclusive on 1")
    assert glance.point_verdict([HOLDS, INCONCLUSIVE]) == ("inconclusive", "holds on 1 of 2 points, inconclusive on 1")
    assert glance.point_verdict([NOT_MEASURED]) == ("not measured", "")
    assert glance.point_verdict([]) == ("not measured", "")


# ------------------------------------------------------------------------------------------- the chart
def _prices() -> pd.DataFrame:
    return pd.DataFrame([{"gpu": "H200 SXM5", "match": "H200", "tier": "t", "usd_per_gpu_hour_low": 3.0,
                          "usd_per_gpu_hour_high": 5.0, "as_of": "x", "source": "y"}])


def test_per_gpu_throughput_divides_by_the_gpus():
    points = pd.DataFrame([
        {"rig": "r", "part": 6, "series": "m tensor parallel on 2 GPUs", "kind": "flood", "setting": "cap 64",
         "point": "tp2-mns-064", "gpus": 2, "output_tok_s": 9000.0, "itl_p50_ms": 20.0, "gpu_name": "NVIDIA H200",
         "power_w": 1200.0},
        {"rig": "r", "part": 6, "series": "m on one GPU", "kind": "flood", "setting": "cap 64", "point": "tp1-mns-064",
         "gpus": 1, "output_tok_s": 6000.0, "itl_p50_ms": 10.0, "gpu_name": "Other GPU", "power_w": math.nan},
    ])
    d = glance.chart_rows(points, _prices()).set_index("point")
    assert d.loc["tp2-mns-064", "per_gpu_tok_s"] == pytest.approx(4500.0)
    assert d.loc["tp1-mns-064", "per_gpu_tok_s"] == pytest.approx(6000.0)
    assert d.loc["tp2-mns-064", "per_user_tok_s"] == pytest.approx(50.0)
    # a GPU-hour at the listed middle (4 USD) over the tokens one GPU emits in an hour
    assert d.loc["tp2-mns-064", "usd_per_million"] == pytest.approx(4.0 / (4500.0 * 3600) * 1e6)
    assert math.isnan(d.loc["tp1-mns-064", "usd_per_million"])  # no listed price for this GPU
    assert d.loc["tp2-mns-064", "energy_j_per_token"] == pytest.approx(1200.0 / 9000.0)
    assert math.isnan(d.loc["tp1-mns-064", "energy_j_per_token"])


def test_points_a_log_axis_cannot_draw_are_left_out():
    points = pd.DataFrame([{"rig": "r", "part": 3, "series": "s", "kind": "flood", "setting": "cap 1", "point": p,
                            "gpus": g, "output_tok_s": t, "itl_p50_ms": i}
                           for p, g, t, i in (("ok", 1, 10.0, 5.0), ("no-itl", 1, 10.0, math.nan),
                                              ("zero", 1, 0.0, 5.0), ("no-gpus", 0, 10.0, 5.0))])
    assert list(glance.chart_rows(points)["point"]) == ["ok"]


def test_server_gpus_reads_the_command():
    assert glance.server_gpus(["vllm", "serve", "m", "--max-num-seqs", "4"]) == 1
    assert glance.server_gpus(None) == 1
    assert glance.server_gpus(["serve", "m", "--tensor-parallel-size", "2"]) == 2
    assert glance.server_gpus(["serve", "m", "--data-parallel-size=2"]) == 2
    assert glance.server_gpus(["serve", "--tp", "2", "--dp", "2"]) == 4
    with pytest.raises(ValueError, match="not a whole number"):
        glance.server_gpus(["serve", "--tensor-parallel-size", "two"])


def test_mean_power_sums_the_working_gpus():
    samples = pd.DataFrame({"gpu": [0, 1, 2, 0, 1, 2], "power_w": [300.0, 500.0, 70.0, 500.0, 700.0, 70.0],
                            "util_pct": [100, 100, 0, 100, 100, 0], "label": ["bench"] * 6})
    assert glance.mean_power_w(samples) == pytest.approx(400.0 + 600.0)  # GPU 2 idled through the pass
    assert math.isnan(glance.mean_power_w(samples.iloc[0:0]))
    assert math.isnan(glance.mean_power_w(samples, label="warmup"))
    assert glance.energy_per_token_j(1000.0, 500.0) == pytest.approx(2.0)
    assert math.isnan(glance.energy_per_token_j(math.nan, 500.0))


def test_chart_has_no_missing_words_and_rig_colours():
    from inference_wall import figures

    points = pd.DataFrame([{"rig": r, "part": 5, "series": "m fp8", "kind": "decode", "setting": "8 streams",
                            "point": f"p{r}", "gpus": 1, "output_tok_s": 800.0, "itl_p50_ms": 8.0,
                            "gpu_name": name, "power_w": w}
                           for r, name, w in (("h200", "NVIDIA H200", 400.0), ("a10g-published", None, math.nan))])
    spec = figures.glance.chart(glance.chart_rows(points, _prices())).to_dict()
    rows = [r for values in spec["datasets"].values() for r in values]
    assert rows and all(v is not None and not (isinstance(v, float) and math.isnan(v)) for r in rows for v in r.values())
    text = json.dumps(rows, ensure_ascii=False)
    assert "NaN" not in text and "– (no listed price)" in text and "– (no power samples)" in text
    colour = spec["layer"][1]["encoding"]["color"]
    assert colour["scale"]["range"] == [figures.rig_palette(colour["scale"]["domain"])[r]
                                        for r in colour["scale"]["domain"]]
    assert spec["layer"][1]["encoding"]["x"]["scale"]["type"] == "log"


def test_log_ticks_span_the_values():
    from inference_wall import figures

    assert figures.glance.log_ticks([49.0, 8650.0]) == [10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0]
    assert figures.glance.log_ticks([]) == [1.0, 10.0]


def test_chart_words_name_each_rigs_best_point_and_leave_missing_numbers_out():
    points = pd.DataFrame([{"rig": "h200", "part": 5, "series": "m fp8", "kind": "decode", "setting": s, "point": s,
                            "gpus": 1, "output_tok_s": t, "itl_p50_ms": i, "gpu_name": "NVIDIA H200", "power_w": 400.0}
                           for s, t, i in (("1 streams", 200.0, 5.0), ("64 streams", 6400.0, 10.0))]
                          + [{"rig": "a10g-published", "part": 3, "series": "m", "kind": "flood", "setting": "cap 1",
                              "point": "mns-001", "gpus": 1, "output_tok_s": 49.0, "itl_p50_ms": 20.0}])
    text = glance.chart_words(glance.chart_rows(points, _prices()))
    assert "most tokens per GPU 6,400 tok/s (part 5, m fp8, 64 streams) at 100 tok/s per user" in text
    assert "from 2.00 J (part 5, m fp8, 1 streams) to 0.0625 J" in text
    assert "nan" not in text.lower() and "USD per million tokens" in text
    assert "a10g-published**: most tokens per GPU 49.0 tok/s (part 3, m, cap 1) at 50.0 tok/s per user." in text


def test_a_parts_headline_is_its_first_findings_lead(committed):
    """The intro's line per part carries the part's headline number: the lead of its findings box's first bullet."""
    from types import SimpleNamespace

    assert glance.headline(SimpleNamespace(box=["- **Ceiling:** 1,090 tok/s on the A10G, flooded at every cap; more after"])) == \
        "**Ceiling:** 1,090 tok/s on the A10G, flooded at every cap."
    assert glance.headline(SimpleNamespace(box=[])) == ""
    pages = glance.pages()
    line = glance.headline(pages[1])
    assert line and any(ch.isdigit() for ch in line)


def test_a_parts_own_matrix_draws_the_glance_cells_without_a_band():
    """A part's page draws its verdicts as the glance page does (a claim's sentence under its name, one coloured cell
    per rig), in a table a reader finishes: the same cells, no band naming the part."""
    from inference_wall import parts
    from inference_wall.parts import protocol

    page = protocol.page(p01.PART, None, parts.page_rigs(1, None))
    html_ = glance.part_matrix_html(1, page.claims)
    assert 'class="iw-v-part"' not in html_
    cells = html_.count('<td class="iw-v iw-v-')
    assert cells == len(page.claims) and "set by the KV pool" in html_
    assert glance.part_matrix_html(1, page.claims.iloc[0:0]) == ""
    # no column of "not measured" for a rig on which nothing was judged (part 2's published A10G)
    two = protocol.page(p02.PART, None, parts.page_rigs(2, None))
    unjudged = set(two.claims["rig"]) - set(two.claims[two.claims["verdict"] != NOT_MEASURED]["rig"])
    assert unjudged, "part 2 judges every rig it shows: the case is gone"
    assert all(f">{html.escape(r)}</th>" not in glance.part_matrix_html(2, two.claims) for r in unjudged)
