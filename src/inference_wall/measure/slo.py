"""Serving within a target (goodput): per offered rate, the share of requests whose time to first token and
whose time per output token (the mean gap between its tokens) both meet a target, and the highest offered
rate at which a rig keeps a given share (99% by default) within it.

Per-request times come from the measured passes' `--save-detailed` arrays (`BenchResult.requests`); a
failed request never meets a target. The published rig has no per-request data, so it has no row here.
The targets are the reader's choice: the grids below only set what the page's controls offer. The chart is
figures.p01.goodput_chart.
"""
from __future__ import annotations

import math

import pandas as pd

TTFT_TARGETS_MS = [100, 200, 500, 1000, 2000, 5000, 10000]
TPOT_TARGETS_MS = [10, 20, 30, 50, 100, 200]
SHARE = 0.99  # the share of requests that must meet both targets
DEFAULT_TARGETS = [(200, 20), (500, 50), (2000, 100)]  # (TTFT ms, TPOT ms) shown in the page's table

COLUMNS = ["rig", "offered_rate_rps", "ttft_target_ms", "tpot_target_ms", "requests", "share_ok", "goodput_rps"]


def share_within(requests: pd.DataFrame, ttft_ms: float, tpot_ms: float) -> float:
    """Share of requests (failed ones count as missed) whose TTFT <= ttft_ms and mean inter-token gap <= tpot_ms."""
    if not len(requests):
        return math.nan
    ok = requests["ok"] & (requests["ttft_ms"] <= ttft_ms) & (requests["itl_mean_ms"].fillna(0.0) <= tpot_ms)
    return float(ok.mean())


def goodput_table(points, ttft_targets=TTFT_TARGETS_MS, tpot_targets=TPOT_TARGETS_MS) -> pd.DataFrame:
    """One row per (rig, offered rate, TTFT target, TPOT target) over part 1's measured rate points (`points`:
    store.PointData with params kind == "rate" and a finite offered rate)."""
    rows = []
    for pt in points:
        rate = float(pt.params.get("offered_rate_rps", math.nan))
        if pt.params.get("kind") != "rate" or not math.isfinite(rate):
            continue
        result = pt.bench("bench")
        req = result.requests
        if req is None or not len(req):
            continue
        for t in ttft_targets:
            for g in tpot_targets:
                share = share_within(req, t, g)
                rows.append({"rig": pt.rig, "offered_rate_rps": rate, "ttft_target_ms": t, "tpot_target_ms": g,
                             "requests": len(req), "share_ok": share,
                             "goodput_rps": share * len(req) / result.duration_s if result.duration_s else math.nan})
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(
        ["rig", "ttft_target_ms", "tpot_target_ms", "offered_rate_rps"]).reset_index(drop=True)


def highest_rate(goodput: pd.DataFrame, ttft_ms: float, tpot_ms: float, share: float = SHARE) -> dict[str, object]:
    """Per rig: the highest offered rate at which at least `share` of requests met both targets, with every
    lower measured rate meeting it too; None when even the lowest measured rate misses."""
    sel = goodput[(goodput["ttft_target_ms"] == ttft_ms) & (goodput["tpot_target_ms"] == tpot_ms)]
    out: dict[str, object] = {}
    for rig, g in sel.groupby("rig"):
        best = None
        for row in g.sort_values("offered_rate_rps").itertuples(index=False):
            if row.share_ok < share:
                break
            best = row.offered_rate_rps
        out[rig] = best
    return out


def highest_rate_table(goodput: pd.DataFrame, targets=DEFAULT_TARGETS, share: float = SHARE) -> pd.DataFrame:
    """The page's table: per rig and default target pair, the highest rate kept within it, in words where none."""
    rows = []
    for t, g in targets:
        for rig, rate in highest_rate(goodput, t, g, share).items():
            lowest = goodput.loc[goodput["rig"] == rig, "offered_rate_rps"].min()
            rows.append({"rig": rig, "ttft_target_ms": t, "tpot_target_ms": g,
                         "highest_rate_kept": f"{rate:.3g} req/s" if rate is not None
                         else f"below the lowest rate measured ({lowest:.3g} req/s)"})
    return pd.DataFrame(rows, columns=["rig", "ttft_target_ms", "tpot_target_ms", "highest_rate_kept"])
