"""The refit's model: a GPU's step fitted per component (Fit), the resource each component follows (ratios,
classify, resources_from) and a target GPU's step scaled from a fit (Target, kernels, predicted_step)."""
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

    def parts(self, batch: float) -> dict[str, float]:
        """Each kernel family split in two parts, named `PARTS`: its time at batch 1, and what it adds from batch 1 to
        `batch` (the idle is not split)."""
        one, here = self.at(1), self.at(batch)
        out = {}
        for c in COMPONENTS:
            if c == "GPU idle":
                continue
            out[part_name(c, AT_ONE)] = one[c]
            out[part_name(c, GROWTH)] = here[c] - one[c]
        return out


AT_ONE, GROWTH = "at batch 1", "growth past batch 1"


def part_name(component: str, kind: str) -> str:
    return f"{component}: {kind}"


def fit(view: dict, variant: str, datasheet: str | None = None, steps: pd.Series | None = None) -> Fit | None:
    """The Fit of `variant` from one rig's part-0 view (p00.rig_view): its traced batches whose window held no
    prefill (`mixed` false) and whose untraced step was measured. `steps` ({batch: ms}) replaces the untraced steps
    where it has the batch (the idle follows): the steps of the same model's server with more API servers, whose
    front end did not hold it back. None where fewer than two such batches exist."""
    comp = view.get("variant_components", {}).get(variant)
    if comp is None or not len(comp):
        return None
    comp = comp.copy()
    if steps is not None:
        for i, b in comp["batch"].items():
            if b in steps.index:
                comp.loc[i, "step_ms"] = float(steps[b])
                comp.loc[i, "GPU idle"] = float(steps[b]) - float(comp.loc[i, "kernels_ms"])
    pure = comp[~comp["mixed"] & comp["step_ms"].notna()].set_index("batch").sort_index()
    if len(pure) < 2:
        return None
    bw = view["floors"].get(variant, {}).get("bandwidth_gb_s", math.nan)
    table = pure.reindex(columns=COMPONENTS + ["step_ms"]).fillna(0.0)
    return Fit(view["rig"], variant, datasheet, float(bw), table)


def ratios(a: Fit, b: Fit, tflops: dict[str, float]) -> pd.DataFrame:
    """Per part of a kernel family (Fit.parts) and per batch both GPUs traced past 1: b's ms over a's, beside the
    bandwidth ratio (a's copy over b's) and the tensor ratio (a's TFLOP/s over b's). A family's time at batch 1 is
    read at batch 1; its growth at each larger batch both traced."""
    rows = []
    shared = sorted(set(a.table.index) & set(b.table.index))
    for batch in shared:
        pa, pb = a.parts(batch), b.parts(batch)
        for name in pa:
            if (name.endswith(AT_ONE) and batch != shared[0]) or (name.endswith(GROWTH) and batch == shared[0]):
                continue
            x, y = pa[name], pb[name]
            rows.append({"component": name, "batch": int(batch), "fit_ms": x, "other_ms": y,
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
    """Each part's factor from the fit GPU to the target: the copy-bandwidth ratio for a "bandwidth" part, the tensor
    ratio for a part NOT_BANDWIDTH sends there (the matmuls' growth), 1 for the rest."""
    out = {}
    for name in fit_.parts(1):
        component = name.rsplit(": ", 1)[0]
        res = resources.get(name, "not bandwidth")
        if res == "bandwidth":
            out[name] = fit_.bandwidth_gb_s / target_bw
        elif NOT_BANDWIDTH.get(component) == "tensor" and name.endswith(GROWTH):
            out[name] = fit_tflops / target_tflops
        else:
            out[name] = 1.0
    return out


HOST_BOUND = 0.10  # a fit GPU whose idle is over this share of its step waited on its host at that batch


@dataclass(frozen=True)
class Target:
    """A GPU to predict: its copy bandwidth (measured, or datasheet x the measured fraction) and dense TFLOP/s."""

    key: str
    name: str
    bandwidth_gb_s: float
    bandwidth_source: str
    tflops: float


def kernels(fit_: Fit, resources: dict[str, str], target: Target, fit_tflops: float, batch: float
            ) -> dict[str, float]:
    """Each part of each kernel family in ms on the target at `batch` (the idle excluded)."""
    sc = scales(fit_, resources, target.bandwidth_gb_s, fit_tflops, target.tflops)
    return {name: ms * sc[name] for name, ms in fit_.parts(batch).items()}


def predicted_step(fit_: Fit, resources: dict[str, str], target: Target, fit_tflops: float, batch: float
                   ) -> dict[str, float]:
    """{"kernels", "wait", "step", "host_bound"}: the target's step at `batch` by the module's rule."""
    at = fit_.at(batch)
    k_fit = sum(v for c, v in at.items() if c != "GPU idle")
    k_t = sum(kernels(fit_, resources, target, fit_tflops, batch).values())
    idle = at["GPU idle"]
    gaps = float(fit_.table["GPU idle"].clip(lower=0).min())
    host_bound = idle > HOST_BOUND * (k_fit + idle)
    wait = max(gaps, idle - (k_t - k_fit)) if host_bound else idle
    return {"kernels": k_t, "wait": wait, "step": k_t + wait, "host_bound": host_bound}


def resources_from(fits: dict[str, Fit], tflops: dict[str, float]) -> tuple[dict[str, str], pd.DataFrame]:
    """Each family's resource read from the first two measured GPUs' ratios (classify), and the ratios table;
    with one measured GPU, every family that the frozen model reads as bytes is "bandwidth" (an assumption)."""
    rigs = sorted(fits, key=lambda r: -fits[r].bandwidth_gb_s)  # the faster first: ratios read slower / faster
    if len(rigs) < 2:  # the frozen model's rule: the weights at 1 and every growth of bytes read with the bandwidth
        first = next(iter(fits.values()))
        assumed = {n: ("bandwidth" if n == part_name("weights (matmul)", AT_ONE) or (
            n.endswith(GROWTH) and n.split(":")[0] in ("recurrent state (GDN)", "attention")) else "not bandwidth")
            for n in first.parts(1)}
        return assumed, pd.DataFrame()
    r = ratios(fits[rigs[0]], fits[rigs[1]], tflops)
    cls = classify(r)
    return dict(zip(cls["component"], cls["resource"])), cls.assign(fit=rigs[0], other=rigs[1])
