"""Part 5, four bits: one model in 16 bits, fp8 and 4-bit GPTQ, each on its own server, against the part-1/3
model of the same rig (the reference); does a decode step's fixed cost follow the bytes its weights take,
and what does the per-sequence cost follow?

A variant is one server session per (model, format): a single stream, decode at fixed batch sizes (the step
fit: fixed + per-sequence cost), and a flood at the session's cap; further caps of part 3's sweep each get a
server of their own. The KV pool each format leaves comes from the variant's startup log (kvcache).
"""
from __future__ import annotations

import math

import pandas as pd

from ..measure.analysis import Interval, combine
from ..measure.claims import Claim, Judgement, Missing, known_number, missing, need
from ..errors import UserError
from ..records.store import load_points, pass_summary
from ..run.sweep import PointPlan
from ..words import MISSING
from ..model.modelshape import preset_decode_bytes, preset_group_size
from ..model.weightbytes import FORMATS
from .protocol import EVERY_PART, Part, judged, one_paragraph, reading_data_dir, with_data_dir, without_data_dir
from .variants import (BAND, STEP_NAMES, apply_start, flood_point, interval_words, measure_variant,
                       num, pct, point_name, point_table, positive_prediction, rig_bandwidth, rig_price, sig,
                       startup_table, stream_points, usd_per_million)
from . import variants

NAME = "05-four-bits"
NOTEBOOK = "notebooks/05-four-bits.md"

DEFAULTS = {
    "model": "qwen3.5-9b",  # the 16-bit preset; the 4-bit one is "<model>-gptq-int4" (a quantization_config)
    "formats": ["fp16", "int4", "fp8"],  # run in this order (each its own server)
    "skip_formats": {},  # format -> why this rig cannot serve it: left out of the plan, named on the page
    "max_num_seqs": 256,  # each format's main server: single stream, decode batches, and the top flood
    "caps": [64],  # further caps of part 3's sweep, each its own server per format (after every main server)
    "input_len": 256,
    "output_len": 128,
    "single_prompts": 8,  # one request at a time (--max-concurrency 1)
    "decode_batches": [1, 8, 32, 64, 128, 256],  # fixed concurrency: pure decode between waves
    "decode_waves": 3,
    "fit_max_batch": 128,  # the per-sequence cost: the step fit's slope over decode batches up to this one (where the
    # step still grows by a fixed cost per sequence; past it the 4B's H200 steps bend upward as the arithmetic binds)
    "reference_session": True,  # one more server in this part's run: the rig's own model (its profile's preset) in
    # 16 bits, single stream and decode batches, so the reference shares the run's session (not parts 1/3's)
    "waves": 4,  # a flood's prompts = waves x cap, within min/max, raised to last min_window_s (as part 3)
    "min_prompts": 32,
    "max_prompts": 4096,
    "min_window_s": 10.0,
    "seed": 0,  # a flood's prompts: the same for every cap, format and rig (and part 3's)
    "poll_s": 0.25,  # /metrics during every flood's measured pass (its steady window, steady.flood_steady)
}

FORMAT_SERVE_ARGS = {"fp16": [], "int4": [], "fp8": ["--quantization", "fp8"]}
FORMAT_LABELS = {"fp16": "16-bit", "fp8": "fp8 (online, W8A8)", "int4": "4-bit GPTQ"}  # int4: + its group (rig_view)
REFERENCE = "ref"  # the rig's own model in 16 bits: this part's reference server, else parts 1/3


def variant_preset(model: str, fmt: str) -> str:
    if fmt not in FORMATS:
        raise UserError(f"unknown weight format {fmt!r}; valid: {', '.join(FORMATS)}")
    return f"{model}-gptq-int4" if fmt == "int4" else model






def run_formats(p: dict) -> list[str]:
    for fmt in [*p["formats"], *p["skip_formats"]]:
        variant_preset(p["model"], fmt)  # validates the name
    return [f for f in p["formats"] if f not in p["skip_formats"]]


def served_presets(p: dict, profile) -> list[str]:
    """The presets this part's servers load: each format's variant, and the rig's own model for the reference
    server (not the rig's model alone, as in the other parts)."""
    out = [variant_preset(p["model"], fmt) for fmt in run_formats(p)]
    ref = getattr(profile, "model_preset", None)
    if p.get("reference_session") and ref and ref != p["model"]:
        out.append(ref)
    return list(dict.fromkeys(out))






def plan(p: dict, profile, pools: dict | None = None) -> list[PointPlan]:
    """Every format's main server first (single, decode batches, the top-cap flood), then the other caps."""
    mns = int(p["max_num_seqs"])
    fmts = run_formats(p)
    plans: list[PointPlan] = []

    def flood(fmt: str, cap: int, session: str) -> PointPlan:
        return flood_point(fmt, cap, session, p, variant_preset(p["model"], fmt), FORMAT_SERVE_ARGS[fmt],
                           params={"format": fmt, "model": p["model"]})

    for fmt in fmts:  # the flood keeps p["seed"], the same for every cap, format and rig
        plans += stream_points(fmt, p, variant_preset(p["model"], fmt), FORMAT_SERVE_ARGS[fmt],
                               {"format": fmt, "model": p["model"]})
        plans.append(flood(fmt, mns, f"{fmt}-main"))
    ref_preset = getattr(profile, "model_preset", None)
    if p.get("reference_session") and ref_preset and ref_preset != p["model"]:
        plans += stream_points(REFERENCE, p, ref_preset, [], {"format": REFERENCE, "model": ref_preset})
    for fmt in fmts:
        for cap in sorted(int(c) for c in p["caps"]):
            if cap != mns:
                plans.append(flood(fmt, cap, point_name(fmt, f"mns-{cap:03d}")))
    return plans


# ---------------------------------------------------------------------------------------------
# Replay: tables, per-rig views and claims
# ---------------------------------------------------------------------------------------------












def reference_tables(data_dir=None, rigs: list[str] | None = None) -> dict:
    """The rig's part-1 and part-3 measurements of its own model (16-bit): single stream, decode batches, the
    floods per cap and the server's weights, as rows shaped like part 5's."""
    from ..records.gpuclocks import point_summary
    from . import p01, p03

    rows, starts = [], []
    for part, mod in ((1, p01), (3, p03)):
        for pt in load_points(mod.NAME, data_dir, rigs):
            kind = pt.params.get("kind")
            if part == 3:
                if pt.params.get("model", "main") != "main":
                    continue
                kind = "flood"
            elif kind == "rate" and math.isinf(float(pt.params.get("offered_rate_rps", 0))):
                kind = "flood-part1"  # part 3's floods make the reference's sweep; this one is on its table only
            if kind not in ("single", "decode", "flood"):
                continue
            row = pass_summary(pt)
            clocks = point_summary(pt) or {}
            row.update(sm_mhz_median=clocks.get("sm_mhz_median", math.nan),
                       sw_power_cap_share=clocks.get("sw_power_cap_share", math.nan))
            row.update(kind=kind, format="fp16", source_part=part, batch=pt.params.get("batch"),
                       preset=pt.record.preset,
                       bandwidth_gb_s=pt.record.bandwidth_gb_s)
            rows.append(row)
            rep = pt.startup()
            if rep is not None and rep.weights_gib is not None:
                starts.append({"rig": pt.rig, "weights_gib": rep.weights_gib, "part": part,
                               "started": pt.record.server_started or 0})
    return {"points": pd.DataFrame(rows), "starts": pd.DataFrame(starts)}


def page_tables(data_dir=None, rigs: list[str] | None = None) -> dict:
    from ..records.reference import gpu_prices

    return {"points": point_table(data_dir, rigs, part=NAME), "starts": startup_table(data_dir, rigs, part=NAME),
            "reference": reference_tables(data_dir, rigs), "prices": gpu_prices(data_dir)}








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






def predicted_bytes(model: str, data_dir=None, formats=FORMATS) -> pd.DataFrame:
    """What each format of `model` must read per decode step, by component (no run needed)."""
    rows = []
    for fmt in formats:
        b = preset_decode_bytes(variant_preset(model, fmt), fmt, data_dir)
        rows.append({"format": fmt, "preset": variant_preset(model, fmt), "decode_gb": b.gb,
                     "quantized_gb": b.quantized / 1e9, "unquantized_matrices_gb": b.unquantized_linear / 1e9,
                     "head_gb": b.head / 1e9, "other_gb": b.small / 1e9, "head_share_pct": 100 * b.head / b.total})
    return pd.DataFrame(rows)




# ----------------------------------------------------------------------------------------- claims


def _pair(v: dict, fmt: str, base: str) -> tuple[dict, dict]:
    variants = need(v, "variants")
    if fmt not in variants:
        raise Missing(f"{fmt} variant")
    if base not in variants:
        raise Missing(f"{base} variant")
    return variants[fmt], variants[base]


def _fixed_scales_with_bytes(fmt: str, base: str):
    """The series' prediction: the fixed cost is the weight stream, so it scales with the bytes a step reads."""
    def judge(v: dict) -> Judgement:
        x, b = _pair(v, fmt, base)
        a0, a1 = need(b, "fixed"), need(x, "fixed")
        r = need(x, "bytes").total / need(b, "bytes").total
        pred = a0.map(lambda a: a * r)
        how = (f"{num(a0.value)} ms ({b['label']}) x {num(x['bytes'].gb)} / {num(b['bytes'].gb)} GB read per step "
               f"= {num(pred.value)} ms")
        return Judgement(positive_prediction(pred), a1, how)
    return judge


def _fixed_is_floor_plus_overhead(fmt: str):
    """Refined: the fixed cost is this format's weight stream plus the reference's non-weight fixed cost."""
    def judge(v: dict) -> Judgement:
        x, b = _pair(v, fmt, REFERENCE)
        a0, a1 = need(b, "fixed"), need(x, "fixed")
        f0, f1, bw = need(b, "floor_ms"), need(x, "floor_ms"), need(v, "bandwidth_gb_s")
        b0, b1 = need(b, "bytes"), need(x, "bytes")
        # both floors come from the one bandwidth: vary it once, not each floor on its own
        pred = combine(lambda a, w: max(a - b0.floor_ms(w), 0.0) + b1.floor_ms(w), a0, bw)
        how = (f"{num(f1.value)} ms floor ({num(x['bytes'].gb)} GB / {num(v['bandwidth_gb_s'].value)} GB/s) + "
               f"({num(a0.value)} - {num(f0.value)}) ms the reference's fixed cost beyond its floor = {num(pred.value)} ms")
        return Judgement(positive_prediction(pred), a1, how)
    return judge


def _per_seq(fmt: str, follows: str):
    """Per-sequence cost against the same model in 16 bits: scaled by bytes, or unchanged (it follows the
    parameter count, i.e. the arithmetic and the KV reads, which quantizing the weights does not shrink)."""
    def judge(v: dict) -> Judgement:
        x, b = _pair(v, fmt, "fp16")
        s0, s1 = need(b, "slope"), need(x, "slope")
        if follows == "bytes":
            r = need(x, "bytes").total / need(b, "bytes").total
            pred = s0.map(lambda s: s * r)
            how = f"{num(s0.value)} ms x {num(x['bytes'].gb)} / {num(b['bytes'].gb)} GB = {num(pred.value)} ms"
        else:
            r = x["bytes"].params / b["bytes"].params
            pred = s0.map(lambda s: s * r)
            how = f"{num(s0.value)} ms x {num(x['bytes'].params / 1e9)} / {num(b['bytes'].params / 1e9)} B parameters = {num(pred.value)} ms"
        return Judgement(positive_prediction(pred), s1, how)
    return judge


def _per_seq_model(v: dict) -> Judgement:
    """Across models in 16 bits (the reference and this part's fp16): the per-sequence cost scales with bytes
    (for 16-bit weights, the same ratio as parameters)."""
    x, b = _pair(v, "fp16", REFERENCE)
    s0, s1 = need(b, "slope"), need(x, "slope")
    r = need(x, "bytes").total / need(b, "bytes").total
    pred = s0.map(lambda s: s * r)
    return Judgement(positive_prediction(pred), s1, f"{num(s0.value)} ms ({b['label']}) x {num(x['bytes'].gb)} / {num(b['bytes'].gb)} GB "
                               f"= {num(pred.value)} ms")


def _single_floor(fmt_key: str):
    """A single stream's token time is the weight stream of this format (part 1's roofline)."""
    def judge(v: dict) -> Judgement:
        variants = need(v, "variants")
        if fmt_key not in variants:
            raise Missing(f"{fmt_key} variant")
        x = variants[fmt_key]
        floor, itl = need(x, "floor_ms"), need(x, "single_itl_ms")
        return Judgement(positive_prediction(floor), itl, f"{num(x['bytes'].gb)} GB / {num(v['bandwidth_gb_s'].value)} GB/s = "
                                     f"{num(floor.value)} ms")
    return judge


def _pool_grows(fmt: str):
    """With the same memory fraction, the KV pool takes what the weights leave: a format's pool is the 16-bit
    variant's pool plus the weight memory it frees (both read from each server's startup log)."""
    def judge(v: dict) -> Judgement:
        x, b = _pair(v, fmt, "fp16")
        k0, w0, w1, k1 = need(b, "kv_logged"), need(b, "weights_logged"), need(x, "weights_logged"), need(x, "kv_logged")
        pred = combine(lambda k, a, c: k + a - c, k0, w0, w1)
        return Judgement(positive_prediction(pred), k1, f"{num(k0.value)} GiB KV (16-bit) + {num(w0.value)} - {num(w1.value)} "
                                              f"GiB of weights = {num(pred.value)} GiB")
    return judge


WHY_POOL = ("the profiling run that sizes the pool also measures the peak activation memory, which a quantized kernel's "
            "workspace can change; a rig that fixes the pool in bytes (the CPU rig) gives every format the same pool")
WHY_FIXED = ("a 4-bit step also unpacks and rescales every weight, and the step's non-weight work (kernel launches, "
             "sampling, the Gated DeltaNet's state) does not shrink with the weights; where the ratio is above the band "
             "the format saves less time than it saves bytes")
WHY_MODEL = ("the two models differ in more than bytes: the larger one has wider layers (more work per launched "
             "kernel) and the same number of layers, launches and recurrent state per step, so its non-weight costs "
             "do not grow with its weights")
WHY_SLOPE = ("per-sequence work is the arithmetic of each sequence's row against every weight plus its own KV and "
             "state reads; dequantizing 4-bit weights for more rows, or fp8 activations' quantization, add to it")

CLAIMS = [
    Claim("fixed-bytes-fp16", "The series: a decode step's fixed cost is the weight stream, so it scales with the bytes "
          "the weights take (here: from the smaller model to the larger, both 16-bit).",
          "reference's fixed cost (its step at batch 1) x bytes ratio predicts the fp16 variant's batch-1 step", "ms",
          _fixed_scales_with_bytes("fp16", REFERENCE), BAND, WHY_MODEL),
    Claim("fixed-bytes-fp8", "Quantizing to fp8 halves the bytes, so it halves the fixed cost.",
          "16-bit batch-1 step x bytes ratio predicts the fp8 batch-1 step", "ms",
          _fixed_scales_with_bytes("fp8", "fp16"), BAND, WHY_FIXED),
    Claim("fixed-bytes-int4", "Quantizing to four bits cuts the fixed cost as much as it cuts the bytes.",
          "16-bit batch-1 step x bytes ratio predicts the 4-bit batch-1 step", "ms",
          _fixed_scales_with_bytes("int4", "fp16"), BAND, WHY_FIXED),
    Claim("fixed-floor-fp16", "The larger model's fixed cost is its own weight stream plus the non-weight cost every "
          "step pays.", "fp16 floor (bytes / measured bandwidth) + (reference batch-1 step - reference floor) "
          "predicts the fp16 variant's batch-1 step", "ms", _fixed_is_floor_plus_overhead("fp16"), BAND, WHY_MODEL),
    Claim("fixed-floor-int4", "The 4-bit fixed cost is its own weight stream plus the non-weight cost every step pays.",
          "4-bit floor (bytes / measured bandwidth) + (reference batch-1 step - reference floor) predicts the "
          "4-bit batch-1 step", "ms", _fixed_is_floor_plus_overhead("int4"), BAND, WHY_FIXED),
    Claim("fixed-floor-fp8", "The fp8 fixed cost is its own weight stream plus the non-weight cost every step pays.",
          "fp8 floor + (reference batch-1 step - reference floor) predicts the fp8 batch-1 step", "ms",
          _fixed_is_floor_plus_overhead("fp8"), BAND, WHY_FIXED),
    Claim("single-floor-int4", "One 4-bit stream runs near its weight-stream floor.",
          "4-bit floor predicts the single-stream ITL (at least the floor, within 20% of it to hold)", "ms",
          _single_floor("int4"), (1.0, 1.2), WHY_FIXED),
    Claim("pool-int4", "Four-bit weights leave their freed memory to the KV cache.",
          "16-bit KV pool + 16-bit weights - 4-bit weights (the logs) predicts the 4-bit KV pool", "GiB",
          _pool_grows("int4"), (0.95, 1.05), WHY_POOL),
    Claim("pool-fp8", "fp8 weights leave their freed memory to the KV cache.",
          "16-bit KV pool + 16-bit weights - fp8 weights (the logs) predicts the fp8 KV pool", "GiB",
          _pool_grows("fp8"), (0.95, 1.05), WHY_POOL),
    Claim("per-seq-model", "The series (part 3): the larger model's per-sequence cost tracks its weight bytes.",
          "reference slope x bytes ratio predicts the fp16 variant's slope", "ms/seq",
          _per_seq_model, BAND, WHY_MODEL),
    Claim("per-seq-bytes-int4", "The series (part 3): per-sequence cost tracks weight bytes, so four bits cut it too.",
          "16-bit slope x bytes ratio predicts the 4-bit slope", "ms/seq", _per_seq("int4", "bytes"), BAND, WHY_SLOPE),
    Claim("per-seq-params-int4", "The alternative: per-sequence cost tracks the parameters (arithmetic), unchanged by "
          "the weights' width.", "16-bit slope predicts the 4-bit slope", "ms/seq",
          _per_seq("int4", "params"), BAND, WHY_SLOPE),
    Claim("per-seq-bytes-fp8", "Per-sequence cost tracks weight bytes, so fp8 halves it.",
          "16-bit slope x bytes ratio predicts the fp8 slope", "ms/seq", _per_seq("fp8", "bytes"), BAND, WHY_SLOPE),
    Claim("per-seq-params-fp8", "Per-sequence cost tracks the parameters, unchanged by fp8.",
          "16-bit slope predicts the fp8 slope", "ms/seq", _per_seq("fp8", "params"), BAND, WHY_SLOPE),
]


# ----------------------------------------------------------------------------------------- sentences


def findings(view: dict) -> str:
    """One paragraph per variant of one rig: what it reads, what the log says, what it measured."""
    lines = []
    bw = view.get("bandwidth_gb_s")
    for key, v in view["variants"].items():
        parts = [f"**{v['label']}**"]
        if "bytes" in v:
            parts.append(f"reads {num(v['bytes'].gb)} GB per decode step by its shapes"
                         + (f" (floor {interval_words(v.get('floor_ms'), 'ms')} at {num(bw.value)} GB/s)" if bw else ""))
        if not missing(v.get("weights_gib")):
            parts.append(f"the log reports {num(v['weights_gib'])} GiB of weights")
        if v.get("kernels"):
            parts.append(f"linear kernels: {v['kernels']}")
        parts.append(f"single-stream ITL {interval_words(v.get('single_itl_ms'), 'ms')}")
        if "fixed" in v:
            parts.append(f"step at batch 1 (the fixed cost) {interval_words(v['fixed'], 'ms')}")
        if "fit" in v:
            b = v["slope"] if "slope" in v else Interval.exact(v["fit"].slope)
            parts.append(f"per-sequence cost {interval_words(b, 'ms')} (the step fit's slope over decode batches up to "
                         f"{v['fit_max_batch']}; measured at {', '.join(str(int(b)) for b in v['decode']['batch'])})")
        if "bend_ratio" in v:
            parts.append(f"at batch {v['bend_batch']} the step is {num(v['bend_step_ms'])} ms, "
                         f"{num(v['bend_ratio'])}x what the line predicts there")
        if "ceiling_tok_s" in v:
            parts.append(f"flood at cap {v['top_cap']}: {num(v['ceiling_tok_s'].value)} output tok/s")
        if not missing(v.get("admission_limit")):
            parts.append(f"its KV pool admits {num(v['admission_limit'])} requests at once")
        lines.append("- " + "; ".join(parts) + ".")
    for fmt_name, why in (view.get("skipped") or {}).items():
        lines.append(f"- **{fmt_name}** not run on this rig: {why}.")
    return "\n".join(lines)


def series_summary(rows: pd.DataFrame, views: dict[str, dict]) -> str:
    """Per rig, in words: how the series' own forecasts fared (the claims whose post starts "The series"), and the
    formats of the part's model ordered by per-sequence cost and by flood ceiling, from the data."""
    out = []
    for rig, view in views.items():
        mine = rows[(rows["rig"] == rig) & rows["post"].str.startswith("The series")]
        said = [f"`{r.claim}` {r.verdict} (measured {r.measured}, predicted {r.predicted})" for r in mine.itertuples()
                if r.verdict != "not measured on this rig"]
        if not said:
            continue
        text = f"**{rig}**: the series' forecasts: " + "; ".join(said) + "."
        fmts = {k: v for k, v in view["variants"].items() if k != REFERENCE}
        slopes = {k: v["slope"].value for k, v in fmts.items() if "slope" in v}
        if len(slopes) >= 2:
            order = sorted(slopes, key=slopes.get)
            text += (" Per-sequence cost by the median ITL, least first: "
                     + ", ".join(f"{k} {num(slopes[k])} ms" for k in order))
            other = {k: v["slope_other"].value for k, v in fmts.items() if "slope_other" in v}
            if len(other) == len(slopes):
                text += ("; by the median TPOT: " + ", ".join(f"{k} {num(other[k])} ms"
                                                              for k in sorted(other, key=other.get)))
            text += "."
        tops = {k: v["ceiling_tok_s"].value for k, v in fmts.items() if "ceiling_tok_s" in v}
        if len(tops) >= 2:
            order = sorted(tops, key=tops.get, reverse=True)
            text += (" Flood ceiling, highest first: " + ", ".join(f"{k} {num(tops[k])} tok/s" for k in order) + ".")
        out.append(text)
    return "\n\n".join(out)


def closing_note(views: dict[str, dict], device: pd.DataFrame | None = None) -> str:
    """Per rig: weights GiB, single ITL, the fit and the ceiling per format, and the device minutes used."""
    return variants.closing_note(views, device, NAME, skip=(REFERENCE,), weights=True)




# ----------------------------------------------------------------------------------------- what the page says




def repeat_spread(rig: str, data_dir=None) -> pd.DataFrame:
    """The run-to-run spread of floods on one rig: every flood measured on `rig` and on one of its repeats (rigs
    named `<rig>-run...`) with the same point (part 3's caps, part 1's flood), as the repeat's output throughput
    over the rig's, minus one. Empty where the rig has no repeat."""
    from . import p01, p03

    rows = []
    for mod, floods_only in ((p03, lambda pt: pt.params.get("model", "main") == "main"),
                             (p01, lambda pt: pt.params.get("kind") == "rate"
                              and math.isinf(float(pt.params.get("offered_rate_rps", 0))))):
        mine, repeats = {}, []
        for pt in load_points(mod.NAME, data_dir):
            if not floods_only(pt):
                continue
            if pt.rig == rig:
                mine[pt.name] = pass_summary(pt)["output_tok_s"]
            elif pt.rig.startswith(f"{rig}-run"):
                repeats.append((pt.rig, pt.name, pass_summary(pt)["output_tok_s"]))
        for other, name, tok in repeats:
            if name in mine and mine[name] > 0:
                rows.append({"part": mod.NAME, "rig": rig, "repeat": other, "point": name,
                             "change": tok / mine[name] - 1})
    return pd.DataFrame(rows, columns=["part", "rig", "repeat", "point", "change"])


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


def spread_text(view: dict, spread: pd.DataFrame) -> str:
    """The ceilings' gaps to fp16 set against the run-to-run spread, in words."""
    gaps = ceiling_gaps(view, spread)
    if not gaps:
        return ""
    if not len(spread):
        return ("Flood ceilings against fp16: " + ", ".join(f"{g['format']} {pct(g['gap'])}" for g in gaps)
                + "; this rig has no repeated run to set them against.")
    where = ", ".join(f"{r} in part {int(part.split('-', 1)[0])}" for (part, r), _ in
                      spread.groupby(["part", "repeat"], sort=False))
    words = []
    for g in gaps:
        words.append(f"{g['format']}'s ceiling is {pct(g['gap'])} against fp16's, "
                     + ("within" if g["within"] else "outside") + " that spread")
    return (f"Run to run, the same flood on {view['rig']} changed by {pct(spread['change'].min())} to "
            f"{pct(spread['change'].max())} between repeats ({view['rig']} against {where}; {len(spread)} floods): " + "; ".join(words) + ". A gap within the spread is no difference these runs can "
            "tell.")


def clocks_text(view: dict) -> str:
    """Each format's GPU clock beside its ceiling and its bend: the busy SM clock's median and the share of samples
    at the software power cap, from the passes' own GPU samples."""
    items = []
    for key, v in view["variants"].items():
        if key == REFERENCE or not known_number(v.get("ceiling_sm_mhz")):
            continue
        items.append(f"{key} {sig(v['ceiling_sm_mhz'], exact_whole=False)} MHz, {sig(100 * v['ceiling_power_cap'], 2)}% of samples at "
                     f"the power cap ({sig(v['ceiling_tok_s'].value)} tok/s)")
    if not items:
        return ""
    return ("The GPU's SM clock during each flood at the top cap (median over busy samples) and the share of its "
            "samples at the software power cap: " + "; ".join(items) + ".")


def bend_text(view: dict) -> str:
    """The largest decode batch's step over the fit's line, per format, with that pass's clock: what the bend shows
    and what it does not (a format that bends as much as another is not bent by what only the other does)."""
    bends = {k: v for k, v in view["variants"].items() if k != REFERENCE and "bend_ratio" in v}
    if len(bends) < 2:
        return ""
    batch = next(iter(bends.values()))["bend_batch"]
    items = [f"{k} {sig(v['bend_ratio'])}x" + (f" ({sig(v['bend_sm_mhz'], exact_whole=False)} MHz, {sig(100 * v['bend_power_cap'], 2)}% "
                                                 f"at the power cap)" if known_number(v.get("bend_sm_mhz")) else "")
             for k, v in bends.items()]
    text = f"At a batch of {batch} the step over what each format's line predicts: " + "; ".join(items) + "."
    if "int4" in bends and "fp16" in bends and bends["fp16"]["bend_ratio"] >= bends["int4"]["bend_ratio"] * 0.95:
        text += (" fp16 bends as much as int4, so the bend is not 4-bit work (unpacking) and these runs do not show "
                 "a format turning compute-bound; what sets it is not measured here (candidates: the arithmetic that "
                 "grows with the batch, and the clock, which the power cap lowers at large batches).")
    return text


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


def _apart(a: Interval, b: Interval) -> int:
    """-1 where a's range lies wholly below b's, 1 wholly above, 0 where they overlap."""
    return -1 if a.high < b.low else (1 if a.low > b.high else 0)


def larger_model_text(view: dict) -> str:
    """Whether the larger model costs less per sequence than the reference: said only where both step estimators
    (ITL and TPOT) put its slope's range wholly below the reference's; otherwise what each estimator gives."""
    vs = view["variants"]
    if REFERENCE not in vs or "fp16" not in vs:
        return ""
    r, x = vs[REFERENCE], vs["fp16"]
    pairs = [(STEP_NAMES["itl_p50_ms"], x.get("slope"), r.get("slope")),
             (STEP_NAMES["tpot_p50_ms"], x.get("slope_other"), r.get("slope_other"))]
    pairs = [(n, a, b) for n, a, b in pairs if isinstance(a, Interval) and isinstance(b, Interval)]
    if not pairs:
        return ""
    said = "; ".join(f"by the {n}, {sig(a.value)} ms ({sig(a.low)} to {sig(a.high)}) against "
                     f"{sig(b.value)} ({sig(b.low)} to {sig(b.high)})" for n, a, b in pairs)
    order = {_apart(a, b) for _, a, b in pairs}
    head = f"Per sequence, {x['preset']} in fp16 against {r['preset']}: {said}."
    if len(pairs) == 2 and order == {-1}:
        return head + " Both estimators agree: the larger model costs less per sequence on this rig."
    if len(pairs) == 2 and order == {1}:
        return head + " Both estimators agree: the larger model costs more per sequence on this rig."
    return head + (" The estimators disagree (or their ranges overlap), so these runs do not say which model costs "
                   "less per sequence.")


def key_findings(views: dict[str, dict], predicted: pd.DataFrame, data_dir=None) -> list[str]:
    """The findings box: 3-5 bullets from the rigs shown (the first rig with data; the bytes need no run)."""
    by = predicted.set_index("format")
    out = [f"**Four bits do not quarter the bytes:** a 4-bit step reads {sig(by.loc['int4', 'decode_gb'])} GB against "
           f"fp16's {sig(by.loc['fp16', 'decode_gb'])} GB ({sig(by.loc['int4', 'decode_gb'] / by.loc['fp16', 'decode_gb'])}"
           f" of it), since the {sig(by.loc['int4', 'head_gb'])} GB output head stays in 16 bits."]
    for rig, view in views.items():
        vs = view["variants"]
        if "fp16" in vs and "int4" in vs and "fixed" in vs["fp16"] and "fixed" in vs["int4"]:
            f16, f4 = vs["fp16"]["fixed"].value, vs["int4"]["fixed"].value
            out.append(f"**{rig}: the fixed cost fell less than the bytes:** the batch-1 step went from {sig(f16)} ms "
                       f"(fp16) to {sig(f4)} ms (int4), {sig(f4 / f16)} of it, for "
                       f"{sig(vs['int4']['decode_gb'] / vs['fp16']['decode_gb'])} of the bytes.")
        gaps = ceiling_gaps(view, repeat_spread(rig, data_dir))
        g4 = next((g for g in gaps if g["format"] == "int4"), None)
        if g4 and g4["within"] is not None:
            out.append(f"**{rig}: int4's flood ceiling is {pct(g4['gap'])} against fp16's**, "
                       + ("within" if g4["within"] else "outside")
                       + f" the up to {sig(100 * g4['spread'], 2)}% by which repeats of one flood differ on this rig"
                       + (": no difference these runs can tell." if g4["within"] else "."))
        bends = {k: v.get("bend_ratio") for k, v in vs.items() if k in ("fp16", "int4")}
        if all(known_number(b) for b in bends.values()) and len(bends) == 2:
            out.append(f"**{rig}: 4-bit is not shown to turn compute-bound:** at batch {vs['int4']['bend_batch']} fp16's "
                       f"step sits {sig(bends['fp16'])}x above its line and int4's {sig(bends['int4'])}x; "
                       + (f"fp16's flood ran at {sig(vs['fp16']['ceiling_sm_mhz'], exact_whole=False)} MHz, "
                          f"{sig(100 * vs['fp16']['ceiling_power_cap'], 2)}% of its samples at the software power cap."
                          if known_number(vs["fp16"].get("ceiling_sm_mhz")) else ""))
        lm = larger_model_text(view)
        if lm:
            agree = "Both estimators agree" in lm
            r, x = vs[REFERENCE], vs["fp16"]
            out.append(f"**{rig}: per sequence, the 9B against the 4B depends on the estimator**"
                       if not agree else f"**{rig}: per sequence, {lm.split('Both estimators agree: ')[1][:-1]}**")
            out[-1] += (f": {sig(x['slope'].value)} against {sig(r['slope'].value)} ms by ITL, "
                        f"{sig(x['slope_other'].value)} against {sig(r['slope_other'].value)} ms by TPOT."
                        if "slope_other" in x and "slope_other" in r else ".")
        break  # one rig's numbers: the box stays short
    return out[:5]




PART = Part(NAME, DEFAULTS, without_data_dir(plan), tables=with_data_dir(page_tables), view=reading_data_dir(rig_view),
            findings=one_paragraph(findings), claims=judged(CLAIMS), closing=closing_note,
            served_presets=served_presets,
            reads=EVERY_PART)  # part 1's and 3's servers, part 0's answers and step model, every start's log
