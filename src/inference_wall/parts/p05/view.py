"""Part 5's view of one rig, pure over its tables: each format's measurements (variants.measure_variant), and
the page's summary, cost and estimator tables over the views."""
from __future__ import annotations

import math
import pandas as pd

from ...measure.analysis import Interval
from ...measure.claims import known_number
from ...model.modelshape import preset_group_size
from ...model.weightbytes import FORMATS
from ...words import MISSING
from ..variants import apply_start, measure_variant, rig_bandwidth, rig_price, sig, usd_per_million
from .plan import DEFAULTS, FORMAT_LABELS, REFERENCE


def rig_view(rig: str, tables: dict, p: dict | None = None, data_dir=None) -> dict:
    """Everything part 5's figures and claims need about one rig: a dict per variant (the reference, then each
    format measured), the rig's bandwidth (the spread of its captures), and the formats it skipped."""
    pts = tables["points"]
    pts = pts[pts["rig"] == rig] if len(pts) else pts
    ref = tables["reference"]["points"]
    ref = ref[ref["rig"] == rig] if len(ref) else ref
    bandwidth = rig_bandwidth(pts, ref)
    view: dict = {"rig": rig, "bandwidth_gb_s": bandwidth, "variants": {}}
    pp = {**DEFAULTS, **(p or {})}
    st = tables["starts"]
    st = st[st["rig"] == rig] if len(st) else st
    own = pts[pts["format"] == REFERENCE] if len(pts) else pts
    if len(ref) and len(own):  # this part's reference server: its single stream and decode; parts 1/3's floods
        ref = pd.concat([own, ref[ref["kind"] == "flood"]], ignore_index=True)
    elif len(ref):  # parts 1/3 alone: their decode batches as this part's, so that the fits compare
        ref = ref[(ref["kind"] != "decode") | ref["batch"].isin(pp["decode_batches"])]
    elif len(own):
        ref = own
    if len(ref):
        presets = [x for x in ref["preset"].dropna().unique()]
        rv = measure_variant(ref, presets[0] if presets else None, "fp16", bandwidth, data_dir,
                      int(p["max_num_seqs"]) if p else None, pp["fit_max_batch"])
        mine = st[st["format"] == REFERENCE] if len(st) else st
        starts = tables["reference"]["starts"]
        starts = starts[starts["rig"] == rig] if len(starts) else starts
        if len(mine):  # this part's reference server: its log's weights, KV cache and pool
            apply_start(rv, mine)
            rv["weights_gib"] = float(rv["weights_gib"])
        elif len(starts):
            rv["weights_gib"] = float(starts.sort_values("started").iloc[-1]["weights_gib"])
        rv["label"] = f"{rv['preset']} 16-bit ({'this part' if len(own) else 'parts 1 and 3'})"
        view["variants"][REFERENCE] = rv
    for fmt in FORMATS:
        sub = pts[pts["format"] == fmt] if len(pts) else pts
        if not len(sub):
            continue
        v = measure_variant(sub, sub["preset"].iloc[0], fmt, bandwidth, data_dir, fit_max_batch=pp["fit_max_batch"])
        apply_start(v, st[(st["format"] == fmt)] if len(st) else st)
        v["label"] = f"{v['preset']} {FORMAT_LABELS[fmt]}" + (f", group {preset_group_size(v['preset'], data_dir)}"
                                                             if fmt == "int4" else "")
        view["variants"][fmt] = v
    if p is not None:
        view["skipped"] = dict(p.get("skip_formats") or {})
    if "prices" in tables and len(pts):
        view["price"] = rig_price(tables["prices"], pts)
    return view


def variant_summary(views: dict[str, dict]) -> pd.DataFrame:
    """One row per (rig, variant): bytes a step reads, weights the log reports, floor, single ITL, the fit,
    the ceiling, the pool it leaves."""
    rows = []
    for rig, view in views.items():
        for key, v in view["variants"].items():
            def val(k):
                x = v.get(k)
                return x.value if isinstance(x, Interval) else x
            rows.append({"rig": rig, "variant": v.get("label"), "format": v["format"], "reference": key == REFERENCE,
                         "decode_gb": v.get("decode_gb"), "weights_gib": v.get("weights_gib"),
                         "kv_cache_gib": v.get("kv_cache_gib"),
                         "floor_ms": val("floor_ms"), "single_itl_ms": val("single_itl_ms"),
                         "fixed_ms": val("fixed"), "per_seq_ms": val("slope"), "per_seq_tpot_ms": val("slope_other"),
                         "bend_ratio": v.get("bend_ratio"),
                         "ceiling_tok_s": val("ceiling_tok_s"), "ceiling_sm_mhz": v.get("ceiling_sm_mhz"),
                         "ceiling_power_cap_pct": 100 * v["ceiling_power_cap"] if known_number(v.get("ceiling_power_cap"))
                         else math.nan, "top_cap": v.get("top_cap"),
                         "admission_limit": v.get("admission_limit"), "kernels": v.get("kernels")})
    return pd.DataFrame(rows)


def cost_table(views: dict[str, dict]) -> pd.DataFrame:
    """Each variant's flood ceiling, for the cost per million tokens at a price per GPU-hour (figures.p05), and
    where the price listing has the rig's GPU, that cost at its listed low, middle and high (USD)."""
    cols = ["rig", "variant", "format", "ceiling_tok_s", "top_cap", "gpu", "usd_low", "usd_mid", "usd_high"]
    s = variant_summary(views)
    if not len(s):
        return pd.DataFrame(columns=cols)
    s = s[s["ceiling_tok_s"].notna()].copy()
    for key in ("gpu", "low", "mid", "high"):
        s[key if key == "gpu" else f"usd_{key}"] = [
            ((views[r].get("price") or {}).get(key) if key == "gpu" else
             usd_per_million((views[r].get("price") or {}).get(key), t)) for r, t in zip(s["rig"], s["ceiling_tok_s"])]
    return s[cols]


def cost_points(views: dict[str, dict]) -> pd.DataFrame:
    """The step fit's fixed and per-sequence cost of every variant with its 95% range, and the floor (bytes /
    bandwidth) where the rig measured its bandwidth, against the bytes a decode step reads (long form)."""
    rows = []
    for rig, view in views.items():
        for key, v in view["variants"].items():
            if "decode_gb" not in v:
                continue
            base = {"rig": rig, "variant": v["label"], "format": v["format"], "decode_gb": v["decode_gb"],
                    "reference": "yes" if key == REFERENCE else "no"}
            for quantity, k, series in (("fixed cost (batch-1 step)", "fixed", "measured"),
                                        ("per-sequence cost (slope)", "slope", "measured"),
                                        ("fixed cost (batch-1 step)", "floor_ms", "floor: bytes / bandwidth")):
                if isinstance(v.get(k), Interval):
                    i = v[k]
                    rows.append({**base, "quantity": quantity, "series": series, "value": i.value, "low": i.low,
                                 "high": i.high})
    return pd.DataFrame(rows, columns=["rig", "variant", "format", "decode_gb", "reference", "quantity", "series",
                                       "value", "low", "high"])


def ceiling_gaps(view: dict, spread: pd.DataFrame) -> list[dict]:
    """Each quantized format's flood ceiling against fp16's on one rig, and whether the gap is inside the rig's
    run-to-run spread (repeat_spread: the largest change between repeats of the same flood, either way)."""
    vs = view["variants"]
    if "fp16" not in vs or "ceiling_tok_s" not in vs["fp16"]:
        return []
    base = vs["fp16"]["ceiling_tok_s"].value
    worst = float(spread["change"].abs().max()) if len(spread) else math.nan
    out = []
    for fmt in ("int4", "fp8"):
        if fmt in vs and "ceiling_tok_s" in vs[fmt]:
            gap = vs[fmt]["ceiling_tok_s"].value / base - 1
            out.append({"format": fmt, "gap": gap, "spread": worst,
                        "within": None if math.isnan(worst) else abs(gap) <= worst})
    return out


def per_seq_estimators(views: dict[str, dict]) -> pd.DataFrame:
    """Each variant's per-sequence cost (the fit's slope) by both step estimators, with their ranges."""
    rows = []
    for rig, view in views.items():
        for key, v in view["variants"].items():
            a, b = v.get("slope"), v.get("slope_other")
            rows.append({"rig": rig, "variant": v["label"],
                         "per_seq_itl_ms": a.value if a else math.nan,
                         "itl_range": f"{sig(a.low)} to {sig(a.high)}" if a else MISSING,
                         "per_seq_tpot_ms": b.value if b else math.nan,
                         "tpot_range": f"{sig(b.low)} to {sig(b.high)}" if b else MISSING})
    return pd.DataFrame(rows, columns=["rig", "variant", "per_seq_itl_ms", "itl_range", "per_seq_tpot_ms",
                                       "tpot_range"])
