"""The step model carried to other GPUs: its coefficients, the A10G's published figures against it, every
datasheet GPU's single stream and flood, and the h200's own measured steps against it."""
from __future__ import annotations

import math

import pandas as pd

from ...measure import analysis
from .tables import reference, reference_fact
from ... import words
from ...words import join_and
from .stepinputs import measured_steps
from .stepmodel import Gpu, H200_KEY, MODEL_LABELS, StepModel, TRACE_BATCHES, VALIDATION_BATCHES


def coefficient_table(models: dict[str, StepModel]) -> pd.DataFrame:
    """Every coefficient of every model with its value on the h200, how it scales and where it comes from."""
    rows = []
    for v, m in models.items():
        h = Gpu(H200_KEY, "h200", 0, m.h200_bw_gb_s / m.copy_fraction, m.h200_tflops, "", "")
        for t in m.terms:
            rows.append({"model": MODEL_LABELS.get(v, v), "term": t.name, "per": t.per, "scale": t.scale,
                         "h200_ms": m.term_ms(t, h, m.trace_context),
                         "at_context": m.trace_context if t.per_token else math.nan, "source": t.source})
        rows += [{"model": MODEL_LABELS.get(v, v), "term": "non-KV memory overhead (GiB)", "per": "start",
                  "scale": "none", "h200_ms": m.overhead_gib, "at_context": math.nan, "source": m.overhead_source},
                 {"model": MODEL_LABELS.get(v, v), "term": "prefill's fraction of the dense peak", "per": "request",
                  "scale": "tflops", "h200_ms": m.prefill_rate, "at_context": math.nan, "source": m.prefill_source},
                 {"model": MODEL_LABELS.get(v, v), "term": "copy bandwidth's fraction of the datasheet's",
                  "per": "all bytes terms", "scale": "none", "h200_ms": m.copy_fraction, "at_context": math.nan,
                  "source": f"measured on h200: {m.h200_bw_gb_s:.0f} GB/s copy over the datasheet's"}]
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------------------------

def _carried(parts: dict[str, float], top: int = 3) -> str:
    """The largest parts of a predicted value, each as its share of the value (their sum)."""
    total = sum(parts.values())
    ranked = sorted(((k, v) for k, v in parts.items() if v > 0), key=lambda kv: -kv[1])[:top]
    return "; ".join(f"{k} {100 * v / total:.0f}%" for k, v in ranked) if total > 0 else ""


def _top_term(parts: dict[str, float]) -> tuple[str, float]:
    total = sum(parts.values())
    k, v = max(parts.items(), key=lambda kv: kv[1])
    return k, (100 * v / total if total > 0 else math.nan)


def _flood_parts(m: StepModel, gpu: Gpu, batch: float, input_len: int, output_len: int) -> dict[str, float]:
    """Each term's ms in one request's share of a flood (its decode steps' share of the batch, and its prefill)."""
    ctx = input_len + output_len / 2
    parts = {k: output_len * v / batch for k, v in m.parts(gpu, ctx, batch).items()}
    parts["prefill"] = m.prefill_ms(gpu, input_len)
    return parts


def _workload(data_dir=None) -> dict:
    f1 = reference(1, data_dir)
    return {"input_len": int(reference_fact(f1, "workload_input_tokens")),
            "output_len": int(reference_fact(f1, "workload_output_tokens")),
            "max_num_seqs": int(reference_fact(f1, "max_num_seqs")),
            "utilization": reference_fact(f1, "gpu_memory_utilization")}


def a10g_table(models: dict[str, StepModel], gpus_: dict[str, Gpu], ratio: float, data_dir=None) -> pd.DataFrame:
    """The posts' published A10G figures (read through inference_wall.records.reference) beside what the h200's model
    predicts for the A10G's datasheet: quantity, predicted, published, error %, the terms that carry it."""
    from ...model.pools import published_pool
    from ...schema import PUBLISHED_PRESET

    g = gpus_["a10g"]
    m, small = models["4b"], models.get("0.5b")
    w = _workload(data_dir)
    ref1, ref3 = reference(1, data_dir), reference(3, data_dir)
    fit = ref1["step_time_fit"].iloc[0]
    mns = ref3["mns_sweep"].sort_values("max_num_seqs")
    n_in, n_out, cap_top = w["input_len"], w["output_len"], w["max_num_seqs"]
    ctx, tokens = n_in + n_out / 2, n_in + n_out
    memory = m.usable_gib(g, ratio)
    adm = m.admission(memory, w["utilization"], tokens)
    usable = reference_fact(ref1, "gpu_memory_usable")
    adm_usable = m.admission(usable, w["utilization"], tokens)
    a, b = m.fit(g, ctx)
    per = {t.name: m.term_ms(t, g, ctx) for t in m.terms if t.per == "sequence"}
    fixed = {t.name: m.term_ms(t, g, ctx) for t in m.terms if t.per == "step"}
    fixed.update({k: fixed.get(k, 0.0) - v for k, v in per.items()})  # intercept = at 1 less one added sequence
    run = min(cap_top, adm) if adm else cap_top
    rows = []

    def add(quantity, predicted, published, carried, key):
        top, share = _top_term(carried) if isinstance(carried, dict) else ("", math.nan)
        rows.append({"quantity": quantity, "predicted": predicted, "published": published,
                     "error_pct": 100 * (predicted - published) / published,
                     "carried_by": _carried(carried) if isinstance(carried, dict) else carried,
                     "top_term": top, "top_share_pct": share, "reference": key})

    add("copy bandwidth (GB/s)", m.bandwidth(g), reference_fact(ref1, "hbm_bandwidth_measured"),
        f"datasheet {g.bandwidth_gb_s:g} GB/s x the h200's copy fraction {m.copy_fraction:.3f}",
        "01 facts hbm_bandwidth_measured")
    add("single stream (ms per token)", m.step(g, 1, ctx), reference_fact(ref1, "single_request_ms_per_token"),
        m.parts(g, ctx, 1), "01 facts single_request_ms_per_token")
    add("step fit: fixed term (ms)", a, float(fit["intercept_ms"]), fixed, "01 step_time_fit intercept_ms")
    add("step fit: per sequence (ms)", b, float(fit["slope_ms_per_seq"]), per, "01 step_time_fit slope_ms_per_seq")
    add("crossover batch (fixed = per sequence)", a / b, float(fit["crossover_batch_seqs"]),
        "the fixed term over the per-sequence term", "01 step_time_fit crossover_batch_seqs")
    add(f"pure-decode ceiling at {run} sequences (tok/s)", run / m.step(g, run, ctx) * 1000,
        reference_fact(ref1, "pure_decode_ceiling_tok_s"), m.parts(g, ctx, run),
        "01 facts pure_decode_ceiling_tok_s")
    fl = m.flood(g, run, n_in, n_out)
    add(f"serving ceiling, flood at cap {cap_top} (tok/s)", fl["tok_s"], reference_fact(ref1, "serving_ceiling_tok_s"),
        _flood_parts(m, g, run, n_in, n_out), "01 facts serving_ceiling_tok_s")
    add("prefill's share of the GPU under a flood (%)", 100 * fl["prefill_share"],
        reference_fact(ref1, "prefill_gpu_share"),
        f"prefill {fl['prefill_ms_per_request']:.1f} ms against decode {fl['decode_ms_per_request']:.1f} ms a request",
        "01 facts prefill_gpu_share")
    for r in mns.itertuples():
        bb = min(int(r.max_num_seqs), adm) if adm else int(r.max_num_seqs)
        add(f"flood output at cap {int(r.max_num_seqs)} (tok/s)", m.flood(g, bb, n_in, n_out)["tok_s"],
            float(r.output_tok_s), _flood_parts(m, g, bb, n_in, n_out),
            f"03 mns_sweep output_tok_s at {int(r.max_num_seqs)}")
    lo_cap, hi_cap = int(mns["max_num_seqs"].iloc[0]), int(mns["max_num_seqs"].iloc[-1])
    hi_b = min(hi_cap, adm) if adm else hi_cap
    add(f"cliff ratio, cap {hi_cap} over cap {lo_cap} (x)",
        m.flood(g, hi_b, n_in, n_out)["tok_s"] / m.flood(g, lo_cap, n_in, n_out)["tok_s"],
        analysis.cliff_ratio(mns), _flood_parts(m, g, hi_b, n_in, n_out),
        "03 mns_sweep (analysis.cliff_ratio)")
    if small is not None:
        sadm = small.admission(small.usable_gib(g, ratio), w["utilization"], tokens)
        sb = min(hi_cap, sadm) if sadm else hi_cap
        add(f"0.5B cliff ratio, cap {hi_cap} over cap {lo_cap} (x)",
            small.flood(g, sb, n_in, n_out)["tok_s"] / small.flood(g, lo_cap, n_in, n_out)["tok_s"],
            reference_fact(ref3, "small_model_batching_lift"), _flood_parts(small, g, sb, n_in, n_out),
            "03 facts small_model_batching_lift")
    # The post prints no admission limit: its memory report's pool (83.7x of 2,048 tokens) counted in this model's
    # pages is the book's count, and the post's own figure is the running batch it saw under a flood ("~145").
    published_adm = published_pool(PUBLISHED_PRESET, data_dir).admission_limit(tokens)
    add(f"KV admission, {n_in}+{n_out} tokens (seqs; the 'published' figure is the book's count of the post's "
        "memory report)", adm, published_adm,
        f"datasheet memory {memory:.2f} GiB x {w['utilization']:g} - weights {m.weights_gib:g} GiB - overhead "
        f"{m.overhead_gib:.2f} GiB (h200 log), pages of {m.pages_bytes(tokens) / 1e6:.1f} MB a sequence",
        "01 memory_report via p01.published_pool")
    add(f"KV admission, {n_in}+{n_out} tokens, from the post's usable memory (seqs; the book's count of the post's "
        "memory report)", adm_usable, published_adm,
        f"the post's usable {usable:g} GB read as GiB, x {w['utilization']:g}, the same weights, overhead and pages",
        "01 facts gpu_memory_usable; memory_report via p01.published_pool")
    add(f"running batch under a flood at cap {cap_top} (seqs; the post's own figure)", run,
        reference_fact(ref1, "running_batch_flood"),
        f"min(max_num_seqs {cap_top}, the predicted admission {adm})", "01 facts running_batch_flood")
    return pd.DataFrame(rows)


def prefill_sensitivity(models: dict[str, StepModel], gpus_: dict[str, Gpu], ratio: float, data_dir=None,
                        change: float = 0.10, key: str = "a10g") -> dict:
    """How the 4B's predicted floods on `key` move when its tensor TFLOP/s is `change` lower or higher: the
    prefill term (and the matmuls' per-sequence growth) rest on that one figure, which for the A10G is the post's
    quoted spec, not a datasheet's. {"tflops", "source", "rows": [{cap, at, lower, higher, lower_pct, higher_pct}]}."""
    from dataclasses import replace

    m, g = models["4b"], gpus_[key]
    w = _workload(data_dir)
    tokens = w["input_len"] + w["output_len"]
    adm = m.admission(m.usable_gib(g, ratio), w["utilization"], tokens)
    caps = reference(3, data_dir)["mns_sweep"]["max_num_seqs"].astype(int).tolist()
    rows = []
    for cap in caps:
        b = min(cap, adm) if adm else cap
        at = m.flood(g, b, w["input_len"], w["output_len"])["tok_s"]
        lo, hi = (m.flood(replace(g, tflops=g.tflops * f), b, w["input_len"], w["output_len"])["tok_s"]
                  for f in (1 - change, 1 + change))
        rows.append({"cap": cap, "at": at, "lower": lo, "higher": hi, "lower_pct": 100 * (lo - at) / at,
                     "higher_pct": 100 * (hi - at) / at})
    return {"tflops": g.tflops, "source": g.tflops_source, "change_pct": 100 * change, "rows": rows}


def prefill_sensitivity_words(sens: dict) -> str:
    """One sentence: where the A10G's tensor figure comes from and how far the floods move with it."""
    rows = sens["rows"]
    lo = min(r["lower_pct"] for r in rows), max(r["lower_pct"] for r in rows)
    hi = min(r["higher_pct"] for r in rows), max(r["higher_pct"] for r in rows)
    caps = join_and([f"{r['cap']:,}" for r in rows])
    return (f"Every A10G prediction's prefill term rests on the {sens['tflops']:g} TFLOP/s that part 1's post "
            f"quotes, not on a datasheet figure (NVIDIA publishes none for the A10G): were it {sens['change_pct']:g}% "
            f"lower, the predicted floods at caps {caps} would fall by {_n(-lo[1])}% to {_n(-lo[0])}%; "
            f"{sens['change_pct']:g}% higher, they would rise by {_n(hi[0])}% to {_n(hi[1])}%.")


def gpu_table(models: dict[str, StepModel], gpus_: dict[str, Gpu], ratio: float, data_dir=None) -> pd.DataFrame:
    """Per datasheet GPU and series model whose weights fit: the predicted single-stream ITL, the decode ceiling at
    the running batch a flood reaches (min(max_num_seqs, the KV admission limit)), the admission limit for requests
    of the series' lengths, and the batch where an added sequence stops paying (STOP_PAYING_X)."""
    w = _workload(data_dir)
    ctx, tokens = w["input_len"] + w["output_len"] / 2, w["input_len"] + w["output_len"]
    rows = []
    for g in gpus_.values():
        for v, m in models.items():
            adm = m.admission(m.usable_gib(g, ratio), w["utilization"], tokens)
            if adm < 1:
                continue
            run = min(w["max_num_seqs"], adm)
            rows.append({"gpu": g.name, "model": MODEL_LABELS.get(v, v), "itl_ms": m.step(g, 1, ctx),
                         "ceiling_batch": run, "decode_ceiling_tok_s": run / m.step(g, run, ctx) * 1000,
                         "kv_admission": adm, "stop_paying_batch": m.stop_paying_batch(g, ctx)})
    return pd.DataFrame(rows)


def unfit(models: dict[str, StepModel], gpus_: dict[str, Gpu], ratio: float, data_dir=None) -> list[str]:
    w = _workload(data_dir)
    tokens = w["input_len"] + w["output_len"]
    return [f"{MODEL_LABELS.get(v, v)} on the {g.name}" for g in gpus_.values() for v, m in models.items()
            if m.admission(m.usable_gib(g, ratio), w["utilization"], tokens) < 1]


def h200_table(models: dict[str, StepModel], view: dict, gpus_: dict[str, Gpu]) -> pd.DataFrame:
    """The model's prediction of the h200's own measured decode steps (p00.step_curve, at the decode points'
    context), with `in_sample` where the batch is one the coefficients were read at (TRACE_BATCHES), and each
    model's stated error: the largest |error| over its other measured batches (all of the curve, not only
    VALIDATION_BATCHES)."""
    g = gpus_[H200_KEY]
    curve, pts = view["curve"], view["points"]
    rows = []
    for v, m in models.items():
        c, where = measured_steps(view, v)
        d = pts[(pts["variant"] == v) & (pts["kind"] == "decode")]
        ctx = float(d["context"].iloc[0])
        errs = {int(b): 100 * (m.step(g, b, ctx) - s) / s for b, s in c.items()}
        out_of = [abs(e) for b, e in errs.items() if b not in TRACE_BATCHES]
        stated = max(out_of) if out_of else math.nan
        for b in VALIDATION_BATCHES:
            rows.append({"model": MODEL_LABELS.get(v, v), "batch": b, "measured_ms": float(c[b]) if b in c.index
                         else math.nan, "predicted_ms": m.step(g, b, ctx), "error_pct": errs.get(b, math.nan),
                         "in_sample": b in TRACE_BATCHES, "stated_error_pct": stated,
                         "measured_on": where.get(b, "")})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------

_n = words.sig  # three significant figures
