"""Part 3's figures (Altair, the book's theme), one function each, on tidy frames: throughput, ITL and TTFT
against the max_num_seqs cap, and where each polled flood's working time went."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures


def _cap_axis(df: pd.DataFrame) -> alt.X:
    return figures.log_x("max_num_seqs", "max_num_seqs (log)",
                         domain=[float(df["max_num_seqs"].min()), float(df["max_num_seqs"].max())])


RIG_TIP = figures.tip("rig:N", "Rig")
CAP_TIP = figures.tip("max_num_seqs", "Cap (max_num_seqs)", figures.COUNT)


def throughput_vs_cap(sweep: pd.DataFrame, prediction: pd.DataFrame | None = None) -> alt.LayerChart:
    """Part 3: output throughput against the max_num_seqs cap, both axes logarithmic (equal heights are equal
    ratios, so a rig's climb from one sequence reads the same at 50 tok/s as at 5,000), and where part 1's
    step-time fit exists for the rig, its pure-decode prediction (dashed)."""
    rigs = list(sweep["rig"].unique()) + (list(prediction["rig"].unique()) if prediction is not None else [])
    color = figures.rig_color(rigs)
    values = [float(v) for v in list(sweep["output_tok_s"]) + (list(prediction["output_tok_s"]) if prediction is not None
                                                               else []) if v and v > 0]
    y = figures.log_y("output_tok_s", "Output throughput (tok/s)",
                      domain=[min(values) / 1.25, max(values) * 1.25] if values else None,
                      ticks=figures.log_ticks(values))
    tip = [RIG_TIP, CAP_TIP, figures.tip("output_tok_s", "Output (tok/s)"),
           figures.tip("completed_rps", "Completed (req/s)")]
    chart = alt.Chart(sweep).mark_line(point=True).encode(x=_cap_axis(sweep), y=y, color=color, tooltip=tip)
    if prediction is not None and len(prediction):
        pred = alt.Chart(prediction).mark_line(strokeDash=[5, 4], opacity=0.7).encode(
            x="max_num_seqs:Q", y="output_tok_s:Q", color=color,
            tooltip=[RIG_TIP, CAP_TIP, figures.tip("output_tok_s", "Predicted pure decode (tok/s)")])
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
        tooltip=[RIG_TIP, CAP_TIP, figures.tip("stat:N", "Percentile"), figures.tip("itl_ms", "ITL (ms)")])


def ttft_vs_cap(sweep: pd.DataFrame) -> alt.Chart:
    """Part 3: median TTFT against the cap under a flood (log-log): a queue, not a comparison."""
    data = sweep.assign(ttft_p50_s=sweep["ttft_p50_ms"] / 1000)
    return alt.Chart(data).mark_line(point=True).encode(
        x=_cap_axis(data), y=figures.log_y("ttft_p50_s", "Median TTFT (s, log)"),
        color=figures.rig_color(data["rig"]),
        tooltip=[RIG_TIP, CAP_TIP, figures.tip("ttft_p50_s", "TTFT p50 (s)")])


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
        tooltip=[figures.tip("flood:N", "Flood"), figures.tip("what:N", "Steps"),
                 figures.tip("seconds", "Seconds"), figures.tip("share", "Share of the working time", ".0%")],
    ).properties(height=alt.Step(22))
