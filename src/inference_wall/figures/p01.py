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
        x=figures.log_x("offered_rate_rps", "offered rate (req/s)"),
        y=alt.Y("share_pct:Q", title="requests within both targets (%)", scale=alt.Scale(domain=[0, 100])),
        color=figures.rig_color(rigs),
        tooltip=["rig", "offered_rate_rps", "ttft_target_ms", "tpot_target_ms",
                 alt.Tooltip("share_pct:Q", format=".1f")],
    ).add_params(ttft, tpot).transform_filter(
        (alt.datum.ttft_target_ms == ttft) & (alt.datum.tpot_target_ms == tpot))
    rule = alt.Chart(pd.DataFrame({"y": [100 * share]})).mark_rule(strokeDash=[4, 4]).encode(y="y:Q")
    return alt.layer(lines, rule).properties(width=520, height=280)


def running_batch(series: pd.DataFrame) -> alt.FacetChart:
    """The running batch of every rate pass over its seconds (parts.p01.running_series), one line per pass, per rig."""
    return alt.Chart(series).mark_line().encode(x=alt.X("t_s:Q", title="Seconds into the pass"),
                                                y=alt.Y("running:Q", title="Running requests"),
                                                color=alt.Color("point:N", title="Rate point"),
                                                tooltip=["rig", "point", "t_s", "running"]).facet(column=figures.RIG_FACET)
