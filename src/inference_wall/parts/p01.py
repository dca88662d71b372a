"""Part 1, hit the wall: on one server, the cold vs warm pass, a single stream, the flood, the rate
sweep (relative to the flood's measured capacity unless absolute rates are given), and decode at fixed
batch sizes for the step-time model."""
from __future__ import annotations

import math

import pandas as pd

from .. import analysis
from ..bench import PassSpec
from ..claims import Claim, around, between
from ..reference import load_reference
from ..schema import PUBLISHED_RIG
from ..errors import UserError
from ..store import load_points, pass_summary, request_throughput
from ..sweep import PassPlan, PointPlan, prompts_for_window

NAME = "01-hit-the-wall"
NOTEBOOK = "notebooks/01-hit-the-wall.md"

DEFAULTS = {
    "max_num_seqs": 256,
    "input_len": 256,
    "output_len": 128,
    "cold_rate_rps": 1.0,  # the series' cold vs warm comparison was at rate 1
    "cold_prompts": 24,
    "single_prompts": 8,  # one request at a time (--max-concurrency 1)
    "flood_prompts": 1024,
    # Offered rates as fractions of the flood's completed req/s, so every rig gets the three regimes.
    "rate_fractions": [0.125, 0.25, 0.5, 0.75, 0.9, 1.1, 1.5, 2.0, 4.0],
    "rates_rps": None,  # absolute rates instead (e.g. the series' [1, 2, 4, 6, 8, 10, 16, 32])
    "target_window_s": 30.0,
    "min_prompts": 16,
    "max_prompts": 4096,
    "decode_batches": [1, 8, 16, 32, 64, 128, 256],  # fixed concurrency: pure decode between waves
    "decode_waves": 3,
}


KEEP_UP = 0.9  # the knee: the first offered rate at which less than this fraction is completed


def rate_point_name(rate: float, relative: bool) -> str:
    return f"rate-x{rate:.3f}" if relative else f"rate-{rate:g}rps"


def flood_capacity_rps(rig_dir) -> float:
    """Completed requests per second of the rig's flood point: what relative rates are fractions of."""
    try:
        return request_throughput(rig_dir / "flood")
    except (FileNotFoundError, KeyError, ValueError) as e:
        raise UserError(f"relative rates need the flood point first ({rig_dir / 'flood'}): {e}")


def plan(p: dict, profile, pools: dict | None = None) -> list[PointPlan]:
    mns = p["max_num_seqs"]
    session = f"main-mns-{mns}"

    def point(name, passes, params, **kw):
        return PointPlan(name=name, session=session, max_num_seqs=mns, passes=passes, params=params, **kw)

    seed = iter(range(1, 10_000))  # a fresh seed per measured pass on this server (prefix cache)
    cold = PassSpec(num_prompts=p["cold_prompts"], request_rate=p["cold_rate_rps"], seed=next(seed))
    plans = [
        point("cold-warm",
              [PassPlan("cold", "cold", cold),
               PassPlan("warmup", "warmup", PassSpec(num_prompts=min(512, 2 * mns), seed=9_000, detailed=False)),
               PassPlan("bench", "measured", PassSpec(num_prompts=p["cold_prompts"], request_rate=p["cold_rate_rps"],
                                                      seed=next(seed)))],
              {"kind": "cold-warm", "offered_rate_rps": p["cold_rate_rps"]}, cold_start=True),
        point("single", [PassPlan("bench", "measured", PassSpec(num_prompts=p["single_prompts"], max_concurrency=1,
                                                                 seed=next(seed)))],
              {"kind": "single", "max_concurrency": 1}),
        point("flood", [PassPlan("bench", "measured", PassSpec(num_prompts=p["flood_prompts"], seed=next(seed)))],
              {"kind": "rate", "offered_rate_rps": math.inf}),
    ]
    relative = not p["rates_rps"]
    for rate in (p["rate_fractions"] if relative else p["rates_rps"]):
        spec_seed = next(seed)

        def resolve(pt, ctx, rate=rate, spec_seed=spec_seed):
            capacity = flood_capacity_rps(ctx.rig_dir)
            absolute = rate * capacity if relative else rate
            n = prompts_for_window(absolute, capacity, p["target_window_s"], p["min_prompts"], p["max_prompts"])
            pt.passes = [PassPlan("bench", "measured", PassSpec(num_prompts=n, request_rate=absolute, seed=spec_seed))]
            pt.params.update({"offered_rate_rps": absolute, "capacity_rps": capacity})

        params = {"kind": "rate", "rate_fraction": rate if relative else None}
        plans.append(point(rate_point_name(rate, relative), [], params, resolve=resolve))
    for b in p["decode_batches"]:
        if b > mns:
            continue
        n = max(2 * b, p["decode_waves"] * b)
        plans.append(point(f"decode-b{b:03d}",
                           [PassPlan("bench", "measured", PassSpec(num_prompts=n, max_concurrency=b, seed=next(seed)))],
                           {"kind": "decode", "batch": b}))
    return plans


# ---------------------------------------------------------------------------------------------
# Replay: tables, per-rig views and claims
# ---------------------------------------------------------------------------------------------
def rate_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Table 1 for every rig: published rows and measured rows (the rate points plus the flood)."""
    ref = load_reference(1, data_dir)["rate_sweep"].assign(source="published")
    rows = []
    for pt in load_points(NAME, data_dir, rigs):
        if pt.params.get("kind") != "rate":
            continue
        row = pass_summary(pt)
        row.update(offered_rate_rps=float(pt.params["offered_rate_rps"]), source="measured",
                   rate_fraction=pt.params.get("rate_fraction"))
        rows.append(row)
    table = pd.concat([ref, pd.DataFrame(rows)], ignore_index=True) if rows else ref
    if rigs is not None:
        table = table[table["rig"].isin(rigs)]
    return table.sort_values(["rig", "offered_rate_rps"]).reset_index(drop=True)


def _facts(data_dir=None) -> dict:
    f = load_reference(1, data_dir)["facts"]
    return dict(zip(f["key"], f["value"]))


def measured_points(data_dir=None, rigs=None) -> dict[str, dict[str, object]]:
    out: dict[str, dict] = {}
    for pt in load_points(NAME, data_dir, rigs):
        out.setdefault(pt.rig, {})[pt.name] = pt
    return out


def memory_table(data_dir=None, rigs=None) -> pd.DataFrame:
    """The startup memory report per rig: published, and parsed from each measured rig's latest start."""
    rows = [load_reference(1, data_dir)["memory_report"].assign(source="published").iloc[0].to_dict()]
    for rig, points in measured_points(data_dir, rigs).items():
        starts = [p for p in points.values() if (p.manifest.get("session") or {}).get("has_startup")]
        if not starts:
            continue
        latest = max(starts, key=lambda p: p.manifest["session"].get("server_started") or 0)
        rep = latest.startup()
        rows.append({"rig": rig, "model_weights_gib": rep.weights_gib, "kv_cache_gib": rep.kv_cache_gib,
                     "kv_cache_tokens": rep.kv_cache_tokens, "max_concurrency_x": rep.max_concurrency,
                     "max_concurrency_tokens_per_request": rep.max_concurrency_tokens_per_request,
                     "kv_cache_device": rep.kv_cache_device, "start_to_healthy_s":
                     latest.manifest["session"].get("start_to_healthy_s"), "vllm_version": rep.vllm_version,
                     "source": "measured"})
    table = pd.DataFrame(rows)
    if rigs is not None:
        table = table[table["rig"].isin(rigs)]
    table["concurrency_discount_x"] = (table["max_concurrency_x"] * table["max_concurrency_tokens_per_request"]
                                       / table["kv_cache_tokens"])
    return table.reset_index(drop=True)


def cold_warm_table(data_dir=None, rigs=None) -> pd.DataFrame:
    rows = [load_reference(1, data_dir)["cold_warm"].assign(source="published")]
    for rig, points in measured_points(data_dir, rigs).items():
        if "cold-warm" in points:
            pt = points["cold-warm"]
            for label, state in (("cold", "cold"), ("bench", "warm")):
                b = pt.bench(label)
                rows.append(pd.DataFrame([{"rig": rig, "server_state": state,
                                           "offered_rate_rps": pt.params.get("offered_rate_rps"),
                                           "ttft_p50_ms": b.ms("ttft", "p50"), "ttft_p99_ms": b.ms("ttft", "p99"),
                                           "source": "measured"}]))
    table = pd.concat(rows, ignore_index=True)
    return table[table["rig"].isin(rigs)] if rigs is not None else table


def decode_table(data_dir=None, rigs=None) -> pd.DataFrame:
    """Decode at fixed concurrency: median ITL is the step time at that running batch."""
    rows = []
    for rig, points in measured_points(data_dir, rigs).items():
        for pt in points.values():
            if pt.params.get("kind") == "decode":
                row = pass_summary(pt)
                row["batch"] = pt.params["batch"]
                row["step_ms"] = row["itl_p50_ms"]
                row["decode_tok_s"] = row["batch"] * 1000.0 / row["step_ms"]
                rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else ["rig", "batch", "step_ms", "decode_tok_s"])


def mixed_step_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Inside each measured rate pass, from vLLM's stats lines (one per second): generation throughput in
    intervals that also prefilled arriving prompts against intervals of decode alone, beside the generation
    rate the offered load needs (offered requests a second x output tokens)."""
    rows = []
    for rig, points in measured_points(data_dir, rigs).items():
        for name, pt in points.items():
            rate = float(pt.params.get("offered_rate_rps", math.nan)) if pt.params.get("kind") == "rate" else math.nan
            if not math.isfinite(rate):
                continue
            st = pt.stats_during()
            busy = st[st["running"] > 0] if len(st) else st
            if not len(busy):
                continue
            mixed, alone = busy[busy["prompt_tok_s"] > 0], busy[busy["prompt_tok_s"] == 0]
            rows.append({"rig": rig, "point": name, "offered_rate_rps": rate,
                         "needed_gen_tok_s": rate * pt.manifest["workload"]["output_len"],
                         "gen_with_prefill_tok_s": mixed["gen_tok_s"].median() if len(mixed) else math.nan,
                         "gen_decode_only_tok_s": alone["gen_tok_s"].median() if len(alone) else math.nan,
                         "intervals_with_prefill_pct": 100 * len(mixed) / len(busy),
                         "running_median": busy["running"].median(),
                         "max_num_seqs": pt.manifest.get("max_num_seqs")})
    cols = ["rig", "point", "offered_rate_rps", "needed_gen_tok_s", "gen_with_prefill_tok_s", "gen_decode_only_tok_s",
            "intervals_with_prefill_pct", "running_median", "max_num_seqs"]
    return pd.DataFrame(rows, columns=cols).sort_values(["rig", "offered_rate_rps"]).reset_index(drop=True)


def rig_view(rig: str, data_dir=None, tables: dict | None = None) -> dict:
    """Everything part 1's claims and figures need about one rig, published or measured (`tables`: the
    page's tables, already loaded; any that is missing is loaded here)."""
    t = tables or {}
    rates = t["rates"] if "rates" in t else rate_table(data_dir)
    rates = rates[rates["rig"] == rig]
    view: dict = {"rig": rig, "rates": rates}
    if len(rates):
        view.update(analysis.knee(rates, KEEP_UP))
    mem = t["memory"] if "memory" in t else memory_table(data_dir)
    mem = mem[mem["rig"] == rig]
    if len(mem):
        view["memory"] = mem.iloc[0].to_dict()
        view["weights_gib"] = mem.iloc[0]["model_weights_gib"]
        view["concurrency_discount"] = mem.iloc[0]["concurrency_discount_x"]
    cw = t["cold_warm"] if "cold_warm" in t else cold_warm_table(data_dir)
    cw = cw[cw["rig"] == rig].set_index("server_state")
    if {"cold", "warm"} <= set(cw.index):
        view["cold_over_warm_p99"] = float(cw.loc["cold", "ttft_p99_ms"] / cw.loc["warm", "ttft_p99_ms"])
    if rig == PUBLISHED_RIG:
        f = _facts(data_dir)
        fit = load_reference(1, data_dir)["step_time_fit"].iloc[0]
        view.update(single_itl_ms=f["single_request_ms_per_token"], bandwidth_gb_s=f["hbm_bandwidth_measured"],
                    fit_intercept_ms=fit["intercept_ms"], fit_slope_ms=fit["slope_ms_per_seq"],
                    pure_decode_tok_s=f["pure_decode_ceiling_tok_s"], running_low=f["running_batch_rate1"],
                    running_flood=f["running_batch_flood"])
    else:
        points = measured_points(data_dir, [rig]).get(rig, {})
        if "single" in points:
            view["single_itl_ms"] = pass_summary(points["single"])["itl_p50_ms"]
        bw = next((p.manifest.get("rig_info", {}).get("hbm_bandwidth_gb_s") for p in points.values()
                   if p.manifest.get("rig_info", {}).get("hbm_bandwidth_gb_s")), None)
        view["bandwidth_gb_s"] = bw
        dec = t["decode"] if "decode" in t else decode_table(data_dir)
        dec = dec[dec["rig"] == rig] if len(dec) else dec
        view["decode"] = dec
        if len(dec) >= 2:
            fit = analysis.linear_fit(dec["batch"], dec["step_ms"])
            view.update(fit=fit, fit_intercept_ms=fit.intercept, fit_slope_ms=fit.slope,
                        pure_decode_tok_s=float(dec["decode_tok_s"].max()))
        finite = rates[rates["offered_rate_rps"].apply(math.isfinite)]
        if len(finite):
            view["running_low"] = finite.iloc[0]["running_mean"]
        flood = rates[~rates["offered_rate_rps"].apply(math.isfinite)]
        if len(flood):
            view["running_flood"] = flood.iloc[0]["running_max"]
            view["max_num_seqs"] = flood.iloc[0]["max_num_seqs"]
    if view.get("weights_gib") and view.get("bandwidth_gb_s"):
        view["floor_ms"] = analysis.weight_stream_floor_ms(view["weights_gib"], view["bandwidth_gb_s"])
        if view.get("single_itl_ms"):
            view["roofline_fraction"] = view["floor_ms"] / view["single_itl_ms"]
        if view.get("fit_intercept_ms"):
            view["intercept_over_floor"] = view["fit_intercept_ms"] / view["floor_ms"]
    if view.get("fit_intercept_ms") and view.get("fit_slope_ms"):
        view["crossover"] = view["fit_intercept_ms"] / view["fit_slope_ms"]
    if view.get("pure_decode_tok_s") and view.get("ceiling_tok_s"):
        view["decode_over_serving"] = view["pure_decode_tok_s"] / view["ceiling_tok_s"]
    return view


def reference_view(data_dir=None) -> dict:
    """The published numbers claims compare with: part 1's facts plus ratios the post states."""
    f = _facts(data_dir)
    f["published_decode_over_serving"] = f["pure_decode_ceiling_tok_s"] / f["serving_ceiling_tok_s"]
    f["published_roofline_fraction"] = f["weight_stream_time"] / f["single_request_ms_per_token"]
    fit = load_reference(1, data_dir)["step_time_fit"].iloc[0]
    f["published_intercept_over_floor"] = fit["intercept_ms"] / f["weight_stream_time"]
    f["published_crossover"] = fit["intercept_ms"] / fit["slope_ms_per_seq"]
    f["keep_up_pct"] = 100 * KEEP_UP
    return f


CLAIMS = [
    Claim("knee", "The server stops keeping up (completes under {keep_up_pct:.0f}% of what is offered) between rate "
          "{knee_offered_rate_low:g} and {knee_offered_rate_high:g} req/s.",
          "req/s", lambda v: v.get("knee_rps"), between("knee_offered_rate_low", "knee_offered_rate_high"), 0.0,
          "the knee sits where the rig's throughput under a steady stream of arrivals runs out; that can be well "
          "below its flood ceiling when steps that also prefill newcomers are slow (see Inside the knee)"),
    Claim("ceiling", "Flooded, it completes {knee_completed_rate_low:g} to {knee_completed_rate_high:g} requests a second, "
          "whatever the offered rate.", "req/s",
          lambda v: v.get("ceiling_rps"), between("knee_completed_rate_low", "knee_completed_rate_high"), 0.05,
          "the ceiling is the rig's decode throughput over 128 tokens per request"),
    Claim("serving-ceiling", "The server sustains about {serving_ceiling_tok_s:,.0f} output tokens a second under load.", "tok/s",
          lambda v: v.get("ceiling_tok_s"), around("serving_ceiling_tok_s"), 0.05,
          "tokens per second scale with the rig's memory bandwidth and the model's bytes per step"),
    Claim("roofline", "A single stream's token time is essentially the time to stream the weights once "
          "(floor over measured ITL, ~{weight_stream_time:g} of ~{single_request_ms_per_token:g} ms).", "fraction",
          lambda v: v.get("roofline_fraction"), around("published_roofline_fraction"), 0.10,
          "a faster weight stream leaves fixed per-step costs (launches, sampling, the hybrid layers' state) a "
          "larger share of the step"),
    Claim("single-itl", "One request alone pays about {single_request_ms_per_token:g} ms per token.", "ms",
          lambda v: v.get("single_itl_ms"), around("single_request_ms_per_token"), 0.10,
          "token time is the weight-stream time, which scales inversely with the rig's bandwidth"),
    Claim("intercept", "The fixed part of a decode step (the fit's intercept) matches the weight-stream floor.",
          "x floor", lambda v: v.get("intercept_over_floor"), around("published_intercept_over_floor"), 0.10,
          "the intercept also holds every per-step cost that is not weight traffic"),
    Claim("crossover", "Per-sequence work overtakes the fixed stream near a batch of {plateau_batch:g} "
          "(intercept over slope ~{published_crossover:.0f}).",
          "seqs", lambda v: v.get("crossover"), around("plateau_batch"), 0.15,
          "the crossover is the ratio of the rig's fixed to per-sequence step cost"),
    Claim("decode-vs-serving", "Pure decode reaches about twice the throughput the server sustains under load "
          "(prefill takes the rest).", "x", lambda v: v.get("decode_over_serving"),
          around("published_decode_over_serving"), 0.20,
          "how much prefill takes depends on the prompt length and how prefill and decode share steps on the rig"),
    Claim("running-flood", "Flooded, the running batch reaches about {running_batch_flood:g} of the {max_num_seqs:g} allowed.", "seqs",
          lambda v: v.get("running_flood"), around("running_batch_flood"), 0.15,
          "the running batch under a flood is set by how fast prefill admits requests against how fast they finish"),
    Claim("cold-warm", "A cold server's first pass has a p99 TTFT about {cold_over_warm_ttft_p99:g}x that of the same pass warm.", "x",
          lambda v: v.get("cold_over_warm_p99"), around("cold_over_warm_ttft_p99"), 0.5,
          "the cold cost is compilation and kernel tuning at first use; caches from an earlier start shrink it"),
    Claim("kv-discount", "The KV cache admits about {concurrency_discount:g}x more max-length requests than tokens / length "
          "suggests (only {full_attention_layers:g} of {total_layers:g} layers grow a cache).", "x", lambda v: v.get("concurrency_discount"),
          around("concurrency_discount"), 0.10,
          "a dense model (every layer keeps K and V) has no discount; for the hybrid model, vLLM's own accounting of "
          "KV tokens changed between versions (0.18 counts all layers, 0.22 only those that grow): the discount is "
          "in the log's arithmetic, not in the model"),
]
