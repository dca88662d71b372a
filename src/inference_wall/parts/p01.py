"""Part 1, hit the wall: on one server, the cold vs warm pass, a single stream, the flood, the rate
sweep (relative to the flood's measured capacity unless absolute rates are given), and decode at fixed
batch sizes for the step-time model."""
from __future__ import annotations

import functools
import math

import pandas as pd

from ..measure import analysis
from ..run.bench import PassSpec
from ..measure.analysis import GIB, Interval, LinearFit, combine
from ..measure.admission import running_limit  # noqa: F401 (part 1's name for it stays)
from ..measure.analysis import KEEP_UP  # noqa: F401 (part 1's name for it stays)
from ..measure.ratepass import MIXED_COLUMNS, mixed_split  # noqa: F401 (part 1's names stay)
from ..measure.claims import Claim, Judgement, Missing, fmt_num, known_number, need
from ..model.kvcache import pool_from_concurrency, pool_from_report
from ..model.modelshape import ModelShape
from ..records.reference import load_reference
from ..schema import PUBLISHED_RIG
from ..errors import UserError
from ..records.store import load_points, pass_summary, request_throughput
from ..run.sweep import PassPlan, PointPlan, prompts_for_window
from ..words import number
from .protocol import DATA_DIR, EVERY_PART, REFERENCE, Part, judged, without_data_dir

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
    "poll_s": 0.25,  # /metrics during the flood's measured pass (its steady window, steady.flood_steady)
    # Offered rates as fractions of the flood's completed req/s, so every rig gets the three regimes.
    "rate_fractions": [0.125, 0.25, 0.5, 0.75, 0.9, 1.1, 1.5, 2.0, 4.0],
    "rates_rps": None,  # absolute rates instead (e.g. the series' [1, 2, 4, 6, 8, 10, 16, 32])
    "target_window_s": 30.0,
    "min_prompts": 16,
    "max_prompts": 4096,
    "decode_batches": [1, 8, 16, 32, 64, 128, 256],  # fixed concurrency: pure decode between waves
    "decode_waves": 3,
}


PUBLISHED_PRESET = "qwen3.5-4b"  # the posts' model, whose shapes data/models holds


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
              {"kind": "rate", "offered_rate_rps": math.inf}, poll_metrics_s=float(p["poll_s"])),
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
def rate_table(data_dir=None, rigs: list[str] | None = None, loaded: dict | None = None) -> pd.DataFrame:
    """Table 1 for every rig: published rows and measured rows (the rate points plus the flood). The flood's row
    also carries its steady window (steady.STEADY_COLUMNS, from /metrics polled during it: the running batch at the
    cap) beside its whole-pass figures; NaN on the rate rows and where the flood was not polled or has none."""
    from ..measure.steady import point_steady_row, steady_row

    ref = load_reference(1, data_dir)["rate_sweep"].assign(source="published")
    rows = []
    pts = ([p for by_name in loaded.values() for p in by_name.values()] if loaded is not None
           else load_points(NAME, data_dir, rigs))
    for pt in pts:
        if pt.params.get("kind") != "rate":
            continue
        row = pass_summary(pt)
        row.update(offered_rate_rps=float(pt.params["offered_rate_rps"]), source="measured",
                   rate_fraction=pt.params.get("rate_fraction"), e2el_mean_ms=pt.bench().ms("e2el", "mean"))
        flood = not math.isfinite(row["offered_rate_rps"])
        row.update(point_steady_row(pt) if flood else steady_row(None, False))
        rows.append(row)
    table = pd.concat([ref, pd.DataFrame(rows)], ignore_index=True) if rows else ref.assign(**steady_row(None, False))
    table = table.assign(steady_polled=table["steady_polled"].eq(True))  # published rows: not polled
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


def memory_table(data_dir=None, rigs=None, loaded: dict | None = None) -> pd.DataFrame:
    """The startup memory report per rig: published, and parsed from each measured rig's latest start, with
    the KV pool it describes (`kv_pool`, see kvcache; the published pool from the post's own log line)."""
    pub = load_reference(1, data_dir)["memory_report"].assign(source="published").iloc[0].to_dict()
    pub.update(kv_pool=published_pool(data_dir), preset=PUBLISHED_PRESET, language_model_only=False)
    rows = [pub]
    for rig, points in (loaded if loaded is not None else measured_points(data_dir, rigs)).items():
        starts = [p for p in points.values() if p.record.has_startup]
        if not starts:
            continue
        latest = max(starts, key=lambda p: p.record.server_started or 0)
        rep = latest.startup()
        preset = latest.record.preset
        pool = pool_from_report(rep, ModelShape.of(preset, data_dir).layout) if preset else None
        rows.append({"kv_pool": pool, "preset": preset,
                     "language_model_only": "--language-model-only" in (latest.record.server_command or []),"rig": rig, "model_weights_gib": rep.weights_gib, "kv_cache_gib": rep.kv_cache_gib,
                     "kv_cache_tokens": rep.kv_cache_tokens, "max_concurrency_x": rep.max_concurrency,
                     "max_concurrency_tokens_per_request": rep.max_concurrency_tokens_per_request,
                     "kv_cache_device": rep.kv_cache_device, "start_to_healthy_s":
                     latest.record.start_to_healthy_s, "vllm_version": rep.vllm_version,
                     "source": "measured"})
    table = pd.DataFrame(rows)
    if rigs is not None:
        table = table[table["rig"].isin(rigs)]
    table["concurrency_discount_x"] = (table["max_concurrency_x"] * table["max_concurrency_tokens_per_request"]
                                       / table["kv_cache_tokens"])
    return table.reset_index(drop=True)


def cold_warm_table(data_dir=None, rigs=None, loaded: dict | None = None) -> pd.DataFrame:
    rows = [load_reference(1, data_dir)["cold_warm"].assign(source="published")]
    for rig, points in (loaded if loaded is not None else measured_points(data_dir, rigs)).items():
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


def decode_table(data_dir=None, rigs=None, loaded: dict | None = None) -> pd.DataFrame:
    """Decode at fixed concurrency: median ITL is the step time at that running batch."""
    rows = []
    for rig, points in (loaded if loaded is not None else measured_points(data_dir, rigs)).items():
        for pt in points.values():
            if pt.params.get("kind") == "decode":
                row = pass_summary(pt)
                row["batch"] = pt.params["batch"]
                row["step_ms"] = row["itl_p50_ms"]
                row["decode_tok_s"] = row["batch"] * 1000.0 / row["step_ms"]
                rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else ["rig", "batch", "step_ms", "decode_tok_s"])


def mixed_step_table(data_dir=None, rigs: list[str] | None = None, loaded: dict | None = None) -> pd.DataFrame:
    """mixed_split of every measured rate pass."""
    rows = []
    for rig, points in (loaded if loaded is not None else measured_points(data_dir, rigs)).items():
        for name, pt in points.items():
            rate = float(pt.params.get("offered_rate_rps", math.nan)) if pt.params.get("kind") == "rate" else math.nan
            if math.isfinite(rate) and (row := mixed_split(pt, rate)) is not None:
                rows.append(row)
    return pd.DataFrame(rows, columns=MIXED_COLUMNS).sort_values(["rig", "offered_rate_rps"]).reset_index(drop=True)


def part1_knee(rig: str, data_dir=None) -> float | None:
    """The knee of part 1's rate sweep on a rig (the first offered rate completed at under KEEP_UP of it), None
    where part 1 has no such rate there."""
    rates = rate_table(data_dir, [rig])
    rates = rates[rates["rig"] == rig]
    if not len(rates):
        return None
    knee = analysis.knee(rates, KEEP_UP).get("knee_rps")
    return float(knee) if knee is not None and math.isfinite(knee) else None


def published_pool(data_dir=None):
    """The A10G's KV pool from the post's own log line ('Maximum concurrency for 2,048 tokens per request:
    83.7x'), with the attention page vLLM gives this model (analysis.hybrid_block_size: 528 tokens)."""
    from ..model.modelshape import ModelShape

    mem = load_reference(1, data_dir)["memory_report"].iloc[0]
    shape = ModelShape.of(PUBLISHED_PRESET, data_dir)
    block = shape.hybrid_block_size
    printed = f"{mem['max_concurrency_x']:g}"
    digits = len(printed.split(".")[1]) if "." in printed else 0
    return pool_from_concurrency(float(mem["max_concurrency_x"]), int(mem["max_concurrency_tokens_per_request"]),
                                 block, shape.layout, digits=digits)


def vision_tower_gib(preset: str, data_dir=None, dtype_bytes: int = 2) -> float:
    from ..model.modelshape import ModelShape

    return ModelShape.of(preset, data_dir).vision_tower_params * dtype_bytes / GIB


def page_tables(data_dir=None, rigs: list[str] | None = None) -> dict:
    """Every table part 1's page (and part 3's, for part 1's side of its claims) needs, each loaded once."""
    from ..run.rig import run_to_run

    loaded = measured_points(data_dir, [r for r in rigs if r != PUBLISHED_RIG] if rigs is not None else None)
    repeats = run_to_run(data_dir)
    return {"points": loaded, "rates": rate_table(data_dir, rigs, loaded),
            "memory": memory_table(data_dir, rigs, loaded), "cold_warm": cold_warm_table(data_dir, rigs, loaded),
            "decode": decode_table(data_dir, rigs, loaded), "run_to_run": repeats}


def flood_spread(rr: pd.DataFrame) -> dict[str, float]:
    """Per rig with a repeat (a profile's `repeat_of`): how far the two runs' floods lay apart (relative),
    for both rigs: the server-to-server spread a flood ceiling carries into the claims. `rr`: rig.run_to_run."""
    rr = rr[(rr["part"] == NAME) & (rr["point"] == "flood") & (rr["metric"] == "output_tok_s")].dropna(subset=["difference_pct"])
    out: dict[str, float] = {}
    for r in rr.itertuples():
        for rig in (r.rig, r.repeat):
            out[rig] = max(out.get(rig, 0.0), abs(r.difference_pct) / 100)
    return out


def rig_view(rig: str, data_dir=None, tables: dict | None = None) -> dict:
    """Everything part 1's claims and figures need about one rig, published or measured (`tables`: the
    page's tables from page_tables, already loaded; without them they are loaded here). Quantities that
    claims use are Intervals: published figures carry their printed rounding, repeated measurements their
    spread."""
    t = tables if tables is not None else page_tables(data_dir, [rig])
    facts = _facts(data_dir)
    rates = t["rates"][t["rates"]["rig"] == rig]
    view: dict = {"rig": rig, "rates": rates, "post": facts,
                  "output_len": int(facts["workload_output_tokens"]),
                  "request_tokens": int(facts["workload_input_tokens"] + facts["workload_output_tokens"])}
    flood = rates[~rates["offered_rate_rps"].apply(math.isfinite)]
    finite = rates[rates["offered_rate_rps"].apply(math.isfinite)]
    if len(rates):
        view.update(analysis.knee(rates, KEEP_UP))
    mem = t["memory"][t["memory"]["rig"] == rig]
    if len(mem):
        m = mem.iloc[0].to_dict()
        view.update(memory=m, pool=m.get("kv_pool"), preset=m.get("preset"),
                    concurrency_discount=m["concurrency_discount_x"])
        if m.get("preset") and m.get("model_weights_gib") == m.get("model_weights_gib"):
            view["vision_gib"] = 0.0 if m.get("language_model_only") else vision_tower_gib(m["preset"], data_dir)
    cw = t["cold_warm"][t["cold_warm"]["rig"] == rig].set_index("server_state")
    published = rig == PUBLISHED_RIG
    num = Interval.printed if published else Interval.exact
    if {"cold", "warm"} <= set(cw.index):
        view.update({f"{state}_{p}_ms": num(cw.loc[state, f"ttft_{p}_ms"]) for state in ("cold", "warm")
                     for p in ("p50", "p99")})
        view["cold_over_warm_p99"] = float(cw.loc["cold", "ttft_p99_ms"] / cw.loc["warm", "ttft_p99_ms"])
    if len(flood):
        f = flood.iloc[0]
        rel = 0.0 if published or "run_to_run" not in t else flood_spread(t["run_to_run"]).get(rig, 0.0)
        view.update(flood_tok_s=num(f["output_tok_s"]).widen(rel), flood_rps=num(f["completed_rps"]).widen(rel))
        if not published and known_number(f.get("steady_output_tok_s")):
            view["flood_steady_tok_s"] = float(f["steady_output_tok_s"])  # the engine's steady window, polled
    if published:
        fit = load_reference(1, data_dir)["step_time_fit"].iloc[0]
        rate1 = finite.iloc[0]
        view.update(weights_gib=Interval.printed(view["memory"]["model_weights_gib"]),
                    bandwidth_gb_s=Interval.printed(facts["hbm_bandwidth_measured"]),
                    single_itl_ms=Interval.printed(facts["single_request_ms_per_token"]),
                    single_ttft_ms=Interval.printed(rate1["ttft_p50_ms"]),
                    single_ttft_source=f"TTFT p50 at rate {rate1['offered_rate_rps']:g}",
                    fit=LinearFit.published(fit["intercept_ms"], fit["slope_ms_per_seq"]),
                    flood_running=Interval.printed(facts["running_batch_flood"]),
                    max_num_seqs=int(facts["max_num_seqs"]),
                    low_rate_rps=Interval.printed(rate1["completed_rps"]),
                    low_running=Interval.printed(facts["running_batch_rate1"]))
        # the post gives no mean E2E: a request's time in the system is its TTFT plus (output - 1) token gaps
        w = combine(lambda ttft, itl: ttft + (view["output_len"] - 1) * itl, view["single_ttft_ms"], view["single_itl_ms"])
        view["low_time_in_system_ms"] = w
        view["low_time_source"] = (f"TTFT p50 {fmt(w.value - (view['output_len'] - 1) * view['single_itl_ms'].value)} ms + "
                                   f"{view['output_len'] - 1} x ~{fmt(view['single_itl_ms'].value)} ms per token")
    else:
        points = t["points"].get(rig, {})
        singles = [pass_summary(points[n]) for n in ("single", "decode-b001") if n in points]
        if singles:
            view["single_itl_ms"] = Interval.spread([s["itl_p50_ms"] for s in singles])
            view["single_ttft_ms"] = Interval.spread([s["ttft_p50_ms"] for s in singles])
            view["single_ttft_source"] = "TTFT p50 of one request at a time"
        bws = [p.record.bandwidth_gb_s for p in points.values()]
        bws = [b for b in bws if b]
        if bws:
            view["bandwidth_gb_s"] = Interval.spread(bws)
        if len(mem) and mem.iloc[0]["model_weights_gib"] == mem.iloc[0]["model_weights_gib"]:
            view["weights_gib"] = Interval.exact(mem.iloc[0]["model_weights_gib"])
        dec = t["decode"]
        dec = dec[dec["rig"] == rig].sort_values("batch") if len(dec) else dec
        view["decode"] = dec
        if len(dec) >= 2:
            fit = analysis.linear_fit(dec["batch"], dec["step_ms"])
            view.update(fit=fit, pure_decode_tok_s=float(dec["decode_tok_s"].max()))
        if len(finite):
            low = finite.iloc[0]
            view.update(running_low=low["running_mean"], low_rate_rps=Interval.exact(low["completed_rps"]),
                        low_running=Interval.exact(low["running_mean"]),
                        low_time_in_system_ms=Interval.exact(low.get("e2el_mean_ms", math.nan)),
                        low_time_source="mean E2E latency of the pass")
        if len(flood):
            view.update(flood_running=Interval.exact(flood.iloc[0]["running_max"]),
                        running_flood=flood.iloc[0]["running_max"], max_num_seqs=flood.iloc[0]["max_num_seqs"])
    if published:
        view.update(running_low=facts["running_batch_rate1"], running_flood=facts["running_batch_flood"],
                    pure_decode_tok_s=facts["pure_decode_ceiling_tok_s"])
    fit = view.get("fit")
    if fit is not None:
        view.update(fit_intercept_ms=fit.intercept, fit_slope_ms=fit.slope, crossover=fit.crossover)
    if view.get("weights_gib") and view.get("bandwidth_gb_s"):
        lm = view["weights_gib"].value - view.get("vision_gib", 0.0)
        view["floor_ms"] = analysis.weight_stream_floor_ms(lm, view["bandwidth_gb_s"].value)
        view["floor_all_weights_ms"] = analysis.weight_stream_floor_ms(view["weights_gib"].value,
                                                                       view["bandwidth_gb_s"].value)
        if view.get("single_itl_ms"):
            view["roofline_fraction"] = view["floor_ms"] / view["single_itl_ms"].value
    if view.get("pure_decode_tok_s") and view.get("ceiling_tok_s"):
        view["decode_over_serving"] = view["pure_decode_tok_s"] / view["ceiling_tok_s"]
    if view.get("pool") is not None:
        lo, hi = view["pool"].admission_interval(view["request_tokens"])
        view["admission"] = Interval(view["pool"].admission_limit(view["request_tokens"]), lo, hi)
    return view


def reference_view(data_dir=None) -> dict:
    """The post's scattered facts (for the claims' statements and the page's prose)."""
    return _facts(data_dir)


fmt = number  # a number in the page's sentences (words.number)


# ---------------------------------------------------------------------------------------------
# Claims: each predicts one measurement of a rig from other measurements of the same rig
# ---------------------------------------------------------------------------------------------
def _roofline(v: dict) -> Judgement:
    w, bw, itl = need(v, "weights_gib"), need(v, "bandwidth_gb_s"), need(v, "single_itl_ms")
    tower = v.get("vision_gib", 0.0)
    lm = Interval(w.value - tower, w.low - tower, w.high - tower)
    pred = combine(lambda g, b: g * GIB / (b * 1e9) * 1000, lm, bw)
    how = (f"({fmt(w.value)} GiB logged - {fmt(tower)} GiB vision tower) / {fmt(bw.value)} GB/s = {fmt(pred.value)} ms"
           + (f" (all {fmt(w.value)} GiB: {fmt(v['floor_all_weights_ms'])} ms)" if tower else ""))
    return Judgement(pred, itl, how)


def _step_linear(v: dict) -> Judgement:
    dec = v.get("decode")
    if dec is None or len(dec) < 4:
        raise Missing("decode at four or more fixed batches (the post gives only its fit)")
    rest, top = dec.iloc[:-1], dec.iloc[-1]
    fit = analysis.linear_fit(rest["batch"], rest["step_ms"])
    pred = fit.step_ms(float(top["batch"]))
    how = (f"fit to batches {', '.join(f'{b:g}' for b in rest['batch'])}: {fmt(fit.intercept)} + {fmt(fit.slope)} x "
           f"{top['batch']:g} = {fmt(pred.value)} ms")
    return Judgement(pred, Interval.exact(top["step_ms"]), how)


def fit_at(fit: LinearFit, fn, batch: Interval) -> Interval:
    """fn(a, b, B) over the fit's uncertainty and a range of batches."""
    parts = [fit.interval(lambda a, b, x=x: fn(a, b, x)) for x in (batch.low, batch.value, batch.high)]
    return Interval(parts[1].value, min(p.low for p in parts), max(p.high for p in parts))


def _ceiling(v: dict) -> Judgement:
    fit, batch, flood = need(v, "fit"), need(v, "flood_running"), need(v, "flood_tok_s")
    share = Interval.printed(v["post"]["prefill_gpu_share"]).map(lambda s: s / 100)
    decode = fit_at(fit, analysis.step_model_tok_s, batch)
    pred = combine(lambda d, s: d * (1 - s), decode, share)
    how = (f"(1 - {share.value:.0%} prefill) x {fmt(batch.value)} / ({fmt(fit.intercept)} + {fmt(fit.slope)} x "
           f"{fmt(batch.value)}) ms = {fmt(pred.value)} tok/s; the flood made {flood.value / decode.value:.0%} of pure "
           f"decode at that batch over the client's whole pass")
    steady = v.get("flood_steady_tok_s")
    if steady is not None:  # judged on the whole pass, as the post measured; the polled steady window beside it
        how += f", {steady / decode.value:.0%} in the engine's steady window ({fmt(steady)} tok/s)"
    return Judgement(pred, flood, how)


def _running_flood(v: dict) -> Judgement:
    pred, how = running_limit(v)
    return Judgement(pred, need(v, "flood_running"), how)


def _knee(v: dict) -> Judgement:
    ceiling = need(v, "flood_rps")
    kept, knee = v.get("last_kept_up_rps"), v.get("knee_rps")
    if knee is None or math.isnan(knee):
        raise Missing("rate the server fell behind at")
    low = kept if kept is not None and not math.isnan(kept) else 0.0
    measured = Interval((low + knee) / 2, low, knee)
    how = (f"kept up at {fmt(low)} req/s, fell behind at {fmt(knee)}: the knee is {low / ceiling.value:.0%} to "
           f"{knee / ceiling.value:.0%} of the flood's {fmt(ceiling.value)} req/s")
    return Judgement(ceiling, measured, how)


def _littles_law(v: dict) -> Judgement:
    lam, w, running = need(v, "low_rate_rps"), need(v, "low_time_in_system_ms"), need(v, "low_running")
    pred = combine(lambda r, t: r * t / 1000, lam, w)
    how = f"{fmt(lam.value)} req/s x {fmt(w.value / 1000)} s ({v['low_time_source']}) = {fmt(pred.value)} in flight"
    return Judgement(pred, running, how)


def _cold(stat: str):
    def judge(v: dict) -> Judgement:
        warm, cold = need(v, f"warm_{stat}_ms"), need(v, f"cold_{stat}_ms")
        return Judgement(warm, cold, f"cold {fmt(cold.value)} ms against warm {fmt(warm.value)} ms: "
                                     f"{cold.value / warm.value:.1f}x")
    return judge


CLAIMS = [
    Claim("roofline", "One request alone pays about {single_request_ms_per_token:g} ms a token: the time to stream "
          "the weights once ({weight_bytes_per_stream:g} GB at {hbm_bandwidth_measured:g} GB/s, ~{weight_stream_time:g} ms).",
          "single-stream ITL = bytes one decode step reads (the language model's weights: the log's figure less any "
          "vision tower) / the rig's measured HBM bandwidth; agreement: the weight stream is at least 80% of the token",
          "ms", _roofline, (0.95, 1.25),
          "a fast weight stream leaves the fixed per-step costs that are not weight traffic (kernel launches, the "
          "scheduler and sampler on the CPU, the recurrent layers' state) a large share of a one-request step"),
    Claim("step-linear", "Steady decode fits a fixed part plus a part per sequence, step = {fit_a:g} ms + "
          "{fit_b:g} ms x batch, and the model 'holds almost exactly'.",
          "step time at the largest fixed batch measured = the line fitted to the smaller batches", "ms",
          _step_linear, (0.85, 1.15),
          "the per-sequence cost grows faster than linearly at large batches (attention over more KV, a step "
          "outside the captured CUDA graphs, or memory traffic that no longer overlaps)"),
    Claim("ceiling", "Flooded, the server sustains about {serving_ceiling_tok_s:,.0f} tok/s, about half what pure decode "
          "reaches: arriving prompts' prefill takes roughly {prefill_gpu_share:g}% of the GPU.",
          "flood output throughput = (1 - the post's prefill share) x batch / step time, the step fit taken at the "
          "running batch the flood reached", "tok/s", _ceiling, (0.8, 1.25),
          "the share of the GPU that prefill takes under a flood depends on how fast the rig prefills against how "
          "fast it decodes, and on how vLLM mixes the two in one step"),
    Claim("running-flood", "Flooded, the running batch reaches about {running_batch_flood:g}, set by the load, "
          "not by the max_num_seqs of {max_num_seqs:g}.",
          "running batch under a flood = min(max_num_seqs, the KV pool's admission limit for a "
          "{workload_input_tokens:g}+{workload_output_tokens:g}-token request), the pool from the server's startup log",
          "seqs", _running_flood, (0.95, 1.05),
          "a flood that ends before the batch fills, or a pool read wrongly from the log"),
    Claim("knee", "The ceiling arrives around rate {knee_offered_rate_low:g} to {knee_offered_rate_high:g}, where "
          "completed throughput flattens at {knee_completed_rate_low:g} to {knee_completed_rate_high:g} req/s: the "
          "server keeps up until the offered rate reaches its flood ceiling.",
          "the knee (between the last rate kept up with and the first missed, at 90% completed) = the flood's "
          "completed req/s", "req/s", _knee, (0.85, 1.15),
          "a steady stream of arrivals makes steps that mix prefill with decode; where those are slow the queue "
          "starts well below the flood's ceiling (see Inside the knee)"),
    Claim("littles-law", "At rate 1 the running batch is about {running_batch_rate1:g} request: it follows the load.",
          "mean running batch at the lowest rate = completed req/s x time each request spends in the server "
          "(Little's law)", "seqs", _littles_law, (0.8, 1.25),
          "the stats line samples the running count once per interval; a figure read off a few lines is not a mean"),
    Claim("cold-median", "On a cold server the median TTFT of the first pass is as low as warm "
          "(the cost of compiling lands in the tail).",
          "cold-pass TTFT p50 = the same pass's TTFT p50 once warm", "ms", _cold("p50"), (0.67, 1.5),
          "when the first requests wait for compilation or graph capture all at once, the median pays too"),
    Claim("cold-tail", "The cold pass's p99 TTFT is about {cold_over_warm_ttft_p99:g}x the warm one: the tail pays.",
          "cold-pass TTFT p99 at least 3x the warm pass's", "ms", _cold("p99"), (3.0, math.inf),
          "caches from an earlier start (compiled kernels, autotuning) shrink the one-time cost"),
]


def claim_facts(data_dir=None) -> dict:
    """The post's figures that the claims' statements quote."""
    f = _facts(data_dir)
    fit = load_reference(1, data_dir)["step_time_fit"].iloc[0]
    return {**f, "fit_a": fit["intercept_ms"], "fit_b": fit["slope_ms_per_seq"]}


# ---------------------------------------------------------------------------------------------
# Server to server: sessions of one configuration, their spread, and which agree with part 3
# ---------------------------------------------------------------------------------------------
SETUP_FIELDS = ("command", "environment", "gpu", "vllm", "torch", "cuda")


def _family(rig: str, data_dir=None) -> str:
    """The rig a run repeats (its profile's `repeat_of`), else the rig itself: runs of one family share the
    host and stack, so their differences are run to run."""
    from ..run.rig import load_profile

    try:
        return load_profile(rig, data_dir).repeat_of or rig
    except Exception:  # a rig with runs but no profile is its own family
        return rig


def _setup(rec) -> dict:
    """What makes two server sessions the same configuration, from a point's record: the serve command less its
    interpreter, host and port; the server's environment; the GPU nvidia-smi reported; the versions."""
    cmd = list(rec.server_command or [])[1:]
    for flag in ("--host", "--port"):
        while flag in cmd:
            i = cmd.index(flag)
            del cmd[i:i + 2]
    info = rec.rig_info
    env = (rec.session.server_env if rec.session is not None else None) or {}
    return {"command": " ".join(cmd), "environment": sorted(env.items()),
            "gpu": sorted((info.get("gpu") or {}).items()), "vllm": rec.vllm_version,
            "torch": info.get("torch"), "cuda": info.get("cuda")}


def server_sessions(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Every server session of part 1's configuration on the measured rigs, one row each, across parts 1
    and 3: a part-3 session counts when its serve command and environment equal a part-1 session's of the
    same family (part 3's cap equal to part 1's, so its pass is the same flood). Per session: the flood's
    output tok/s, the median ITL of one stream (part 1's `single` and `decode-b001`), the step-time fit of
    its fixed-batch decode points (three or more), the start time, and which setup fields differ from the
    family's first session (`differs`: empty when command, environment, GPU and versions all match)."""
    from ..schema import PARTS

    part3 = PARTS[3]
    # part 3's sessions of a shown rig's family count even where that run has no part 1 (a repeat of part 3)
    family = functools.lru_cache(maxsize=None)(lambda rig: _family(rig, data_dir))
    families = None if rigs is None else {family(r) for r in rigs}
    points = [pt for pt in load_points(NAME, data_dir, rigs)] + [
        pt for pt in load_points(part3, data_dir) if families is None or family(pt.rig) in families]
    points = [pt for pt in points if pt.rig != PUBLISHED_RIG]
    sessions: dict[tuple, dict] = {}
    for pt in points:
        rec = pt.record
        key = (pt.rig, pt.part, rec.session_id or rec.server_started)
        row = sessions.setdefault(key, {"family": family(pt.rig), "rig": pt.rig, "part": pt.part,
                                        "started": rec.server_started, "setup": _setup(rec),
                                        "start_to_healthy_s": rec.start_to_healthy_s, "points": [],
                                        "flood": [], "single": [], "decode": []})
        row["points"].append(pt.name)
        kind = pt.params.get("kind")
        summary = pass_summary(pt)
        if pt.part == NAME and pt.name == "flood" or pt.part == part3:
            row["flood"].append(summary["output_tok_s"])
        if pt.part == NAME and (pt.name == "single" or kind == "decode" and pt.params.get("batch") == 1):
            row["single"].append(summary["itl_p50_ms"])
        if pt.part == NAME and kind == "decode":
            row["decode"].append((float(pt.params["batch"]), summary["itl_p50_ms"]))
    part1_setups = {(r["family"], r["setup"]["command"], str(r["setup"]["environment"]))
                    for r in sessions.values() if r["part"] == NAME}
    rows = []
    for r in sorted(sessions.values(), key=lambda r: (r["family"], r["started"] or 0)):
        if r["part"] == part3 and (r["family"], r["setup"]["command"], str(r["setup"]["environment"])) not in part1_setups:
            continue  # another cap: another configuration
        fit = analysis.linear_fit(*zip(*r["decode"])) if len(r["decode"]) >= 3 else None
        rows.append({"family": r["family"], "rig": r["rig"], "part": r["part"], "started": r["started"],
                     "points": len(r["points"]), "flood_tok_s": r["flood"][0] if r["flood"] else math.nan,
                     "single_itl_ms": float(pd.Series(r["single"]).median()) if r["single"] else math.nan,
                     "fit_intercept_ms": fit.intercept if fit else math.nan, "fit_slope_ms": fit.slope if fit else math.nan,
                     "start_to_healthy_s": r["start_to_healthy_s"], "setup": r["setup"]})
    for family in {r["family"] for r in rows}:
        first = next(r for r in rows if r["family"] == family)["setup"]
        for r in rows:
            if r["family"] == family:
                r["differs"] = ", ".join(f for f in SETUP_FIELDS if r["setup"].get(f) != first.get(f))
    table = pd.DataFrame(rows, columns=["family", "rig", "part", "started", "points", "flood_tok_s", "single_itl_ms",
                                        "fit_intercept_ms", "fit_slope_ms", "start_to_healthy_s", "setup", "differs"])
    table["started"] = pd.to_datetime(table["started"], unit="s", utc=True).dt.strftime("%Y-%m-%d %H:%M")
    return table.drop(columns=["setup"])


def steadiness(sessions: pd.DataFrame, spread: pd.DataFrame) -> dict[str, dict]:
    """Per family with two or more sessions: the range of each session metric, and which part-1 sessions'
    floods agree with part 3's. `spread`: rig.run_to_run (repeated points of one family); the tolerance is
    the largest difference between repeated part-3 points of the family (how far two runs of the same
    part-3 point have been seen apart), and a part-1 flood agrees when it lies within that of the median
    part-3 flood. None where the family has no repeated part-3 point or no part-3 flood."""
    from ..schema import PARTS

    out: dict[str, dict] = {}
    for family, s in sessions.groupby("family"):
        if len(s) < 2:
            continue
        res: dict = {"sessions": len(s)}
        for col in ("flood_tok_s", "single_itl_ms", "fit_intercept_ms", "fit_slope_ms"):
            v = s[col].dropna()
            if len(v) >= 2:
                res[col] = (float(v.min()), float(v.max()), float(v.max() / v.min() - 1))
        rep = spread[(spread["rig"] == family) & (spread["part"] == PARTS[3]) & (spread["metric"] == "output_tok_s")]
        p3 = s[(s["part"] == PARTS[3])]["flood_tok_s"].dropna()
        if len(rep) and len(p3):
            tol = float(rep["difference_pct"].abs().max()) / 100
            ref = float(p3.median())
            p1 = s[(s["part"] == NAME)].dropna(subset=["flood_tok_s"])
            res.update(tolerance=tol, part3_flood=ref,
                       agree={f"{r.rig} {r.started}": abs(r.flood_tok_s / ref - 1) <= tol for r in p1.itertuples()},
                       agreeing_rigs=sorted({r.rig for r in p1.itertuples() if abs(r.flood_tok_s / ref - 1) <= tol}))
        out[family] = res
    return out


# ---------------------------------------------------------------------------------------------
# The page's tables and chart rows (what notebook 1's cells display; each a frame of the views)
# ---------------------------------------------------------------------------------------------
def knee_table(views: dict[str, dict]) -> pd.DataFrame:
    """The knee per rig: the first rate completed under the keep-up share, the last kept up, the flood ceiling."""
    return pd.DataFrame([{"rig": r, "knee_rps": v.get("knee_rps"), "last_kept_up_rps": v.get("last_kept_up_rps"),
                          "ceiling_rps": v.get("ceiling_rps"), "ceiling_tok_s": v.get("ceiling_tok_s")}
                         for r, v in views.items()])


def memory_budget_table(memory: pd.DataFrame, shape) -> pd.DataFrame:
    """vLLM's startup memory report per rig, with the KV tokens its budget would hold if only the full-attention
    layers, or all layers, of `shape` (modelshape.ModelShape) kept K and V per token."""
    per_layer = shape.kv_bytes_per_token_per_layer
    m = memory.copy()
    m["tokens_if_8_layers"] = m["kv_cache_gib"] * analysis.GIB / (shape.attention_layers * per_layer)
    m["tokens_if_all_layers"] = m["kv_cache_gib"] * analysis.GIB / (shape.layers * per_layer)
    cols = ["rig", "model_weights_gib", "kv_cache_gib", "kv_cache_tokens", "tokens_if_8_layers", "tokens_if_all_layers",
            "max_concurrency_x", "max_concurrency_tokens_per_request", "concurrency_discount_x"]
    return m[[c for c in cols if c in m]]


def steadiness_words(steady: dict[str, dict], views: dict[str, dict]) -> str:
    """Per rig family (steadiness), in sentences: how far its sessions of this configuration lay apart (flood, one
    stream's ITL, the step fit), which rigs' part-1 floods lie within part 3's run-to-run spread, and the knee of
    those that do."""
    lines = []
    for fam, r in steady.items():
        parts_ = [f"On the {fam} family, {r['sessions']} sessions of this configuration"]
        if "flood_tok_s" in r:
            lo, hi, rel = r["flood_tok_s"]
            parts_.append(f"flooded at {lo:,.0f} to {hi:,.0f} output tok/s ({100 * rel:.0f}% apart)")
        if "single_itl_ms" in r:
            lo, hi, rel = r["single_itl_ms"]
            parts_.append(f"gave one stream a median ITL of {lo:.2f} to {hi:.2f} ms ({100 * rel:.0f}% apart)")
        if "fit_intercept_ms" in r:
            (a0, a1, _), (b0, b1, _) = r["fit_intercept_ms"], r["fit_slope_ms"]
            parts_.append(f"and fitted {a0:.2f} to {a1:.2f} ms + {b0:.3f} to {b1:.3f} ms x batch")
        line = ", ".join(parts_) + "."
        if "tolerance" in r:
            ok = r["agreeing_rigs"]
            line += (f" Two runs of the same part-3 point have differed by up to {100 * r['tolerance']:.1f}%; within that "
                     f"of part 3's median flood ({r['part3_flood']:,.0f} tok/s) lie the part-1 sessions of "
                     f"{', '.join(ok) if ok else 'no rig'}")
            slow = [k for k, v in r["agree"].items() if not v]
            line += f"; not {', '.join(slow)}." if slow else "."
            for rig in ok:
                if rig in views and views[rig].get("knee_rps"):
                    line += (f" The knee from {rig}, whose flood agrees: {views[rig]['knee_rps']:.1f} req/s, kept up at "
                             f"{views[rig]['last_kept_up_rps']:.1f}.")
        lines.append(line)
    return " ".join(lines)


def mixed_step_rows(mixed: pd.DataFrame) -> pd.DataFrame:
    """figures.p01.mixed_steps' rows: per rate pass, what the offered rate needs and the generation throughput in
    intervals with and without prefills (long form, missing values dropped)."""
    return mixed.melt(id_vars=["rig", "offered_rate_rps"], var_name="what", value_name="tok_s",
                      value_vars=["needed_gen_tok_s", "gen_with_prefill_tok_s", "gen_decode_only_tok_s"]).dropna()


def floor_rows(views: dict[str, dict]) -> pd.DataFrame:
    """figures.p01.roofline's rows: each rig's weight-stream floor beside its one stream's measured ITL."""
    rows = []
    for r, v in views.items():
        if v.get("floor_ms") and v.get("single_itl_ms"):
            rows += [{"rig": r, "what": "weight-stream floor", "ms": v["floor_ms"]},
                     {"rig": r, "what": "measured ITL (one stream)", "ms": v["single_itl_ms"].value}]
    return pd.DataFrame(rows)


def floor_table(views: dict[str, dict]) -> pd.DataFrame:
    """The floor per rig: weights less the vision tower over the measured bandwidth, against one stream's ITL."""
    return pd.DataFrame([{"rig": r, "weights_gib": _v(v.get("weights_gib")), "vision_tower_gib": v.get("vision_gib"),
                          "hbm_bandwidth_gb_s": _v(v.get("bandwidth_gb_s")), "floor_ms": v.get("floor_ms"),
                          "single_itl_ms": _v(v.get("single_itl_ms")), "floor_over_itl": v.get("roofline_fraction")}
                         for r, v in views.items()])


def step_fit_rows(views: dict[str, dict], max_num_seqs: int) -> tuple[pd.DataFrame, dict, dict, pd.DataFrame]:
    """figures.p01.step_time_fit's inputs: the decode points of every rig with a fit, the fits ((a, b) per rig),
    the batch each rig's line is drawn to (its largest decode batch, else `max_num_seqs`), and the crossovers."""
    fits, tops, pts, cross = {}, {}, [], []
    for r, v in views.items():
        if v.get("fit_intercept_ms") and v.get("fit_slope_ms"):
            fits[r] = (v["fit_intercept_ms"], v["fit_slope_ms"])
            dec = v.get("decode")
            tops[r] = float(dec["batch"].max()) if dec is not None and len(dec) else float(max_num_seqs)
            cross.append({"rig": r, "crossover": v["crossover"]})
            if dec is not None and len(dec):
                pts += [{"rig": r, "batch": b, "step_ms": s} for b, s in zip(dec["batch"], dec["step_ms"])]
    return pd.DataFrame(pts), fits, tops, pd.DataFrame(cross)


def step_fit_table(views: dict[str, dict]) -> pd.DataFrame:
    """The step fit per rig with its 95% ranges, the crossover, and pure decode's rate against the serving ceiling."""
    rows = []
    for r, v in views.items():
        fit = v.get("fit")
        rows.append({"rig": r, "intercept_ms": v.get("fit_intercept_ms"), "slope_ms": v.get("fit_slope_ms"),
                     "intercept_95ci_ms": f"{fit.intercept_ci[0]:.3g} to {fit.intercept_ci[1]:.3g}" if fit else "",
                     "slope_95ci_ms": f"{fit.slope_ci[0]:.3g} to {fit.slope_ci[1]:.3g}" if fit else "",
                     "crossover_seqs": v.get("crossover"), "pure_decode_tok_s": v.get("pure_decode_tok_s"),
                     "serving_ceiling_tok_s": v.get("ceiling_tok_s"), "decode_over_serving": v.get("decode_over_serving")})
    return pd.DataFrame(rows)


def running_table(views: dict[str, dict], published_cap: int) -> pd.DataFrame:
    """The running batch per rig at the lowest rate (mean) and flooded (largest), beside its cap (the published
    rig's from the post, `published_cap`)."""
    return pd.DataFrame([{"rig": r, "running_at_lowest_rate": v.get("running_low"), "running_flooded": v.get("running_flood"),
                          "max_num_seqs": published_cap if r == PUBLISHED_RIG else v.get("max_num_seqs")}
                         for r, v in views.items()])


def running_series(points: dict[str, dict]) -> pd.DataFrame:
    """figures.p01.running_batch's rows: the running batch of every rate pass over its seconds, from the stats lines
    during the pass (measured_points' points per rig)."""
    series = []
    for rig, by_name in points.items():
        for name, point in by_name.items():
            if point.params.get("kind") == "rate":
                st = point.stats_during()
                if len(st):
                    t0 = st["epoch"].min()
                    series += [{"rig": rig, "point": name, "t_s": e - t0, "running": n}
                               for e, n in zip(st["epoch"], st["running"])]
    return pd.DataFrame(series)


def top_cap_table(sweep: pd.DataFrame) -> pd.DataFrame:
    """Part 3's flood at each rig's and model's top cap, and what limited it: the KV cache (at least 95% used), the
    cap (the running batch reached it), or else decode speed."""
    top = sweep.sort_values("max_num_seqs").groupby(["rig", "model"]).tail(1)
    if not len(top):
        return top
    top = top.assign(limit=[
        "KV cache" if (row.kv_usage_max_pct if "kv_usage_max_pct" in top else math.nan) >= 95 else
        ("max_num_seqs cap" if row.running_max == row.max_num_seqs else "decode speed")
        for row in top.itertuples()])
    cols = ["rig", "model", "max_num_seqs", "running_max", "kv_usage_max_pct", "output_tok_s", "limit"]
    return top[[c for c in cols if c in top]]


# ---------------------------------------------------------------------------------------------
# Sentences for the page, computed from the data
# ---------------------------------------------------------------------------------------------


def knee_words(views: dict[str, dict], mixed: pd.DataFrame) -> str:
    """Inside the knee, per rig: where the knee came against the flood, what the knee rate needed, what intervals
    that also prefilled and intervals of decode alone made there (in words where a pass had no interval of one kind,
    marked where a figure is one interval), and the median running batch."""
    def made(value: float, n: int, some: str, none: str) -> str:
        if n == 0 or value != value:
            return none
        return f"{some} {fmt_num(value)}" + (" (one interval)" if n == 1 else "")

    lines = []
    for r, v in views.items():
        m = mixed[mixed["rig"] == r].set_index("offered_rate_rps")
        if not len(m) or not v.get("knee_rps") or v["knee_rps"] not in m.index:
            continue
        row = m.loc[v["knee_rps"]]
        n_alone = int(row.decode_only_intervals)
        with_p = made(row.gen_with_prefill_tok_s, int(row.intervals) - n_alone, "intervals that also prefilled made",
                      "no interval of the pass also prefilled")
        alone = made(row.gen_decode_only_tok_s, n_alone, "intervals of decode alone",
                     "no interval of the pass decoded alone")
        lines.append(f"On {r} the knee came at {v['knee_rps'] / v['ceiling_rps']:.0%} of the flood ceiling. At the "
                     f"knee the offered rate needed {fmt_num(row.needed_gen_tok_s)} generated tokens a second; "
                     f"{with_p}, {alone}, and the median running batch was {row.running_median:.0f} of "
                     f"{row.max_num_seqs:.0f}.")
    return " ".join(lines)


def single_interval_note(mixed: pd.DataFrame) -> str:
    """The passes of figure 1c whose decode-alone (or with-prefill) figure is a single stats interval of one
    second, named: '' when none is."""
    said = []
    for r in mixed.itertuples():
        kinds = [k for k, n in (("decode alone", r.decode_only_intervals),
                                ("with prefill", r.intervals - r.decode_only_intervals)) if n == 1]
        if kinds:
            said.append(f"{r.rig} at {fmt_num(r.offered_rate_rps)} req/s ({' and '.join(kinds)})")
    if not said:
        return ""
    return ("Drawn from a single one-second stats interval, so one sample, not a median: " + "; ".join(said) + ".")


def flood_steady_words(rates: pd.DataFrame) -> str | None:
    """Each measured rig's flood (rate_table's rows of infinite offered rate): its steady window beside its whole
    pass, in one sentence (steady.flood_window_words); None where no measured rig is shown."""
    from ..measure.steady import flood_window_words

    floods = rates[(rates["source"] == "measured") & rates["offered_rate_rps"].astype(float).map(math.isinf)]
    return flood_window_words(floods.assign(flood=floods["rig"] + "'s flood"), "flood")


def above_flood_words(rates: pd.DataFrame, points: dict[str, dict]) -> str:
    """Figure 1a's rate passes that completed more than the rig's flood (its dashed line), with whether each ran in
    the flood's server session: '' where none did."""
    def session(pt) -> str | None:
        return pt.record.session_id

    lines = []
    for rig, g in rates[rates["source"] == "measured"].groupby("rig", sort=True):
        flood = g[~g["offered_rate_rps"].apply(math.isfinite)]
        if not len(flood):
            continue
        ceiling = float(flood["completed_rps"].iloc[0])
        over = g[g["offered_rate_rps"].apply(math.isfinite) & (g["completed_rps"] > ceiling)]
        if not len(over):
            continue
        pts = points.get(rig, {})
        flood_pt = next((p for p in pts.values() if p.params.get("kind") == "rate"
                         and not math.isfinite(float(p.params.get("offered_rate_rps", 0)))), None)
        by_rate = {float(p.params["offered_rate_rps"]): p for p in pts.values() if p.params.get("kind") == "rate"}
        other = [r for r in over.itertuples() if flood_pt is not None and r.offered_rate_rps in by_rate
                 and session(by_rate[r.offered_rate_rps]) != session(flood_pt)]
        said = ", ".join(f"{fmt_num(r.completed_rps)} req/s at an offered {fmt_num(r.offered_rate_rps)} req/s"
                         for r in over.itertuples())
        one = len(over) == 1
        line = (f"On {rig} {'one rate pass' if one else f'{len(over)} rate passes'} completed more than the flood's "
                f"{fmt_num(ceiling)} req/s (the dashed line): {said}.")
        if len(other) == len(over):
            line += (f" {'It' if one else 'Each'} ran in another server session than the flood, and sessions of this "
                     "configuration do not measure the same ceiling (see Server to server).")
        elif other:
            line += (f" {len(other)} of them ran in another server session than the flood (see Server to server).")
        else:
            line += " They ran in the flood's own server session."
        lines.append(line)
    return " ".join(lines)


def goodput_words(goodput: pd.DataFrame, ttft_ms: float, tpot_ms: float, points: dict[str, dict] | None = None) -> str:
    """Where the share of requests within one target pair rises with the offered rate (the chart is not
    monotonic), per rig: the rise, and, where the passes at and past it sent the same number of requests, that
    share against the server's max_num_seqs over that number (the requests admitted at once). '' where it never
    rises by a point or more."""
    sel = goodput[(goodput["ttft_target_ms"] == ttft_ms) & (goodput["tpot_target_ms"] == tpot_ms)]
    cap = {}
    for rig, pts in (points or {}).items():
        caps = {p.record.max_num_seqs for p in pts.values() if p.params.get("kind") == "rate"}
        if len(caps) == 1:
            cap[rig] = next(iter(caps))
    lines = []
    for rig, g in sel.groupby("rig", sort=True):
        g = g.sort_values("offered_rate_rps").reset_index(drop=True)
        rises = [(g.loc[i - 1], g.loc[i]) for i in range(1, len(g)) if g.loc[i, "share_ok"] >= g.loc[i - 1, "share_ok"] + 0.01]
        if not rises:
            continue
        a, b = max(rises, key=lambda ab: ab[1]["share_ok"] - ab[0]["share_ok"])
        line = (f"On {rig} the share within {ttft_ms:g} ms and {tpot_ms:g} ms rises from "
                f"{100 * a['share_ok']:.1f}% at {fmt_num(a['offered_rate_rps'])} req/s to {100 * b['share_ok']:.1f}% at "
                f"{fmt_num(b['offered_rate_rps'])} req/s")
        same = g[g["offered_rate_rps"] >= b["offered_rate_rps"]]
        n = int(b["requests"])
        if rig in cap and cap[rig] and (same["requests"] == n).all() and len(same) > 1:
            line += (f"; every pass from there on sent {n:,} requests, and {fmt_num(cap[rig])} of {n:,} (the "
                     f"max_num_seqs over the requests) is {100 * cap[rig] / n:.1f}%: the share of the requests the "
                     "server could run at once, so past the knee it follows how many requests a pass sent, not the "
                     "rate")
        lines.append(line + ".")
    return " ".join(lines)


def _v(x):
    """An Interval's value, or the number itself."""
    return getattr(x, "value", x)


def _span(values, unit: str = "", pct: bool = False) -> str:
    """'a' or 'a to b' over the values, at three significant digits (percentages as whole percents)."""
    vals = sorted(float(v) for v in values)
    f = (lambda x: f"{100 * x:.0f}%") if pct else (lambda x: f"{fmt_num(x)}{unit}")
    return f(vals[0]) if f(vals[0]) == f(vals[-1]) else f"{f(vals[0])} to {f(vals[-1])}"


def batch_limit(v: dict) -> str | None:
    """What bounded a rig's flooded batch: 'the KV pool' (the batch reached the pool's admission limit, under the
    cap), 'max_num_seqs' (it reached the cap) or 'neither'; None where the flood's batch is not known."""
    run, cap, adm = _v(v.get("running_flood")), _v(v.get("max_num_seqs")), _v(v.get("admission"))
    if run is None or cap is None or run != run:
        return None
    if adm is not None and adm < cap and run >= adm - 1:
        return "the KV pool"
    return "max_num_seqs" if run >= cap else "neither"


def key_findings(views: dict[str, dict]) -> list[str]:
    """The findings box of part 1: 3-5 sentences from the shown rigs' views (published and measured)."""
    pub = views.get(PUBLISHED_RIG, {})
    measured = {r: v for r, v in views.items() if r != PUBLISHED_RIG}
    out = []
    if pub.get("admission") is not None and pub.get("running_flood") is not None:
        pool = pub.get("pool")
        pages = (f" ({pool.num_blocks:,} KV pages at {pool.pages_per_request(pub['request_tokens'])} a request)"
                 if pool is not None else "")
        same = [r for r, v in measured.items() if batch_limit(v) == "the KV pool"]
        out.append(f"The post reads the A10G's flooded batch of about {fmt_num(_v(pub['running_flood']))} as set by the "
                   f"load. It is the KV pool's admission limit for this workload, {fmt_num(_v(pub['admission']))} "
                   f"requests{pages}" + (f"; {', '.join(same)}, given a pool of that size, ran "
                                         f"{_span(_v(measured[r]['running_flood']) for r in same)}." if same else "."))
    rows = [(r, v) for r, v in views.items() if v.get("floor_ms") and v.get("single_itl_ms") is not None]
    if rows:
        out.append("One request alone: " + "; ".join(
            f"{r} {fmt_num(_v(v['single_itl_ms']))} ms a token, of which streaming the weights once is "
            f"{fmt_num(v['floor_ms'])} ms ({v['floor_ms'] / _v(v['single_itl_ms']):.0%})" for r, v in rows) + ".")
    flood = [(r, v) for r, v in views.items() if v.get("ceiling_rps")]
    if flood:
        out.append("The flood's ceiling: " + "; ".join(f"{r} {fmt_num(v['ceiling_rps'])} req/s "
                                                      f"({fmt_num(v['ceiling_tok_s'])} output tok/s)" for r, v in flood) + ".")
    knee = [(r, v) for r, v in views.items() if v.get("knee_rps") and v.get("ceiling_rps")]
    if knee:
        out.append("Offered a steady rate, each server fell behind (completed under "
                   f"{100 * knee[0][1]['keep_up']:.0f}% of the offered rate) below its flood's ceiling: " + "; ".join(
                       f"{r} kept up at {v['last_kept_up_rps'] / v['ceiling_rps']:.0%} of it and fell behind at "
                       f"{v['knee_rps'] / v['ceiling_rps']:.0%}" for r, v in knee) + ".")
    return out[:5]


def takeaways(views: dict[str, dict]) -> list[tuple[str, str]]:
    """The post's own 'what to take away' list, in our words, each with what the shown rigs' data say."""
    pub = views.get(PUBLISHED_RIG, {})
    facts = pub.get("post", {})
    limits = {r: batch_limit(v) for r, v in views.items() if batch_limit(v)}
    bounded = "; ".join(f"{r}: {lim}" for r, lim in limits.items())
    pool_pub = batch_limit(pub) == "the KV pool"
    out = []
    said = (f"The A10G's flood made {fmt_num(pub['ceiling_rps'])} req/s with the weights taking "
            f"{fmt_num(_v(pub['weights_gib']))} GiB" if pub.get("ceiling_rps") and pub.get("weights_gib") else "")
    if pool_pub:
        said += (f"{'; but' if said else 'But'} memory was not idle: the KV pool admitted at most "
                 f"{fmt_num(_v(pub['admission']))} requests of this workload, and the flooded batch stopped there")
    out.append(("A model that fits in memory with room to spare can still cap the server's throughput: memory "
                "headroom and serving capacity are different resources.", (said or "Not measured on the rigs shown") + "."))
    knee = [(r, v) for r, v in views.items() if v.get("knee_rps")]
    out.append(("Load-test for the knee and serve below it: past it more load buys only queue, and no single-request "
                "benchmark shows it.",
                ("Every rig shown has a knee: " + "; ".join(f"{r} kept up at {fmt_num(v['last_kept_up_rps'])} req/s and "
                                                            f"fell behind at {fmt_num(v['knee_rps'])}" for r, v in knee)
                 + ".") if knee else "Not measured on the rigs shown."))
    out.append(("Know which limit you hit first: on a small model usually memory, on this 4B generation speed.",
                (f"On the A10G the 4B's flooded batch stopped at the KV pool's admission limit "
                 f"({fmt_num(_v(pub['admission']))}): the KV pool, which the post reads as far from full, is what "
                 "stopped its batch. "
                 if pool_pub else "") + (f"What bounded each flood's batch: {bounded}." if limits else "")))
    ratio = facts.get("cold_over_warm_ttft_p99")
    cold = [(r, v) for r, v in views.items() if v.get("cold_over_warm_p99")]
    out.append(("Warm the server before believing any number" + (f": the cold p99 TTFT was about {ratio:g}x the warm one."
                                                                 if ratio else "."),
                ("; ".join(f"{r}: cold p99 {fmt_num(_v(v['cold_over_warm_p99']))}x warm, cold median "
                           f"{fmt_num(_v(v['cold_p50_ms']))} ms against {fmt_num(_v(v['warm_p50_ms']))} ms warm"
                           for r, v in cold) + ".") if cold else "Not measured on the rigs shown."))
    return out


def bullets(items: list[str]) -> str:
    """Markdown bullets, one per item (the findings box's body)."""
    return "\n".join(f"- {t}" for t in items)


def takeaways_markdown(items: list[tuple[str, str]]) -> str:
    """The post's take-aways as a numbered list, each followed by what the data say."""
    return "\n".join(f"{i}. {post} **What the data say:** {data}" for i, (post, data) in enumerate(items, 1))


def protocol_tables(data_dir, rigs: list[str]) -> dict:
    """The protocol's tables: page_tables, the data dir and the post's figures the claims quote (claim_facts)."""
    return {**page_tables(data_dir, rigs), DATA_DIR: data_dir, REFERENCE: claim_facts(data_dir)}


def protocol_view(rig: str, tables: dict, params: dict) -> dict:
    """The protocol's view: rig_view, carrying the post's figures its claims quote."""
    return {**rig_view(rig, tables[DATA_DIR], tables), REFERENCE: tables[REFERENCE]}


def rig_findings(view: dict) -> list[str]:
    """The protocol's findings: the findings box's sentences on this rig alone."""
    return key_findings({view["rig"]: view})


PART = Part(NAME, DEFAULTS, without_data_dir(plan), tables=protocol_tables, view=protocol_view, findings=rig_findings,
            claims=judged(CLAIMS),
            # every part's: a repeat rig's points of every part (rig.run_to_run), every start's log
            # (pools.block_size), the step chapter's answers and step model (p00.part_answers, stepcheck)
            reads=EVERY_PART)
