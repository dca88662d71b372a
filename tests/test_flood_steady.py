"""steady.flood_steady on synthetic poll frames (a flood's plateau at the cap, and the passes that have none), its
reading of a point's poll artefact (steady.point_steady), and the plans of parts 1, 3, 5 and 6 polling their floods
without changing what makes a committed point."""
from __future__ import annotations

import json
import lzma
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from inference_wall import parts
from inference_wall.records import poller
from inference_wall.run.bench import Workload
from inference_wall.parts import p01, p03, p05, p06
from inference_wall.run.rig import RigProfile, load_profile
from inference_wall.measure.steady import (MIN_FLOOD_STEPS, MIN_INTERVALS, STEADY_COLUMNS, flood_steady, point_steady,
                                   point_steady_row, steady_window)
from inference_wall.records.store import rig_dir
from inference_wall.run.sweep import SettingsSource, changed_points, point_settings

DT = 0.25  # seconds between polls
STEPS = 10  # engine steps per poll interval (per engine): a 25 ms step


def frame_of(running: list[float], engines: int = 1, steps: list[int] | None = None,
             prompt_len: int = 256) -> pd.DataFrame:
    """A poll frame (poller.POLL_COLUMNS) of a pass whose running batch is `running` at each poll: between two polls
    each engine takes STEPS steps (or `steps[i]` in all), each running sequence makes a token a step, and every
    sequence the batch gains counts its prompt."""
    rows, gen, prompt, n = [], 0.0, 0.0, 0.0
    for i, r in enumerate(running):
        if i:
            step = STEPS * engines if steps is None else steps[i - 1]
            n += step
            gen += min(r, running[i - 1]) * step / engines
            prompt += max(0.0, r - running[i - 1]) * prompt_len
        rows.append({"t": 1e9 + i * DT, "t_s": i * DT, "running": float(r), "waiting": 0.0, "kv_usage_pct": 0.0,
                     "preemptions_total": 0.0, "prompt_tokens_total": prompt, "generation_tokens_total": gen,
                     "step_tokens_total": gen + prompt, "steps_total": n})
    return pd.DataFrame(rows, columns=poller.POLL_COLUMNS).astype(float)


CAP = 64
RAMP = [0, 8, 24, 40]
DRAIN = [48, 30, 12, 2, 0]


def test_a_flood_with_ramp_plateau_and_drain_finds_the_plateau():
    plateau = 20  # polls at the cap: 19 intervals, 190 steps
    f = frame_of([*RAMP, *[CAP] * plateau, *DRAIN])
    w = flood_steady(f, CAP)
    assert w is not None
    assert w.t0_s == pytest.approx(len(RAMP) * DT)  # the first poll at the cap
    assert w.t1_s == pytest.approx((len(RAMP) + plateau - 1) * DT)  # the last one
    assert w.steps == (plateau - 1) * STEPS
    assert w.step_ms == pytest.approx(1000 * DT / STEPS)
    assert w.output_tok_s == pytest.approx(CAP * STEPS / DT)  # the cap's tokens each step, nothing of ramp or drain
    assert w.running_mean == CAP and w.running_min == CAP
    # the whole pass averages ramp and drain in: its rate is below the plateau's
    whole = f["generation_tokens_total"].iloc[-1] / f["t_s"].iloc[-1]
    assert whole < w.output_tok_s


def test_within_five_percent_of_the_cap_counts_as_at_it():
    near = [CAP - 4, CAP, CAP - 2, *[CAP] * 16]  # 62 is within 5% of 64, 60 is not
    f = frame_of([*RAMP, *near, *DRAIN])
    w = flood_steady(f, CAP)
    assert w is not None and w.running_min == CAP - 2
    assert w.t0_s == pytest.approx((len(RAMP) + 1) * DT)  # the run starts after the poll at 60
    wide = flood_steady(f, CAP, share=0.9)  # within 10%: 60 too
    assert wide.running_min == CAP - 4 and wide.t0_s == pytest.approx(len(RAMP) * DT)


def test_waves_that_empty_between_cohorts_have_no_window():
    waves = [0, CAP, CAP, 0] * 8  # at the cap one interval at a time
    f = frame_of(waves)
    assert flood_steady(f, CAP) is None


def test_a_plateau_of_too_few_steps_has_no_window():
    polls = MIN_FLOOD_STEPS // STEPS - 2  # fewer intervals at the cap than MIN_FLOOD_STEPS steps take
    assert polls - 1 >= MIN_INTERVALS  # long enough in intervals: the steps decide
    f = frame_of([*RAMP, *[CAP] * polls, *DRAIN])
    assert flood_steady(f, CAP) is None
    w = flood_steady(f, CAP, min_steps=(polls - 1) * STEPS)
    assert w is not None and w.steps == (polls - 1) * STEPS


def test_a_batch_that_never_reaches_the_cap_has_no_window():
    held = int(0.9 * CAP)  # a long plateau, below the cap (the KV pool bounding the batch, say)
    f = frame_of([*RAMP[:3], *[held] * 40, *DRAIN[1:]])
    assert flood_steady(f, CAP) is None
    assert steady_window(f) is not None  # a plateau there is, not at the cap
    assert flood_steady(f, held) is not None


def test_intervals_in_which_the_engine_does_not_step_are_not_steady():
    running = [*RAMP, *[CAP] * 30, *DRAIN]
    steps = [STEPS] * (len(running) - 1)
    steps[len(RAMP) + 10] = 0  # the engine stalls once, 10 intervals into the plateau's 29
    w = flood_steady(frame_of(running, steps=steps), CAP)
    assert w is not None and w.steps == 18 * STEPS  # the longer side of the stall
    assert w.t0_s == pytest.approx((len(RAMP) + 11) * DT)


def test_replicas_sum_their_counters_and_the_step_is_one_engine_s():
    w = flood_steady(frame_of([*RAMP, *[2 * CAP] * 20, *DRAIN], engines=2), CAP, engines=2)
    assert w is not None
    assert w.step_ms == pytest.approx(1000 * DT / STEPS)
    assert w.steps == 19 * STEPS
    assert w.output_tok_s == pytest.approx(2 * CAP * STEPS / DT)
    assert flood_steady(frame_of([*RAMP, *[CAP] * 20, *DRAIN], engines=2), CAP, engines=2) is None  # one engine's worth


def test_an_empty_or_single_poll_frame_has_no_window():
    assert flood_steady(frame_of([]), CAP) is None
    assert flood_steady(frame_of([CAP]), CAP) is None


# -------------------------------------------------------------------------- a point's poll artefact
def _metrics_text(row: dict) -> str:
    return "\n".join([
        f'vllm:num_requests_running{{engine="0"}} {row["running"]}',
        f'vllm:num_requests_waiting{{engine="0"}} {row["waiting"]}',
        'vllm:kv_cache_usage_perc{engine="0"} 0.5',
        'vllm:num_preemptions_total{engine="0"} 0.0',
        f'vllm:prompt_tokens_total{{engine="0"}} {row["prompt_tokens_total"]}',
        f'vllm:generation_tokens_total{{engine="0"}} {row["generation_tokens_total"]}',
        f'vllm:iteration_tokens_total_sum{{engine="0"}} {row["step_tokens_total"]}',
        f'vllm:iteration_tokens_total_count{{engine="0"}} {row["steps_total"]}'])


def test_point_steady_reads_the_poll_artefact_and_none_where_not_polled(tmp_path, monkeypatch):
    monkeypatch.setenv("IW_CACHE_DIR", "off")
    pt = SimpleNamespace(path=tmp_path, params={}, record=SimpleNamespace(max_num_seqs=CAP))
    assert point_steady(pt) is None
    row = point_steady_row(pt)
    assert list(row) == STEADY_COLUMNS and row["steady_polled"] is False
    assert all(math.isnan(row[c]) for c in STEADY_COLUMNS[1:])

    f = frame_of([*RAMP, *[CAP] * 20, *DRAIN])
    with lzma.open(tmp_path / poller.artefact_name("bench"), "wt") as out:
        for r in f.to_dict("records"):
            out.write(json.dumps({"t0": r["t"], "t1": r["t"], "status": 200, "text": _metrics_text(r)}) + "\n")
    w = point_steady(pt)
    assert w is not None and w == flood_steady(f, CAP)
    row = point_steady_row(pt)
    assert row["steady_polled"] is True and row["steady_output_tok_s"] == pytest.approx(w.output_tok_s)
    assert row["steady_step_ms"] == pytest.approx(w.step_ms) and row["steady_running_mean"] == CAP

    pt.record.max_num_seqs = 2 * CAP  # a cap the batch never reached: polled, no window
    row = point_steady_row(pt)
    assert row["steady_polled"] is True and math.isnan(row["steady_output_tok_s"])


# -------------------------------------------------------------------------- the plans poll their floods
def _flood(point) -> bool:
    """A flood: every request admitted at once (no rate, no concurrency limit) on a measured pass."""
    return any(p.kind == "measured" and p.spec.request_rate in (None, math.inf) and not p.spec.max_concurrency
               for p in point.passes) and point.resolve is None


@pytest.mark.parametrize("mod", [p01, p03, p05, p06])
def test_every_flood_of_the_plan_polls_its_measured_pass_and_nothing_else_does(mod):
    plans = mod.plan(dict(mod.DEFAULTS), RigProfile(name="x"))
    floods = [p for p in plans if _flood(p)]
    assert floods
    assert all(p.poll_metrics_s == mod.DEFAULTS["poll_s"] == 0.25 for p in floods)
    assert all(p.poll_metrics_s is None for p in plans if not _flood(p))  # rates, single streams, decode batches
    kinds = {p.params.get("kind") for p in floods}
    assert kinds <= {"rate", "flood", None}
    if mod is p01:
        assert [p.name for p in floods] == ["flood"]
    if mod is p03:
        assert len(floods) == len(plans)


@pytest.mark.parametrize("mod", [p01, p03, p05, p06])
def test_the_poll_interval_is_a_parameter_and_not_a_setting_of_the_point(mod):
    profile = RigProfile(name="x")
    src = SettingsSource([], {}, profile, Workload(mod.DEFAULTS["input_len"], mod.DEFAULTS["output_len"]))
    a = mod.plan(dict(mod.DEFAULTS), profile)
    b = mod.plan({**mod.DEFAULTS, "poll_s": 1.0}, profile)
    assert {p.poll_metrics_s for p in b if _flood(p)} == {1.0}
    assert [point_settings(p, src) for p in a] == [point_settings(p, src) for p in b]


@pytest.mark.parametrize("part", [1, 3, 5])
def test_committed_h200_points_still_plan_as_they_were_made(part):
    profile = load_profile("h200")
    params = parts.parameters(part, "h200")
    plans = parts.plan(part, "h200")
    assert any(p.poll_metrics_s for p in plans)
    src = SettingsSource(list(parts.SERVE_ARGS), dict(parts.SERVER_ENV), profile,
                         Workload(params["input_len"], params["output_len"]))
    assert changed_points(plans, rig_dir(part, "h200"), src) == {}


def test_part4s_floods_carry_their_steady_window_beside_the_whole_pass():
    import math

    from inference_wall.parts import p04

    t = p04.point_table(None, ["h200"])
    if not len(t):
        pytest.skip("no part-4 h200 runs committed")
    rated = t[~t["offered_rate_rps"].map(math.isinf)]
    assert rated["steady_output_tok_s"].isna().all()  # a pass at a finite rate has no flood window
    held = t.dropna(subset=["steady_output_tok_s"])
    # held at the cap, or at what the pool admits where that is fewer
    batch = held[["max_num_seqs", "admitted"]].min(axis=1)
    assert ((held["steady_running_mean"] >= 0.95 * batch) & (held["steady_step_ms"] > 0)).all()
    words = p04.steady_words(t)
    assert words and "nan" not in words.lower()
    assert f"{len(t) - len(held) - len(rated)} of" in words or not (len(t) - len(held) - len(rated))


def test_flood_phases_split_the_working_time_by_what_the_steps_did():
    """A ramp (prompt tokens counted: mixed), a plateau of pure decode, a stretch where requests run and the step
    counter stands still, and a stretch where the engine has free slots and nothing waiting."""
    from inference_wall.measure.steady import flood_phases

    running = [0, 0, 32, CAP, *[CAP] * 8, *[CAP] * 4, *[8] * 4, 0, 0]
    steps = [0, STEPS, STEPS, *[STEPS] * 8, *[0] * 4, *[STEPS] * 4, STEPS, 0]
    f = frame_of(running, steps=steps)
    ph = flood_phases(f, CAP)
    active = [i for i in range(len(running) - 1) if running[i] > 0 or steps[i] > 0]
    assert ph["phase_active_s"] == pytest.approx(len(active) * DT)
    assert ph["phase_mixed_share"] == pytest.approx(2 * DT / ph["phase_active_s"])  # the two ramp intervals
    assert ph["phase_stalled_s"] == pytest.approx(4 * DT)  # running at the cap, the counter still
    # under the cap with nothing waiting: the ramp's two intervals (the frame has no queue) and the four at 8 of 64
    assert ph["phase_starved_share"] == pytest.approx(6 * DT / ph["phase_active_s"])
    assert ph["phase_decode_step_ms"] == pytest.approx(1000 * DT / STEPS)
    assert flood_phases(f.iloc[:1], CAP)["phase_active_s"] != flood_phases(f.iloc[:1], CAP)["phase_active_s"]  # NaN


def test_part3s_polled_floods_read_inside_the_pass_and_a_partial_run_renders():
    """The committed h200 floods that were polled give each a rate over the engine's working time and sentences
    with numbers; a view without the series' top cap (a partial --points run) gives no past-cap sentence instead of
    a KeyError (session 11's GPU call failed its notebook on one)."""
    t = p03.sweep_table(None, ["h200"])
    polled = t[t["steady_polled"]]
    if not len(polled):
        pytest.skip("no polled part-3 floods committed")
    assert polled["phase_active_tok_s"].gt(0).all()
    words = p03.steady_words(t, "h200")
    assert words and not any("nan" in w.lower() for w in words)
    for c in polled[polled["model"] == "main"]["max_num_seqs"]:
        assert f"cap {c:,.0f}" in words[0]
    partial = t[(t["model"] == "main") & (t["max_num_seqs"] != p03.REF_CAP)]
    view = p03.rig_view(partial, "h200")
    assert p03.REF_CAP not in view["caps"] and p03.past_cap_words(view, "differs") is None


def test_part3s_findings_cite_the_polled_floods_and_fall_back_without_them():
    t = p03.sweep_table(None, ["h200"])
    facts = p03.reference_view()
    polled = t[t["steady_polled"]]
    if not {p03.REF_CAP} <= set(polled[polled["model"] == "small"]["max_num_seqs"]):
        pytest.skip("the small model's polled flood at the top cap is not committed")
    bullets = p03.key_findings({"h200": p03.rig_view(t, "h200", None, facts)}, facts)
    small = next(b for b in bullets if "0.5B" in b)
    assert "free slots and nothing waiting" in small and "not yet measured" not in small
    unpolled = t.assign(**{c: math.nan for c in t.columns if c.startswith("phase_")})
    bullets = p03.key_findings({"h200": p03.rig_view(unpolled, "h200", None, facts)}, facts)
    small = next(b for b in bullets if "0.5B" in b)
    assert "not yet measured" in small and not any("working time" in b for b in bullets)


def test_flood_window_words_say_which_floods_have_a_window_and_which_have_only_their_whole_pass():
    from inference_wall.measure.steady import flood_window_words, steady_row

    window = flood_steady(frame_of([0, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 256, 0]), 256)
    assert window is not None
    rows = pd.DataFrame([
        {"flood": "A", "output_tok_s": 5000.0, **steady_row(window, True)},
        {"flood": "B", "output_tok_s": 4000.0, **steady_row(None, True)},
        {"flood": "C", "output_tok_s": 3000.0, **steady_row(None, False)},
    ])
    words = flood_window_words(rows, "flood")
    a, b, c = words.split("; ")
    assert f"{window.output_tok_s:,.0f} tok/s in its steady window" in a and "5,000 tok/s over the client's whole pass" in a
    assert f"{window.steps:,.0f} steps" in a and "256 running" in a
    assert "B: polled, but its running batch never held at the cap" in b and "4,000 tok/s" in b
    assert "C: not polled" in c and "3,000 tok/s" in c
    assert "nan" not in words.lower()
    assert flood_window_words(rows.iloc[0:0], "flood") is None


def test_parts_1_and_5_name_each_measured_flood_in_their_steady_words():
    from inference_wall.parts import variants

    rates = p01.rate_table(rigs=["a10g-published", "h200"])
    words = p01.flood_steady_words(rates)
    assert words is not None and "h200's flood" in words and "a10g-published" not in words
    points = variants.point_table(part=p05.NAME, rigs=["h200"])
    five = variants.flood_steady_words(points, "h200")
    floods = points[points["kind"] == "flood"]
    assert five.count(" at cap ") == len(floods) and "nan" not in five.lower()
    assert variants.flood_steady_words(points, "no-such-rig") is None
