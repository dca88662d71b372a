"""The variant parts' shared figures (parts 5 and 6, on parts.variants' frames): one bar per variant, the step
against the batch with its fit, the cost per million tokens under a price slider; each part colours its own
variants (figures.p05.format_color, or key_color over part 6's layouts)."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures


LABELS = alt.Axis(labelLimit=320)  # variant names are long: keep them whole
# A variant part's colours, one per variant in the part's order (part 5: its formats; part 6: its layouts).
PALETTE = ("#4c78a8", "#f58518", "#54a24b")
RIG_TIP = figures.tip("rig:N", "Rig")
VARIANT_TIP = figures.tip("variant:N", "Variant")


def key_color(keys, title: str) -> alt.Color:
    """A fixed colour per key of the `format` column (part 5: its formats; part 6: its configurations), in the
    order given."""
    return alt.Color("format:N", title=title, scale=alt.Scale(domain=list(keys),
                                                              range=list(PALETTE)[:len(keys)]))


def _bars(df: pd.DataFrame, field: str, title: str, color: alt.Color) -> alt.FacetChart:
    return alt.Chart(df).mark_bar().encode(
        y=alt.Y("variant:N", title=None, sort=None, axis=LABELS), x=alt.X(f"{field}:Q", title=title),
        color=color, tooltip=[RIG_TIP, VARIANT_TIP, figures.tip(field, title)],
    ).properties(width=220, height=alt.Step(22)).facet(row=alt.Row("rig:N", title=None)).resolve_scale(
        x="independent", y="independent")


def itl_and_ceiling(summary: pd.DataFrame, color: alt.Color, ceiling: str = "ceiling_tok_s",
                    ceiling_title: str = "Flood output throughput (tok/s)") -> alt.HConcatChart:
    """Single-stream ITL and flood throughput at the top cap (or the column `ceiling`), one bar per variant, per
    rig, coloured by `color` (key_color, or part 5's format colours)."""
    itl = summary[summary["single_itl_ms"].notna()]
    top = summary[summary[ceiling].notna()]
    return alt.hconcat(_bars(itl, "single_itl_ms", "Single-stream ITL p50 (ms)", color),
                       _bars(top, ceiling, ceiling_title, color))


def step_vs_batch(rows: pd.DataFrame, x_title: str = "Running batch (fixed concurrency)") -> alt.FacetChart:
    """Decode step time against the running batch per variant: measured (points) and the straight-line fit
    (dashed). A format whose points bend up away from its line at large batches has become compute-bound there."""
    tips = [RIG_TIP, VARIANT_TIP, figures.tip("batch", "Running batch"), figures.tip("step_ms", "Step, measured (ms)"),
            figures.tip("fit_ms", "Step, the fit (ms)")]
    base = alt.Chart().encode(x=alt.X("batch:Q", title=x_title),
                              color=alt.Color("variant:N", title="Variant"), tooltip=tips)
    points = base.mark_point(filled=True).encode(y=alt.Y("step_ms:Q", title="Decode step (ms, ITL p50)"))
    line = base.mark_line(strokeDash=[6, 4]).encode(y="fit_ms:Q")
    return alt.layer(line, points, data=rows).facet(column=alt.Column("rig:N", title=None)).resolve_scale(
        x="independent", y="independent")


def cost_per_million(costs: pd.DataFrame, default_price: float, color: alt.Color) -> alt.FacetChart:
    """Cost per million output tokens at each variant's flood ceiling, from a price per GPU-hour the reader sets
    with the slider: price / (tokens a second x 3,600) x 1,000,000. Where the price listing has the rig's GPU
    (p05.cost_table's usd_low/usd_mid/usd_high), a thin line spans the listing's tiers around the slider's price: the
    cost at the price times the cheapest tier over the middle one, to the price times the dearest over the middle; at
    the slider's start (the middle tier) that is the cost at the listed cheapest and dearest tier. Every layer
    reads the same calculated rows, so the line follows the slider with the bar."""
    price = alt.param(name="price", value=default_price,
                      bind=alt.binding_range(min=0.25, max=12.0, step=0.25, name="Price per GPU-hour (USD) "))
    per_million = f"{price.name} / (datum.ceiling_tok_s * 3600) * 1000000"
    listed = "isValid(datum.usd_mid) && isFinite(datum.usd_mid) && datum.usd_mid > 0"
    tips = [RIG_TIP, VARIANT_TIP, figures.tip("ceiling_tok_s", "Ceiling (tok/s)"),
            figures.tip("usd_per_million", "USD per million tokens at your price"),
            figures.tip("gpu:N", "Listed GPU"),
            figures.tip("range_low", "At your price, the listing's cheapest tier (USD)"),
            figures.tip("range_high", "At your price, the listing's dearest tier (USD)")]
    y = alt.Y("variant:N", title=None, sort=None, axis=LABELS)
    charts = {}
    for rig in figures.rig_order(costs["rig"]):
        own = costs[costs["rig"] == rig]
        base = alt.Chart(own).encode(y=y, tooltip=tips).transform_calculate(
            usd_per_million=per_million,
            range_low=f"{listed} ? ({per_million}) * datum.usd_low / datum.usd_mid : null",
            range_high=f"{listed} ? ({per_million}) * datum.usd_high / datum.usd_mid : null")
        layers = [base.mark_bar().encode(x=alt.X("usd_per_million:Q", title="USD per million output tokens"), color=color)]
        if own["usd_mid"].notna().any():
            layers.append(base.mark_rule(color="#333", strokeWidth=2).encode(x="range_low:Q", x2="range_high:Q"))
        charts[rig] = alt.layer(*layers)
    # one panel per rig (figures.panels: a facet's layers that differ in their rows make Vega warn), one slider
    return figures.panels(charts, columns=1, width=300, height=alt.Step(22)).add_params(price)
