"""The batching cliff of a max_num_seqs sweep (one model's floods, one row per cap): the ceiling over the first cap, the
small model's cliff against the main one's in words, and what one more running sequence adds to a step between two
caps. Part 3's page and claims read them, and part 0's answers to part 3 (a wing the parts share, not a part)."""
from __future__ import annotations

import math

import pandas as pd

from ..measure.claims import Missing


def cliff(sweep: pd.DataFrame, lo: float | None = None, hi: float | None = None) -> float:
    """The batching cliff: the ceiling (the most output tok/s of any cap from `lo` to `hi`) over the throughput
    at `lo` (default: the sweep's smallest cap, one request at a time). The one computation behind the per-rig
    table, the prose and the small model's claim, for either model."""
    s = sweep.sort_values("max_num_seqs")
    lo = float(s["max_num_seqs"].iloc[0]) if lo is None else lo
    hi = float(s["max_num_seqs"].iloc[-1]) if hi is None else hi
    s = s[(s["max_num_seqs"] >= lo) & (s["max_num_seqs"] <= hi)].set_index("max_num_seqs")
    if lo not in s.index:
        raise Missing(f"cap {lo:g}")
    return float(s["output_tok_s"].max() / s.loc[lo, "output_tok_s"])


STEEPER = 1.1  # the small-cliff claim: "steeper" from this many times the 4B's cliff


def cliff_comparison(small_x: float, main_x: float, band: float = STEEPER) -> str:
    """The small model's cliff against the 4B's in words, with the small-cliff claim's band: steeper only from
    `band` times the 4B's, shallower only below its inverse, else about as steep."""
    if small_x >= band * main_x:
        return "steeper, as the post found"
    if small_x * band <= main_x:
        return "shallower, not steeper"
    return f"about as steep (within {100 * (band - 1):.0f}%), not steeper"


def added_sequence_ms(sweep: pd.DataFrame, lo: float = 64.0, hi: float = 256.0) -> dict | None:
    """What one more running sequence adds to a step, read from the median ITL between two caps: (ITL at `hi` -
    ITL at `lo`) / (running batch at `hi` - at `lo`), the running batch being the stats lines' largest where
    measured, else the cap. None where either cap is missing."""
    s = sweep.set_index("max_num_seqs")
    if lo not in s.index or hi not in s.index:
        return None

    def batch(cap):
        run = s.loc[cap, "running_max"] if "running_max" in s else math.nan
        return float(run) if run is not None and run == run else float(cap)

    b_lo, b_hi = batch(lo), batch(hi)
    itl_lo, itl_hi = float(s.loc[lo, "itl_p50_ms"]), float(s.loc[hi, "itl_p50_ms"])
    if b_hi <= b_lo:
        return None
    return {"lo": lo, "hi": hi, "itl_lo": itl_lo, "itl_hi": itl_hi, "batch_lo": b_lo, "batch_hi": b_hi,
            "ms_per_seq": (itl_hi - itl_lo) / (b_hi - b_lo)}
