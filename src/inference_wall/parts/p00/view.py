"""Part 0's view of a rig: the step per point, the components per variant, the models side by side (pure over the
tables)."""
from __future__ import annotations

import math

import pandas as pd

from ...measure.analysis import Interval
from ...measure.claims import Missing, known_number, missing
from ...words import MISSING
from .families import COMPONENTS
from .plan import API_FLAG, DEFAULTS, DEFAULT_VARIANTS, DENSE, MAIN, SYNC_FLAG, label
from .tables import CLIENTS_COLUMNS, CLIENT_COLUMNS, shape_bytes
from ...words import number as _n


def _steps(points: pd.DataFrame, variant: str, kind: str = "decode", sampling: str | None = "server") -> pd.Series:
    f = points[(points["variant"] == variant) & (points["kind"] == kind)]
    if "after_trace" in f:
        f = f[~f["after_trace"]]
    if sampling is not None:
        f = f[f["sampling"] == sampling]
    return f.set_index("batch")["step_ms"].sort_index()


def components(points: pd.DataFrame, traces: pd.DataFrame, rig: str, variant: str, data_dir=None) -> pd.DataFrame:
    """One row per traced batch of `variant` on `rig`: the measured step (engine counters, untraced), each kernel
    family's GPU milliseconds per step (the trace), and the GPU's idle time: the untraced step less the traced
    kernels' time (what the kernels leave of the step). Columns: batch, step_ms, one per component, sum_ms
    (the kernels), mixed."""
    pts = points[points["rig"] == rig]
    step = _steps(pts, variant)
    tr = traces[(traces["rig"] == rig) & (traces["variant"] == variant)]
    rows = []
    for b, g in tr.groupby("batch"):
        measured = step.get(b, math.nan)
        row = {"batch": int(b), "step_ms": measured, "mixed": bool(g["mixed"].any()),
               "traced_step_ms": float(g["span_ms_per_step"].iloc[0])}
        for fam, ms in zip(g["family"], g["ms_per_step"]):
            row[fam] = ms
        busy = float(g["ms_per_step"].sum())
        row["kernels_ms"] = busy
        row["GPU idle"] = measured - busy if measured == measured else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def sampling_cost(points: pd.DataFrame, rig: str, variant: str) -> pd.DataFrame:
    """Per batch: the step with the server's sampling defaults (the checkpoint's top-k/top-p), with no top-k/top-p,
    and greedy; what the filter costs (defaults - none) and what random sampling costs over an argmax."""
    pts = points[points["rig"] == rig]
    out = pd.DataFrame({"server": _steps(pts, variant),
                        "nofilter": _steps(pts, variant, "nofilter", "nofilter"),
                        "greedy": _steps(pts, variant, "greedy", "greedy")})
    out = out.dropna(how="all", subset=["nofilter", "greedy"])
    out["filter_ms"] = out["server"] - out["nofilter"]
    out["random_ms"] = out["nofilter"] - out["greedy"]
    # the spread of the server's step between the two halves of its pass: a difference inside it is not a cost
    f = pts[(pts["variant"] == variant) & (pts["kind"] == "decode") & (pts["sampling"] == "server")].set_index("batch")
    out["spread_ms"] = [(f.loc[b, "step_hi_ms"] - f.loc[b, "step_lo_ms"]) if b in f.index else math.nan
                        for b in out.index]
    return out.reset_index(names="batch")


def host_overlap(points: pd.DataFrame, rig: str, variants: dict) -> pd.DataFrame:
    """Per variant with a `base` and per batch: the step without asynchronous scheduling, the base's step with it,
    and what the overlap hides (the difference)."""
    pts = points[points["rig"] == rig]
    rows = []
    for name, v in variants.items():
        base = v.get("base")
        if not base or SYNC_FLAG not in v.get("serve_args", []):
            continue
        sync, asyn = _steps(pts, name), _steps(pts, base)
        for b in sync.index:
            if b in asyn.index:
                rows.append({"variant": base, "batch": int(b), "sync_ms": sync[b], "async_ms": asyn[b],
                             "hidden_ms": sync[b] - asyn[b]})
    return pd.DataFrame(rows, columns=["variant", "batch", "sync_ms", "async_ms", "hidden_ms"])


def api_servers(points: pd.DataFrame, rig: str, variants: dict) -> pd.DataFrame:
    """Per variant that adds API servers to a `base` (its serve_args name --api-server-count) and per batch: the
    step and the most requests running at once with the base's one API server and with the variant's, so a reader
    sees whether the front end held the batch back (a pass that never held its batch has no step)."""
    pts = points[(points["rig"] == rig) & (points["kind"] == "decode")]
    rows = []
    for name, v in variants.items():
        args = v.get("serve_args", [])
        base = v.get("base")
        if not base or API_FLAG not in args:
            continue
        count = args[args.index(API_FLAG) + 1] if args.index(API_FLAG) + 1 < len(args) else "?"
        mine = pts[pts["variant"] == name].set_index("batch")
        theirs = pts[(pts["variant"] == base) & (pts["sampling"] == "server")].set_index("batch")
        for b in sorted(set(mine.index) | set(theirs.index) if len(mine) else []):
            one, more = (theirs.loc[b] if b in theirs.index else None), (mine.loc[b] if b in mine.index else None)
            rows.append({"variant": base, "api_servers": count, "batch": int(b),
                         "step_one_ms": one["step_ms"] if one is not None else math.nan,
                         "running_one": one["running_max_pass"] if one is not None else math.nan,
                         "step_more_ms": more["step_ms"] if more is not None else math.nan,
                         "running_more": more["running_max_pass"] if more is not None else math.nan})
    return pd.DataFrame(rows, columns=["variant", "api_servers", "batch", "step_one_ms", "running_one",
                                       "step_more_ms", "running_more"])


def api_table(api: pd.DataFrame) -> pd.DataFrame:
    """api_servers' rows as the page shows them: the batches the server with more API servers ran, each step a number,
    'never held' (the pass ran and never held its batch long enough to time) or 'not run' (no such pass on the rig),
    headed for a reader."""
    rows = api.dropna(subset=["running_more"])
    out = pd.DataFrame({"Batch": rows["batch"].astype(int).map("{:,}".format)})
    for col, ran, head in (("step_one_ms", "running_one", "step, one API server (ms)"),
                           ("step_more_ms", "running_more", "step, more API servers (ms)")):
        out[head] = [_n(x) if known_number(x) else "never held" if known_number(r) else "not run"
                     for x, r in zip(rows[col], rows[ran])]
    out["most running, one"] = [f"{x:,.0f}" if known_number(x) else MISSING for x in rows["running_one"]]
    out["most running, more"] = [f"{x:,.0f}" for x in rows["running_more"]]
    return out.reset_index(drop=True)


def context_cost(points: pd.DataFrame, rig: str, variant: str, batch: int, data_dir=None) -> dict | None:
    """The step at one batch against the mean context of its sequences (the decode point and the longer prompts):
    its slope per 1,000 tokens of context per sequence, and what reading K and V predicts for it."""
    pts = points[(points["rig"] == rig) & (points["variant"] == variant) & (points["batch"] == batch)]
    pts = pts[(pts["kind"] == "context") | ((pts["kind"] == "decode") & (pts["sampling"] == "server"))]
    pts = pts.dropna(subset=["step_ms"])
    if len(pts) < 2:
        return None
    pts = pts.sort_values("context")
    x = pts["context"].to_numpy(float) / 1000.0
    y = pts["step_ms"].to_numpy(float)
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    preset = pts["preset"].iloc[0]
    bw = pts["bandwidth_gb_s"].dropna()
    kv = shape_bytes(preset, data_dir)["kv_bytes_per_token"]
    predicted = batch * 1000 * kv / (bw.iloc[0] * 1e9) * 1000 if len(bw) else math.nan
    return {"batch": batch, "contexts": pts["context"].tolist(), "steps_ms": y.tolist(),
            "slope_ms_per_k": slope, "kv_predicted_ms_per_k": predicted,
            "after_trace": sorted(pts[pts["after_trace"]]["point"]) if "after_trace" in pts else []}


def floors(points: pd.DataFrame, rig: str, variant: str, data_dir=None) -> dict:
    """The shapes' bytes over the rig's measured bandwidth: the weight stream of one step, and per sequence the
    recurrent state read and written once."""
    pts = points[(points["rig"] == rig) & (points["variant"] == variant)]
    if not len(pts):
        return {}
    sb = shape_bytes(pts["preset"].iloc[0], data_dir)
    bw = pts["bandwidth_gb_s"].dropna()
    if not len(bw):
        return {**sb, "bandwidth_gb_s": math.nan, "weights_ms": math.nan, "state_ms_per_seq": math.nan}
    gbs = float(bw.median())
    return {**sb, "bandwidth_gb_s": gbs, "weights_ms": sb["weights_bytes"] / (gbs * 1e9) * 1000,
            "state_ms_per_seq": 2 * sb["state_bytes_per_seq"] / (gbs * 1e9) * 1000}


def step_curve(points: pd.DataFrame, rig: str) -> pd.DataFrame:
    """The measured pure-decode step of every variant against the batch (server sampling defaults), with the
    per-sequence cost between neighbouring batches ((step(B2) - step(B1)) / (B2 - B1))."""
    f = points[(points["rig"] == rig) & (points["kind"] == "decode")].dropna(subset=["step_ms"])
    if "after_trace" in f:
        f = f[~f["after_trace"]]
    f = f.sort_values(["variant", "batch"]).copy()
    f["per_seq_ms"] = f.groupby("variant")["step_ms"].diff() / f.groupby("variant")["batch"].diff()
    f["tok_s"] = f["batch"] / f["step_ms"] * 1000
    return f[["variant", "preset", "async", "batch", "step_ms", "per_seq_ms", "tok_s", "itl_p50_ms", "tpot_p50_ms"]]


def _row(frame: pd.DataFrame, **where) -> pd.Series | None:
    f = frame
    for k, v in where.items():
        f = f[f[k] == v]
    return f.iloc[0] if len(f) else None


def _step_interval(points: pd.DataFrame, variant: str, batch: int, kind: str = "decode") -> Interval:
    r = _row(points, variant=variant, batch=batch, kind=kind)
    if r is None or missing(r["step_ms"]):
        raise Missing(f"{variant} step at batch {batch}")
    lo = r["step_lo_ms"] if known_number(r["step_lo_ms"]) else r["step_ms"]
    hi = r["step_hi_ms"] if known_number(r["step_hi_ms"]) else r["step_ms"]
    return Interval(float(r["step_ms"]), float(min(lo, r["step_ms"])), float(max(hi, r["step_ms"])))


def _of_rig(frame: pd.DataFrame | None, rig: str, columns: list[str]) -> pd.DataFrame:
    return frame[frame["rig"] == rig] if frame is not None and len(frame) else pd.DataFrame(columns=columns)


def rig_view(rig: str, tables: dict, params: dict | None = None, data_dir=None) -> dict:
    """Everything the page and the claims read for one rig: per variant its floors and step curve, the main
    variant's components at each traced batch, sampling, host overlap and context costs."""
    params = params or DEFAULTS
    points = tables["points"][tables["points"]["rig"] == rig]
    traces = tables["trace"][tables["trace"]["rig"] == rig] if len(tables["trace"]) else tables["trace"]
    variants = params.get("variants", DEFAULT_VARIANTS)
    main = MAIN if MAIN in set(points["variant"]) else next(iter(points["variant"].dropna().unique()), None)
    view = {"rig": rig, "main": main, "points": points, "traces": traces,
            "curve": step_curve(points, rig) if len(points) else pd.DataFrame(),
            "floors": {v: floors(points, rig, v, data_dir) for v in points["variant"].dropna().unique()},
            "components": components(points, traces, rig, main, data_dir) if main and len(traces) else pd.DataFrame(),
            "sampling": sampling_cost(points, rig, main) if main else pd.DataFrame(),
            "host": host_overlap(points, rig, variants),
            "api": api_servers(points, rig, variants),
            "context": context_cost(points, rig, main, int(params.get("context_batch", 64)), data_dir) if main else None,
            "clients": _of_rig(tables.get("clients"), rig, CLIENTS_COLUMNS),
            "client_runs": _of_rig(tables.get("client_runs"), rig, CLIENT_COLUMNS)}
    comp = view["components"]
    if len(comp):
        pure = comp[~comp["mixed"]].sort_values("batch")
        view["pure_components"] = pure
    traced = set(traces["variant"].dropna()) if len(traces) else set()
    view["variant_components"] = {v: components(points, traces, rig, v, data_dir) for v in sorted(traced)}
    view["models"] = model_table(view)
    return view


# ---------------------------------------------------------------------------------------------
# The models side by side: the single stream against its weight floor, the batch of 256, the cost per sequence
# ---------------------------------------------------------------------------------------------

MODEL_ORDER = ["0.5b", "4b", "9b-fp16", "9b-int4"]


def _comp_at(view: dict, variant: str, batch: int, name: str) -> float:
    comp = view.get("variant_components", {}).get(variant)
    if comp is None or not len(comp):
        return math.nan
    c = comp[~comp["mixed"]].set_index("batch")
    return float(c.loc[batch, name]) if batch in c.index and known_number(c.loc[batch, name]) else math.nan


def _per_seq(curve: pd.DataFrame, variant: str, a: int, b: int) -> float:
    c = curve[curve["variant"] == variant].set_index("batch")["step_ms"]
    return (c[b] - c[a]) / (b - a) if a in c.index and b in c.index else math.nan


def _from_batch(curve: pd.DataFrame, variant: str, upto: int = 64, least: int = 8) -> int | None:
    """The largest measured batch from `least` to `upto` (64, or the next below where 64 never held its batch)."""
    have = [int(b) for b in curve[curve["variant"] == variant]["batch"] if least <= b <= upto]
    return max(have) if have else None


def _quant_mm_at(view: dict, variant: str, batch: int) -> float:
    """The quantized layers' matmul kernels' GPU milliseconds per step in the variant's trace at `batch` (0 where the
    trace has none, NaN where there is no such trace)."""
    tr = view.get("traces")
    if tr is None or not len(tr) or "quant_mm_ms_per_step" not in tr:
        return math.nan
    at = tr[(tr["variant"] == variant) & (tr["batch"] == batch) & ~tr["mixed"]]
    return float(at["quant_mm_ms_per_step"].iloc[0]) if len(at) else math.nan


def model_table(view: dict) -> pd.DataFrame:
    """One row per model served with async scheduling (variants without a `base`): the single stream's step against
    its weight floor (the language model's bytes over the measured bandwidth), what the trace splits it into (the
    weight matmuls, and the rate at which they read the weights; every other kernel; the GPU idle), the step and the
    GPU's idle share at 256 sequences, and the cost of an added sequence between batches 64 and 256 and 256 and
    1,024 (the step curve: engine counters, points after a profiler window in their server left out)."""
    curve, pts = view["curve"], view["points"]
    rows = []
    present = set(curve["variant"]) if len(curve) else set()
    for v in [m for m in MODEL_ORDER if m in present] + sorted(present - set(MODEL_ORDER) - {"4b-sync"}):
        if v not in present or (pts[pts["variant"] == v]["base"].dropna().any()):
            continue
        f = view["floors"].get(v) or {}
        c = curve[curve["variant"] == v].set_index("batch")["step_ms"]
        s1 = float(c[1]) if 1 in c.index else math.nan
        mm = _comp_at(view, v, 1, "weights (matmul)")
        k1 = _comp_at(view, v, 1, "kernels_ms")
        s256 = float(c[256]) if 256 in c.index else math.nan
        k256 = _comp_at(view, v, 256, "kernels_ms")
        kern = pts[(pts["variant"] == v)]["linear_kernel"].dropna()
        rows.append({"variant": v, "model": label(v), "weights_gb": f.get("weights_bytes", math.nan) / 1e9,
                     "floor_ms": f.get("weights_ms", math.nan), "step_b1_ms": s1,
                     "step_over_floor": s1 / f["weights_ms"] if f.get("weights_ms") else math.nan,
                     "matmul_b1_ms": mm,
                     "matmul_gb_s": f.get("weights_bytes", math.nan) / 1e9 / (mm / 1000) if mm == mm and mm else math.nan,
                     "matmul_pct_bw": 100 * f["weights_ms"] / mm if mm == mm and mm and f.get("weights_ms") else math.nan,
                     **_matmul_split(f, mm, _quant_mm_at(view, v, 1)),
                     "other_kernels_b1_ms": k1 - mm, "idle_b1_ms": s1 - k1,
                     "step_b256_ms": s256, "kernels_b256_ms": k256,
                     "idle_b256_pct": 100 * (s256 - k256) / s256 if s256 == s256 and s256 else math.nan,
                     "from_batch": _from_batch(curve, v),
                     "per_seq_to_256_us": 1000 * _per_seq(curve, v, _from_batch(curve, v) or 0, 256),
                     "per_seq_256_1024_us": 1000 * _per_seq(curve, v, 256, 1024),
                     "state_mb_per_seq": f.get("state_bytes_per_seq", math.nan) / 1e6,
                     "linear_kernel": str(kern.iloc[0]) if len(kern) else ""})
    return pd.DataFrame(rows)


def _matmul_split(f: dict, matmul_ms: float, quant_ms: float) -> dict:
    """The weight matmuls at batch 1 split by kernel: the quantized layers' kernels (`quant_mm_b1_ms`) reading the
    quantized weights, and the 16-bit GEMMs (`gemm16_b1_ms`: the output head and any layer left in 16 bits) reading
    theirs, each with its read rate (% of the measured bandwidth). NaN where the model has no quantized layer."""
    bw = f.get("bandwidth_gb_s", math.nan)
    out = dict.fromkeys(["quant_mm_b1_ms", "quant_mm_pct_bw", "gemm16_b1_ms", "gemm16_pct_bw"], math.nan)
    if not f.get("quantized_bytes") or not known_number(quant_ms) or not quant_ms or not known_number(bw):
        return out
    gemm16 = matmul_ms - quant_ms
    out.update(quant_mm_b1_ms=quant_ms, quant_mm_pct_bw=100 * f["quantized_bytes"] / (bw * 1e9) * 1000 / quant_ms,
               gemm16_b1_ms=gemm16,
               gemm16_pct_bw=100 * f["gemm16_bytes"] / (bw * 1e9) * 1000 / gemm16 if gemm16 > 0 else math.nan)
    return out


MODEL_COLUMNS = {"model": "model", "weights_gb": "weights a step reads (GB)", "floor_ms": "weight floor (ms)",
                 "step_b1_ms": "step at 1 (ms)", "step_over_floor": "step / floor", "matmul_b1_ms": "matmuls at 1 (ms)",
                 "matmul_pct_bw": "matmuls' read rate (% of bandwidth)", "other_kernels_b1_ms": "other kernels at 1 (ms)",
                 "idle_b1_ms": "GPU idle at 1 (ms)", "step_b256_ms": "step at 256 (ms)",
                 "idle_b256_pct": "GPU idle at 256 (%)", "from_batch": "from batch", "per_seq_to_256_us": "per added sequence, to 256 (us)",
                 "per_seq_256_1024_us": "per added sequence, 256-1,024 (us)"}


def skipped_points(view: dict) -> list[str]:
    """The points left out of the curves because a profiler window ran before them in the same server."""
    pts = view["points"]
    return sorted(pts[pts["after_trace"]]["point"]) if "after_trace" in pts else []


def _component(view: dict, batch: int, name: str) -> float:
    comp = view.get("pure_components")
    if comp is None or not len(comp) or batch not in set(comp["batch"]):
        raise Missing(f"a pure-decode trace at batch {batch}")
    value = comp.set_index("batch").loc[batch, name]
    if missing(value):
        raise Missing(f"{name} at batch {batch}")
    return float(value)


def _traced_pair(view: dict) -> tuple[int, int]:
    comp = view.get("pure_components")
    if comp is None or len(comp) < 2:
        raise Missing("two pure-decode traces")
    batches = sorted(int(b) for b in comp["batch"])
    return batches[-2], batches[-1]


def client_pair(view: dict) -> tuple[pd.Series, pd.Series]:
    """(one client's point, the most clients' point) of the first variant that ran both, the dense model first."""
    c = view.get("clients")
    if c is None or not len(c):
        raise Missing("two clients at once against one server")
    for variant in [DENSE, *sorted(set(c["variant"].dropna()) - {DENSE})]:
        v = c[(c["variant"] == variant)].dropna(subset=["tok_s"])
        if 1 in set(v["clients"]) and (v["clients"] > 1).any():
            return v[v["clients"] == 1].iloc[0], v.sort_values("clients").iloc[-1]
    raise Missing("a flood from one client and from several with the counters polled in both")


def component_long(view: dict) -> pd.DataFrame:
    """The main variant's pure-decode components as long rows (batch, component, ms, share_pct, order) for the bars."""
    comp = view.get("pure_components")
    if comp is None or not len(comp):
        return pd.DataFrame(columns=["batch", "component", "ms", "share_pct", "order"])
    rows = []
    for d in comp.to_dict("records"):
        for i, name in enumerate(COMPONENTS):
            ms = d.get(name)
            if ms is None or missing(ms):
                continue
            rows.append({"batch": str(int(d["batch"])), "component": name, "ms": max(float(ms), 0.0),
                         "share_pct": 100 * max(float(ms), 0.0) / d["step_ms"], "order": i})
    return pd.DataFrame(rows)


def clients_page_table(view: dict) -> pd.DataFrame:
    """The clients points as the page shows them: per client count, the server's rates over the common window and
    each client's own output rate."""
    c, runs = view.get("clients"), view.get("client_runs")
    if c is None or not len(c):
        return pd.DataFrame()
    rows = []
    for r in c.sort_values(["variant", "clients"]).itertuples():
        mine = runs[runs["point"] == r.point].sort_values("client")
        rows.append({"model": label(r.variant), "clients": int(r.clients), "prompts": f"{int(r.prompts):,}",
                     "common window (s)": _n(r.window_s), "steps a second": _n(r.steps_per_s),
                     "step (ms)": _n(r.step_ms), "server's output (tok/s)": _n(r.tok_s),
                     "running (mean)": _n(r.running_mean),
                     "each client's output (tok/s)": ", ".join(_n(x) for x in mine["output_tok_s"]) or MISSING})
    return pd.DataFrame(rows)
