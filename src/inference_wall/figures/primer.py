"""The primer's two measured figures (Altair, the book's theme): prefill against the prompt (primer.prefill_table)
and the decode step against the batch (primer.decode_steps)."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures
from ..figures import RIG_FACET


def prefill_chart(t: pd.DataFrame) -> alt.FacetChart:
    base = alt.Chart(t).encode(
        color=figures.rig_color(t["rig"], legend=None),
        x=alt.X("prompt_len:Q", title="prompt (tokens, log)", scale=alt.Scale(type="log", base=2),
                axis=alt.Axis(values=sorted(int(v) for v in t["prompt_len"].unique()), format=",d")),
        tooltip=[alt.Tooltip("rig:N"), alt.Tooltip("prompt_len:Q", title="prompt (tokens)", format=",d"),
                 alt.Tooltip("ttft_ms:Q", title="TTFT alone (ms)", format=",.1f")])
    line = base.mark_line(point=True).encode(y=alt.Y("ttft_ms:Q", title="time to first token, alone (ms)"))
    bar = base.mark_rule().encode(y="ttft_min_ms:Q", y2="ttft_max_ms:Q")
    return alt.layer(bar, line).facet(column=RIG_FACET).resolve_scale(x="independent", y="independent")


def decode_chart(t: pd.DataFrame) -> alt.Chart:
    return alt.Chart(t).mark_line(point=True).encode(
        x=alt.X("batch:Q", title="sequences decoding together (batch)"),
        y=alt.Y("step_ms:Q", title="decode step (median ITL, ms)"),
        color=figures.rig_color(t["rig"]),
        tooltip=[alt.Tooltip("rig:N"), alt.Tooltip("batch:Q"), alt.Tooltip("step_ms:Q", title="step (ms)", format=".2f"),
                 alt.Tooltip("decode_tok_s:Q", title="tokens/s", format=",.0f")])
