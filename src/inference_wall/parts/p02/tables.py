"""Part 2's tables: the only file of the part that reads the disk (each injection and the steps around it, the
freeze per configuration, the timelines, the knee points against part 1's pass at that rate, the traces, the
clocks, the roofline's inputs and the post's figures). The injections' readers and the tables over them are the
injections wing's (parts/injections.py), which part 0 reads too; this file re-exports them under their old names."""
from __future__ import annotations

import json
import math

import pandas as pd

from ...measure import freeze
from ...records.reference import load_reference
from ...records.store import bench_result, load_points, open_artefact, read_artefact
from ...schema import PARTS, PUBLISHED_RIG
from .. import injections
from ..injections import (  # noqa: F401 (part 2's names, read by the page before the wing)
    INJECTION_COLUMNS, _async_by_session, _injections, _steps, ttft_ms as _ttft_ms, by_config as _by_config, config_label,
    freeze_table, injection_table, injections_of, matmul_params, measured_points, point_injections, steps_timed)
from ..protocol import DATA_DIR, REFERENCE
from .plan import A10G_BUDGET, DEFAULTS, NAME, OFF


def knee_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Back to part 1, per rig: part 1's own pass at its knee rate (vLLM's default budget, read from its log) and
    each knee point's (one budget each): completed against offered, whether it kept up (part 1's rule), the
    latencies, and the split of generation throughput between intervals that also prefilled and decode alone."""
    from ...measure.analysis import KEEP_UP
    from ...measure.ratepass import mixed_split
    from ...records.store import pass_summary

    rows = []

    def row(pt, budget, source):
        s = pass_summary(pt)
        rate = float(pt.params["offered_rate_rps"])
        mix = mixed_split(pt, rate) or {}
        return {"rig": pt.rig, "budget": budget, "server": source, "offered_rate_rps": rate,
                "completed_rps": s["completed_rps"], "completed_share": s["completed_rps"] / rate,
                "kept_up": s["completed_rps"] / rate >= KEEP_UP, "ttft_p50_ms": s["ttft_p50_ms"],
                "ttft_p99_ms": s["ttft_p99_ms"], "itl_p50_ms": s["itl_p50_ms"], "itl_p99_ms": s["itl_p99_ms"],
                "gen_with_prefill_tok_s": mix.get("gen_with_prefill_tok_s", math.nan),
                "gen_decode_only_tok_s": mix.get("gen_decode_only_tok_s", math.nan),
                "needed_gen_tok_s": mix.get("needed_gen_tok_s", math.nan)}

    knees = [pt for pt in load_points(NAME, data_dir, rigs) if pt.params.get("kind") == "knee"]
    for rig in sorted({pt.rig for pt in knees}):
        rate = float(next(pt for pt in knees if pt.rig == rig).params["offered_rate_rps"])
        part1 = {pt.name: pt for pt in load_points(PARTS[1], data_dir, [rig])}
        same = [pt for pt in part1.values() if pt.params.get("kind") == "rate"
                and math.isclose(float(pt.params["offered_rate_rps"]), rate, rel_tol=1e-9)]
        if same:
            starts = (q.startup() for q in part1.values())
            default = next((r.max_num_batched_tokens for r in starts if r is not None and r.max_num_batched_tokens), None)
            rows.append(row(same[0], default if default else math.nan, "part 1 (vLLM's default budget)"))
        rows += [row(pt, int(pt.params["budget"]), "knee point") for pt in knees if pt.rig == rig]
    cols = ["rig", "budget", "server", "offered_rate_rps", "completed_rps", "completed_share", "kept_up", "ttft_p50_ms",
            "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "gen_with_prefill_tok_s", "gen_decode_only_tok_s",
            "needed_gen_tok_s"]
    return pd.DataFrame(rows, columns=cols)


def timeline_table(data_dir=None, rig: str | None = None, prompt_len: int | None = None, injection_no: int = 0,
                   before: int = 8, after: int = 8) -> pd.DataFrame:
    """The engine's steps around one injection, per configuration (from the iteration log): for the step timeline.
    Only servers whose iteration log times its steps: under asynchronous scheduling the log's elapsed time is a wait
    for a result, not a step (steps_timed), and an untimed step is not drawn as a time."""
    frames = []
    pts = measured_points(data_dir, [rig] if rig else None)
    modes = _async_by_session(pts)
    for pt in pts:
        if prompt_len is not None and int(pt.params["prompt_len"]) != prompt_len:
            continue
        if modes.get((pt.rig, pt.record.session_id)) is True:
            continue
        steps = _steps(pt)
        inj = _injections(pt)
        runs = freeze.long_prompt_steps(steps, int(pt.params["prompt_len"]),
                                        int(pt.record.workload.get("input_len", 256))) if len(steps) else []
        n = len(inj["injections"])
        if len(runs) < n or injection_no >= n:
            continue
        t = freeze.timeline(steps, runs[len(runs) - n + injection_no], before, after)
        frames.append(t.assign(rig=pt.rig, budget=int(pt.params["budget"]), config=config_label(int(pt.params["budget"])),
                               prompt_len=int(pt.params["prompt_len"])))
    if not frames:
        return pd.DataFrame(columns=["rig", "config", "budget", "prompt_len", "step", "elapsed_ms", "ctx_tokens",
                                     "gen_tokens", "long_prompt"])
    return pd.concat(frames, ignore_index=True)[["rig", "config", "budget", "prompt_len", "step", "elapsed_ms",
                                                 "ctx_tokens", "gen_tokens", "gen_reqs", "long_prompt"]]


def step_chart(data_dir, rigs: list[str], prompt_len: int | None = None) -> tuple[str | None, pd.DataFrame]:
    """The page's step chart: the first of `rigs` whose iteration log times its steps (timeline_table), and its
    steps around the first injection of `prompt_len`; None and an empty table where no rig's does."""
    for rig in rigs:
        steps = timeline_table(data_dir, rig, prompt_len)
        if len(steps):
            return rig, steps
    return None, pd.DataFrame()


def token_timeline(data_dir=None, rig: str | None = None, prompt_len: int | None = None, injection_no: int = 0,
                   before_s: float = 0.5, after_s: float = 0.5, max_streams: int = 6) -> pd.DataFrame:
    """Background tokens around one injection, per configuration, in ms from the long prompt's send (row per token;
    at most `max_streams` streams per configuration, those decoding across the window first: with 128 tokens a
    stream, four configurations stay under the 5,000 rows a chart may draw unaggregated)."""
    rows = []
    for pt in measured_points(data_dir, [rig] if rig else None):
        if prompt_len is not None and int(pt.params["prompt_len"]) != prompt_len:
            continue
        recs = _injections(pt)["injections"]
        if injection_no >= len(recs) or not recs[injection_no].get("token_times"):
            continue
        rec = recs[injection_no]
        sent, first = rec["sent"], rec["token_times"][0]
        streams = freeze.stream_token_times(bench_result(open_artefact(pt.path, "bench.json")).raw)
        near = [t for t in streams if len(t) and t[-1] > sent - before_s and t[0] < first + after_s]
        near.sort(key=lambda t: not (t[0] < sent and t[-1] > first))
        budget = int(pt.params["budget"])
        for s, t in enumerate(near[:max_streams]):
            keep = t[(t > sent - before_s) & (t < first + after_s)]
            rows += [{"rig": pt.rig, "config": config_label(budget), "budget": budget, "stream": s,
                      "t_ms": 1000 * (x - sent)} for x in keep]
        rows += [{"rig": pt.rig, "config": config_label(budget), "budget": budget, "stream": -1,
                  "t_ms": 1000 * (x - sent)} for x in rec["token_times"] if x < first + after_s]
    return pd.DataFrame(rows, columns=["rig", "config", "budget", "stream", "t_ms"])


def roofline_table(freezes: pd.DataFrame, data_dir=None, params_by_rig: dict[str, float | None] | None = None,
                   peaks: dict[str, dict] | None = None) -> pd.DataFrame:
    """injections.roofline_table with the peak from each rig profile's part-2 parameters (`peaks`, rig ->
    {"peak_dense_tflops", "peak_source"}, replaces what the rig profiles say)."""
    from ...run.rig import load_profile
    from ..protocol import parameters_for

    if peaks is None:
        off = freezes[freezes["budget"] == OFF] if len(freezes) else freezes
        peaks = {rig: parameters_for(NAME, DEFAULTS, load_profile(rig, data_dir)) for rig in
                 (sorted(set(off["rig"])) if len(off) else [])}
    return injections.roofline_table(freezes, peaks, data_dir, params_by_rig)


def reference_view(data_dir=None) -> dict:
    f = load_reference(2, data_dir)["facts"]
    facts = dict(zip(f["key"], f["value"]))
    facts["a10g_budget"] = A10G_BUDGET
    return facts


def trace_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Kernel (or, on the CPU build, operator) time by family per traced window: one row per (rig, configuration,
    window, family), with its share of the window's busy time."""
    rows = []
    for pt in load_points(NAME, data_dir, rigs):
        if pt.params.get("kind") != "trace":
            continue
        summary = json.loads(read_artefact(pt.path, "trace-summary.json"))
        budget = int(pt.params["budget"])
        for w in summary.get("windows", []):
            for sm in w.get("summaries", []):
                for fam, ms in sm["families_ms"].items():
                    rows.append({"rig": pt.rig, "config": config_label(budget), "budget": budget,
                                 "prompt_len": int(pt.params["prompt_len"]), "window": w["window"],
                                 "device": sm["device"], "family": fam, "time_ms": ms,
                                 "share_pct": 100 * ms / sm["busy_ms"] if sm["busy_ms"] else math.nan,
                                 "busy_ms": sm["busy_ms"], "span_ms": sm["span_ms"]})
    return pd.DataFrame(rows, columns=["rig", "config", "budget", "prompt_len", "window", "device", "family", "time_ms",
                                       "share_pct", "busy_ms", "span_ms"])


def clock_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """What the GPU ran at during the freeze points, per rig and configuration (from each point's GPU samples, taken
    once a second by nvidia-smi during its passes): the lowest and the median busy SM clock over its points, the most
    power drawn, and the share of busy samples at the software power cap. Bigger chunks draw more power; a freeze
    measured at lower clocks is a longer one."""
    from ...records.gpuclocks import fold, points_table

    pts = measured_points(data_dir, rigs)
    budget = {(pt.rig, pt.name): int(pt.params["budget"]) for pt in pts}
    t = points_table(pts)
    cols = ["rig", "config", "points", "sampled", "sm_mhz_min", "sm_mhz_median", "power_w_max", "sw_power_cap_pct"]
    if not len(t):
        return pd.DataFrame(columns=cols)
    t["budget"] = [budget[(r.rig, r.point)] for r in t.itertuples()]
    out = fold(t, ["rig", "budget"])
    counts = pd.DataFrame([(r, b) for (r, _), b in budget.items()], columns=["rig", "budget"]).value_counts()
    out = counts.rename("points").reset_index().merge(out, on=["rig", "budget"], how="left")
    out = out[out["rig"].isin(t["rig"])]  # rigs that sampled at all
    out["sampled"] = out["sampled"].fillna(0).astype(int)
    out.insert(1, "config", out["budget"].map(config_label))
    return _by_config(out)[cols]


def trace_unsupported(data_dir=None, rigs: list[str] | None = None) -> list[str]:
    """'rig config: reason' for each traced point whose server recorded no trace."""
    out = []
    for pt in load_points(NAME, data_dir, rigs):
        if pt.params.get("kind") == "trace":
            reason = json.loads(read_artefact(pt.path, "trace-summary.json")).get("unsupported")
            if reason:
                out.append(f"{pt.rig} {config_label(int(pt.params['budget']))}: {reason}")
    return out


def trace_note(data_dir=None, rigs: list[str] | None = None) -> str:
    """What the page says about the profiler pass of the shown rigs."""
    traced = sorted({pt.rig for pt in load_points(NAME, data_dir, rigs) if pt.params.get("kind") == "trace"})
    if not traced:
        return ("**No trace recorded** for the rigs shown: the profiler pass (part parameter `trace`) is off by "
                "default and on in a rig profile that asks for it (the h200's; `gpu/README.md`). What it shows: "
                "kernel time by family (matrix multiplies, attention, the recurrent layers' kernels, the rest) in a "
                "window of decode alone and in the window of one long prompt, per configuration.")
    bad = trace_unsupported(data_dir, rigs)
    return f"Traced: {', '.join(traced)}." + (" No trace from: " + "; ".join(bad) + "." if bad else "")


def a10g_inputs(data_dir=None) -> dict:
    """The series' A10G figures the floor prediction uses (part 1's facts): operations per token, the quoted peak,
    and one decode step (a single stream's time per token)."""
    f = load_reference(1, data_dir)["facts"]
    facts = dict(zip(f["key"], f["value"]))
    return {"gflop_per_token": facts["flops_per_token"], "peak_tflops": facts["a10g_fp16_peak"],
            "decode_ms": facts["single_request_ms_per_token"]}


def floor_freeze_ms(prompt_len: int, budget: int, a: dict) -> float:
    """The freeze if a prefill ran at the GPU's peak: the largest step's prompt tokens (all of them without
    chunking, at most a budget with it) x operations per token / peak, plus one decode step."""
    tokens = prompt_len if budget == OFF else min(prompt_len, budget)
    return 1000 * tokens * a["gflop_per_token"] * 1e9 / (a["peak_tflops"] * 1e12) + a["decode_ms"]


def floor_table(data_dir=None, prompt_lens: list[int] | None = None, budgets: list[int] | None = None) -> pd.DataFrame:
    """The A10G's freeze at the compute floor per configuration and prompt length, from the post's own figures."""
    a = a10g_inputs(data_dir)
    rows = [{"rig": PUBLISHED_RIG, "config": config_label(b), "budget": b, "prompt_len": n,
             "floor_freeze_ms": floor_freeze_ms(n, b, a)}
            for b in (budgets or DEFAULTS["budgets"]) for n in (prompt_lens or DEFAULTS["prompt_lens"])]
    return pd.DataFrame(rows)


def protocol_tables(data_dir, rigs: list[str]) -> dict:
    """The protocol's tables: the measured rigs' injections and freezes, the post's figures (reference_view) and
    the data dir."""
    injections = injection_table(data_dir, [r for r in rigs if r != PUBLISHED_RIG])
    return {"injections": injections, "freezes": freeze_table(injections), REFERENCE: reference_view(data_dir),
            DATA_DIR: data_dir}
