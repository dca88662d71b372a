"""Part 1's view of one rig (everything its claims, figures and prose need: the knee, the ceiling, the step
fit, the roofline, the memory and the KV pool), and the tables the page draws over the views."""
from __future__ import annotations

import math

import pandas as pd

from ...measure import analysis
from ...measure.analysis import Interval, KEEP_UP, LinearFit, combine
from ...measure.claims import fmt_num, known_number
from ...records.reference import load_reference
from ...records.store import pass_summary
from ...schema import PUBLISHED_RIG
from ...words import number
from ..protocol import DATA_DIR, REFERENCE
from .plan import NAME
from .tables import _facts, page_tables, vision_tower_gib


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


fmt = number  # a number in the page's sentences (words.number)


def fit_at(fit: LinearFit, fn, batch: Interval) -> Interval:
    """fn(a, b, B) over the fit's uncertainty and a range of batches."""
    parts = [fit.interval(lambda a, b, x=x: fn(a, b, x)) for x in (batch.low, batch.value, batch.high)]
    return Interval(parts[1].value, min(p.low for p in parts), max(p.high for p in parts))


def steadiness(sessions: pd.DataFrame, spread: pd.DataFrame) -> dict[str, dict]:
    """Per family with two or more sessions: the range of each session metric, and which part-1 sessions'
    floods agree with part 3's. `spread`: rig.run_to_run (repeated points of one family); the tolerance is
    the largest difference between repeated part-3 points of the family (how far two runs of the same
    part-3 point have been seen apart), and a part-1 flood agrees when it lies within that of the median
    part-3 flood. None where the family has no repeated part-3 point or no part-3 flood."""
    from ...schema import PARTS

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
    # named columns even when empty: a rig with no decode point yet (a first run of `--points single`) beside the
    # published fit, which has none, gave frames with no "rig" column and the page failed in run mode (KeyError)
    return (pd.DataFrame(pts, columns=["rig", "batch", "step_ms"]), fits, tops,
            pd.DataFrame(cross, columns=["rig", "crossover"]))


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


def protocol_view(rig: str, tables: dict, params: dict) -> dict:
    """The protocol's view: rig_view, carrying the post's figures its claims quote."""
    return {**rig_view(rig, tables[DATA_DIR], tables), REFERENCE: tables[REFERENCE]}
