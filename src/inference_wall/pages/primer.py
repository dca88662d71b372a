"""The primer's two measured figures, from the parts' own data: how prefill grows with the prompt (part 2's long
prompts sent alone to an idle server with chunking off, so one step holds the whole prompt and the time to first
token is that step plus the request's path through the server) and how the decode step grows with the batch (part
1's decode at fixed batch sizes, where the median gap between tokens is the step). Each rig's own runs; nothing
here is typed in. The charts are figures.primer's."""
from __future__ import annotations

import pandas as pd

from ..parts.p02 import OFF


def prefill_table(injections: pd.DataFrame) -> pd.DataFrame:
    """Per rig and prompt length: the median, least and largest time to first token of the prompt alone on the idle
    server, from the chunking-off points only (a chunked prefill spreads over several steps by design)."""
    off = injections[injections["budget"] == OFF].dropna(subset=["solo_ttft_ms"])
    if not len(off):
        return pd.DataFrame(columns=["rig", "prompt_len", "ttft_ms", "ttft_min_ms", "ttft_max_ms"])
    g = off.groupby(["rig", "prompt_len"])
    return g.agg(ttft_ms=("solo_ttft_ms", "median"), ttft_min_ms=("solo_ttft_min_ms", "min"),
                 ttft_max_ms=("solo_ttft_max_ms", "max")).reset_index()


def decode_steps(decode: pd.DataFrame) -> pd.DataFrame:
    """Per rig and batch: the decode step (median ITL at that fixed batch) and the tokens a second it makes."""
    cols = ["rig", "batch", "step_ms", "decode_tok_s"]
    return decode[cols].sort_values(["rig", "batch"]).reset_index(drop=True) if len(decode) else pd.DataFrame(columns=cols)


def growth(table: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Per rig: the smallest and largest x measured, y at each, and how many times y grew for how many times x."""
    rows = []
    for rig, t in table.groupby("rig"):
        t = t.sort_values(x)
        if len(t) < 2:
            continue
        a, b = t.iloc[0], t.iloc[-1]
        rows.append({"rig": rig, f"{x}_low": a[x], f"{x}_high": b[x], f"{y}_low": a[y], f"{y}_high": b[y],
                     "x_factor": b[x] / a[x], "y_factor": b[y] / a[y]})
    return pd.DataFrame(rows)
