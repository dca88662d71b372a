"""A step model that travels: each part of a measured decode step carried to another GPU by what the measurements
say it depends on, fitted on one measured GPU and tested on the GPUs it was not fitted on.

The frozen model (parts/p00/predict.py, `data/predictions/`) carries every term from the h200 by one rule chosen in
advance. This one ("the refit", after the H100's data) reads what two measured GPUs say:

    kernels_g(c, B)   the GPU time per step of kernel family c at batch B on GPU g: part 0's profiler windows at its
                      traced pure-decode batches (1, 64, 256: a window that caught a prefill chunk is left out)
    idle_g(B)         the untraced step less the traced kernels: the time the GPU waits, on launches and on the host
    ratio(c)          kernels_other(c, B) / kernels_fit(c, B), its geometric mean over the batches both traced
    bandwidth ratio   each rig's own measured copy GB/s, fit over other; tensor ratio: datasheet dense TFLOP/s

A family is "bandwidth" where its ratio sits nearer the bandwidth ratio than the tensor ratio (in logs), else "not
bandwidth" (`classify`). The H100 SXM and the H200 SXM have equal TFLOP/s: "not bandwidth" cannot tell tensor-bound
from launch- or host-bound work there, so such a family is carried unscaled (`NOT_BANDWIDTH` names the one exception
a GPU of other TFLOP/s needs: the matmuls' arithmetic, an assumption the two GPUs cannot test).

The step on a target GPU at batch B, from a fit GPU:

    K_t(B) = sum over c of kernels_fit(c, B) x (fit copy / target copy if c is bandwidth, else 1)
    step_t(B) = K_t(B) + wait_t(B)
    wait_t(B) = max(gaps, idle_fit(B) - (K_t(B) - K_fit(B)))   where the fit GPU waited on its host at B
                idle_fit(B)                                      elsewhere

`gaps` is the fit GPU's least idle over its traced batches (launch gaps, never shorter on a slower GPU). Where the fit GPU waited on its
host (its idle over HOST_BOUND of the step), the host's work per step is the fit's whole step: a slower GPU fills
the wait with kernels, a faster one waits longer. Elsewhere the fit GPU was the limit and the host's work is not
measured: the idle is carried as it was. A host-bound step on the target that the fit GPU did not show cannot be
predicted from it: that miss is named, not fitted.

kernels_fit(c, B) and idle_fit(B) between traced batches are linear in B; past the largest traced pure-decode batch
they continue the last segment. A target's copy bandwidth is its own where it was measured (its rig's capture, made
before any pass), else its datasheet figure times the mean fraction of their datasheet figures the measured GPUs'
copies reached. `loo_table` fits on each measured GPU in turn and predicts the others and the published A10G: the
families' resources are read from both GPUs (said beside the table); every carried millisecond is the fit GPU's.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .refitmodel import (  # noqa: F401 (refit's names, as before the split)
    AT_ONE, classify, COMPONENTS, Fit, fit, GROWTH, HOST_BOUND, kernels, NOT_BANDWIDTH, part_name, predicted_step,
    ratios, resources_from, scales, Target)


A10G_FIT_BATCHES = (1, 8, 16, 32, 64, 128)  # a line through these stands for the post's step fit (its batches unstated)


def measured_gpus(data_dir=None, variant: str = "4b") -> dict[str, dict]:
    """Every rig whose profile names its datasheet row and whose part-0 runs trace `variant` at two or more pure-decode
    batches: {rig: {"view", "fit", "datasheet"}}."""
    from .tables import page_tables, rig_datasheet, rigs_measured
    from .view import rig_view

    out = {}
    for rig in rigs_measured(data_dir):
        ds = rig_datasheet(rig, data_dir)
        if not ds:
            continue
        view = rig_view(rig, page_tables(data_dir, [rig]), None, data_dir)
        f = fit(view, variant, ds)
        if f is not None:
            out[rig] = {"view": view, "fit": f, "datasheet": ds}
    return out


def targets(measured: dict[str, dict], data_dir=None) -> dict[str, Target]:
    """Each measured GPU at its own copy bandwidth, and every other datasheet GPU at its datasheet figure times the
    mean fraction of theirs the measured GPUs' copies reached; dense TFLOP/s as predict.gpus gives them."""
    from . import predict

    gpus_ = predict.gpus(data_dir)
    fractions = [m["fit"].bandwidth_gb_s / gpus_[m["datasheet"]].bandwidth_gb_s for m in measured.values()]
    frac = float(np.mean(fractions)) if fractions else math.nan
    mine = {m["datasheet"]: rig for rig, m in measured.items()}
    out = {}
    for key, g in gpus_.items():
        if key in mine:
            bw, src = measured[mine[key]]["fit"].bandwidth_gb_s, f"measured on {mine[key]} (its copy)"
        else:
            bw, src = g.bandwidth_gb_s * frac, (f"datasheet {g.bandwidth_gb_s:g} GB/s x {frac:.3f}, the measured "
                                                "GPUs' mean copy fraction")
        out[key] = Target(key, g.name, bw, src, g.tflops)
    return out


# ---------------------------------------------------------------------------------------------
# A prediction to freeze before the target measures it (data/predictions/<gpu>-refit.csv)
# ---------------------------------------------------------------------------------------------

REFIT_COLUMNS = ["gpu", "model", "quantity", "batch", "cap", "context_tokens", "utilization", "predicted", "unit",
                 "how", "run"]


FLOOD_CAPS = (1, 4, 16, 64, 256)


def prediction_rows(gpu_key: str, fit_rig: str = "h200", data_dir=None) -> pd.DataFrame:
    """What the refit says, from `fit_rig`'s runs, about the quantities the GPU `gpu_key` has not measured yet:
    the 4B's step at 1,024, its single stream and its floods at FLOOD_CAPS; the 0.5B's steps (its own server, and
    the server with more API servers) and its floods. Each row names the run that will measure it (`run`: part
    folder / point), so a test can check that the file is older than that run. The resources of the kernel families
    are read from every measured GPU's 4B traces (resources_from); the floods add each request's prefill at the rate
    the frozen model uses (predict.StepModel.prefill_ms) and run at min(cap, the frozen model's admission)."""
    from . import predict

    measured = measured_gpus(data_dir, "4b")
    if fit_rig not in measured:
        raise ValueError(f"{fit_rig} has no traced 4B decode steps to fit")
    gpus_ = predict.gpus(data_dir)
    tf = {k: g.tflops for k, g in gpus_.items()}
    res, _ = resources_from({r: m["fit"] for r, m in measured.items()}, tf)
    t = targets(measured, data_dir)[gpu_key]
    view = measured[fit_rig]["view"]
    fit_tf = tf[measured[fit_rig]["datasheet"]]
    frozen = predict.step_models(view, data_dir, gpus_)
    w = predict._workload(data_dir)
    n_in, n_out = w["input_len"], w["output_len"]
    g = gpus_[gpu_key]
    ratio = predict.memory_ratio(view, gpus_, data_dir)
    rows = []

    def add(model, quantity, predicted, unit, how, run, batch=None, cap=None, context=None):
        rows.append({"gpu": gpu_key, "model": model, "quantity": quantity, "batch": batch, "cap": cap,
                     "context_tokens": context, "utilization": None, "predicted": float(predicted), "unit": unit,
                     "how": how, "run": run})

    for variant, prefix, flood_prefix in (("4b", "4b", "mns"), ("0.5b", "0.5b", "small-mns")):
        label = predict.MODEL_LABELS[variant]
        f = fit(view, variant, measured[fit_rig]["datasheet"])
        if f is None:
            continue
        ctx = float(view["points"][(view["points"]["variant"] == variant)
                                   & (view["points"]["kind"] == "decode")]["context"].iloc[0])
        batches = (1024,) if variant == "4b" else (1, 8, 64, 256, 1024)
        for b in batches:
            add(label, "decode step", predicted_step(f, res, t, fit_tf, b)["step"], "ms",
                f"refit.predicted_step from {fit_rig}", f"00-inside-a-step/{prefix}-decode-b{b:04d}", batch=b,
                context=ctx)
        if variant == "0.5b":
            more, _ = predict.measured_steps(view, variant)
            f2 = fit(view, variant, measured[fit_rig]["datasheet"], more)
            api = view["api"]
            for b in sorted(api[(api["variant"] == variant) & api["step_more_ms"].notna()]["batch"].astype(int)):
                add(label, "decode step, 2 API servers", predicted_step(f2, res, t, fit_tf, b)["step"], "ms",
                    f"refit.predicted_step from {fit_rig}'s 2-API-server steps",
                    f"00-inside-a-step/{prefix}-api2-decode-b{b:04d}", batch=b, context=ctx)
        if variant == "4b":
            add(label, "single stream", predicted_step(f, res, t, fit_tf, 1)["step"], "ms per token",
                f"refit.predicted_step at 1 from {fit_rig}", "01-hit-the-wall/single", batch=1, context=ctx)
        m = frozen.get(variant)
        if m is None:
            continue
        adm = m.admission(m.usable_gib(g, ratio), w["utilization"], n_in + n_out)
        for cap in FLOOD_CAPS:
            b = min(cap, adm) if adm else cap
            step = predicted_step(f, res, t, fit_tf, b)["step"]
            tok_s = n_out / (n_out * step / b + m.prefill_ms(g, n_in)) * 1000
            add(label, "flood output", tok_s, "tok/s", f"{n_out} tokens / ({n_out} refit steps at batch {b} / {b} + "
                f"the frozen model's prefill of {n_in} tokens)", f"03-batching-cliff/{flood_prefix}-{cap:03d}",
                batch=b, cap=cap, context=n_in + n_out / 2)
    return pd.DataFrame(rows, columns=REFIT_COLUMNS)
