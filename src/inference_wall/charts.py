"""The book's figures, one function each, on tidy frames; built with figures' theme, rig colours and axes.

A flood (offered rate = inf) cannot sit on a log axis: it is drawn as a dashed rule at its value,
labelled in the tooltip, so every rig shows its ceiling next to its rate curve.
"""
from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from . import figures

RIG_FACET = alt.Facet("rig:N", title=None, header=alt.Header(labelFontWeight="bold"))


def _finite(df: pd.DataFrame, col: str) -> pd.Series:
    return df[col].apply(lambda v: v is not None and math.isfinite(float(v)))


def _rate_layers(df: pd.DataFrame, y: str, y_title: str, log_y: bool, tooltip: list[str]) -> alt.FacetChart:
    rigs = list(df["rig"].unique())
    data = df.copy()
    data["flood"] = ~_finite(data, "offered_rate_rps")
    data["offered_rate_rps"] = data["offered_rate_rps"].where(~data["flood"], None)
    yenc = figures.log_y(y, y_title) if log_y else alt.Y(f"{y}:Q", title=y_title)
    base = alt.Chart(data)
    line = base.transform_filter("!datum.flood").mark_line(point=True).encode(
        x=figures.log_x("offered_rate_rps", "Offered rate (req/s, log)"), y=yenc,
        color=figures.rig_color(rigs), tooltip=tooltip)
    rule = base.transform_filter("datum.flood").mark_rule(strokeDash=[6, 4]).encode(
        y=alt.Y(f"{y}:Q"), color=figures.rig_color(rigs),
        tooltip=[alt.Tooltip("rig:N"), alt.Tooltip(f"{y}:Q", title=f"flood: {y_title}", format=",.0f")])
    return alt.layer(line, rule).facet(column=RIG_FACET).resolve_scale(x="independent", y="independent")


RATE_TOOLTIP = [alt.Tooltip("rig:N"), alt.Tooltip("offered_rate_rps:Q", title="offered req/s", format=".3g"),
                alt.Tooltip("completed_rps:Q", title="completed req/s", format=".3g"),
                alt.Tooltip("output_tok_s:Q", title="output tok/s", format=",.0f"),
                alt.Tooltip("e2el_p99_ms:Q", title="E2E p99 ms", format=",.0f")]


def throughput_vs_rate(rates: pd.DataFrame) -> alt.FacetChart:
    """Figure 1a: output throughput against offered rate; the dashed rule is the flood."""
    return _rate_layers(rates, "output_tok_s", "Output throughput (tok/s)", False, RATE_TOOLTIP)


def e2e_p99_vs_rate(rates: pd.DataFrame) -> alt.FacetChart:
    """Figure 1b: E2E p99 latency against offered rate, log scale; the dashed rule is the flood."""
    return _rate_layers(rates, "e2el_p99_ms", "E2E p99 (ms, log)", True, RATE_TOOLTIP)


MIXED_LABELS = {"needed_gen_tok_s": "needed by the offered rate", "gen_with_prefill_tok_s": "intervals that also prefilled",
                "gen_decode_only_tok_s": "intervals of decode alone"}


def mixed_steps(long: pd.DataFrame) -> alt.FacetChart:
    """Figure 1c: generation throughput inside the rate passes (long: rig, offered_rate_rps, what, tok_s)."""
    data = long.assign(what=long["what"].map(MIXED_LABELS))
    order = list(MIXED_LABELS.values())
    return alt.Chart(data).mark_line(point=True).encode(
        x=figures.log_x("offered_rate_rps", "Offered rate (req/s, log)"),
        y=alt.Y("tok_s:Q", title="Generated tokens per second"),
        color=alt.Color("what:N", title=None, sort=order, legend=alt.Legend(orient="bottom")),
        strokeDash=alt.condition(alt.datum.what == order[0], alt.value([6, 4]), alt.value([1, 0])),
        tooltip=["rig:N", "what:N", alt.Tooltip("offered_rate_rps:Q", title="offered req/s", format=".3g"),
                 alt.Tooltip("tok_s:Q", title="tok/s", format=",.0f")],
    ).facet(column=RIG_FACET).resolve_scale(x="independent", y="independent")


def roofline(rows: pd.DataFrame) -> alt.Chart:
    """Single-stream time per token against the weight-stream floor, per rig (rows: rig, what, ms)."""
    return alt.Chart(rows).mark_bar().encode(
        x=alt.X("what:N", title=None, sort=["weight-stream floor", "measured ITL (one stream)"]),
        y=alt.Y("ms:Q", title="Time per token (ms)"),
        color=alt.Color("what:N", title=None, legend=alt.Legend(orient="bottom")),
        column=RIG_FACET,
        tooltip=["rig:N", "what:N", alt.Tooltip("ms:Q", format=".3g")],
    ).resolve_scale(y="independent")


def step_time_fit(points: pd.DataFrame, lines: pd.DataFrame, crossovers: pd.DataFrame) -> alt.FacetChart:
    """Decode step time against running batch: measured points, the fitted line a + b x batch, and the
    crossover a/b (where the per-sequence term equals the fixed one) as a vertical rule."""
    data = pd.concat([lines.assign(kind="fit"), points.assign(kind="measured"),
                      crossovers.rename(columns={"crossover": "batch"}).assign(kind="crossover")], ignore_index=True)
    color = figures.rig_color(list(data["rig"].unique()))
    base = alt.Chart(data)
    fit = base.transform_filter("datum.kind == 'fit'").mark_line().encode(
        x=alt.X("batch:Q", title="Running batch (sequences)"), y=alt.Y("step_ms:Q", title="Step time (ms)"),
        color=color, tooltip=["rig:N", alt.Tooltip("batch:Q", format=".0f"),
                              alt.Tooltip("step_ms:Q", title="fit ms", format=".3g")])
    measured = base.transform_filter("datum.kind == 'measured'").mark_point(filled=True, size=60).encode(
        x="batch:Q", y="step_ms:Q", color=color,
        tooltip=["rig:N", "batch:Q", alt.Tooltip("step_ms:Q", title="median ITL ms", format=".3g")])
    rule = base.transform_filter("datum.kind == 'crossover'").mark_rule(strokeDash=[4, 4]).encode(
        x="batch:Q", color=color,
        tooltip=["rig:N", alt.Tooltip("batch:Q", title="crossover a/b (seqs)", format=".3g")])
    return alt.layer(fit, measured, rule).facet(column=RIG_FACET).resolve_scale(y="independent")


def fit_lines(fits: dict[str, tuple[float, float]], max_batch: dict[str, float]) -> pd.DataFrame:
    rows = []
    for rig, (a, b) in fits.items():
        for x in np.linspace(1, max_batch.get(rig, 256), 40):
            rows.append({"rig": rig, "batch": float(x), "step_ms": a + b * x})
    return pd.DataFrame(rows)


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
