"""'What would my GPU do?' as a view a reader drives: pick a GPU (a datasheet row, or your own bandwidth, TFLOP/s and
memory) and a model, and read the refit's predicted single stream, KV admission, decode ceiling and the batch where
an added sequence stops paying, with its predicted step against the batch drawn beside the measured rigs and the
errors the model made where it was tested.

Everything the page needs travels in one JSON payload (`payload`); `_static/iw-yourgpu.js` computes in the reader's
browser exactly what `predict` computes here (the same rule, step for step: tests/test_yourgpu.py compares both on
every datasheet GPU), so the view works offline and its numbers are the table's. The model is parts/p00/refit.py's:
each part of each kernel family carried by the resource its two-GPU ratio points to, the GPU's wait on its host
carried as the fit GPU measured it. The fit GPU is the measured GPU whose copy bandwidth is nearest the target's (in
ratio): a GPU slower than both measured ones is carried from the slower, and the errors shown are that direction's.
The KV admission is the frozen model's page arithmetic (parts/p00/predict.py): the target's memory x the utilization,
less the weights and the non-KV overhead a start of the model logged, in pages.
"""
from __future__ import annotations

import html
import json
import math

from ..words import sig

GRID = (1, 2, 4, 8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024)  # the batches the chart draws
STOP_PAYING_X = 0.9  # parts/p00/predict.py's definition: the step's growth per added sequence reaches 0.9 of step / B
ELEMENT_ID = "iw-yourgpu"


def _fit_record(f, resources: dict[str, str], fit_tflops: float, ds_bw: float) -> dict:
    """What the browser needs of one Fit: its traced batches, each part's ms there (Fit.parts), the idle, and the
    part's resource and scale rule."""
    from ..parts.p00 import refit

    batches = [int(b) for b in f.table.index]
    parts = {name: [f.parts(b)[name] for b in batches] for name in f.parts(batches[0])}
    rules = {}
    for name in parts:
        component = name.rsplit(": ", 1)[0]
        res = resources.get(name, "not bandwidth")
        rules[name] = ("bandwidth" if res == "bandwidth" else
                       "tensor" if refit.NOT_BANDWIDTH.get(component) == "tensor" and name.endswith(refit.GROWTH)
                       else "none")
    return {"rig": f.rig, "bandwidth_gb_s": f.bandwidth_gb_s, "datasheet_bandwidth_gb_s": ds_bw,
            "tflops": fit_tflops, "batches": batches, "parts": parts, "rules": rules,
            "idle": [float(x) for x in f.table["GPU idle"]], "step": [float(x) for x in f.table["step_ms"]],
            "host_bound_share": refit.HOST_BOUND}


def payload(data_dir=None) -> dict | None:
    """The view's data: the GPUs, each series model's fits (one per measured GPU that traced it), its memory
    arithmetic, the measured steps of every measured rig, and the tested errors. None where no GPU has traced the
    4B (the model reads its families' resources from the 4B's traces)."""
    from ..parts import p00
    from ..parts.p00 import predict, refit

    measured = refit.measured_gpus(data_dir, "4b")
    if not measured:
        return None
    gpus_ = predict.gpus(data_dir)
    tf = {k: g.tflops for k, g in gpus_.items()}
    resources, _ = refit.resources_from({r: m["fit"] for r, m in measured.items()}, tf)
    tg = refit.targets(measured, data_dir)
    w = predict._workload(data_dir)
    tokens = w["input_len"] + w["output_len"]
    out = {"gpus": [], "models": {}, "measured": {}, "utilization": w["utilization"],
           "max_num_seqs": w["max_num_seqs"], "tokens": tokens, "grid": list(GRID), "stop_paying_x": STOP_PAYING_X,
           "copy_fraction": None, "errors": {}}
    fractions = [m["fit"].bandwidth_gb_s / gpus_[m["datasheet"]].bandwidth_gb_s for m in measured.values()]
    out["copy_fraction"] = sum(fractions) / len(fractions)
    for key, g in gpus_.items():
        t = tg[key]
        out["gpus"].append({"key": key, "name": g.name, "memory_gb": g.memory_gb,
                            "datasheet_bandwidth_gb_s": g.bandwidth_gb_s, "bandwidth_gb_s": t.bandwidth_gb_s,
                            "bandwidth_source": t.bandwidth_source, "tflops": g.tflops,
                            "tflops_source": g.tflops_source})
    views = {r: m["view"] for r, m in measured.items()}
    h200 = [r for r, m in measured.items() if m["datasheet"] == predict.H200_KEY]
    frozen = predict.step_models(views[h200[0]], data_dir, gpus_) if h200 else {}
    ratio = predict.memory_ratio(views[h200[0]], gpus_, data_dir) if h200 else math.nan
    out["memory_ratio"] = ratio
    for variant in predict.MODELS:
        fits = []
        for rig, m in measured.items():
            f = refit.fit(m["view"], variant, m["datasheet"])
            if f is not None:
                fits.append(_fit_record(f, resources, tf[m["datasheet"]],
                                        gpus_[m["datasheet"]].bandwidth_gb_s))
        sm = frozen.get(variant)
        if not fits or sm is None:
            continue
        label = predict.MODEL_LABELS[variant]
        out["models"][label] = {
            "fits": fits, "weights_gib": sm.weights_gib, "overhead_gib": sm.overhead_gib,
            "block_bytes": sm.block_bytes, "pages_per_request": sm.layout.pages_per_request(tokens, sm.block_size),
            "null_blocks": 1, "memory_source": sm.overhead_source}
        out["measured"][label] = {rig: [[int(b), float(s)] for b, s in
                                        v["curve"][v["curve"]["variant"] == variant][["batch", "step_ms"]]
                                        .itertuples(index=False) if s == s]
                                  for rig, v in views.items()}
    out["errors"] = tested_errors(data_dir)
    out["bands"] = error_bands(data_dir)
    from ..figures import rig_colour

    out["colours"] = {rig: rig_colour(rig) for rig in measured}  # the book's colour of each measured rig
    return out


def tested_errors(data_dir=None) -> dict:
    """{fit rig: [one line per target: its largest |error| over the decode steps, and the single stream's]} from the
    leave-one-GPU-out table: what the view prints under a prediction carried from that rig."""
    from ..parts.p00 import refitloo
    from ..words import percent

    t = refitloo.loo_table(data_dir)
    out: dict[str, list[str]] = {}
    for (fit_rig, target), g in t.groupby(["fit", "target"], sort=False):
        steps = g[g["quantity"] == "decode step"]
        bits = []
        if len(steps):
            lo, hi = steps["error_pct"].min(), steps["error_pct"].max()
            bits.append(f"decode steps at {', '.join(s.split()[-1] for s in steps['at'])}: "
                        f"{percent(lo, signed=True, whole=False, points=True)} to "
                        f"{percent(hi, signed=True, whole=False, points=True)}")
        for q in ("single stream", "step fit: fixed term", "step fit: per sequence"):
            r = g[g["quantity"] == q]
            if len(r):
                bits.append(f"{q} {percent(r['error_pct'].iloc[0], signed=True, whole=False, points=True)}")
        out.setdefault(fit_rig, []).append(f"carried from {fit_rig} to {target}: " + "; ".join(bits))
    return out


def error_bands(data_dir=None) -> dict[str, list[float]]:
    """{fit rig: [lowest, highest] signed error (%) of its decode steps wherever it was asked about another measured
    GPU}: the band the view draws around a prediction carried from that rig (the spread its own test showed, not a
    confidence interval)."""
    from ..parts.p00 import refitloo

    t = refitloo.loo_table(data_dir)
    steps = t[(t["quantity"] == "decode step") & (t["target"] != "a10g-published")]
    return {fit: [float(g["error_pct"].min()), float(g["error_pct"].max())] for fit, g in steps.groupby("fit")}


# ---------------------------------------------------------------------------------------------
# The rule, as the browser runs it (tests compare the two)
# ---------------------------------------------------------------------------------------------

def _interp(xs: list[float], ys: list[float], x: float) -> float:
    if len(xs) == 1:
        return ys[0]
    if x <= xs[-1]:
        for i in range(1, len(xs)):
            if x <= xs[i]:
                a, b = xs[i - 1], xs[i]
                return ys[i - 1] + (ys[i] - ys[i - 1]) * (max(x, a) - a) / (b - a)
        return ys[-1]
    return ys[-1] + (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) * (x - xs[-1])


def nearest_fit(model: dict, bandwidth_gb_s: float) -> dict:
    """The fit whose measured copy bandwidth is nearest the target's, in ratio."""
    return min(model["fits"], key=lambda f: abs(math.log(f["bandwidth_gb_s"] / bandwidth_gb_s)))


def step(model: dict, bandwidth_gb_s: float, tflops: float, batch: float) -> float:
    """refit.predicted_step, from the payload: the nearest fit's parts scaled to the target, plus its wait."""
    f = nearest_fit(model, bandwidth_gb_s)
    xs = f["batches"]
    k_fit = k_t = 0.0
    for name, ys in f["parts"].items():
        ms = _interp(xs, ys, batch) if name.endswith("growth past batch 1") else ys[0]
        rule = f["rules"][name]
        scale = (f["bandwidth_gb_s"] / bandwidth_gb_s if rule == "bandwidth" else
                 f["tflops"] / tflops if rule == "tensor" else 1.0)
        k_fit += ms
        k_t += ms * scale
    idle = _interp(xs, f["idle"], batch)
    gaps = min(max(0.0, i) for i in f["idle"])
    host_bound = idle > f["host_bound_share"] * (k_fit + idle)
    wait = max(gaps, idle - (k_t - k_fit)) if host_bound else idle
    return k_t + wait


def admission(model: dict, memory_gb: float, memory_ratio: float, utilization: float) -> int:
    """The frozen model's page arithmetic (predict.StepModel.pool and KVPool.admission_limit)."""
    free = (memory_gb * memory_ratio * utilization - model["weights_gib"] - model["overhead_gib"]) * 2 ** 30
    blocks = int(free // model["block_bytes"]) if free > 0 else 0
    if blocks <= 1:
        return 0
    return (blocks - model["null_blocks"]) // model["pages_per_request"]


def summary(data: dict, label: str, bandwidth_gb_s: float, tflops: float, memory_gb: float) -> dict:
    """What the view prints for one GPU and model: single stream, KV admission, the running batch a flood at the
    series' cap reaches, the decode ceiling there, and the stop-paying batch (the first batch of 1..1,024 where the
    step's growth per added sequence reaches STOP_PAYING_X of step / B)."""
    m = data["models"][label]
    adm = admission(m, memory_gb, data["memory_ratio"], data["utilization"])
    run = min(data["max_num_seqs"], adm)
    one = step(m, bandwidth_gb_s, tflops, 1)
    stop = None
    prev = one
    for b in range(2, 1025):
        cur = step(m, bandwidth_gb_s, tflops, b)
        if cur - prev >= data["stop_paying_x"] * cur / b:
            stop = b
            break
        prev = cur
    return {"single_ms": one, "admission": adm, "batch": run,
            "ceiling_tok_s": run / step(m, bandwidth_gb_s, tflops, run) * 1000 if run else 0.0,
            "stop_paying": stop, "fit": nearest_fit(m, bandwidth_gb_s)["rig"]}


def shown_numbers(s: dict) -> dict[str, str]:
    """The view's numbers as written (the same words the browser writes)."""
    return {"single": sig(s["single_ms"]), "admission": f"{s['admission']:,}",
            "ceiling": sig(s["ceiling_tok_s"]) if s["batch"] else "–", "batch": f"{s['batch']:,}",
            "stop": f"{s['stop_paying']:,}" if s["stop_paying"] else "past 1,024"}


def html_block(data: dict | None) -> str:
    """The view's markup: the payload, the controls and the places the browser writes to (iw-yourgpu.js)."""
    if not data:
        return ""
    payload_json = html.escape(json.dumps(data, separators=(",", ":")), quote=True)
    gpu_options = "".join(f'<option value="{html.escape(g["key"])}">{html.escape(g["name"])}</option>'
                          for g in data["gpus"])
    model_options = "".join(f'<option value="{html.escape(m)}">{html.escape(m)}</option>' for m in data["models"])
    return f"""<div class="iw-yourgpu" id="{ELEMENT_ID}" data-payload="{payload_json}">
<form class="iw-yourgpu-controls" onsubmit="return false">
<label>GPU <select name="gpu">{gpu_options}<option value="custom">Custom…</option></select></label>
<label>Model <select name="model">{model_options}</select></label>
<span class="iw-yourgpu-custom" hidden>
<label>Bandwidth (GB/s) <input name="bandwidth" type="number" min="50" step="10" value="1000"></label>
<label>Tensor TFLOP/s <input name="tflops" type="number" min="1" step="1" value="100"></label>
<label>Memory (GB) <input name="memory" type="number" min="4" step="1" value="48"></label>
</span>
</form>
<dl class="iw-yourgpu-out">
<dt>Single stream</dt><dd><span data-out="single">–</span> ms a token</dd>
<dt>KV admission</dt><dd><span data-out="admission">–</span> requests of {data['tokens']:,} tokens</dd>
<dt>Decode ceiling</dt><dd><span data-out="ceiling">–</span> tok/s at a running batch of <span data-out="batch">–</span></dd>
<dt>An added sequence stops paying at</dt><dd>batch <span data-out="stop">–</span></dd>
</dl>
<div class="iw-yourgpu-chart"></div>
<p class="iw-yourgpu-note" data-out="note"></p>
</div>"""
