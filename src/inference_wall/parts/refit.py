"""A step model that travels: each component of a measured decode step carried to another GPU by the resource the
measurements say it uses, fitted on one measured GPU and tested on the others it was not fitted on.

The frozen model (parts/predict.py, `data/predictions/`) carries every term from the h200 by one rule chosen in
advance. This one reads what two measured GPUs say:

    component c at batch B on GPU g:  ms_g(c, B)   from part 0's profiler windows on g (kernel time per step of
                                                   each family; the GPU's idle time is the untraced step at B less
                                                   the traced kernels), at the traced pure-decode batches
    ratio(c, B) = ms_other(c, B) / ms_fit(c, B)    two GPUs, the same server, model and batch
    bandwidth ratio = copy GB/s fit / copy GB/s other   (each rig's own measured copy, rig capture)
    tensor ratio = dense TFLOP/s fit / other            (datasheets; equal for the H100 SXM and the H200 SXM)

A component is "bandwidth" where its ratios sit nearer the bandwidth ratio than the tensor ratio (compared in
logs, over the traced batches), else "not bandwidth". With two GPUs of equal TFLOP/s, "not bandwidth" cannot tell
tensor-bound from host- or launch-bound: such a component is carried unscaled between them, and to a GPU of other
TFLOP/s (the A10G) by the rule `NOT_BANDWIDTH` states, an assumption, not a measurement.

    step_target(B) = sum over c of  ms_fit(c, B) x scale(c)      scale = bandwidth ratio (fit/target) or 1
                                                                  (or the tensor ratio where NOT_BANDWIDTH says)

ms_fit(c, B) between traced batches is linear in B; past the largest traced pure-decode batch it continues the last
segment. A target's bandwidth is its own measured copy where it was measured, else its datasheet figure times the
mean fraction of their datasheet figures the measured GPUs' copies reached. Nothing here reads a measurement of the
target when predicting it: `predict_rig` takes the fit rig's runs and the target's datasheet row (and, where the
target was measured, only its copy bandwidth, a capture made before any pass).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

COMPONENTS = ["weights (matmul)", "recurrent state (GDN)", "attention", "sampling", "norms, activations, other",
              "memory copies", "GPU idle"]
# What a component that is not bandwidth-bound does on a GPU of other tensor throughput: the matmuls' arithmetic
# scales with TFLOP/s, the rest (launches, host work, small kernels) not at all. An assumption: the two measured
# GPUs have equal TFLOP/s and cannot test it.
NOT_BANDWIDTH = {"weights (matmul)": "tensor"}


@dataclass(frozen=True)
class Fit:
    """One measured GPU's step, component by component, for one model (a p00 variant)."""

    rig: str
    variant: str
    datasheet: str | None
    bandwidth_gb_s: float  # the rig's measured copy bandwidth (read + write)
    table: pd.DataFrame  # index: traced pure-decode batch; columns: COMPONENTS (ms per step) and step_ms

    def at(self, batch: float) -> dict[str, float]:
        """Each component's ms at `batch`: linear between traced batches, the last segment continued past them."""
        b = np.asarray(self.table.index, dtype=float)
        out = {}
        for c in COMPONENTS:
            y = self.table[c].to_numpy(dtype=float)
            if len(b) == 1:
                out[c] = float(y[0])
            elif batch <= b[-1]:
                out[c] = float(np.interp(batch, b, y))
            else:
                out[c] = float(y[-1] + (y[-1] - y[-2]) / (b[-1] - b[-2]) * (batch - b[-1]))
        return out


def fit(view: dict, variant: str, datasheet: str | None = None) -> Fit | None:
    """The Fit of `variant` from one rig's part-0 view (p00.rig_view): its traced batches whose window held no
    prefill (`mixed` false) and whose untraced step was measured. None where fewer than two such batches exist."""
    comp = view.get("variant_components", {}).get(variant)
    if comp is None or not len(comp):
        return None
    pure = comp[~comp["mixed"] & comp["step_ms"].notna()].set_index("batch").sort_index()
    if len(pure) < 2:
        return None
    bw = view["floors"].get(variant, {}).get("bandwidth_gb_s", math.nan)
    table = pure.reindex(columns=COMPONENTS + ["step_ms"]).fillna(0.0)
    return Fit(view["rig"], variant, datasheet, float(bw), table)


def ratios(a: Fit, b: Fit, tflops: dict[str, float]) -> pd.DataFrame:
    """Per component and batch both GPUs traced: b's ms over a's, beside the bandwidth ratio (a's copy over b's)
    and the tensor ratio (a's TFLOP/s over b's)."""
    rows = []
    for batch in sorted(set(a.table.index) & set(b.table.index)):
        for c in COMPONENTS:
            x, y = float(a.table.loc[batch, c]), float(b.table.loc[batch, c])
            rows.append({"component": c, "batch": int(batch), "fit_ms": x, "other_ms": y,
                         "ratio": y / x if x > 0 and y > 0 else math.nan,
                         "bandwidth_ratio": a.bandwidth_gb_s / b.bandwidth_gb_s,
                         "tensor_ratio": tflops[a.datasheet] / tflops[b.datasheet]})
    return pd.DataFrame(rows)


def classify(r: pd.DataFrame) -> pd.DataFrame:
    """Per component: the geometric mean of its measured ratios, and "bandwidth" where that mean sits nearer the
    bandwidth ratio than the tensor ratio (in logs), else "not bandwidth". A component with no positive time on
    either GPU is "none measured"."""
    rows = []
    for c, g in r.groupby("component", sort=False):
        x = g["ratio"].dropna()
        x = x[x > 0]
        if not len(x):
            rows.append({"component": c, "ratio": math.nan, "resource": "none measured", "batches": ""})
            continue
        mean = float(np.exp(np.log(x).mean()))
        bw, tf = float(g["bandwidth_ratio"].iloc[0]), float(g["tensor_ratio"].iloc[0])
        near_bw = abs(math.log(mean) - math.log(bw)) < abs(math.log(mean) - math.log(tf))
        rows.append({"component": c, "ratio": mean, "bandwidth_ratio": bw, "tensor_ratio": tf,
                     "resource": "bandwidth" if near_bw else "not bandwidth",
                     "batches": ", ".join(str(int(b)) for b in g.loc[x.index, "batch"])})
    return pd.DataFrame(rows)


def scales(fit_: Fit, resources: dict[str, str], target_bw: float, fit_tflops: float, target_tflops: float
           ) -> dict[str, float]:
    """Each component's factor from the fit GPU to the target."""
    out = {}
    for c in COMPONENTS:
        res = resources.get(c, "not bandwidth")
        if res == "bandwidth":
            out[c] = fit_.bandwidth_gb_s / target_bw
        elif NOT_BANDWIDTH.get(c) == "tensor":
            out[c] = fit_tflops / target_tflops
        else:
            out[c] = 1.0
    return out


def step(fit_: Fit, scale: dict[str, float], batch: float) -> float:
    return sum(ms * scale[c] for c, ms in fit_.at(batch).items())
