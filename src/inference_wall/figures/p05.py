"""Part 5's figures (Altair, the book's theme): one function each, on the tidy frames of parts.p05."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures

LABELS = alt.Axis(labelLimit=320)  # variant names are long: keep them whole
# A colour per weight format, the same in every figure of the part.
FORMAT_COLOURS = {"fp16": "#4c78a8", "fp8": "#f58518", "int4": "#54a24b"}


def format_color(title: str = "Format") -> alt.Color:
    return alt.Color("format:N", title=title, scale=alt.Scale(domain=list(FORMAT_COLOURS),
                                                              range=list(FORMAT_COLOURS.values())))


def key_color(keys, title: str) -> alt.Color:
    """A fixed colour per key of the `format` column (part 6: its configurations), in the order given."""
    return alt.Color("format:N", title=title, scale=alt.Scale(domain=list(keys),
                                                              range=list(FORMAT_COLOURS.values())[:len(keys)]))


def _bars(df: pd.DataFrame, field: str, title: str, number: str = ",.2f", color: alt.Color | None = None
          ) -> alt.FacetChart:
    return alt.Chart(df).mark_bar().encode(
        y=alt.Y("variant:N", title=None, sort=None, axis=LABELS), x=alt.X(f"{field}:Q", title=title),
        color=color or format_color(),
        tooltip=[alt.Tooltip("rig:N"), alt.Tooltip("variant:N"), alt.Tooltip(f"{field}:Q", title=title, format=number)],
    ).properties(width=220, height=alt.Step(22)).facet(row=alt.Row("rig:N", title=None)).resolve_scale(
        x="independent", y="independent")


def itl_and_ceiling(summary: pd.DataFrame, color: alt.Color | None = None, ceiling: str = "ceiling_tok_s",
                    ceiling_title: str = "Flood output throughput (tok/s)") -> alt.HConcatChart:
    """Single-stream ITL and flood throughput at the top cap (or the column `ceiling`), one bar per variant, per
    rig; coloured by format unless `color` says otherwise."""
    itl = summary[summary["single_itl_ms"].notna()]
    top = summary[summary[ceiling].notna()]
    return alt.hconcat(_bars(itl, "single_itl_ms", "Single-stream ITL p50 (ms)", color=color),
                       _bars(top, ceiling, ceiling_title, ",.0f", color=color))


def costs_vs_bytes(long: pd.DataFrame) -> alt.FacetChart:
    """The step fit's fixed and per-sequence cost (with their 95% ranges) against the bytes a decode step reads;
    the weight-stream floor (bytes / measured bandwidth) where the rig measured its bandwidth.
    `long`: rig, variant, format, decode_gb, reference, quantity, series, value, low, high (p05.cost_points)."""
    tips = [alt.Tooltip("rig:N"), alt.Tooltip("variant:N"), alt.Tooltip("series:N"),
            alt.Tooltip("decode_gb:Q", title="GB per step", format=".3g"),
            alt.Tooltip("value:Q", title="ms", format=".3g"), alt.Tooltip("low:Q", title="from", format=".3g"),
            alt.Tooltip("high:Q", title="to", format=".3g")]
    x = alt.X("decode_gb:Q", title="Bytes one decode step reads (GB)", scale=alt.Scale(zero=True))
    base = alt.Chart().encode(x=x, tooltip=tips)
    measured = "datum.series == 'measured'"
    bars = base.transform_filter(measured).mark_rule().encode(y=alt.Y("low:Q", title="ms"), y2="high:Q",
                                                              color=format_color())
    points = base.transform_filter(measured).mark_point(filled=True, size=70).encode(
        y="value:Q", color=format_color(), shape=alt.Shape("reference:N", title="Reference model"))
    floor = base.transform_filter(f"!({measured})").mark_line(strokeDash=[6, 4], color="#888", point=True).encode(
        y="value:Q", detail="series:N")
    return alt.layer(floor, bars, points, data=long).facet(
        column=alt.Column("quantity:N", title=None, sort=["fixed cost (batch-1 step)", "per-sequence cost (slope)"]),
        row=alt.Row("rig:N", title=None)).resolve_scale(x="independent", y="independent")


def step_vs_batch(rows: pd.DataFrame, x_title: str = "Running batch (fixed concurrency)") -> alt.FacetChart:
    """Decode step time against the running batch per variant: measured (points) and the straight-line fit
    (dashed). A format whose points bend up away from its line at large batches has become compute-bound there."""
    tips = [alt.Tooltip("rig:N"), alt.Tooltip("variant:N"), alt.Tooltip("batch:Q"),
            alt.Tooltip("step_ms:Q", title="step ms (measured)", format=".3g"),
            alt.Tooltip("fit_ms:Q", title="step ms (fit)", format=".3g")]
    base = alt.Chart().encode(x=alt.X("batch:Q", title=x_title),
                              color=alt.Color("variant:N", title="Variant"), tooltip=tips)
    points = base.mark_point(filled=True).encode(y=alt.Y("step_ms:Q", title="Decode step (ms, ITL p50)"))
    line = base.mark_line(strokeDash=[6, 4]).encode(y="fit_ms:Q")
    return alt.layer(line, points, data=rows).facet(column=alt.Column("rig:N", title=None)).resolve_scale(
        x="independent", y="independent")


def cap_sweep(rows: pd.DataFrame) -> alt.FacetChart:
    """Flood output throughput against the max_num_seqs cap, one line per variant (part 3's sweep per format)."""
    tips = [alt.Tooltip("rig:N"), alt.Tooltip("variant:N"), alt.Tooltip("max_num_seqs:Q", title="cap"),
            alt.Tooltip("output_tok_s:Q", title="output tok/s", format=",.0f"),
            alt.Tooltip("itl_p50_ms:Q", title="ITL p50 ms", format=".3g")]
    return alt.Chart(rows).mark_line(point=True).encode(
        x=figures.log_x("max_num_seqs", "max_num_seqs cap (log)"), y=alt.Y("output_tok_s:Q", title="Output throughput (tok/s)"),
        color=alt.Color("variant:N", title="Variant"), tooltip=tips,
    ).facet(column=alt.Column("rig:N", title=None)).resolve_scale(x="independent", y="independent")


def cost_per_million(costs: pd.DataFrame, default_price: float, color: alt.Color | None = None) -> alt.FacetChart:
    """Cost per million output tokens at each variant's flood ceiling, from a price per GPU-hour the reader sets
    with the slider: price / (tokens a second x 3,600) x 1,000,000. Where the price listing has the rig's GPU
    (p05.cost_table's usd_low/usd_high), a thin line spans the cost at its listed cheapest and dearest price."""
    price = alt.param(name="price", value=default_price,
                      bind=alt.binding_range(min=0.25, max=12.0, step=0.25, name="Price per GPU-hour (USD) "))
    tips = [alt.Tooltip("rig:N"), alt.Tooltip("variant:N"),
            alt.Tooltip("ceiling_tok_s:Q", title="ceiling tok/s", format=",.0f"),
            alt.Tooltip("usd_per_million:Q", title="USD per million tokens (slider)", format=".3f"),
            alt.Tooltip("gpu:N", title="listed GPU"),
            alt.Tooltip("usd_low:Q", title="at the listed low", format=".3f"),
            alt.Tooltip("usd_high:Q", title="at the listed high", format=".3f")]
    y = alt.Y("variant:N", title=None, sort=None, axis=LABELS)
    base = alt.Chart().encode(y=y, tooltip=tips)
    bars = base.mark_bar().encode(x=alt.X("usd_per_million:Q", title="USD per million output tokens"),
                                  color=color or format_color()).transform_calculate(
        usd_per_million=f"{price.name} / (datum.ceiling_tok_s * 3600) * 1000000").add_params(price)
    listed = base.transform_filter("isValid(datum.usd_low) && isFinite(datum.usd_low)").mark_rule(
        color="#333", strokeWidth=2).encode(x="usd_low:Q", x2="usd_high:Q")
    return alt.layer(bars, listed, data=costs).properties(width=300, height=alt.Step(22)).facet(
        row=alt.Row("rig:N", title=None)).resolve_scale(x="independent", y="independent")


def predicted_bytes(predicted: pd.DataFrame) -> alt.Chart:
    """Before any run: what one decode step reads per format (p05.predicted_bytes), one bar each; the tooltip
    splits it into quantized matrices, matrices left in 16 bits, the output head and the rest."""
    parts = {"quantized_gb": "quantized matrices (GB)", "unquantized_matrices_gb": "matrices left in 16 bits (GB)",
             "head_gb": "output head, 16 bits (GB)", "other_gb": "norms and state terms (GB)"}
    return alt.Chart(predicted).mark_bar().encode(
        x=alt.X("format:N", title="weight format", sort=list(predicted["format"])),
        y=alt.Y("decode_gb:Q", title="bytes one decode step reads (GB)"),
        tooltip=["format", alt.Tooltip("decode_gb:Q", format=".2f", title="all (GB)")]
        + [alt.Tooltip(f"{c}:Q", format=".2f", title=t) for c, t in parts.items()],
    ).properties(width=320, height=260)
