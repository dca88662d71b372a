"""The primer's two measured figures (Altair, the book's theme): prefill against the prompt (primer.prefill_table)
and the decode step against the batch (primer.decode_steps)."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures


RIG_TIP = figures.tip("rig:N", "Rig")
PROMPT_TIP = figures.tip("prompt_len", "Prompt (tokens)", figures.COUNT)


def proportional(t: pd.DataFrame) -> pd.DataFrame:
    """Per rig: the time to first token in proportion to the prompt, from the shortest prompt's (a line from zero
    through that point to the longest prompt)."""
    rows = []
    for rig, g in t.groupby("rig"):
        first, last = g.loc[g["prompt_len"].idxmin()], float(g["prompt_len"].max())
        for n in (0.0, last):
            rows.append({"rig": rig, "prompt_len": n, "ttft_ms": float(first["ttft_ms"]) * n / float(first["prompt_len"])})
    return pd.DataFrame(rows, columns=["rig", "prompt_len", "ttft_ms"])


def prefill_chart(t: pd.DataFrame) -> alt.ConcatChart:
    """Time to first token of a prompt alone against its length, both axes linear from zero, so that a time in
    proportion to the prompt is a straight line through zero (dashed, from the shortest prompt's time); the bar spans
    the repeats. One panel per rig (figures.panels: the proportional line has data of its own)."""
    color = figures.rig_color(t["rig"], legend=None)
    x = alt.X("prompt_len:Q", title="prompt (tokens)", scale=alt.Scale(zero=True),
              axis=alt.Axis(values=sorted(int(v) for v in t["prompt_len"].unique()), format=",d", labelAngle=-45))
    y = alt.Y("ttft_ms:Q", title="time to first token, alone (ms)", scale=alt.Scale(zero=True))
    tips = [RIG_TIP, PROMPT_TIP, figures.tip("ttft_ms", "TTFT alone, median (ms)"),
            figures.tip("ttft_min_ms", "Least (ms)"), figures.tip("ttft_max_ms", "Largest (ms)")]
    ref = proportional(t)
    charts = {}
    for rig in figures.rig_order(t["rig"]):
        own = t[t["rig"] == rig]
        line = alt.Chart(ref[ref["rig"] == rig]).mark_line(strokeDash=[4, 4], color="#888").encode(
            x=x, y=y, tooltip=[RIG_TIP, PROMPT_TIP, figures.tip("ttft_ms", "In proportion to the shortest prompt (ms)")])
        bar = alt.Chart(own).mark_rule(strokeWidth=2).encode(x=x, y="ttft_min_ms:Q", y2="ttft_max_ms:Q", color=color,
                                                              tooltip=tips)
        measured = alt.Chart(own).mark_line(point=True).encode(x=x, y=y, color=color, tooltip=tips)
        charts[rig] = alt.layer(line, bar, measured)
    return figures.panels(charts, columns=2, width=300, height=240)


def decode_chart(t: pd.DataFrame) -> alt.Chart:
    return alt.Chart(t).mark_line(point=True).encode(
        x=alt.X("batch:Q", title="sequences decoding together (batch)"),
        y=alt.Y("step_ms:Q", title="decode step (median ITL, ms)"),
        color=figures.rig_color(t["rig"]),
        tooltip=[RIG_TIP, figures.tip("batch", "Batch", figures.COUNT), figures.tip("step_ms", "Step (ms)"),
                 figures.tip("decode_tok_s", "Tokens a second")])
