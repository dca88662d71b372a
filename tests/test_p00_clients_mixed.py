"""Part 0's two last components: one flood from one client against the same flood from two at once (the plan, the
pass that runs the clients together, the reader of the server's counters over their common window, the claim), and
the dense 0.5B's mixed steps (part 2's sessions in part 0's plan, read by mixedsteps beside part 2's)."""
from __future__ import annotations

import math
import sys

import pandas as pd
import pytest

from inference_wall.parts.p00 import mixed as ms
from inference_wall.run.bench import CLIENT_SEED_STRIDE, PassSpec, Workload, client_file, client_specs
from inference_wall.measure.claims import DIFFERS, HOLDS, INCONCLUSIVE, NOT_MEASURED
from inference_wall.errors import UserError
from inference_wall.parts import p00, p02
from inference_wall.run.rig import load_profile

ONE_CLAIM = next(c for c in p00.CLAIMS if c.id == "one-client")


def _plan(rig: str):
    from inference_wall import parts

    return parts.plan(0, rig)


# --- the plan ---------------------------------------------------------------------------------------------------


def test_the_h200_plan_floods_the_dense_model_from_one_client_then_two_before_its_traces():
    plans = _plan("h200")
    main = [p for p in plans if p.session == "0.5b-main"]
    names = [p.name for p in main]
    assert "0.5b-clients1-b1024" in names and "0.5b-clients2-b1024" in names
    one, two = (next(p for p in main if p.name == f"0.5b-clients{n}-b1024") for n in (1, 2))
    assert names.index(one.name) < names.index(two.name) < names.index("0.5b-trace-b0001")
    assert one.passes[0].spec.clients == 1 and two.passes[0].spec.clients == 2
    # the same flood: the same prompts in all at the server's cap, at once, the part's lengths, polled
    assert one.passes[0].spec.num_prompts == two.passes[0].spec.num_prompts == 4 * 1024
    assert all(math.isinf(p.passes[0].spec.request_rate) and p.passes[0].spec.max_concurrency is None for p in (one, two))
    assert one.workload == two.workload == Workload(256, 128)
    assert one.poll_metrics_s and two.poll_metrics_s
    # every client of the session sends prompts of its own: no seed is another pass's in the same server
    seeds = [s.seed for p in main for s in client_specs(p.passes[0].spec)]
    assert len(seeds) == len(set(seeds))
    assert one.serve_args == next(p for p in main if p.params["kind"] == "decode").serve_args  # the same server


def test_the_mixed_sessions_are_part_twos_on_the_dense_model_each_traced_last():
    plans = _plan("h200")
    mixed = [p for p in plans if p.params["kind"] in p00.MIXED_KINDS]
    q = p02.DEFAULTS
    assert [p.session for p in mixed if p.params["kind"] == "mixed-trace"] == [
        f"0.5b-mixed-{p02.config_name(b)}" for b in q["budgets"]]
    for session in dict.fromkeys(p.session for p in mixed):
        kinds = [p.params["kind"] for p in mixed if p.session == session]
        assert kinds == ["mixed", "mixed-trace"]
    for p in mixed:
        assert p.preset == "qwen2.5-0.5b" and p.params["variant"] == "0.5b"
        assert p.params["prompt_len"] == p02.trace_length(q) == 16384  # the length part 2 traced the 4B at
        assert "--enable-logging-iteration-details" in p.serve_args and "--profiler-config" in p.serve_args
        assert "/00-inside-a-step/0.5b/" in next(a for a in p.serve_args if a.startswith("{"))  # a trace folder of its own
        assert p.workload == Workload(q["input_len"], q["output_len"])
    off = next(p for p in mixed if p.name == "0.5b-mixed-off-p16384")
    assert "--no-enable-chunked-prefill" in off.serve_args
    small = next(p for p in mixed if p.name == "0.5b-mixed-b00512-trace")
    assert small.serve_args[small.serve_args.index("--max-num-batched-tokens") + 1] == "512"


@pytest.mark.parametrize("rig", ["h200", "cpu-tiny"])
def test_no_server_runs_a_point_after_its_profiler_window(rig):
    plans = _plan(rig)
    for session in dict.fromkeys(p.session for p in plans):
        kinds = [p.params["kind"] in p00.TRACED_KINDS for p in plans if p.session == session]
        assert kinds == sorted(kinds), session  # untraced first, traced last


def test_the_cpu_rig_plans_both_components_on_its_tiny_model():
    names = [p.name for p in _plan("cpu-tiny")]
    for name in ("tiny-clients1-b0004", "tiny-clients2-b0004", "tiny-mixed-off-p01024", "tiny-mixed-off-trace",
                 "tiny-mixed-b00064-p01024", "tiny-mixed-b00064-trace"):
        assert name in names


# --- the clients of one pass --------------------------------------------------------------------------------------


def test_a_pass_is_shared_by_its_clients_each_with_its_own_prompts():
    spec = PassSpec(num_prompts=5, seed=7, clients=2, detailed=False)
    a, b = client_specs(spec)
    assert (a.num_prompts, b.num_prompts) == (3, 2)
    assert (a.seed, b.seed) == (7, 7 + CLIENT_SEED_STRIDE)
    assert a.clients == b.clients == 1 and not a.detailed
    assert client_specs(PassSpec(num_prompts=5)) == [PassSpec(num_prompts=5)]
    with pytest.raises(UserError, match="cannot be shared"):
        client_specs(PassSpec(num_prompts=1, clients=2))
    assert client_file("d/bench.json", 1).name == "bench.json"
    assert client_file("d/bench.json", 2).name == "bench-client2.json"
    assert client_file("d/bench.log", 3).name == "bench-client3.log"


def test_a_sweep_runs_the_clients_of_a_pass_at_once_and_records_each(fake_vllm_env):
    import json

    from inference_wall.model.modelkit import ModelSpec
    from inference_wall.run.rig import RigProfile
    from inference_wall.run.sweep import PassPlan, PointPlan, SweepContext, run_sweep

    tmp_path = fake_vllm_env
    model = ModelSpec(preset="tiny-dense", source="dummy", model=str(tmp_path / "model"),
                      tokenizer=str(tmp_path / "model"), load_format="dummy", served_name="tiny")
    rig = RigProfile(name="fake", model_preset="tiny-dense")
    ctx = SweepContext(part="00-inside-a-step", rig=rig, rig_dir=tmp_path / "runs" / "00-inside-a-step" / "fake",
                       python=sys.executable, models={"tiny-dense": model}, workload=Workload(8, 4), progress=False,
                       startup_timeout_s=60)
    plan = [PointPlan(name="c2", session="s", max_num_seqs=4,
                      passes=[PassPlan("bench", "measured", PassSpec(num_prompts=6, seed=3, clients=2))])]
    report = run_sweep(plan, ctx)
    assert report.done == ["c2"]
    pdir = ctx.rig_dir / "c2"
    m = json.loads((pdir / "manifest.json").read_text())
    rec = m["passes"][-1]
    assert [c["result"] for c in rec["clients"]] == ["bench.json", "bench-client2.json"]
    assert [c["num_prompts"] for c in rec["clients"]] == [3, 3]
    assert [c["seed"] for c in rec["clients"]] == [3, 3 + CLIENT_SEED_STRIDE]
    assert all(rec["started"] <= c["ended"] <= rec["ended"] for c in rec["clients"])
    for c in rec["clients"]:
        assert json.loads((pdir / c["result"]).read_text())["completed"] == 3
        assert f"--seed {c['seed']}" in " ".join(c["command"])
    assert {"bench.json", "bench-client2.json", "bench.log", "bench-client2.log"} <= set(m["files"])


# --- the reader and the claim -------------------------------------------------------------------------------------


def polls(rows):
    """Poll rows (t, running, generated, steps) as poller.poll_frame returns them."""
    return pd.DataFrame([{"t": t, "t_s": t, "running": r, "waiting": 0.0, "generation_tokens_total": g,
                          "steps_total": s, "prompt_tokens_total": 0.0} for t, r, g, s in rows])


def test_the_server_rate_is_read_over_the_polls_inside_the_window():
    # idle before 10 s, then 100 steps of 64 tokens a second until 14 s, then idle again
    rows = [(t / 2, 64 if 10 <= t / 2 < 14 else 0, max(0.0, min(t / 2, 14) - 10) * 6400, max(0.0, min(t / 2, 14) - 10) * 100)
            for t in range(0, 40)]
    r = p00.window_rates(polls(rows), 10.0, 14.0)
    assert r["polls"] == 9 and r["window_s"] == pytest.approx(4.0)
    assert r["steps_per_s"] == pytest.approx(100) and r["step_ms"] == pytest.approx(10)
    assert r["tok_s"] == pytest.approx(6400) and r["tok_s_lo"] == r["tok_s_hi"] == pytest.approx(6400)
    slow = polls([(t, 64, 3200 * t if t < 2 else 6400 + 6400 * (t - 2), t) for t in range(5)])
    r = p00.window_rates(slow, 0, 4)  # 3,200 tok/s over the first half, 6,400 over the second
    assert (r["tok_s_lo"], r["tok_s_hi"]) == (pytest.approx(3200), pytest.approx(6400))
    assert math.isnan(p00.window_rates(polls(rows), 10.0, 10.6)["tok_s"])  # two polls: no window


def clients_view(one_tok_s: float, two_tok_s: float, spread: float = 0.02) -> dict:
    def row(n, tok):
        return {"rig": "r", "point": f"0.5b-clients{n}-b1024", "variant": "0.5b", "clients": n, "prompts": 4096,
                "cap": 1024, "window_s": 8.0, "polls": 80, "steps_per_s": tok / 1000, "step_ms": 1e6 / tok,
                "tok_s": tok, "tok_s_lo": tok * (1 - spread), "tok_s_hi": tok * (1 + spread), "running_mean": 1000.0,
                "clients_tok_s": tok * 0.9}
    runs = pd.DataFrame([{"rig": "r", "point": "0.5b-clients1-b1024", "client": 1, "output_tok_s": one_tok_s * 0.9},
                         {"rig": "r", "point": "0.5b-clients2-b1024", "client": 1, "output_tok_s": two_tok_s * 0.45},
                         {"rig": "r", "point": "0.5b-clients2-b1024", "client": 2, "output_tok_s": two_tok_s * 0.46}])
    return {"rig": "r", "clients": pd.DataFrame([row(1, one_tok_s), row(2, two_tok_s)], columns=p00.CLIENTS_COLUMNS),
            "client_runs": runs}


def test_the_one_client_claim_holds_differs_and_is_inconclusive_by_the_servers_rate():
    assert ONE_CLAIM.evaluate(clients_view(50_000, 51_000))["verdict"] == HOLDS
    assert ONE_CLAIM.evaluate(clients_view(50_000, 80_000))["verdict"] == DIFFERS  # the one client held the flood back
    assert ONE_CLAIM.evaluate(clients_view(50_000, 40_000))["verdict"] == DIFFERS
    assert ONE_CLAIM.evaluate(clients_view(50_000, 54_000, spread=0.1))["verdict"] == INCONCLUSIVE
    no_window = clients_view(50_000, 51_000)
    no_window["clients"].loc[1, ["tok_s", "tok_s_lo", "tok_s_hi"]] = math.nan
    assert ONE_CLAIM.evaluate(no_window)["verdict"] == NOT_MEASURED
    assert ONE_CLAIM.evaluate({"rig": "r", "clients": pd.DataFrame(columns=p00.CLIENTS_COLUMNS)})["verdict"] == NOT_MEASURED


def test_the_clients_words_and_table_carry_the_numbers_and_no_missing_value():
    view = clients_view(50_000, 80_000)
    words = p00.clients_words(view)
    assert "50,000 tok/s" in words and "80,000 tok/s" in words and "1.60x" in words
    assert "36,000 tok/s and 36,800 tok/s" in words  # what each of the two clients reported
    table = p00.clients_page_table(view)
    assert list(table["clients"]) == [1, 2]
    assert table.loc[1, "each client's output (tok/s)"] == "36,000, 36,800"
    assert "nan" not in words.lower() and "none" not in table.to_string().lower()
    assert p00.clients_words({"rig": "r", "clients": pd.DataFrame(columns=p00.CLIENTS_COLUMNS)}) is None


# --- the mixed steps, the dense model beside part 2's -------------------------------------------------------------


def mixed_rows() -> pd.DataFrame:
    def row(model, source, budget, chunk, share, itl, solo):
        r = dict.fromkeys(ms.COLUMNS, math.nan)
        r.update(rig="r", model=model, source=source, config=p02.config_label(budget), budget=budget, prompt_len=16384,
                 chunk_step_ms=chunk, prefill_share_ms=share, solo_share_ms=share, decode_itl_ms=itl, solo_chunk_step_ms=solo,
                 riding_ms=chunk - solo, sum_ms=solo + itl, step_over_sum=chunk / (solo + itl))
        return r
    return pd.DataFrame([row("qwen3.5-4b", ms.PART2, 512, 20.0, 8.0, 6.0, 17.0),
                         row("qwen3.5-4b", ms.PART2, p02.OFF, 900, 880, 6, 880),
                         row("qwen2.5-0.5b", ms.PART0, 512, 5.0, 1.5, 2.5, 4.5)], columns=ms.COLUMNS)


def test_the_sum_words_set_each_models_chunk_step_against_its_chunk_step_alone_plus_a_decode_step():
    words = ms.sum_words(mixed_rows(), "r")
    # the step beside the decodes against the same budget's step alone + one decode step, not the unchunked share
    assert ("on the qwen3.5-4b at budget 512, 20.0 ms against 17.0 + 6.00 = 23.0 ms (0.870x), the step alone 2.12x "
            "its 8.00 ms share of the unchunked prefill") in words
    assert "on the qwen2.5-0.5b at budget 512, 5.00 ms against 4.50 + 2.50 = 7.00 ms (0.714x)" in words
    assert "8.00 + 6.00 = 14.0 ms" not in words  # the old sum: a share of the prefill that no chunk step costs
    assert "the floor belongs to chunked prefill itself on this rig" in words and "candidate" in words
    assert ms.models_of(mixed_rows(), "r") == ["qwen3.5-4b", "qwen2.5-0.5b"]
    assert ms.sum_words(mixed_rows(), "other") is None
    near = mixed_rows()
    near.loc[near["budget"] == 512, "solo_chunk_step_ms"] = near["solo_share_ms"] + 1  # alone: about its share
    assert "floor belongs" not in ms.sum_words(near, "r")


def test_the_h200_page_says_the_dense_models_mixed_steps_are_not_measured_until_they_run():
    everything = ms.mixed_table(None, ["h200"])
    assert {ms.PART2, ms.PART0} <= set(everything["source"])  # session 14 ran part 0's: the page names no missing point
    assert p00.mixed_missing_words("h200", everything) is None
    mixed = everything[everything["source"] == ms.PART2]  # part 2's 4B only, as before the GPU ran part 0's
    words = p00.mixed_missing_words("h200", mixed)
    assert words.startswith("Not measured on h200: the mixed steps of the 0.5B")
    assert "`0.5b-mixed-b00512-trace`" in words
    with_dense = pd.concat([mixed, mixed.assign(model="qwen2.5-0.5b", source=ms.PART0)], ignore_index=True)
    assert p00.mixed_missing_words("h200", with_dense) is None
    # the 4B's own sentences keep their subject; the dense model's name theirs
    assert ms.mixed_words(with_dense, "h200")[0].startswith("On h200, in the profiler's window")
    assert ms.mixed_words(with_dense, "h200", "qwen2.5-0.5b")[0].startswith("On h200, the qwen2.5-0.5b, in")


# --- the committed cpu-tiny run of both components ----------------------------------------------------------------


def test_the_cpu_runs_give_each_clients_figures_and_the_servers_over_their_common_window():
    points, each = p00.clients_table(None, ["cpu-tiny"])
    assert list(points["clients"]) == [1, 2] and set(points["prompts"]) == {96}
    assert list(each.groupby("point")["client"].apply(list)) == [[1], [1, 2]]
    assert list(each[each["clients"] == 2]["prompts"]) == [48, 48]
    for r in points.itertuples():  # the counters moved inside each window, and no client ran longer than its pass
        mine = each[each["point"] == r.point]
        assert r.polls >= 3 and r.tok_s > 0 and r.window_s <= (mine["end"] - mine["start"]).max() + 1e-9
        assert r.step_ms == pytest.approx(1000 / r.steps_per_s)
    verdict = ONE_CLAIM.evaluate(p00.rig_view("cpu-tiny", p00.page_tables(None, ["cpu-tiny"])))["verdict"]
    assert verdict in (HOLDS, DIFFERS, INCONCLUSIVE)  # measured on this rig, whichever way


def test_the_cpu_runs_put_part_zeros_mixed_steps_in_the_table_with_the_sum_beside_them():
    t = ms.mixed_table(None, ["cpu-tiny"])
    mine = t[t["source"] == ms.PART0]
    assert sorted(mine["budget"]) == [p02.OFF, 64] and set(mine["model"]) == {"tiny-dense"}
    for r in mine.itertuples():
        assert r.sum_ms == pytest.approx(r.solo_chunk_step_ms + r.decode_itl_ms)
        assert r.riding_ms == pytest.approx(r.chunk_step_ms - r.solo_chunk_step_ms)
        assert r.step_over_sum == pytest.approx(r.chunk_step_ms / r.sum_ms)
        # counted in the iteration log: one step with chunking off; at 64 a step, at least 16 for 1,024 prompt tokens
        # (the background's decodes take their share of each step's budget)
        assert r.chunk_steps_from == "iteration log"
        assert r.chunk_steps == 1 if r.budget == p02.OFF else r.chunk_steps >= 16
    assert "on the tiny-dense at budget 64" in ms.sum_words(t, "cpu-tiny")
    assert p00.mixed_missing_words("cpu-tiny", t) is None


def test_the_cpu_run_of_a_prompt_alone_splits_its_chunk_step_by_kernel_and_says_so():
    """The committed cpu-tiny point of a long prompt alone (plan.chunk_points, trace.SoloTrace on the CPU build): the
    untraced prompts after the first time the chunk step, the traced one's window gives the kernels per step."""
    from inference_wall.parts.p00 import chunkalone

    t = chunkalone.chunk_table(None, ["cpu-tiny"])
    (r,) = t.itertuples()
    assert r.point == "tiny-chunk-b00064-p01024" and r.steps == 1024 // 64 and r.untraced_prompts == 2
    assert r.solo_chunk_step_ms == pytest.approx(r.solo_ttft_ms / r.steps)
    assert r.profiler_ratio == pytest.approx(r.traced_ttft_ms / r.solo_ttft_ms) and r.busy_per_step_ms > 0
    fams = sum(getattr(r, f"{k}_per_step_ms") for k in ms.FAMILY_KEYS.values())
    assert fams == pytest.approx(r.busy_per_step_ms)  # every kernel placed in one family
    words = chunkalone.chunk_words(t, "cpu-tiny")
    assert "the 1,024-token prompt at budget 64, 16 steps" in words and "nan" not in words.lower()
    assert "Gated DeltaNet" not in words  # the dense tiny model has no recurrent layers to name
    assert chunkalone.chunk_words(t, "h200") is None
    # where the floor is chunked prefill's own, the trace alone takes the place of the candidate
    assert ms.sum_words(mixed_rows(), "r", words).endswith(words) and "candidate" not in ms.sum_words(mixed_rows(), "r", words)
