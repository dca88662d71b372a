"""Part 4's charts (Altair, on the helpers of the figures package): the pool over time, preemptions, latency and
throughput against the pool's size."""
from __future__ import annotations

import altair as alt
import pandas as pd

from .. import figures

WORKLOAD_ORDER = ["short", "long"]
WORKLOAD_RANGE = ["#4c78a8", "#f58518"]
WORKLOAD_COLOURS = alt.Scale(domain=WORKLOAD_ORDER, range=WORKLOAD_RANGE)
# The admission chart's lines: the requests admitted by their prompts' pages (either workload), and those that fit at
# full length, in their workload's colour.
ADMITTED, FIT_SHORT, FIT_LONG = ("admitted (prompt pages)", "fit at full length, short outputs",
                                 "fit at full length, long outputs")
ADMISSION_LINES = {ADMITTED: "#555555", FIT_SHORT: WORKLOAD_RANGE[0], FIT_LONG: WORKLOAD_RANGE[1]}
WORKLOAD_TIP = figures.tip("workload:N", "Workload")
POOL_TIP = figures.tip("pool_pages", "KV pool (pages)", figures.COUNT)
PANEL_TIP = figures.tip("panel:N", "Rig")
PREEMPTIONS_TIP = figures.tip("preemptions", "Preemptions", figures.COUNT)


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
        x=alt.X("t_s:Q", title="Seconds"), y=alt.Y("count:Q", title=None),  # the legend says requests
        color=alt.Color("requests:N", title="Requests", scale=alt.Scale(domain=["running", "waiting"], range=["#54a24b", "#b279a2"])),
        tooltip=[figures.tip("t_s", "Seconds into the pass"), figures.tip("requests:N", "Requests"),
                 figures.tip("count", "How many", figures.COUNT)])
    rule = alt.Chart().mark_rule(strokeDash=[4, 3], color="#333").encode(
        y="max(admitted):Q", tooltip=[figures.tip("max(admitted)", "Admitted at once (predicted)", figures.COUNT)])
    return alt.layer(base, rule, data=long).properties(width=220, height=90).facet(
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
        tooltip=[figures.tip("rig:N", "Rig"), WORKLOAD_TIP, POOL_TIP, PREEMPTIONS_TIP,
                 figures.tip("admitted", "Admitted at once", figures.COUNT),
                 figures.tip("full_limit", "Fit at full length", figures.COUNT)],
    ).properties(width={"step": 36}, height=180).facet(column=alt.Column("panel:N", title=None)
                                                      ).resolve_scale(x="independent")


def latency_vs_pool(table: pd.DataFrame) -> alt.FacetChart:
    """TTFT p50, ITL p50 and ITL p99 against the pool's size, by workload, one panel per rig and model: the three on
    one log axis (their magnitudes differ enough to stay apart), told apart by a dash and a shape each."""
    cols = {"ttft_p50_ms": "TTFT p50", "itl_p50_ms": "ITL p50", "itl_p99_ms": "ITL p99"}
    data = table.assign(panel=table["rig"] + table["model"].map({"main": "", "small": " (dense)"}).fillna(""))
    long = data.melt(id_vars=["panel", "workload", "pool_pages", "preemptions"], value_vars=list(cols),
                     var_name="metric", value_name="ms").dropna()
    long["metric"] = long["metric"].map(cols)
    long["line"] = long["workload"] + " " + long["metric"]
    order = list(cols.values())
    pools = [float(v) for v in long["pool_pages"]]
    return alt.Chart(long).mark_line(point=True).encode(
        x=figures.log_x("pool_pages", "KV pool (pages, log)", domain=[min(pools) / 1.3, max(pools) * 1.3] if pools else None,
                        ticks=figures.log_ticks(pools)),
        y=figures.log_y("ms", "Latency (ms, log)", ticks=figures.log_ticks(long["ms"])),
        color=alt.Color("workload:N", scale=WORKLOAD_COLOURS, title="Workload"),
        strokeDash=alt.StrokeDash("metric:N", title="Latency", sort=order,
                                  scale=alt.Scale(domain=order, range=[[1, 0], [4, 2], [1, 2]])),
        shape=alt.Shape("metric:N", title="Latency", sort=order,
                        scale=alt.Scale(domain=order, range=["circle", "square", "triangle-up"])),
        detail="line:N",
        tooltip=[PANEL_TIP, WORKLOAD_TIP, POOL_TIP, figures.tip("metric:N", "Latency"), figures.tip("ms", "Latency (ms)"),
                 PREEMPTIONS_TIP],
    ).properties(width=300, height=220).facet(alt.Facet("panel:N", title=None, header=alt.Header(labelFontWeight="bold")),
                                             columns=2).resolve_scale(y="independent")


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
            tooltip=[PANEL_TIP, WORKLOAD_TIP, POOL_TIP, figures.tip("output_tok_s", "Output (tok/s)"),
                     figures.tip("admitted", "Admitted at once", figures.COUNT),
                     figures.tip("running_median", "Running (median)"), PREEMPTIONS_TIP])
        rule = alt.Chart(knee).mark_rule(strokeDash=[4, 3], color="#333").encode(
            x="cap_pool:Q", tooltip=[figures.tip("cap_pool", "Pool admitting max_num_seqs short requests (pages)",
                                                 figures.COUNT)])
        charts.append(alt.layer(line, rule).properties(width=260, height=200, title=panel))
    return alt.hconcat(*charts)


def admission_prediction(a: dict, pools: list[int]) -> alt.LayerChart:
    """Before any run: for each pool size, the requests admitted at once (their prompts' pages) and the requests
    that fit at full length, short and long workload, against the cap (`a`: p04.arithmetic's page counts)."""
    rows = []
    for pool in pools:
        usable = pool - 1  # vLLM's null block
        rows += [{"pool_pages": pool, "line": ADMITTED, "requests": min(a["cap"], usable // a["pages_prompt"])},
                 {"pool_pages": pool, "line": FIT_SHORT, "requests": min(a["cap"], usable // a["pages_short"])},
                 {"pool_pages": pool, "line": FIT_LONG, "requests": min(a["cap"], usable // a["pages_long"])}]
    data = pd.DataFrame(rows)
    data = data[data["requests"] > 0]
    order = list(ADMISSION_LINES)
    # one legend for both channels (the same field, title and order): the colour ties each full-length line to its
    # workload's colour in the part's other figures
    lines = alt.Chart(data).mark_line(point=True).encode(
        x=figures.log_x("pool_pages", "KV pool (pages)", domain=[min(pools) / 1.3, max(pools) * 1.3],
                        ticks=figures.log_ticks(pools)),
        y=figures.log_y("requests", "requests at once", ticks=figures.log_ticks(data["requests"])),
        color=alt.Color("line:N", title=None, sort=order,
                        scale=alt.Scale(domain=order, range=list(ADMISSION_LINES.values())),
                        legend=alt.Legend(orient="bottom", direction="vertical", columns=1)),
        strokeDash=alt.StrokeDash("line:N", title=None, sort=order,
                                  scale=alt.Scale(domain=order, range=[[1, 0], [5, 3], [5, 3]])),
        # the admitted line is wide and pale: where the short workload's full-length line lies on it, both show
        strokeWidth=alt.StrokeWidth("line:N", title=None, sort=order, scale=alt.Scale(domain=order, range=[6, 2, 2])),
        opacity=alt.Opacity("line:N", title=None, sort=order, scale=alt.Scale(domain=order, range=[0.45, 1, 1])),
        tooltip=[figures.tip("line:N", "Requests"), POOL_TIP, figures.tip("requests", "Requests at once", figures.COUNT)],
    )
    cap = alt.Chart(pd.DataFrame({"requests": [a["cap"]]})).mark_rule(strokeDash=[4, 4]).encode(
        y="requests:Q", tooltip=[figures.tip("requests", "The cap (max_num_seqs)", figures.COUNT)])
    return alt.layer(lines, cap).properties(width=520, height=280)

