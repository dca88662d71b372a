"""Part 4's view of one rig, pure over its tables: each pass against its reference (the same rig, model and
workload on its largest calm pool), the stalls, and what starving the pool cost."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...measure import analysis
from ...measure.claims import missing
from .tables import reference_rows


def floods(table: pd.DataFrame) -> pd.DataFrame:
    """The flooded passes only (fixed-rate passes aside)."""
    return table[table["offered_rate_rps"].apply(math.isinf)] if "offered_rate_rps" in table else table


def decode_rate(batch: float, fit: tuple[float, float]) -> float:
    """Tokens a second at a running batch, from the step fit: batch / (a + b x batch)."""
    return analysis.step_model_tok_s(*fit, batch)


def rig_view(table: pd.DataFrame, rig: str, fit: tuple[float, float] | None = None) -> dict:
    """Per rig: the points (with their references and, given part 1's step fit, the throughput their running
    batch predicts relative to the reference pool) and a few summary numbers for the prose."""
    t = reference_rows(table[table["rig"] == rig])
    if fit is not None and len(t):
        t["pred_tok_ratio"] = [decode_rate(r.running_median, fit) / decode_rate(r.ref_running_median, fit)
                               if r.model == "main" and r.running_median > 0 and r.ref_running_median > 0 else math.nan
                               for r in t.itertuples()]  # part 1's fit is the main model's: no prediction for the dense one
        t["tok_ratio"] = t["output_tok_s"] / t["ref_output_tok_s"]
    view = {"rig": rig, "points": t, "fit": fit}
    if len(t):
        view["pools"] = sorted(t["pool_pages"].unique().tolist(), reverse=True)
        view["preemptions_total"] = float(t["preemptions"].sum())
        short = floods(t)[(floods(t)["workload"] == "short") & (floods(t)["model"] == "main")]
        if len(short) >= 2:
            big, small = short.sort_values("pool_pages").iloc[-1], short.sort_values("pool_pages").iloc[0]
            view.update(short_big_pool=big["pool_pages"], short_small_pool=small["pool_pages"],
                        ttft_ratio_short=small["ttft_p50_ms"] / big["ttft_p50_ms"],
                        tok_ratio_short=small["output_tok_s"] / big["output_tok_s"])
    return view


def closing_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per point: the predicted and measured running batch, and the preemptions (the closing note)."""
    cols = {"rig": "rig", "model": "model", "workload": "workload", "pool_pages": "pool_pages",
            "admitted": "predicted_running", "running_peak": "measured_running_peak",
            "full_limit": "fit_at_full_length", "preemptions": "preemptions"}
    return table[list(cols)].rename(columns=cols)


SHORT_PASS_S = 10.0  # a measured pass shorter than this is too short to call steady (parts 3 and 5 use the same window)


def short_passes(table: pd.DataFrame) -> pd.DataFrame:
    """The measured passes that lasted less than SHORT_PASS_S: a few polls, and the first wave's prefill a large
    share of the pass."""
    if not len(table):
        return table
    return table[table["duration_s"] < SHORT_PASS_S]


def pool_cost(view: dict, model: str = "main") -> dict | None:
    """What the smallest pool cost against the largest for one model's short floods on one rig (none preempted or
    not): throughput and median TTFT at both, the requests each flood was given and the waves of its admitted batch
    they make. None without two pools."""
    t = floods(view["points"])
    short = t[(t["workload"] == "short") & (t["model"] == model)].sort_values("pool_pages")
    if len(short) < 2:
        return None
    small, big = short.iloc[0], short.iloc[-1]
    return {"rig": view["rig"], "model": model, "big_pool": big["pool_pages"], "small_pool": small["pool_pages"],
            "big_tok_s": big["output_tok_s"], "small_tok_s": small["output_tok_s"],
            "tok_fall": big["output_tok_s"] / small["output_tok_s"],
            "big_ttft_s": big["ttft_p50_ms"] / 1000, "small_ttft_s": small["ttft_p50_ms"] / 1000,
            "ttft_ratio": small["ttft_p50_ms"] / big["ttft_p50_ms"],
            "big_prompts": big["num_prompts"], "small_prompts": small["num_prompts"],
            "big_waves": big["num_prompts"] / big["admitted"], "small_waves": small["num_prompts"] / small["admitted"],
            "big_running": big["running_peak"], "small_running": small["running_peak"],
            "preemptions": float(short["preemptions"].sum()), "waiting_max": float(short["waiting_max"].max()),
            "pools": len(short)}


def prediction_pools(a: dict) -> list[int]:
    """Pool sizes the page's before-any-run figure draws: a doubling range (plus vLLM's null page) and the A10G's."""
    return sorted({2 ** k + 1 for k in range(3, 12)} | {a["a10g_pool"]})


def for_reader(table: pd.DataFrame) -> pd.DataFrame:
    """The table with its yes/no columns (fits, kv_limited) as words: a reader sees "yes" or "no", not True/False."""
    out = table.copy()
    for col in out.columns:
        values = [v for v in out[col] if not missing(v)]
        if values and all(isinstance(v, (bool, np.bool_)) for v in values):
            out[col] = [v if missing(v) else ("yes" if v else "no") for v in out[col]]
    return out


def protocol_view(rig: str, tables: dict, params: dict) -> dict:
    """The protocol's view: rig_view with the rig's step fit."""
    return rig_view(tables["points"], rig, tables["fits"][rig])
