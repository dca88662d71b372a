"""The figures of "Inside a step" (Altair, the book's theme): one function each, on the frames of parts.p00."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures

# A colour per server of the chapter, the same in every figure of the page (variants are servers, not rigs)
VARIANT_COLOURS = {"4b": "#4c78a8", "4b-sync": "#9ecae9", "0.5b": "#f58518", "9b-fp16": "#54a24b", "9b-int4": "#b79a20"}
COMPONENT_COLOURS = {"weights (matmul)": "#4c78a8", "recurrent state (GDN)": "#e45756", "attention": "#f58518",
                     "sampling": "#72b7b2", "memory copies": "#b279a2", "norms, activations, other": "#bab0ac",
                     "GPU idle": "#eeeeee"}


def _variant_color(variants) -> alt.Color:
    known = [v for v in VARIANT_COLOURS if v in set(variants)]
    other = [v for v in variants if v not in VARIANT_COLOURS]
    domain = known + other
    palette = list(VARIANT_COLOURS.values()) + ["#888888"] * len(other)
    return alt.Color("variant:N", title="Server", scale=alt.Scale(domain=domain, range=[
        VARIANT_COLOURS.get(v, "#888888") for v in domain] if domain else palette))


def step_vs_batch(curve: pd.DataFrame) -> alt.LayerChart:
    """The pure-decode step (engine counters) of every server against the running batch, both axes logarithmic;
    `curve`: p00.step_curve rows (variant, batch, step_ms, tok_s, ...)."""
    df = curve.dropna(subset=["step_ms"]).copy()
    tips = [alt.Tooltip("variant:N", title="Server"), alt.Tooltip("batch:Q", title="Batch"),
            alt.Tooltip("step_ms:Q", title="Step (ms)", format=".3g"),
            alt.Tooltip("tok_s:Q", title="Output (tok/s)", format=",.0f")]
    top = float(df["batch"].max()) if len(df) else 1.0
    base = alt.Chart(df).encode(x=figures.log_x("batch", "Sequences decoding (batch)", domain=[1, max(top, 2.0)]),
                                y=figures.log_y("step_ms", "Step (ms)"), color=_variant_color(df["variant"].unique()),
                                tooltip=tips)
    return (base.mark_line() + base.mark_point(filled=True, size=45)).properties(width=560, height=320)


def components_bars(parts: pd.DataFrame) -> alt.Chart:
    """Milliseconds of one step by component (kernel families from the trace, and the GPU's idle time: the
    untraced step less the kernels) at each traced batch; `parts`: batch, component, ms."""
    order = [c for c in COMPONENT_COLOURS if c in set(parts["component"])]
    tips = [alt.Tooltip("batch:N", title="Batch"), alt.Tooltip("component:N", title="Component"),
            alt.Tooltip("ms:Q", title="ms per step", format=".3g"),
            alt.Tooltip("share_pct:Q", title="% of the step", format=".0f")]
    return alt.Chart(parts).mark_bar().encode(
        y=alt.Y("batch:N", title="Batch", sort=None),
        x=alt.X("ms:Q", title="Milliseconds of one step"),
        color=alt.Color("component:N", title="Component", sort=order,
                        scale=alt.Scale(domain=order, range=[COMPONENT_COLOURS[c] for c in order]),
                        legend=alt.Legend(orient="bottom", columns=2, labelLimit=260)),
        order=alt.Order("order:Q"), tooltip=tips,
    ).properties(width=560, height=alt.Step(34))
