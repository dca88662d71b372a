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


QUANTITIES = ["fixed cost (batch-1 step)", "per-sequence cost (slope)"]


def costs_vs_bytes(long: pd.DataFrame) -> alt.ConcatChart:
    """The step fit's fixed and per-sequence cost (with their 95% ranges) against the bytes a decode step reads;
    the weight-stream floor (bytes / measured bandwidth) where the rig measured its bandwidth. One panel per rig and
    quantity (figures.panels: the per-sequence cost has no floor, and gets no empty layer).
    `long`: rig, variant, format, decode_gb, reference, quantity, series, value, low, high (p05.cost_points)."""
    tips = [figures.tip("rig:N", "Rig"), figures.tip("variant:N", "Variant"), figures.tip("series:N", "Series"),
            figures.tip("decode_gb", "GB per step"), figures.tip("value", "Milliseconds"),
            figures.tip("low", "95% range from (ms)"), figures.tip("high", "95% range to (ms)")]
    x = alt.X("decode_gb:Q", title="Bytes one decode step reads (GB)", scale=alt.Scale(zero=True))
    charts = {}
    for rig in figures.rig_order(long["rig"]):
        quantities = set(long["quantity"])
        for quantity in [q for q in QUANTITIES if q in quantities] + sorted(quantities - set(QUANTITIES)):
            cell = long[(long["rig"] == rig) & (long["quantity"] == quantity)]
            measured, floor = cell[cell["series"] == "measured"], cell[cell["series"] != "measured"]
            layers = []
            if len(floor):
                layers.append(alt.Chart(floor).mark_line(strokeDash=[6, 4], color="#888",
                                                         point=alt.OverlayMarkDef(color="#888")).encode(
                    x=x, y=alt.Y("value:Q", title="ms"), detail="series:N", tooltip=tips))
            if len(measured):
                base = alt.Chart(measured).encode(x=x, tooltip=tips)
                layers += [base.mark_rule().encode(y=alt.Y("low:Q", title="ms"), y2="high:Q", color=format_color()),
                           base.mark_point(filled=True, size=70).encode(
                               y="value:Q", color=format_color(), shape=alt.Shape("reference:N", title="Reference model"))]
            if layers:
                charts[f"{rig}: {quantity}"] = alt.layer(*layers)
    return figures.panels(charts, columns=2, width=240, height=200)


def cap_sweep(rows: pd.DataFrame) -> alt.FacetChart:
    """Flood output throughput against the max_num_seqs cap, one line per variant (part 3's sweep per format)."""
    tips = [figures.tip("rig:N", "Rig"), figures.tip("variant:N", "Variant"),
            figures.tip("max_num_seqs", "Cap (max_num_seqs)", figures.COUNT),
            figures.tip("output_tok_s", "Output (tok/s)"), figures.tip("itl_p50_ms", "ITL p50 (ms)")]
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
        tooltip=[figures.tip("format:N", "Format"), figures.tip("decode_gb", "All (GB)")]
        + [figures.tip(c, t[:1].upper() + t[1:]) for c, t in parts.items()],
    ).properties(width=320, height=260)
