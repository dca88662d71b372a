"""Mechanism claims: the verdict rule, each claim on synthetic data where it must hold and where it must fail,
and the committed data (the published rig judged from the post's own inputs)."""
import math

import numpy as np
import pandas as pd
import pytest

from inference_wall.measure import analysis
from inference_wall.measure.analysis import Interval
from inference_wall.measure.claims import (DIFFERS, HOLDS, INCONCLUSIVE, NOT_MEASURED, VERDICTS, Claim, Judgement, evaluate,
                                   judge_contains, judge_ratio, verdict_matrix)
from inference_wall.model.kvcache import KVPool, ModelLayout
from inference_wall.parts import p01, p03

I = Interval.exact
A, B = 19.1, 0.31  # a step model for the synthetic rigs (ms, ms per sequence)


def model_tok_s(batch):
    return batch / (A + B * batch) * 1000


def part1_view(**change):
    """A synthetic rig on which every part 1 claim holds; `change` perturbs one input."""
    rng = np.random.default_rng(0)
    batches = np.array([1, 8, 16, 32, 64, 128], float)
    steps = A + B * batches + rng.normal(0, 0.05, len(batches))
    pool = KVPool(586, 528, ModelLayout(1, 3), 586, 586, "test")
    v = {"rig": "synthetic", "post": {"prefill_gpu_share": 50.0}, "output_len": 128, "request_tokens": 384,
         "weights_gib": I(8.61), "vision_gib": 0.62, "bandwidth_gb_s": I(483.0), "floor_all_weights_ms": 19.1,
         "single_itl_ms": I(20.0), "single_ttft_ms": I(96.0),
         "decode": pd.DataFrame({"batch": batches, "step_ms": steps}),
         "fit": analysis.linear_fit(batches, steps), "pool": pool, "admission": I(146), "max_num_seqs": 256,
         "flood_running": I(146), "flood_tok_s": I(0.5 * model_tok_s(146)), "flood_rps": I(8.5),
         "last_kept_up_rps": 8.0, "knee_rps": 9.0,
         "low_rate_rps": I(1.0), "low_time_in_system_ms": I(2600.0), "low_running": I(2.6), "low_time_source": "test",
         "warm_p50_ms": I(95.0), "cold_p50_ms": I(98.0), "warm_p99_ms": I(138.0), "cold_p99_ms": I(29000.0)}
    v.update(change)
    return v


def part3_view(**change):
    """A synthetic rig whose sweep follows part 1's view: cap 1 serves one request at a time, cap 256 matches
    part 1's flood, and the running batch is min(cap, the pool's 146)."""
    p1 = part1_view()
    p1["fit"] = analysis.LinearFit.published(A, B)
    caps = [1.0, 4.0, 16.0, 64.0, 256.0, 1024.0]
    top = p1["flood_tok_s"].value
    tok = {1.0: I(128 * 1000 / (96.0 + 127 * 20.0)), 4.0: I(top / 8), 16.0: I(top / 3),
           64.0: I(top * model_tok_s(64) / model_tok_s(146)), 256.0: I(top), 1024.0: I(top)}
    v = {"rig": "synthetic", "caps": caps, "part1": p1, "post": {}, "tok_s": tok, "rps": {256.0: I(8.5)},
         "itl_p50": {256.0: I(A + B * 146)}, "running": {c: I(min(c, 146)) for c in caps}, "plateau_cap": 64.0,
         "small_cliff": I(2 * top / tok[1.0].value), "small_caps": (1.0, 256.0), "graph_max_batch": {}}
    v.update(change)
    return v


# For every claim: (a view where it must hold, a view where it must differ). A new claim without an entry fails
# test_every_claim_has_a_pair.
def _pairs():
    p1, p3 = part1_view, part3_view
    base3 = p3()
    return {
        "roofline": (p1(), p1(single_itl_ms=I(40.0))),
        "step-linear": (p1(), p1(decode=p1()["decode"].assign(step_ms=lambda d: d["step_ms"].where(d["batch"] < 128, 120.0)))),
        "ceiling": (p1(), p1(flood_tok_s=I(model_tok_s(146)))),
        "running-flood": (p1(), p1(flood_running=I(256))),
        "knee": (p1(), p1(last_kept_up_rps=2.0, knee_rps=3.0)),
        "littles-law": (p1(), p1(low_running=I(1.0))),
        "cold-median": (p1(), p1(cold_p50_ms=I(6000.0))),
        "cold-tail": (p1(), p1(cold_p99_ms=I(150.0))),
        "cap1": (base3, p3(tok_s={**base3["tok_s"], 1.0: I(20.0)})),
        "cliff": (base3, p3(tok_s={**base3["tok_s"], 256.0: I(3 * base3["tok_s"][256.0].value)})),
        "consistency": (base3, p3(rps={256.0: I(12.0)})),
        "running-cap": (base3, p3(running={**base3["running"], 1024.0: I(1024)})),
        "plateau-crossover": (p3(plateau_cap=64.0), p3(plateau_cap=4.0)),
        "plateau-gain": (base3, p3(tok_s={**base3["tok_s"], 256.0: I(base3["tok_s"][64.0].value * 1.02)})),
        "past-cap": (base3, p3(tok_s={**base3["tok_s"], 1024.0: I(0.7 * base3["tok_s"][256.0].value)})),
        "itl-batch": (base3, p3(itl_p50={256.0: I(200.0)})),
        "small-cliff": (base3, p3(small_cliff=I(0.5 * base3["tok_s"][256.0].value / base3["tok_s"][1.0].value))),
    }


ALL_CLAIMS = {c.id: c for c in [*p01.CLAIMS, *p03.CLAIMS]}


def test_every_claim_has_a_pair():
    assert set(_pairs()) == set(ALL_CLAIMS)
    assert len(ALL_CLAIMS) == len(p01.CLAIMS) + len(p03.CLAIMS)  # ids are unique


@pytest.mark.parametrize("claim_id", sorted(ALL_CLAIMS))
def test_each_claim_holds_and_fails_on_synthetic_data(claim_id):
    """Every claim's verdict moves with its input: it holds on one synthetic rig and differs on a perturbed one."""
    holds_view, differs_view = _pairs()[claim_id]
    claim = ALL_CLAIMS[claim_id]
    good, bad = claim.evaluate(holds_view), claim.evaluate(differs_view)
    assert good["verdict"] == HOLDS, (good["predicted"], good["measured"], good["how"])
    assert bad["verdict"] == DIFFERS, (bad["predicted"], bad["measured"], bad["how"])
    assert good["predicted"] and good["how"]
    assert bad["note"]  # a rig where it differs is told why it can


@pytest.mark.parametrize("claim_id", sorted(ALL_CLAIMS))
def test_a_missing_input_reads_not_measured(claim_id):
    row = ALL_CLAIMS[claim_id].evaluate({"rig": "empty", "part1": {}, "post": {}})
    assert row["verdict"] == NOT_MEASURED and row["measured"] == "" and "nan" not in row["how"].lower()


def test_verdict_rule():
    band = (0.9, 1.1)
    assert judge_ratio(I(10), I(10.5), band)[0] == HOLDS
    assert judge_ratio(I(10), I(20), band)[0] == DIFFERS
    assert judge_ratio(I(10), Interval(10.5, 10.0, 12.0), band)[0] == INCONCLUSIVE  # the range spans an edge
    assert judge_ratio(Interval(10, 5, 20), I(10), band)[0] == INCONCLUSIVE  # uncertainty wider than the band
    assert judge_ratio(I(10), I(100), (3.0, math.inf))[0] == HOLDS
    # a prediction whose range reaches zero (a fit on few noisy points) bounds the ratio from below only
    assert judge_ratio(Interval(7.6, -45.0, 49.0), I(10), band)[0] == INCONCLUSIVE
    assert judge_ratio(Interval(7.6, -45.0, 49.0), I(1000), band)[0] == DIFFERS  # even the largest prediction is far off
    assert judge_ratio(Interval(-1.0, -2.0, -0.5), I(10), band)[0] == INCONCLUSIVE
    assert judge_contains(Interval(61, 60, 62), Interval(40, 16, 64)) == HOLDS
    assert judge_contains(Interval(61, 60, 62), Interval(200, 64, 256)) == DIFFERS
    assert judge_contains(Interval(60, 30, 100), Interval(160, 64, 256)) == INCONCLUSIVE


def test_printed_figures_carry_their_rounding():
    assert Interval.printed(483) == Interval(483, 482.5, 483.5)
    assert Interval.printed(8.61).low == pytest.approx(8.605)
    assert Interval.printed(0.31).high == pytest.approx(0.315)
    with pytest.raises(ValueError):
        Interval(1.0, 2.0, 3.0)


def test_fit_intervals_cover_the_truth_and_shrink_with_noise():
    x = np.array([1, 8, 16, 32, 64, 128, 256], float)
    rng = np.random.default_rng(3)
    noisy = analysis.linear_fit(x, 3 + 0.05 * x + rng.normal(0, 0.5, len(x)))
    quiet = analysis.linear_fit(x, 3 + 0.05 * x + rng.normal(0, 0.01, len(x)))
    for fit in (noisy, quiet):
        s = fit.step_ms(200)
        assert s.low < 3 + 0.05 * 200 < s.high
    assert quiet.step_ms(200).high - quiet.step_ms(200).low < noisy.step_ms(200).high - noisy.step_ms(200).low


def test_the_crossover_is_not_the_plateau():
    # at batch a/b the model gives half its asymptote, and still gains a third per doubling
    a, b = 19.1, 0.31
    cross = a / b
    assert (cross / (a + b * cross)) / (1 / b) == pytest.approx(0.5)
    assert (2 * cross / (a + 2 * b * cross)) / (cross / (a + b * cross)) == pytest.approx(4 / 3)
    p = analysis.plateau_batch_of_fit(a, b, 0.05)
    assert p == pytest.approx(9.5 * cross)
    gain = (2 * p / (a + 2 * b * p)) / (p / (a + b * p)) - 1
    assert gain == pytest.approx(0.05)


def test_block_size_and_vision_tower_from_the_config():
    import json

    from inference_wall.model.modelkit import preset_dir

    config = json.loads((preset_dir("qwen3.5-4b") / "config.json").read_text())
    assert analysis.hybrid_block_size(config["text_config"]) == 528  # what vLLM 0.22.1 logs for this model
    tower_gib = analysis.vision_tower_params(config) * 2 / analysis.GIB
    assert 0.55 < tower_gib < 0.7
    assert analysis.vision_tower_params(config["text_config"]) == 0


# ---------------------------------------------------------------------------------------------
# Committed data
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def published():
    tables = p01.page_tables(None, ["a10g-published"])
    v1 = p01.rig_view("a10g-published", None, tables)
    rows1 = evaluate(p01.CLAIMS, {"a10g-published": v1}, p01.claim_facts())
    table = p03.sweep_table(None, ["a10g-published"])
    facts3 = p03.reference_view()
    rows3 = evaluate(p03.CLAIMS, {"a10g-published": p03.rig_view(table, "a10g-published", v1, facts3)}, facts3)
    return v1, rows1.set_index("claim"), rows3.set_index("claim")


def test_the_published_pool_is_the_posts_log(published):
    v1, rows1, _ = published
    pool = v1["pool"]
    assert (pool.num_blocks, pool.block_size, v1["admission"].value) == (586, 528, 146)
    # the log's token count agrees: the pool shared among the model's four layer groups, in 528-token pages
    groups = pool.layout.attention_groups + pool.layout.state_groups
    assert pool.num_blocks // groups * pool.block_size == v1["memory"]["kv_cache_tokens"]
    assert rows1.loc["running-flood", "verdict"] == HOLDS


def test_published_verdicts_follow_the_posts_own_numbers(published):
    _, rows1, rows3 = published
    for claim in ("roofline", "ceiling", "cold-median", "cold-tail"):
        assert rows1.loc[claim, "verdict"] == HOLDS, rows1.loc[claim]
    assert rows1.loc["step-linear", "verdict"] == NOT_MEASURED  # the post gives only its fit
    assert rows1.loc["littles-law", "verdict"] == DIFFERS  # 'about 1' at rate 1 against ~2.6 in flight
    for claim in ("cap1", "cliff", "consistency", "running-cap", "small-cliff"):
        assert rows3.loc[claim, "verdict"] == HOLDS, rows3.loc[claim]
    assert rows3.loc["plateau-gain", "verdict"] == DIFFERS  # the model predicts a climb past 64; the post measured <4%
    assert rows3.loc["past-cap", "verdict"] == NOT_MEASURED


def test_every_rig_gets_a_verdict_in_words():
    from inference_wall.parts import page_rigs

    rigs = page_rigs(1)
    tables = p01.page_tables(None, rigs)
    views = {r: p01.rig_view(r, None, tables) for r in rigs}
    rows = evaluate(p01.CLAIMS, views, p01.claim_facts())
    assert set(rows["verdict"]) <= set(VERDICTS)
    assert len(rows) == len(rigs) * len(p01.CLAIMS)
    for col in ("predicted", "measured", "how", "post"):
        assert not rows[col].astype(str).str.contains(r"\bnan\b", case=False).any(), col
    assert not rows["post"].str.contains("{", regex=False).any()
    matrix = verdict_matrix(rows)
    assert list(matrix.columns[2:]) == rigs


def test_a_claim_that_cannot_fail_is_caught():
    """The pair test above would catch a claim whose verdict ignores its input: show it on a constant claim."""
    constant = Claim("const", "s", "m", "x", lambda v: Judgement(I(1.0), I(1.0), "1 = 1"), (0.9, 1.1))
    verdicts = {constant.evaluate(v)["verdict"] for v in (part1_view(), part1_view(single_itl_ms=I(40.0)))}
    assert verdicts == {HOLDS}


def test_no_rig_shown_gives_no_rows_and_the_tables_still_build():
    """A page run for a rig with no point its claims read (a traced point alone) shows empty claim tables."""
    from inference_wall.measure.claims import ROW_COLUMNS, details, evaluate, notes, verdict_matrix
    from inference_wall.parts import p02

    rows = evaluate(p02.CLAIMS, {})
    assert list(rows.columns) == ROW_COLUMNS and not len(rows)
    assert not len(verdict_matrix(rows)) and not len(details(rows)) and notes(rows) == []
    assert all(set(c.evaluate({"rig": "r"})) == set(ROW_COLUMNS) for c in p02.CLAIMS)  # no key of a row is dropped
