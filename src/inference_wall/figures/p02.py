"""Part 2's charts, one function each, on the tidy frames of parts.p02 (theme, rig colours and axes from figures).

A configuration (a prefill budget, or chunking off) has one colour in every figure of the part (config_color), and no
other mark of the part uses it: the colours are neither the rigs' nor the kernel families' (FAMILY_COLOURS)."""
from __future__ import annotations

import zlib

import altair as alt
import pandas as pd

from .. import figures

CONFIG_TITLE = "Configuration"
# A colour per budget (max_num_batched_tokens; 0: chunking off): the part's own budgets, then any other by its hash.
BUDGET_COLOURS = {512: "#1b9e77", 2048: "#7570b3", 8192: "#e7298a", 0: "#525252"}
OTHER_BUDGET_COLOURS = ("#a6761d", "#66a61e", "#1f78b4", "#b15928")
# the kernel families' colours: tableau20's light half, unlike the configurations' and the rigs'
FAMILY_COLOURS = ["#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d",
                  "#9edae5"]
STREAM_GREY = "#b0b0b0"  # the background's tokens and steps: no configuration's colour
LABELS = {"config": CONFIG_TITLE, "prompt_len": "Long prompt (tokens)", "solo_ttft_ms": "TTFT alone (ms)",
          "ttft_ms": "TTFT (ms)", "floor_freeze_ms": "Freeze at the compute floor (ms)", "elapsed_ms": "Step (ms)",
          "ctx_tokens": "Prompt tokens in the step", "gen_tokens": "Tokens generated in the step",
          "gen_reqs": "Requests decoding", "time_ms": "Kernel time (ms)", "share_pct": "Share (%)",
          "busy_ms": "Kernels in the window (ms)", "window": "Window", "family": "Kernel family",
          "predicted_low_ms": "Predicted, low (ms)", "predicted_high_ms": "Predicted, high (ms)"}


def budget_colour(budget: int) -> str:
    budget = int(budget)
    if budget in BUDGET_COLOURS:
        return BUDGET_COLOURS[budget]
    return OTHER_BUDGET_COLOURS[zlib.crc32(str(budget).encode()) % len(OTHER_BUDGET_COLOURS)]


def _config_order(df: pd.DataFrame) -> list[str]:
    return list(df.sort_values("budget", key=lambda b: b.where(b > 0, 10**9))["config"].drop_duplicates())


def config_color(df: pd.DataFrame, **kwargs) -> alt.Color:
    """Colour by configuration, each the colour of its budget (budget_colour), in budget order."""
    order = _config_order(df)
    budgets = dict(zip(df["config"], df["budget"]))
    return alt.Color("config:N", title=CONFIG_TITLE, sort=order,
                     scale=alt.Scale(domain=order, range=[budget_colour(budgets[c]) for c in order]), **kwargs)


def _length_axis(df: pd.DataFrame) -> alt.X:
    """Prompt length on a log-2 axis, ticked at the lengths measured."""
    values = sorted(int(v) for v in df["prompt_len"].unique())
    return alt.X("prompt_len:Q", title="long prompt (tokens, log)", scale=alt.Scale(type="log", base=2),
                 axis=alt.Axis(values=values, format=",d"))


def token_timeline(tokens: pd.DataFrame) -> alt.FacetChart:
    """Background tokens (one row of ticks per stream, grey) around the injection, one panel per configuration; the
    long request's own tokens on the row marked 'long prompt', in its configuration's colour. Time 0 is when the long
    prompt was sent."""
    data = tokens.assign(who=tokens["stream"].map(lambda s: "long prompt" if s < 0 else f"stream {s}"))
    order = ["long prompt", *[f"stream {s}" for s in sorted(set(tokens["stream"]) - {-1})]]
    colour = config_color(tokens).to_dict()
    colour.pop("sort", None)
    base = alt.Chart().mark_tick(thickness=2, size=10).encode(
        x=alt.X("t_ms:Q", title="ms since the long prompt was sent"),
        y=alt.Y("who:N", sort=order, title=None),
        color=alt.condition("datum.stream < 0", colour, alt.value(STREAM_GREY)),
        tooltip=figures.tooltips(["config", "who:N", "t_ms"], labels={**LABELS, "who": "Request",
                                                                     "t_ms": "Token at (ms)"}, data=data))
    rule = alt.Chart().mark_rule(strokeDash=[4, 3], color="#888").encode(x=alt.datum(0))  # the send
    return alt.layer(base, rule, data=data).facet(
        row=alt.Row("config:N", title=None, sort=_config_order(tokens))).resolve_scale(x="independent", y="independent")


def freeze_vs_length(freezes: pd.DataFrame) -> alt.FacetChart:
    """The freeze (median over repeats, bar from the least to the largest) against the long prompt's length, one line
    per configuration, one panel per rig."""
    base = alt.Chart(freezes)
    enc = dict(x=_length_axis(freezes), color=config_color(freezes))
    tips = figures.tooltips(["config", "prompt_len", "freeze_ms", "freeze_min_ms", "freeze_max_ms", "repeats",
                             "ttft_ms", "predicted_low_ms", "predicted_high_ms"], labels=LABELS, data=freezes)
    line = base.mark_line(point=True).encode(y=alt.Y("freeze_ms:Q", title="freeze (ms)"), tooltip=tips, **enc)
    bar = base.mark_rule().encode(y="freeze_min_ms:Q", y2="freeze_max_ms:Q", tooltip=tips, **enc)
    return alt.layer(bar, line).facet(column=alt.Column("rig:N", title=None)).resolve_scale(y="independent")


def ttft_vs_freeze(freezes: pd.DataFrame) -> alt.FacetChart:
    """The trade: the long request's TTFT against the freeze it inflicts, per configuration and prompt length."""
    lengths = sorted(int(v) for v in freezes["prompt_len"].unique())
    data = freezes.assign(prompt=freezes["prompt_len"].map(lambda n: f"{int(n):,}"))
    chart = alt.Chart(data).mark_point(filled=True, size=70).encode(
        x=figures.log_x("freeze_ms", "freeze of the background (ms)", ticks=figures.log_ticks(freezes["freeze_ms"])),
        y=figures.log_y("ttft_ms", "the long prompt's TTFT (ms)", ticks=figures.log_ticks(freezes["ttft_ms"])),
        # two legends: each a column of its own, so that together they are no wider than a phone's column
        color=config_color(freezes, legend=alt.Legend(direction="vertical", columns=1)),
        shape=alt.Shape("prompt:N", title="Long prompt (tokens)", sort=[f"{n:,}" for n in lengths],
                        legend=alt.Legend(direction="vertical", columns=1)),
        tooltip=figures.tooltips(["config", "prompt_len", "freeze_ms", "ttft_ms", "solo_ttft_ms"], labels=LABELS,
                                 data=freezes))
    return chart.facet(column=alt.Column("rig:N", title=None)).resolve_scale(x="independent", y="independent")


def step_timeline(steps: pd.DataFrame) -> alt.FacetChart:
    """The engine's steps around one injection (iteration log): each step's elapsed time, one panel per
    configuration in its colour; the steps that carry the long prompt solid, the others pale."""
    kinds = ["carries the long prompt", "other step"]
    data = steps.assign(kind=steps["long_prompt"].map({True: kinds[0], False: kinds[1]}))
    chart = alt.Chart(data).mark_bar().encode(
        x=alt.X("step:O", title="step (0: the long prompt's first)"),
        y=alt.Y("elapsed_ms:Q", title="step time (ms)"),
        color=config_color(steps),
        opacity=alt.Opacity("kind:N", title=None, scale=alt.Scale(domain=kinds, range=[1.0, 0.35])),
        tooltip=figures.tooltips(["config", "step", "kind:N", "elapsed_ms", "ctx_tokens", "gen_tokens", "gen_reqs"],
                                 labels={**LABELS, "step": "Step", "kind": "The step"}, data=data))
    return chart.facet(row=alt.Row("config:N", title=None, sort=_config_order(steps))).resolve_scale(
        x="independent", y="independent")


def kernel_breakdown(traces: pd.DataFrame) -> alt.FacetChart:
    """Share of the traced window's kernel time by family, one bar per configuration (in budget order), one panel per
    rig and window (the decode alone, the long prompt's injection)."""
    data = traces.assign(panel=traces["rig"] + ": " + traces["window"] + " window")
    panels = list(dict.fromkeys(data.sort_values(["rig", "window"])["panel"]))
    chart = alt.Chart(data).mark_bar().encode(
        y=alt.Y("config:N", title=None, sort=_config_order(traces)),
        x=alt.X("share_pct:Q", title="share of kernel time (%)", stack="zero"),
        color=alt.Color("family:N", title="Kernel family", scale=alt.Scale(range=FAMILY_COLOURS)),
        tooltip=figures.tooltips(["config", "window", "family", "time_ms", "share_pct", "busy_ms"], labels=LABELS,
                                 data=data))
    return chart.facet(row=alt.Row("panel:N", title=None, sort=panels, header=alt.Header(labelAngle=0,
                                                                                         labelAlign="left",
                                                                                         labelAnchor="start",
                                                                                         labelOrient="top")))


def floor_freeze(floor: pd.DataFrame) -> alt.Chart:
    """The freeze the post's own A10G figures predict at the compute floor, per configuration."""
    return alt.Chart(floor).mark_line(point=True, strokeDash=[5, 3]).encode(
        x=_length_axis(floor),
        y=alt.Y("floor_freeze_ms:Q", title="freeze at the compute floor (ms)"),
        color=config_color(floor),
        tooltip=figures.tooltips(["config", "prompt_len", "floor_freeze_ms"], labels=LABELS, data=floor))
