"""Part 2's charts, one function each, on the tidy frames of parts.p02 (theme, rig colours and axes from figures)."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures

CONFIG_TITLE = "Configuration"


def _config_order(df: pd.DataFrame) -> list[str]:
    return list(df.sort_values("budget", key=lambda b: b.where(b > 0, 10**9))["config"].drop_duplicates())


def _length_axis(df: pd.DataFrame) -> alt.X:
    """Prompt length on a log-2 axis, ticked at the lengths measured."""
    values = sorted(int(v) for v in df["prompt_len"].unique())
    return alt.X("prompt_len:Q", title="long prompt (tokens, log)", scale=alt.Scale(type="log", base=2),
                 axis=alt.Axis(values=values, format=",d"))


def token_timeline(tokens: pd.DataFrame) -> alt.FacetChart:
    """Background tokens (one row of ticks per stream) around the injection, one panel per configuration; the
    long request's own tokens on the row marked 'long prompt'. Time 0 is when the long prompt was sent."""
    data = tokens.assign(who=tokens["stream"].map(lambda s: "long prompt" if s < 0 else f"stream {s}"))
    order = ["long prompt", *[f"stream {s}" for s in sorted(set(tokens["stream"]) - {-1})]]
    base = alt.Chart().mark_tick(thickness=2, size=10).encode(
        x=alt.X("t_ms:Q", title="ms since the long prompt was sent"),
        y=alt.Y("who:N", sort=order, title=None),
        color=alt.condition("datum.stream < 0", alt.value("#d62728"), alt.value("#4c78a8")),
        tooltip=[alt.Tooltip("config:N"), alt.Tooltip("who:N", title="request"),
                 alt.Tooltip("t_ms:Q", title="token at (ms)", format=",.1f")])
    rule = alt.Chart().mark_rule(strokeDash=[4, 3], color="#888").encode(x=alt.datum(0))  # the send
    return alt.layer(base, rule, data=data).facet(
        row=alt.Row("config:N", title=None, sort=_config_order(tokens))).resolve_scale(x="independent", y="independent")


def freeze_vs_length(freezes: pd.DataFrame) -> alt.FacetChart:
    """The freeze (median over repeats, bar from the least to the largest) against the long prompt's length, one line
    per configuration, one panel per rig."""
    order = _config_order(freezes)
    base = alt.Chart(freezes)
    enc = dict(x=_length_axis(freezes),
               color=alt.Color("config:N", title=CONFIG_TITLE, sort=order))
    tips = figures.tooltips(["config", "prompt_len", "freeze_ms", "freeze_min_ms", "freeze_max_ms", "repeats",
                             "ttft_ms", "predicted_low_ms", "predicted_high_ms"], data=freezes)
    line = base.mark_line(point=True).encode(y=alt.Y("freeze_ms:Q", title="freeze (ms)"), tooltip=tips, **enc)
    bar = base.mark_rule().encode(y="freeze_min_ms:Q", y2="freeze_max_ms:Q", **enc)
    return alt.layer(bar, line).facet(column=alt.Column("rig:N", title=None)).resolve_scale(y="independent")


def ttft_vs_freeze(freezes: pd.DataFrame) -> alt.FacetChart:
    """The trade: the long request's TTFT against the freeze it inflicts, per configuration and prompt length."""
    order = _config_order(freezes)
    chart = alt.Chart(freezes).mark_point(filled=True, size=70).encode(
        x=alt.X("freeze_ms:Q", title="freeze of the background (ms, log)", scale=alt.Scale(type="log")),
        y=alt.Y("ttft_ms:Q", title="the long prompt's TTFT (ms, log)", scale=alt.Scale(type="log")),
        color=alt.Color("config:N", title=CONFIG_TITLE, sort=order),
        shape=alt.Shape("prompt_len:O", title="prompt (tokens)"),
        tooltip=figures.tooltips(["config", "prompt_len", "freeze_ms", "ttft_ms", "solo_ttft_ms"], data=freezes))
    return chart.facet(column=alt.Column("rig:N", title=None)).resolve_scale(x="independent", y="independent")


def step_timeline(steps: pd.DataFrame) -> alt.FacetChart:
    """The engine's steps around one injection (iteration log): each step's elapsed time, the long prompt's steps
    marked, one panel per configuration."""
    data = steps.assign(kind=steps["long_prompt"].map({True: "carries the long prompt", False: "other step"}))
    chart = alt.Chart(data).mark_bar().encode(
        x=alt.X("step:O", title="step (0: the long prompt's first)"),
        y=alt.Y("elapsed_ms:Q", title="step time (ms)"),
        color=alt.Color("kind:N", title=None, scale=alt.Scale(domain=["carries the long prompt", "other step"],
                                                              range=["#d62728", "#4c78a8"])),
        tooltip=figures.tooltips(["config", "step", "elapsed_ms", "ctx_tokens", "gen_tokens", "gen_reqs"], data=data))
    return chart.facet(row=alt.Row("config:N", title=None, sort=_config_order(steps))).resolve_scale(
        x="independent", y="independent")


def kernel_breakdown(traces: pd.DataFrame) -> alt.FacetChart:
    """Share of the traced window's kernel time by family, one bar per configuration and window, one panel per rig."""
    data = traces.assign(bar=traces["config"] + " · " + traces["window"])
    chart = alt.Chart(data).mark_bar().encode(
        y=alt.Y("bar:N", title=None),
        x=alt.X("share_pct:Q", title="share of kernel time (%)", stack="zero"),
        color=alt.Color("family:N", title="Kernel family"),
        tooltip=figures.tooltips(["config", "window", "family", "time_ms", "share_pct", "busy_ms"], data=data))
    return chart.facet(row=alt.Row("rig:N", title=None))


def floor_freeze(floor: pd.DataFrame) -> alt.Chart:
    """The freeze the post's own A10G figures predict at the compute floor, per configuration."""
    order = _config_order(floor)
    return alt.Chart(floor).mark_line(point=True, strokeDash=[5, 3]).encode(
        x=_length_axis(floor),
        y=alt.Y("floor_freeze_ms:Q", title="freeze at the compute floor (ms)"),
        color=alt.Color("config:N", title=CONFIG_TITLE, sort=order),
        tooltip=figures.tooltips(["config", "prompt_len", "floor_freeze_ms"], data=floor))
