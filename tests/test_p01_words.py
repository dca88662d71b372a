"""Part 1's sentences from synthetic data: no 'nan' where a pass had no interval of decode alone, a figure from a
single stats interval said so, a rate pass above the flood line named (and whether it ran in the flood's session),
and a goodput curve that rises with the rate explained from its request counts."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd

from inference_wall.parts import p01


def _mixed(rows):
    cols = ["rig", "offered_rate_rps", "needed_gen_tok_s", "gen_with_prefill_tok_s", "gen_decode_only_tok_s",
            "intervals", "decode_only_intervals", "running_median", "max_num_seqs"]
    return pd.DataFrame(rows, columns=cols)


VIEWS = {"a": {"knee_rps": 30.0, "ceiling_rps": 60.0}, "b": {"knee_rps": 32.0, "ceiling_rps": 64.0}}


def test_knee_words_say_in_words_where_no_interval_decoded_alone():
    mixed = _mixed([("a", 30.0, 3840, 2500, 10000, 20, 1, 252, 256),
                    ("b", 32.0, 4100, 2700, math.nan, 20, 0, 144, 256)])
    said = p01.knee_words(VIEWS, mixed)
    assert "nan" not in said.lower()
    assert "no interval of the pass decoded alone" in said
    assert "intervals of decode alone 10,000 (one interval)" in said


def test_single_interval_figures_are_named():
    mixed = _mixed([("a", 30.0, 3840, 2500, 10000, 20, 1, 252, 256),
                    ("a", 45.0, 5000, 2600, 11000, 20, 5, 252, 256)])
    note = p01.single_interval_note(mixed)
    assert "a at 30.0 req/s (decode alone)" in note and "45" not in note
    assert p01.single_interval_note(mixed.iloc[1:]) == ""


def _pt(rate, session, cap=256):
    from inference_wall.records.record import PointRecord

    manifest = {"status": "complete", "part": "01-hit-the-wall", "rig": "a", "point": "p", "session": {"id": session},
                "max_num_seqs": cap}
    return SimpleNamespace(params={"kind": "rate", "offered_rate_rps": rate}, record=PointRecord.from_dict(manifest))


def test_a_rate_pass_above_the_flood_line_is_said_with_its_session():
    rates = pd.DataFrame({"rig": "a", "source": "measured", "offered_rate_rps": [10.0, 100.0, math.inf],
                          "completed_rps": [9.9, 65.7, 58.4]})
    points = {"a": {"r10": _pt(10.0, "s1"), "r100": _pt(100.0, "s2"), "flood": _pt(math.inf, "s1")}}
    said = p01.above_flood_words(rates, points)
    assert "one rate pass completed more than the flood's 58.4 req/s" in said
    assert "65.7 req/s at an offered 100 req/s" in said and "another server session" in said
    points["a"]["r100"] = _pt(100.0, "s1")
    assert "the flood's own server session" in p01.above_flood_words(rates, points)
    assert p01.above_flood_words(rates.assign(completed_rps=[9.9, 50.0, 58.4]), points) == ""


def test_goodput_words_name_a_share_that_rises_with_the_rate():
    rates = [10.0, 40.0, 60.0, 90.0]
    good = pd.DataFrame({"rig": "a", "offered_rate_rps": rates, "ttft_target_ms": 500, "tpot_target_ms": 50,
                         "requests": [200, 800, 1169, 1169], "share_ok": [1.0, 0.0, 256 / 1169, 256 / 1169]})
    points = {"a": {f"r{r:g}": _pt(r, "s") for r in rates}}
    said = p01.goodput_words(good, 500, 50, points)
    assert "rises from 0.0% at 40.0 req/s to 21.9% at 60.0 req/s" in said
    assert "256 of 1,169" in said
    falling = good.assign(share_ok=[1.0, 0.5, 0.2, 0.1])
    assert p01.goodput_words(falling, 500, 50, points) == ""


# --- the findings box and the post's take-aways, on the repository's data -------------------------------------

import re

from inference_wall import parts
from inference_wall.schema import PUBLISHED_RIG


def readable(text: str) -> bool:
    """No nan/None/True/False and no decimal number with more than three significant digits."""
    if re.search(r"\b(nan|NaN|None|True|False|inf)\b", text):
        return False
    for num in re.findall(r"\d[\d,]*\.\d+", text):
        digits = num.replace(",", "").replace(".", "").lstrip("0")
        if len(digits) > 3:
            return False
    return True


def _views():
    shown = parts.page_rigs(1)
    tables = p01.page_tables(None, shown)
    return {r: p01.rig_view(r, None, tables) for r in shown}


def test_findings_box_gives_three_to_five_readable_bullets_with_the_correction():
    views = _views()
    found = p01.key_findings(views)
    assert 3 <= len(found) <= 5 and all(readable(b) for b in found)
    pub = views[PUBLISHED_RIG]
    adm = getattr(pub["admission"], "value", pub["admission"])
    assert any(f"admission limit for this workload, {adm:.0f} requests" in b for b in found)


def test_takeaways_are_the_posts_four_each_with_what_the_data_say():
    items = p01.takeaways(_views())
    assert len(items) == 4
    assert all(post and data and readable(data) for post, data in items)
    assert "stopped its batch" in items[2][1]  # the A10G's batch hit the KV pool, not generation speed
    md = p01.takeaways_markdown(items)
    assert md.startswith("1. ") and md.count("**What the data say:**") == 4


def test_batch_limit_names_what_stopped_the_flooded_batch():
    assert p01.batch_limit({"running_flood": 145.0, "max_num_seqs": 256, "admission": 146}) == "the KV pool"
    assert p01.batch_limit({"running_flood": 256.0, "max_num_seqs": 256, "admission": 1825}) == "max_num_seqs"
    assert p01.batch_limit({"running_flood": 100.0, "max_num_seqs": 256, "admission": 1825}) == "neither"
    assert p01.batch_limit({"max_num_seqs": 256}) is None


def test_the_top_cap_table_names_what_limited_each_flood():
    """Part 3's flood at each (rig, model)'s top cap: the KV cache where it was at least 95% used, else the cap where
    the running batch reached it, else decode speed; only the top cap of each is kept."""
    sweep = pd.DataFrame({"rig": ["a", "a", "b", "c"], "model": "main", "max_num_seqs": [64, 256, 256, 256],
                          "running_max": [64, 200, 256, 256], "kv_usage_max_pct": [50.0, 99.0, 40.0, 40.0],
                          "output_tok_s": [1.0, 2.0, 3.0, 4.0]})
    sweep.loc[3, "running_max"] = 120
    top = p01.top_cap_table(sweep).set_index("rig")
    assert list(top.index) == ["a", "b", "c"] and top.loc["a", "max_num_seqs"] == 256
    assert top["limit"].to_dict() == {"a": "KV cache", "b": "max_num_seqs cap", "c": "decode speed"}
    assert "limit" in p01.top_cap_table(sweep.drop(columns="kv_usage_max_pct")).columns


def test_steadiness_words_say_each_familys_spread_and_the_agreeing_rigs_knee():
    steady = {"h200": {"sessions": 3, "flood_tok_s": (6000.0, 6300.0, 0.05), "tolerance": 0.021, "part3_flood": 6200.0,
                       "agreeing_rigs": ["h200"], "agree": {"h200": True, "h200-run2": False}}}
    said = p01.steadiness_words(steady, {"h200": {"knee_rps": 40.0, "last_kept_up_rps": 35.0}})
    assert said.startswith("On the h200 family, 3 sessions of this configuration, flooded at 6,000 to 6,300")
    assert "(5% apart)" in said and "up to 2.1%" in said and "; not h200-run2." in said
    assert "The knee from h200, whose flood agrees: 40.0 req/s, kept up at 35.0." in said
    assert p01.steadiness_words({}, {}) == ""


def test_running_series_reads_the_rate_passes_only_from_their_own_start():
    class Point:
        def __init__(self, kind, epochs, running):
            self.params = {"kind": kind}
            self._st = pd.DataFrame({"epoch": epochs, "running": running})

        def stats_during(self):
            return self._st

    points = {"r": {"rate-1": Point("rate", [100.0, 101.0, 102.5], [1, 3, 2]), "flood": Point("flood", [5.0], [9]),
                    "rate-2": Point("rate", [], [])}}
    series = p01.running_series(points)
    assert series.to_dict("list") == {"rig": ["r"] * 3, "point": ["rate-1"] * 3, "t_s": [0.0, 1.0, 2.5], "running": [1, 3, 2]}
    assert p01.running_series({}).empty


def test_the_step_fit_figure_draws_when_no_shown_rig_has_a_decode_point_yet():
    """A new rig's first run of `--points single` (no decode point yet) beside the published fit (a fit, no points):
    before, step_fit_rows gave a frame with no "rig" column and part 1's page failed in run mode (KeyError: 'rig')
    after the point was measured. Synthetic fit values: the figure's code path is what is tested."""
    from inference_wall import figures

    views = {"published": {"fit_intercept_ms": 10.0, "fit_slope_ms": 1.0, "crossover": 10.0}, "new-rig": {}}
    pts, fits, tops, cross = p01.step_fit_rows(views, 4)
    assert list(pts.columns) == ["rig", "batch", "step_ms"] and pts.empty
    assert list(cross["rig"]) == ["published"] and set(fits) == {"published"}
    chart = figures.p01.step_time_fit(pts, figures.p01.fit_lines(fits, tops), cross)
    assert "published" in chart.to_json()


def test_a_rig_without_a_rate_sweep_is_named_and_given_no_knee():
    """A rig that ran the single stream and the flood but no rate sweep yet (the h100 after its first session): its
    knee is NaN, which is truthy; the findings and the takeaway name it instead of printing 'nan%'."""
    views = _views()
    views["no-rates"] = {**views["h200"], "knee_rps": math.nan, "last_kept_up_rps": math.nan}
    found = p01.key_findings(views)
    assert all(readable(b) for b in found), found
    knee = next(b for b in found if b.startswith("Offered a steady rate"))
    assert "no-rates kept up" not in knee and "no-rates: no rate sweep with a knee yet)" in knee
    _, said = p01.takeaways(views)[1]
    assert readable(said) and said.startswith("Every rig with a rate sweep has a knee") and "no-rates:" in said


def test_the_knee_finding_says_below_the_ceiling_only_where_every_knee_is_below_it():
    views = _views()
    knee = next(b for b in p01.key_findings(views) if b.startswith("Offered a steady rate"))
    assert "below its flood's ceiling" in knee
    views["late"] = {**views["h200"], "knee_rps": 1.2 * views["h200"]["ceiling_rps"]}
    knee = next(b for b in p01.key_findings(views) if b.startswith("Offered a steady rate"))
    assert "below its flood's ceiling" not in knee and "late kept up" in knee and "fell behind at 120%" in knee


def test_the_rate_figures_leave_out_a_rig_with_its_flood_alone():
    """A rig whose rate sweep has not run (the h100 after its first session) has only its flood row: a panel of it had
    no line and Vega warned of an infinite extent in the browser; it is left out, the others drawn."""
    from inference_wall import figures

    rates = pd.DataFrame({"rig": ["a", "a", "b"], "offered_rate_rps": [1.0, math.inf, math.inf],
                          "completed_rps": [1.0, 9.0, 8.0], "output_tok_s": [128.0, 1152.0, 1024.0],
                          "e2el_p99_ms": [900.0, 4000.0, 5000.0]})
    for chart in (figures.p01.throughput_vs_rate(rates), figures.p01.e2e_p99_vs_rate(rates)):
        values = chart.to_dict()["datasets"]
        rigs = {row["rig"] for rows in values.values() for row in rows}
        assert rigs == {"a"}
