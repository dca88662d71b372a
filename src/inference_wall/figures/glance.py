"""The glance page's figure (Altair, the book's theme): throughput per GPU against speed per user, every measured
point of the parts on one chart (glance.chart_data's rows)."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures
from ..figures import log_ticks
from ..measure.claims import known_number


def chart(data: pd.DataFrame, width: int = 420, height: int = 300):
    """Throughput per GPU against tokens a second per user, both log, coloured by rig, a shape per part, a line
    through each series (a model and format, or layout, on one rig) in order of its setting."""
    d = data.copy()
    d["part"] = [f"part {int(p)}" for p in d["part"]]
    d["kind"] = [KIND_WORDS.get(k, k) for k in d["kind"]]
    d["usd_per_million"] = [round(x, 3) if known_number(x) else None for x in d["usd_per_million"]]
    d["energy_j_per_token"] = [round(x, 4) if known_number(x) else None for x in d["energy_j_per_token"]]
    d["cost"] = [f"{x:,.3g} USD" if known_number(x) else "– (no listed price)" for x in d["usd_per_million"]]
    d["energy"] = [f"{x:,.3g} J" if known_number(x) else "– (no power samples)" for x in d["energy_j_per_token"]]
    d = d.drop(columns=["usd_per_million", "energy_j_per_token"])
    d["line"] = d["rig"] + " " + d["series"] + " " + d["kind"]
    rigs = list(d["rig"].unique())
    x = figures.log_x("per_user_tok_s", "Tokens per second per user (1000 / median ITL)")
    y = figures.log_y("per_gpu_tok_s", "Output tokens per second per GPU")
    x.axis = alt.Axis(values=log_ticks(d["per_user_tok_s"]), format="~s", grid=True)
    y.axis = alt.Axis(values=log_ticks(d["per_gpu_tok_s"]), format="~s", grid=True)
    base = alt.Chart(d).encode(x=x, y=y)
    # the lines join a series in order of its speed per user, faint (strokeOpacity: the legend keeps full colour)
    lines = base.mark_line(strokeOpacity=0.35, strokeWidth=1.5).encode(
        color=figures.rig_color(rigs, legend=alt.Legend(columns=2)), detail="line:N", order="per_user_tok_s:Q", tooltip=alt.value(None))
    tips = [alt.Tooltip("rig:N", title="Rig"), alt.Tooltip("part:N", title="Part"),
            alt.Tooltip("series:N", title="Served"), alt.Tooltip("kind:N", title="Load"),
            alt.Tooltip("setting:N", title="Setting"),
            alt.Tooltip("gpus:Q", title="GPUs", format=",d"),
            alt.Tooltip("per_gpu_tok_s:Q", title="Output tok/s per GPU", format=",.3~r"),
            alt.Tooltip("per_user_tok_s:Q", title="Tok/s per user", format=",.3~r"),
            alt.Tooltip("cost:N", title="Cost per million tokens (listed mid price)"),
            alt.Tooltip("energy:N", title="Energy per token")]
    points = base.mark_point(filled=True, size=55, opacity=0.9).encode(
        color=figures.rig_color(rigs, legend=alt.Legend(columns=2)),
        shape=alt.Shape("part:N", title="Part", legend=alt.Legend(columns=3)), tooltip=tips)
    return (lines + points).properties(width=width, height=height)


KIND_WORDS = {"flood": "flood (every prompt at once, up to the cap)", "decode": "decode (a fixed number of streams)"}
