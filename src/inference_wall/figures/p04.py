"""Part 4's charts (Altair, on the helpers of the figures package): the pool over time, preemptions, latency and
throughput against the pool's size."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures

WORKLOAD_ORDER = ["short", "long"]
WORKLOAD_COLOURS = alt.Scale(domain=WORKLOAD_ORDER, range=["#4c78a8", "#f58518"])


def _pool_label(df: pd.DataFrame) -> pd.Series:
    return df["model"].map({"main": "", "small": "dense "}).fillna("") + df["pool_pages"].map(lambda n: f"{int(n):,} pages")


def running_over_time(timeline: pd.DataFrame, table: pd.DataFrame) -> alt.FacetChart:
    """One rig: running and waiting requests over the pass, one panel per pool (rows) and workload (columns),
    with the running batch the pool admits (predicted) as a dashed rule."""
    long = timeline.melt(id_vars=["model", "workload", "pool_pages", "t_s"], value_vars=["running", "waiting"],
                         var_name="requests", value_name="count")
    long = long.merge(table[["model", "workload", "pool_pages", "admitted"]], on=["model", "workload", "pool_pages"],
                      how="left")
    long["pool"] = _pool_label(long)
    order = list(dict.fromkeys(table.sort_values(["model", "pool_pages"], ascending=[True, False]).pipe(_pool_label)))
    base = alt.Chart().mark_line(interpolate="step-after").encode(
        x=alt.X("t_s:Q", title="Seconds into the pass"), y=alt.Y("count:Q", title="Requests"),
        color=alt.Color("requests:N", title="", scale=alt.Scale(domain=["running", "waiting"], range=["#54a24b", "#b279a2"])),
        tooltip=[alt.Tooltip("t_s:Q", title="s", format=".1f"), "requests:N", "count:Q"])
    rule = alt.Chart().mark_rule(strokeDash=[4, 3], color="#333").encode(
        y="max(admitted):Q", tooltip=[alt.Tooltip("max(admitted):Q", title="admitted at once (predicted)")])
    return alt.layer(base, rule, data=long).properties(width=220, height=110).facet(
        row=alt.Row("pool:N", title=None, sort=order), column=alt.Column("workload:N", title=None, sort=WORKLOAD_ORDER)
    ).resolve_scale(x="independent", y="independent")


def preemptions(table: pd.DataFrame) -> alt.FacetChart:
    """Preemptions per measured pass, by pool and workload, one panel per rig and model."""
    data = table.assign(panel=table["rig"] + table["model"].map({"main": "", "small": " (dense)"}).fillna(""),
                        pool=table["pool_pages"].map(lambda n: f"{int(n):,}"))
    order = [f"{int(n):,}" for n in sorted(table["pool_pages"].unique(), reverse=True)]
    return alt.Chart(data).mark_bar().encode(
        x=alt.X("pool:N", title="KV pool (pages)", sort=order), xOffset=alt.XOffset("workload:N", sort=WORKLOAD_ORDER),
        y=alt.Y("preemptions:Q", title="Preemptions in the pass"),
        color=alt.Color("workload:N", scale=WORKLOAD_COLOURS, title="Workload"),
        tooltip=["rig:N", "workload:N", alt.Tooltip("pool_pages:Q", title="pool (pages)"), "preemptions:Q",
                 alt.Tooltip("admitted:Q", title="admitted at once"), alt.Tooltip("full_limit:Q", title="fit at full length")],
    ).properties(width={"step": 36}, height=180).facet(column=alt.Column("panel:N", title=None)
                                                      ).resolve_scale(x="independent")


def latency_vs_pool(table: pd.DataFrame) -> alt.FacetChart:
    """TTFT p50, ITL p50 and ITL p99 against the pool's size (log-log), by workload, one row per rig and model."""
    cols = {"ttft_p50_ms": "TTFT p50", "itl_p50_ms": "ITL p50", "itl_p99_ms": "ITL p99"}
    data = table.assign(panel=table["rig"] + table["model"].map({"main": "", "small": " (dense)"}).fillna(""))
    long = data.melt(id_vars=["panel", "workload", "pool_pages", "preemptions"], value_vars=list(cols),
                     var_name="metric", value_name="ms").dropna()
    long["metric"] = long["metric"].map(cols)
    return alt.Chart(long).mark_line(point=True).encode(
        x=figures.log_x("pool_pages", "KV pool (pages, log)"), y=figures.log_y("ms", "ms (log)"),
        color=alt.Color("workload:N", scale=WORKLOAD_COLOURS, title="Workload"),
        tooltip=["panel:N", "workload:N", alt.Tooltip("pool_pages:Q", title="pool (pages)"), "metric:N",
                 alt.Tooltip("ms:Q", format=",.1f"), "preemptions:Q"],
    ).properties(width=170, height=150).facet(
        column=alt.Column("metric:N", title=None, sort=list(cols.values())), row=alt.Row("panel:N", title=None)
    ).resolve_scale(y="independent")


def throughput_vs_pool(table: pd.DataFrame) -> alt.HConcatChart:
    """Output throughput against the pool (log), by workload, one panel per rig and model; the dashed rule marks
    the pool that admits exactly max_num_seqs short requests (below it the pool, not the cap, sets the batch)."""
    data = table.assign(panel=table["rig"] + table["model"].map({"main": "", "small": " (dense)"}).fillna(""))
    charts = []
    for panel, sub in data.groupby("panel", sort=True):
        short = sub[sub["workload"] == "short"]
        # admission counts a prompt's pages (p04.admitted); the part's cap is the largest (a small pool's may be lower)
        knee = pd.DataFrame({"cap_pool": [int(short["max_num_seqs"].max() * short["pages_prompt"].iloc[0] + 1)]}
                            if len(short) else {"cap_pool": []})
        domain = [float(sub["pool_pages"].min()) * 0.8, float(sub["pool_pages"].max()) * 1.25]
        line = alt.Chart(sub).mark_line(point=True).encode(
            x=figures.log_x("pool_pages", "KV pool (pages, log)", domain=domain),
            y=alt.Y("output_tok_s:Q", title="Output throughput (tok/s)"),
            color=alt.Color("workload:N", scale=WORKLOAD_COLOURS, title="Workload"),
            tooltip=["panel:N", "workload:N", alt.Tooltip("pool_pages:Q", title="pool (pages)"),
                     alt.Tooltip("output_tok_s:Q", format=",.0f"), alt.Tooltip("admitted:Q", title="admitted at once"),
                     alt.Tooltip("running_median:Q", title="running (median)"), "preemptions:Q"])
        rule = alt.Chart(knee).mark_rule(strokeDash=[4, 3], color="#333").encode(
            x="cap_pool:Q", tooltip=[alt.Tooltip("cap_pool:Q", title="pool admitting max_num_seqs short requests")])
        charts.append(alt.layer(line, rule).properties(width=260, height=200, title=panel))
    return alt.hconcat(*charts)


def admission_prediction(a: dict, pools: list[int]) -> alt.LayerChart:
    """Before any run: for each pool size, the requests admitted at once (their prompts' pages) and the requests
    that fit at full length, short and long workload, against the cap (`a`: p04.arithmetic's page counts)."""
    rows = []
    for pool in pools:
        usable = pool - 1  # vLLM's null block
        rows += [{"pool_pages": pool, "line": "admitted (prompt pages)", "requests": min(a["cap"], usable // a["pages_prompt"])},
                 {"pool_pages": pool, "line": "fit at full length, short outputs",
                  "requests": min(a["cap"], usable // a["pages_short"])},
                 {"pool_pages": pool, "line": "fit at full length, long outputs",
                  "requests": min(a["cap"], usable // a["pages_long"])}]
    data = pd.DataFrame(rows)
    data = data[data["requests"] > 0]
    lines = alt.Chart(data).mark_line(point=True).encode(
        x=figures.log_x("pool_pages", "KV pool (pages)"),
        y=figures.log_y("requests", "requests at once"),
        color=alt.Color("line:N", title=None),
        strokeDash=alt.StrokeDash("line:N", legend=None),
        tooltip=["line", "pool_pages", "requests"],
    )
    cap = alt.Chart(pd.DataFrame({"requests": [a["cap"]]})).mark_rule(strokeDash=[4, 4]).encode(y="requests:Q")
    return alt.layer(lines, cap).properties(width=520, height=280)
