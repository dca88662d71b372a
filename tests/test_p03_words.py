"""Part 3's words and per-rig table against synthetic sweeps: the ceiling is the cap with the most throughput (not
the top cap), the cliff in the table is the one in the prose, and the small model's shallower cliff is read from
what each added sequence costs a step, its cause left open (a fixed per-step cost would make a cliff steeper)."""
from __future__ import annotations

import pandas as pd
import pytest

from inference_wall.measure.analysis import Interval
from inference_wall.measure.claims import fmt_num
from inference_wall.parts import p03


def _rows(rig, model, caps, tok, itl, running=None):
    running = running or caps
    return [{"rig": rig, "model": model, "source": "measured", "max_num_seqs": float(c), "output_tok_s": float(t),
             "completed_rps": t / 128, "itl_p50_ms": float(i), "ttft_p50_ms": 100.0, "running_max": float(r)}
            for c, t, i, r in zip(caps, tok, itl, running)]


CAPS = [1, 4, 16, 64, 256, 512, 1024]
# the top cap makes less than cap 256: the ceiling is cap 256's flood
MAIN = _rows("syn", "main", CAPS, [200, 650, 2400, 6000, 8600, 8000, 6100], [4.0, 4.5, 4.9, 6.7, 17.8, 35, 78])


def _view(rows):
    return p03.rig_view(pd.DataFrame(rows), "syn", {}, {})


def test_the_ceiling_is_the_cap_with_the_most_throughput_not_the_top_cap():
    v = _view(MAIN)
    assert v["ceiling_cap"] == 256
    assert v["ceiling_rps"] == pytest.approx(8600 / 128)
    assert v["cliff_ratio"] == pytest.approx(8600 / 200)  # not the top cap's 6100 / 200
    t = p03.rig_table({"syn": v}, {"syn": {"ceiling_rps": 60.0}}).set_index("rig")
    assert t.loc["syn", "ceiling_rps"] == pytest.approx(8600 / 128)
    assert t.loc["syn", "ceiling_cap"] == 256
    assert t.loc["syn", "top_cap"] == 1024 and t.loc["syn", "top_cap_rps"] == pytest.approx(6100 / 128)
    assert t.loc["syn", "cliff_x"] == pytest.approx(p03.cliff(v["sweep"]))


def test_the_table_drops_columns_empty_for_every_rig():
    t = p03.rig_table({"syn": _view(MAIN)}, {"syn": {}})
    assert "small_model_cliff_x" not in t and "part1_flood_rps" not in t


def _small_rows(itl_64, itl_256):
    caps = [1, 4, 16, 64, 256]
    return _rows("syn", "small", caps, [540, 1480, 4670, 12200, 15560], [1.66, 2.4, 2.8, itl_64, itl_256])


def _with_small(small_rows):
    v = _view(MAIN + small_rows)
    return v


def test_added_sequence_cost_reads_the_running_batch():
    rows = _rows("syn", "main", [64, 256], [6000, 8400], [6.0, 10.0], running=[64, 144])
    add = p03.added_sequence_ms(pd.DataFrame(rows), 64, 256)
    assert add["ms_per_seq"] == pytest.approx(4.0 / 80)  # per running sequence, not per cap
    assert p03.added_sequence_ms(pd.DataFrame(rows), 64, 512) is None


def test_small_model_words_give_the_same_cliff_as_the_table_and_leave_the_cause_open():
    v = _with_small(_small_rows(4.06, 16.44))  # each added sequence costs the small model more than the 4B
    words = p03.small_model_words(v, {}, "differs", "Inside a step")
    main_cliff = p03.cliff(v["sweep"], 1, 256)
    assert f"against the 4B's {fmt_num(main_cliff)}x" in words
    assert fmt_num(main_cliff) == fmt_num(p03.rig_table({"syn": v}, {})["cliff_x"].iloc[0])
    assert "costs the small model more than it costs the 4B" in words
    assert "steeper, not shallower" in words and "the cause is open (Inside a step" in words
    assert "bound by the step's fixed costs" not in words  # the old, wrong explanation
    add = (16.44 - 4.06) / 192
    assert f"{fmt_num(add)} ms per added running sequence" in words


def test_small_model_words_say_lighter_where_the_data_say_so():
    v = _with_small(_small_rows(3.0, 6.0))
    words = p03.small_model_words(v, {}, "holds")
    assert "costs the small model less than it costs the 4B" in words
    assert "the cause is open" not in words


def test_no_small_model_no_words():
    assert p03.small_model_words(_view(MAIN), {}, "not measured") == ""


def test_the_small_cliff_claim_does_not_blame_a_fixed_cost():
    (claim,) = [c for c in p03.CLAIMS if c.id == "small-cliff"]
    assert "gains less from sharing" not in claim.why


# --- the findings box and the post's take-aways, on the repository's data -------------------------------------


def _page_views():
    from inference_wall import parts
    from inference_wall.measure.claims import evaluate
    from inference_wall.parts import p01
    from inference_wall.run.rig import load_profile
    from inference_wall.schema import PUBLISHED_RIG

    shown = parts.page_rigs(3)
    facts = p03.reference_view()

    def of(rig):
        return rig if rig == PUBLISHED_RIG else (load_profile(rig).repeat_of or rig)

    rigs1 = sorted({of(r) for r in shown})
    t1 = p01.page_tables(None, rigs1)
    v1 = {r: p01.rig_view(r, None, t1) for r in rigs1}
    table = p03.sweep_table(None, shown)
    spread = p03.run_to_run(table)
    views = {r: p03.rig_view(table, r, v1[of(r)], facts, spread) for r in shown}
    verdict = evaluate(p03.CLAIMS, views, facts).set_index(["claim", "rig"])["verdict"]
    return views, facts, verdict


def test_findings_box_gives_the_cliff_of_the_table_and_the_correction():
    from test_p01_words import readable

    views, facts, _ = _page_views()
    found = p03.key_findings(views, facts)
    assert 3 <= len(found) <= 5 and all(readable(b) for b in found)
    table = p03.rig_table(views, {}).set_index("rig")
    for rig, x in table["cliff_x"].items():  # the box's cliff is the table's
        assert f"{rig} " in found[0] and f"{fmt_num(x)}x" in found[0]
    assert any("admission limit" in b for b in found)


def test_the_box_says_the_flat_top_is_not_the_models_term_only_where_the_plateau_claim_differs_below_it():
    from inference_wall.schema import PUBLISHED_RIG

    views, facts, verdict = _page_views()
    if verdict.get(("plateau-gain", PUBLISHED_RIG)) != "differs":
        pytest.skip("the A10G's plateau-gain claim does not differ")
    assert any("the flat top is not that model's per-sequence term alone" in b for b in p03.key_findings(views, facts))
    steeper = {**views, PUBLISHED_RIG: {**views[PUBLISHED_RIG], "gain_64_to_256_pct": 1000.0}}
    said = p03.key_findings(steeper, facts)
    assert not any("flat top is not" in b for b in said)
    assert any("(claim plateau-gain: differs)" in b for b in said)


def test_the_ceiling_takeaway_says_a_cap_past_the_ceiling_cost_throughput_where_a_rig_lost_some():
    views, facts, verdict = _page_views()
    past = p03._past_ceiling(views)
    if not past:
        pytest.skip("no shown rig ran a cap past its ceiling cap")
    _, said = p03.takeaways(views, facts, verdict)[1]
    assert "a larger cap cost throughput, where the post has it buy nothing" in said
    assert all(f"{r}'s cap {v['caps'][-1]:,.0f} made" in said for r, v in past)


def test_takeaways_mark_each_of_the_posts_four_with_the_data():
    from test_p01_words import readable

    views, facts, verdict = _page_views()
    items = p03.takeaways(views, facts, verdict)
    assert len(items) == 4 and all(readable(data) for _, data in items)
    small = [v for r, v in views.items() if v.get("small_cliff_ratio")]
    if small:
        v = small[0]
        assert p03.cliff_comparison(v["small_cliff_ratio"], p03.cliff(v["sweep"], *v["small_caps"])) in items[2][1]


def test_a_rig_whose_models_share_no_caps_renders_without_the_comparison():
    """A GPU call's tree holds only the points it ran (session 16's fourth call: the 0.5B's caps 4 and 16, no 4B):
    the page says nothing comparing the two cliffs, and the small-cliff claim is not measured, instead of failing."""
    from inference_wall.measure.claims import NOT_MEASURED, evaluate

    def p99(rows):
        return [dict(r, itl_p99_ms=2 * r["itl_p50_ms"]) for r in rows]

    small = p99(_rows("syn", "small", [4, 16], [1480, 4670], [2.4, 2.8]))
    main = p99(_rows("syn", "main", [64, 256], [6000, 8600], [6.7, 17.8]))
    for rows in (small, main + small):
        v = _view(rows)
        assert v["main_cliff_same_caps"] is None and v["small_caps"] == (4.0, 16.0)
        assert p03.small_model_words(v, {}, "x") == ""
        views = {"syn": v}
        assert not any("0.5B" in d for _, d in p03.takeaways(views, {}))
        assert not any("small" in f for f in p03.key_findings(views, {}))
        (claim,) = [c for c in p03.CLAIMS if c.id == "small-cliff"]
        assert evaluate([claim], {"syn": v}).iloc[0]["verdict"] == NOT_MEASURED
    v = _view(_rows("syn", "main", [4, 16, 64], [650, 2400, 6000], [4.5, 4.9, 6.7]) + small)
    assert v["main_cliff_same_caps"] == pytest.approx(2400 / 650)  # the caps both ran: 4 to 16


def test_the_small_cliff_is_one_definition_in_the_claim_the_box_and_the_takeaway():
    """Both models' cliffs are their best cap over cap 1, over the same caps: a small model whose throughput falls past
    its best cap is not read at its top cap (h200's 0.5B at 1,024 once gave 32.6x against the 4B's best-cap 40.1x in
    the box, and the claim compared it with the 4B's 29.1x at cap 1,024)."""
    views, facts, verdict = _page_views()
    for rig, v in views.items():
        if not v.get("small_cliff_ratio"):
            continue
        lo, hi = v["small_caps"]
        assert hi <= v["sweep"]["max_num_seqs"].max()  # caps both ran: h200's 0.5B also ran 4,096, the 4B did not
        assert lo in set(v["sweep"]["max_num_seqs"]) and hi in set(v["small"]["max_num_seqs"])
        assert v["small_cliff_ratio"] == pytest.approx(p03.cliff(v["small"], lo, hi))
        (claim,) = [c for c in p03.CLAIMS if c.id == "small-cliff"]
        j = claim.judge(v)
        assert j.predicted.value == pytest.approx(p03.cliff(v["sweep"], lo, hi))
        assert j.measured.value == pytest.approx(v["small_cliff_ratio"])


def test_the_small_cliff_words_follow_the_claim_s_band():
    assert p03.cliff_comparison(45.0, 40.0) == "steeper, as the post found"
    assert p03.cliff_comparison(39.7, 40.1).startswith("about as steep")
    assert p03.cliff_comparison(30.0, 40.0) == "shallower, not steeper"


def test_the_page_s_warnings_name_the_short_and_the_unpolled_floods():
    table = pd.DataFrame({"rig": ["h200", "h200", "a10g-published"], "model": ["main", "small", "main"],
                          "max_num_seqs": [64.0, 1024.0, 256.0], "source": ["measured", "measured", "published"],
                          "window_s": [1.5, 30.0, 9.0], "min_window_s": [2.0, 2.0, 0.0],
                          "steady_polled": [True, False, False]})
    assert p03.short_window_words(table) == ("**Warning:** these measured passes lasted less than the part's minimum "
                                             "window and are too short to call steady: h200 cap 64 (1.5 s)")
    said = p03.unpolled_words(table)
    assert said.startswith("*Not polled (run before the book polled floods): h200, 0.5B at cap 1,024.")
    assert "a10g" not in said
    assert p03.unpolled_words(table.assign(steady_polled=True)) == "" and p03.short_window_words(table.iloc[1:]) == ""


def test_the_predicted_line_stops_at_each_rig_s_top_cap_and_uses_the_step_model():
    from inference_wall.measure.analysis import step_model_tok_s

    fits = {"a": {"fit_intercept_ms": 20.0, "fit_slope_ms": 0.5}, "b": {"fit_intercept_ms": None}}
    rows = p03.predicted_rows(fits, {"a": {"caps": [1, 16]}, "b": {"caps": []}})
    assert list(rows["max_num_seqs"]) == [1, 2, 4, 8, 16] and set(rows["rig"]) == {"a"}
    assert rows["output_tok_s"].iloc[-1] == step_model_tok_s(20.0, 0.5, 16) == 16 / 28 * 1000
