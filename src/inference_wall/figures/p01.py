"""Part 1's figures (Altair, the book's theme), one function each, on tidy frames: throughput and latency against
the offered rate, generation inside the rate passes, the roofline, the step-time fit, and goodput (slo).

A flood (offered rate = inf) cannot sit on a log axis: it is drawn as a dashed rule at its value,
labelled in the tooltip, so every rig shows its ceiling next to its rate curve.
"""
from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from .. import figures
from ..figures import RIG_FACET
from ..measure.slo import DEFAULT_TARGETS, SHARE


def _finite(df: pd.DataFrame, col: str) -> pd.Series:
    return df[col].apply(lambda v: v is not None and math.isfinite(float(v)))


def _rate_layers(df: pd.DataFrame, y: str, y_title: str, log_y: bool, tooltip: list[str]) -> alt.FacetChart:
    """A panel per rig with a rate sweep (a rig with its flood alone, its sweep not run yet, has no line to draw: the
    page's words name it)."""
    data = df.copy()
    data["flood"] = ~_finite(data, "offered_rate_rps")
    swept = set(data.loc[~data["flood"], "rig"])
    data = data[data["rig"].isin(swept)]
    rigs = list(data["rig"].unique())
    data["offered_rate_rps"] = data["offered_rate_rps"].where(~data["flood"], None)
    yenc = figures.log_y(y, y_title) if log_y else alt.Y(f"{y}:Q", title=y_title)
    base = alt.Chart(data)
    line = base.transform_filter("!datum.flood").mark_line(point=True).encode(
        x=figures.log_x("offered_rate_rps", "Offered rate (req/s, log)", ticks=figures.log_ticks(data["offered_rate_rps"])),
        y=yenc,
        color=figures.rig_color(rigs), tooltip=tooltip)
    rule = base.transform_filter("datum.flood").mark_rule(strokeDash=[6, 4]).encode(
        y=alt.Y(f"{y}:Q"), color=figures.rig_color(rigs),
        tooltip=[RIG_TIP, figures.tip(y, f"Flood: {y_title.replace(', log', '')}")])
    return alt.layer(line, rule).facet(column=RIG_FACET).resolve_scale(x="independent", y="independent")


RIG_TIP = figures.tip("rig:N", "Rig")
OFFERED_TIP = figures.tip("offered_rate_rps", "Offered (req/s)")
RATE_TOOLTIP = [RIG_TIP, OFFERED_TIP, figures.tip("completed_rps", "Completed (req/s)"),
                figures.tip("output_tok_s", "Output (tok/s)"), figures.tip("e2el_p99_ms", "E2E p99 (ms)")]


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
        x=figures.log_x("offered_rate_rps", "Offered rate (req/s, log)", ticks=figures.log_ticks(data["offered_rate_rps"])),
        y=alt.Y("tok_s:Q", title="Generated tokens per second"),
        color=alt.Color("what:N", title=None, sort=order, legend=alt.Legend(orient="bottom")),
        strokeDash=alt.condition(alt.datum.what == order[0], alt.value([6, 4]), alt.value([1, 0])),
        tooltip=[RIG_TIP, figures.tip("what:N", "Generation"), OFFERED_TIP, figures.tip("tok_s", "Generated (tok/s)")],
    ).facet(column=RIG_FACET).resolve_scale(x="independent", y="independent")


def roofline(rows: pd.DataFrame) -> alt.Chart:
    """Single-stream time per token against the weight-stream floor, per rig (rows: rig, what, ms): one chart, a pair
    of bars per rig on one scale (a panel per rig stacked five panels past a phone's screen and a half)."""
    order = ["weight-stream floor", "measured ITL (one stream)"]
    return alt.Chart(rows).mark_bar().encode(
        x=alt.X("rig:N", title=None, sort=figures.rig_order(set(rows["rig"])), axis=alt.Axis(labelAngle=-30)),
        xOffset=alt.XOffset("what:N", sort=order),
        y=alt.Y("ms:Q", title="Time per token (ms)"),
        color=alt.Color("what:N", title=None, sort=order, legend=alt.Legend(orient="bottom")),
        tooltip=[RIG_TIP, figures.tip("what:N", "Time per token"), figures.tip("ms", "Milliseconds")],
    )


def step_time_fit(points: pd.DataFrame, lines: pd.DataFrame, crossovers: pd.DataFrame) -> alt.ConcatChart:
    """Decode step time against running batch: measured points, the fitted line a + b x batch, and the
    crossover a/b (where the per-sequence term equals the fixed one) as a vertical rule; one panel per rig
    (figures.panels: a rig with no measured points, the published one, gets no empty layer)."""
    rigs = figures.rig_order(set(lines["rig"]) | set(points["rig"]) | set(crossovers["rig"]))
    color = figures.rig_color(rigs)
    x = alt.X("batch:Q", title="Running batch (sequences)")
    charts = {}
    for rig in rigs:
        layers = []
        fit = lines[lines["rig"] == rig]
        if len(fit):
            layers.append(alt.Chart(fit).mark_line().encode(
                x=x, y=alt.Y("step_ms:Q", title="Step time (ms)"), color=color,
                tooltip=[RIG_TIP, figures.tip("batch", "Batch"), figures.tip("step_ms", "Fitted step (ms)")]))
        measured = points[points["rig"] == rig]
        if len(measured):
            layers.append(alt.Chart(measured).mark_point(filled=True, size=60).encode(
                x=x, y=alt.Y("step_ms:Q", title="Step time (ms)"), color=color,
                tooltip=[RIG_TIP, figures.tip("batch", "Batch"), figures.tip("step_ms", "Median ITL (ms)")]))
        cross = crossovers[crossovers["rig"] == rig].rename(columns={"crossover": "batch"})
        if len(cross):
            layers.append(alt.Chart(cross).mark_rule(strokeDash=[4, 4]).encode(
                x=x, color=color, tooltip=[RIG_TIP, figures.tip("batch", "Crossover a/b (sequences)")]))
        if layers:
            charts[rig] = alt.layer(*layers)
    return figures.panels(charts, columns=2, width=300, height=220).resolve_scale(x="shared")


def fit_lines(fits: dict[str, tuple[float, float]], max_batch: dict[str, float]) -> pd.DataFrame:
    rows = []
    for rig, (a, b) in fits.items():
        for x in np.linspace(1, max_batch.get(rig, 256), 40):
            rows.append({"rig": rig, "batch": float(x), "step_ms": a + b * x})
    return pd.DataFrame(rows)


def goodput_chart(goodput: pd.DataFrame, share: float = SHARE) -> alt.LayerChart:
    """Share of requests within the chosen targets against offered rate, one line per rig; the targets are two
    drop-downs (Altair parameters: they work offline), the required share a rule."""
    ttft = alt.param(name="ttft_target", value=DEFAULT_TARGETS[1][0],
                     bind=alt.binding_select(options=sorted(goodput["ttft_target_ms"].unique().tolist()),
                                             name="TTFT target (ms) "))
    tpot = alt.param(name="tpot_target", value=DEFAULT_TARGETS[1][1],
                     bind=alt.binding_select(options=sorted(goodput["tpot_target_ms"].unique().tolist()),
                                             name="time per output token target (ms) "))
    data = goodput.assign(share_pct=100 * goodput["share_ok"])
    rigs = figures.rig_order(data["rig"].unique())
    lines = alt.Chart(data).mark_line(point=True).encode(
        x=figures.log_x("offered_rate_rps", "offered rate (req/s)", ticks=figures.log_ticks(data["offered_rate_rps"])),
        y=alt.Y("share_pct:Q", title="requests within both targets (%)", scale=alt.Scale(domain=[0, 100])),
        color=figures.rig_color(rigs),
        tooltip=[RIG_TIP, OFFERED_TIP, figures.tip("ttft_target_ms", "TTFT target (ms)"),
                 figures.tip("tpot_target_ms", "Time per output token target (ms)"),
                 figures.tip("share_pct", "Requests within both (%)")],
    ).add_params(ttft, tpot).transform_filter(
        (alt.datum.ttft_target_ms == ttft) & (alt.datum.tpot_target_ms == tpot))
    rule = alt.Chart(pd.DataFrame({"y": [100 * share]})).mark_rule(strokeDash=[4, 4]).encode(
        y="y:Q", tooltip=[figures.tip("y", "Share required (%)")])
    return alt.layer(lines, rule).properties(width=520, height=280)


def running_batch(series: pd.DataFrame) -> alt.FacetChart:
    """The running batch of every rate pass over its seconds (parts.p01.running_series), one line per pass, per rig."""
    return alt.Chart(series).mark_line().encode(x=alt.X("t_s:Q", title="Seconds into the pass"),
                                                y=alt.Y("running:Q", title="Running requests"),
                                                color=alt.Color("point:N", title="Rate point"),
                                                tooltip=[RIG_TIP, figures.tip("point:N", "Rate point"),
                                                         figures.tip("t_s", "Seconds into the pass"),
                                                         figures.tip("running", "Running requests", figures.COUNT)]
                                                ).facet(column=figures.RIG_FACET)
