"""The refit tested by leaving one GPU out: fitted on each measured GPU, it predicts each other measured GPU and the
published A10G (loo_table), beside the frozen model's error where it stated the same quantity (validation.table)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .refitmodel import Fit, Target, kernels, predicted_step, resources_from
from .refit import A10G_FIT_BATCHES, measured_gpus, targets


# ---------------------------------------------------------------------------------------------
# Leave one GPU out
# ---------------------------------------------------------------------------------------------

LOO_BATCHES = (1, 8, 64, 256, 512)  # the decode steps both measured GPUs ran (the chapter's pure-decode points)


LOO_COLUMNS = ["model", "quantity", "at", "fit", "target", "predicted", "measured", "error_pct", "frozen_error_pct",
               "carried_by", "unit", "measured_as"]


def _carried(parts: dict[str, float]) -> str:
    from ...words import percent

    total = sum(v for v in parts.values() if v > 0)
    top = sorted(((k, v) for k, v in parts.items() if v > 0), key=lambda kv: -kv[1])[:2]
    return "; ".join(f"{k} {percent(v / total, 2)}" for k, v in top) if total > 0 else ""


def _parts(f: Fit, res: dict[str, str], t: Target, fit_tf: float, batch: float) -> dict[str, float]:
    p = predicted_step(f, res, t, fit_tf, batch)
    return {**kernels(f, res, t, fit_tf, batch), "GPU wait": p["wait"]}


def _line(xs, ys) -> tuple[float, float]:
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(intercept), float(slope)


def loo_table(data_dir=None, variant: str = "4b") -> pd.DataFrame:
    """Fit on each measured GPU, predict each other measured GPU and the published A10G: one row per quantity,
    direction and batch, with the signed error and, where the frozen model stated the same quantity, its error."""
    from . import predict
    from .validation import table as frozen_table

    measured = measured_gpus(data_dir, variant)
    if not measured:
        return pd.DataFrame(columns=LOO_COLUMNS)
    gpus_ = predict.gpus(data_dir)
    tf = {k: g.tflops for k, g in gpus_.items()}
    res, _ = resources_from({r: m["fit"] for r, m in measured.items()}, tf)
    tg = targets(measured, data_dir)
    rows = []

    def add(quantity, at, fit_rig, target, predicted, measured_value, unit, carried="", measured_as="", frozen=None):
        err = 100 * (predicted - measured_value) / measured_value if measured_value else math.nan
        rows.append({"model": predict.MODEL_LABELS.get(variant, variant), "quantity": quantity, "at": at,
                     "fit": fit_rig, "target": target, "predicted": predicted, "measured": measured_value,
                     "error_pct": err, "frozen_error_pct": frozen if frozen is not None else math.nan,
                     "carried_by": carried, "unit": unit, "measured_as": measured_as})

    curves = {r: m["view"]["curve"][m["view"]["curve"]["variant"] == variant].set_index("batch")["step_ms"]
              for r, m in measured.items()}
    frozen_steps = {}
    for r in measured:
        v = frozen_table(r, data_dir)
        if len(v):
            d = v[(v["model"] == predict.MODEL_LABELS.get(variant, variant)) & (v["quantity"] == "decode step")]
            frozen_steps[r] = dict(zip(d["batch"].astype(int), d["error_pct"]))
    # the frozen model was fitted on the h200: it has a frozen (out-of-sample) error only for the other GPUs
    h = [r for r in measured if measured[r]["datasheet"] == predict.H200_KEY]
    a10g_frozen = {}
    if h:
        a = predict.page(measured[h[0]]["view"], data_dir)["a10g"]
        names = {"single stream (ms per token)": "single stream", "step fit: fixed term (ms)": "step fit: fixed term",
                 "step fit: per sequence (ms)": "step fit: per sequence"}
        a10g_frozen = {names[q]: e for q, e in zip(a["quantity"], a["error_pct"]) if q in names}
    for fit_rig, m in measured.items():
        f, fit_tf = m["fit"], tf[m["datasheet"]]
        for other, o in measured.items():
            if other == fit_rig:
                continue
            t = tg[o["datasheet"]]
            for b in LOO_BATCHES:
                if b not in curves[other].index:
                    continue
                p = predicted_step(f, res, t, fit_tf, b)
                add("decode step", f"batch {b:,}", fit_rig, other, p["step"], float(curves[other][b]), "ms",
                    _carried(_parts(f, res, t, fit_tf, b)), "engine step counter, pure decode",
                    frozen_steps.get(other, {}).get(b))
            if 256 in curves[other].index:
                p = predicted_step(f, res, t, fit_tf, 256)
                add("pure-decode ceiling", "batch 256", fit_rig, other, 256 / p["step"] * 1000,
                    256 / float(curves[other][256]) * 1000, "tok/s", measured_as="256 / the decode step")
        rows += _a10g_rows(f, res, tg["a10g"], fit_tf, fit_rig, data_dir, variant, a10g_frozen)
    return pd.DataFrame(rows, columns=LOO_COLUMNS)


def _a10g_rows(f: Fit, res: dict[str, str], t: Target, fit_tf: float, fit_rig: str, data_dir, variant: str,
               frozen: dict[str, float]) -> list[dict]:
    """The published A10G figures the refit can state from `f` alone: its single stream, the step fit's two terms
    (a line through the predicted steps at A10G_FIT_BATCHES), each beside the frozen model's error (`frozen`:
    quantity -> error %, predict.a10g_table's)."""
    from . import predict
    from .tables import reference, reference_fact

    if variant != "4b":
        return []
    ref1 = reference(1, data_dir)
    line = ref1["step_time_fit"].iloc[0]
    steps = {b: predicted_step(f, res, t, fit_tf, b)["step"] for b in A10G_FIT_BATCHES}
    a, b = _line(list(steps), list(steps.values()))
    out = []
    for quantity, at, pred, pub, unit, parts in (
            ("single stream", "batch 1", steps[1], reference_fact(ref1, "single_request_ms_per_token"), "ms",
             _parts(f, res, t, fit_tf, 1)),
            ("step fit: fixed term", "line over batches 1-128", a, float(line["intercept_ms"]), "ms", None),
            ("step fit: per sequence", "line over batches 1-128", b, float(line["slope_ms_per_seq"]), "ms", None)):
        out.append({"model": predict.MODEL_LABELS.get(variant, variant), "quantity": quantity, "at": at,
                    "fit": fit_rig, "target": "a10g-published", "predicted": pred, "measured": pub,
                    "error_pct": 100 * (pred - pub) / pub, "frozen_error_pct": frozen.get(quantity, math.nan),
                    "carried_by": _carried(parts) if parts else "", "unit": unit,
                    "measured_as": "the post's figure"})
    return out
