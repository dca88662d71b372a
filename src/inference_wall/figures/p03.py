"""Part 3's figures (Altair, the book's theme), one function each, on tidy frames: throughput, ITL and TTFT
against the max_num_seqs cap, and where each polled flood's working time went."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures


def _cap_axis(df: pd.DataFrame) -> alt.X:
    return figures.log_x("max_num_seqs", "max_num_seqs (log)",
                         domain=[float(df["max_num_seqs"].min()), float(df["max_num_seqs"].max())])


def throughput_vs_cap(sweep: pd.DataFrame, prediction: pd.DataFrame | None = None) -> alt.LayerChart:
    """Part 3: output throughput against the max_num_seqs cap (log axis), and where part 1's step-time
    fit exists for the rig, its pure-decode prediction (dashed)."""
    rigs = list(sweep["rig"].unique()) + (list(prediction["rig"].unique()) if prediction is not None else [])
    color = figures.rig_color(rigs)
    tip = [alt.Tooltip("rig:N"), alt.Tooltip("max_num_seqs:Q", title="max_num_seqs"),
           alt.Tooltip("output_tok_s:Q", title="output tok/s", format=",.0f"),
           alt.Tooltip("completed_rps:Q", title="req/s", format=".3g")]
    chart = alt.Chart(sweep).mark_line(point=True).encode(
        x=_cap_axis(sweep), y=alt.Y("output_tok_s:Q", title="Output throughput (tok/s)"),
        color=color, tooltip=tip)
    if prediction is not None and len(prediction):
        pred = alt.Chart(prediction).mark_line(strokeDash=[5, 4], opacity=0.7).encode(
            x="max_num_seqs:Q", y="output_tok_s:Q", color=color,
            tooltip=["rig:N", alt.Tooltip("max_num_seqs:Q"),
                     alt.Tooltip("output_tok_s:Q", title="predicted pure-decode tok/s", format=",.0f")])
        chart = alt.layer(chart, pred)
    return chart


def itl_vs_cap(sweep: pd.DataFrame) -> alt.Chart:
    """Part 3: the smoothness bill: ITL p50 and p99 against the cap (log-log)."""
    long = sweep.melt(id_vars=["rig", "max_num_seqs"], value_vars=["itl_p50_ms", "itl_p99_ms"],
                      var_name="stat", value_name="itl_ms").dropna()
    long["stat"] = long["stat"].map({"itl_p50_ms": "p50", "itl_p99_ms": "p99"})
    return alt.Chart(long).mark_line(point=True).encode(
        x=_cap_axis(long), y=figures.log_y("itl_ms", "ITL (ms, log)"),
        color=figures.rig_color(long["rig"]), strokeDash=alt.StrokeDash("stat:N", title="percentile"),
        tooltip=["rig:N", "max_num_seqs:Q", "stat:N", alt.Tooltip("itl_ms:Q", format=".3g")])


def ttft_vs_cap(sweep: pd.DataFrame) -> alt.Chart:
    """Part 3: median TTFT against the cap under a flood (log-log): a queue, not a comparison."""
    data = sweep.assign(ttft_p50_s=sweep["ttft_p50_ms"] / 1000)
    return alt.Chart(data).mark_line(point=True).encode(
        x=_cap_axis(data), y=figures.log_y("ttft_p50_s", "Median TTFT (s, log)"),
        color=figures.rig_color(data["rig"]),
        tooltip=["rig:N", "max_num_seqs:Q", alt.Tooltip("ttft_p50_s:Q", title="TTFT p50 s", format=".3g")])


FLOOD_TIME_LABELS = {"mixed": "steps with a refill's prompt tokens", "decode": "pure-decode steps",
                     "still": "step counter still"}


def flood_time(polled: pd.DataFrame) -> alt.Chart:
    """Part 3: where each polled flood's working time went (p03.flood_time_rows: rig, flood, what, seconds, share),
    one horizontal bar per flood, stacked by what the engine's steps did."""
    order = list(FLOOD_TIME_LABELS.values())
    data = polled.assign(what=polled["what"].map(FLOOD_TIME_LABELS), order=polled["what"].map(
        {k: i for i, k in enumerate(FLOOD_TIME_LABELS)}))
    floods = list(dict.fromkeys(data["flood"]))
    return alt.Chart(data).mark_bar().encode(
        y=alt.Y("flood:N", title=None, sort=floods),
        x=alt.X("seconds:Q", title="Seconds the engine had work", stack="zero"),
        color=alt.Color("what:N", title=None, sort=order, legend=alt.Legend(orient="bottom", columns=1),
                        scale=alt.Scale(domain=order, range=["#e45756", "#4c78a8", "#bab0ac"])),
        order=alt.Order("order:Q"),
        tooltip=["flood:N", "what:N", alt.Tooltip("seconds:Q", format=".3g"),
                 alt.Tooltip("share:Q", title="share of the working time", format=".0%")],
    ).properties(height=alt.Step(22))
