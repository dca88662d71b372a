"""Part 5's own figures (Altair, the book's theme), on the tidy frames of parts.p05; the charts it shares with
part 6 are figures.variants', coloured by format_color."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures
from .variants import PALETTE

# A colour per weight format, the same in every figure of the part.
FORMAT_COLOURS = dict(zip(("fp16", "fp8", "int4"), PALETTE))


def format_color(title: str = "Format") -> alt.Color:
    return alt.Color("format:N", title=title, scale=alt.Scale(domain=list(FORMAT_COLOURS),
                                                              range=list(FORMAT_COLOURS.values())))


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


def cap_sweep(rows: pd.DataFrame) -> alt.FacetChart:
    """Flood output throughput against the max_num_seqs cap, one line per variant (part 3's sweep per format)."""
    tips = [alt.Tooltip("rig:N"), alt.Tooltip("variant:N"), alt.Tooltip("max_num_seqs:Q", title="cap"),
            alt.Tooltip("output_tok_s:Q", title="output tok/s", format=",.0f"),
            alt.Tooltip("itl_p50_ms:Q", title="ITL p50 ms", format=".3g")]
    return alt.Chart(rows).mark_line(point=True).encode(
        x=figures.log_x("max_num_seqs", "max_num_seqs cap (log)"), y=alt.Y("output_tok_s:Q", title="Output throughput (tok/s)"),
        color=alt.Color("variant:N", title="Variant"), tooltip=tips,
    ).facet(column=alt.Column("rig:N", title=None)).resolve_scale(x="independent", y="independent")


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
