"""The prefill freeze, measured: pure functions over one pass's token times and one server log's steps.

Definitions (part 2):
- A background stream's token times are its start + TTFT + the running sum of its inter-token gaps (from
  `vllm bench serve --save-detailed`), on the same monotonic clock as the injected request (see inject.py).
- The injection window of one long prompt runs from its send time to its first token.
- The streams it froze are the background streams that were decoding when it arrived: a token before the send and
  one after it (a stream that ends inside the window counts with the gaps it had there). The send stands for the
  admission: the background's rate is set so that the server keeps up, so nothing queues ahead of the long prompt.
- The freeze is, over those streams, the median of each stream's largest gap between consecutive tokens that
  overlaps the window (its max over the streams is kept too); the time lost is, per stream, the sum over its gaps that
  overlap the window of (gap - the background's baseline gap), again the median over streams.
- The baseline gap is the median of the background's gaps that overlap no injection window.
- Server side, the steps that carried one long prompt are found in the iteration log
  (`--enable-logging-iteration-details`) by their context tokens: see `long_prompt_steps`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd


def stream_token_times(raw: dict) -> list[np.ndarray]:
    """Each successful request's token arrival times (s, perf_counter clock) from a --save-detailed result."""
    starts, ttfts, itls = raw.get("start_times"), raw.get("ttfts"), raw.get("itls")
    if not (isinstance(starts, list) and isinstance(ttfts, list) and isinstance(itls, list)):
        raise ValueError("the bench result has no per-request start_times, ttfts and itls (--save-detailed)")
    errors = raw.get("errors") or [""] * len(ttfts)
    out = []
    for start, ttft, itl, err in zip(starts, ttfts, itls, errors):
        if err or start is None or ttft is None or not ttft:
            continue
        out.append(start + ttft + np.concatenate([[0.0], np.cumsum(itl or [])]))
    return out


def _overlapping(times: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Boolean mask over the gaps of `times` (len - 1) that overlap [lo, hi]."""
    return (times[1:] > lo) & (times[:-1] < hi)


def baseline_gap_s(streams: list[np.ndarray], windows: list[tuple[float, float]]) -> float:
    gaps = []
    for t in streams:
        if len(t) < 2:
            continue
        keep = np.ones(len(t) - 1, dtype=bool)
        for lo, hi in windows:
            keep &= ~_overlapping(t, lo, hi)
        gaps.append(np.diff(t)[keep])
    gaps = np.concatenate(gaps) if gaps else np.array([])
    return float(np.median(gaps)) if len(gaps) else math.nan


@dataclass(frozen=True)
class Freeze:
    streams: int  # background streams decoding when the long prompt was sent
    freeze_ms: float  # median over those streams of their largest gap overlapping the window
    freeze_max_ms: float  # the largest such gap of any stream
    lost_ms: float  # median over those streams of the time lost in the window against the baseline gap

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def freeze_in_window(streams: list[np.ndarray], sent: float, first_token: float, baseline_s: float) -> Freeze:
    largest, lost = [], []
    for t in streams:
        if len(t) < 2 or not (t[0] < sent < t[-1]):
            continue
        mask = _overlapping(t, sent, first_token)
        if not mask.any():
            continue
        gaps = np.diff(t)[mask]
        largest.append(gaps.max())
        lost.append(float(np.sum(gaps - baseline_s)))
    if not largest:
        return Freeze(0, math.nan, math.nan, math.nan)
    return Freeze(len(largest), 1000 * float(np.median(largest)), 1000 * float(np.max(largest)),
                  1000 * float(np.median(lost)))


# ---------------------------------------------------------------------------------------------
# Server side: the steps that carried a long prompt
# ---------------------------------------------------------------------------------------------


def long_part(steps: pd.DataFrame, bg_input_len: int) -> pd.Series:
    """Per step, the context tokens not explained by other prompts: a step's context tokens less a whole short prompt
    for every other context request in it (an estimate: a short prompt split across steps counts whole)."""
    others = (steps["ctx_reqs"] - 1).clip(lower=0)
    return (steps["ctx_tokens"] - others * bg_input_len).clip(lower=0)


def long_prompt_steps(steps: pd.DataFrame, prompt_len: int, bg_input_len: int) -> list[list[int]]:
    """The runs of steps (as row positions, in iteration order) that carried a long prompt of `prompt_len` tokens.

    A run starts at a step whose unexplained context tokens (`long_part`) exceed one short prompt, and takes the
    following steps' unexplained context tokens until they add up to the prompt. Needs prompt_len > bg_input_len.
    """
    if prompt_len <= bg_input_len:
        raise ValueError(f"a long prompt ({prompt_len}) must be longer than a background prompt ({bg_input_len})")
    part = long_part(steps, bg_input_len).to_numpy()
    runs, i = [], 0
    while i < len(part):
        if part[i] > bg_input_len:
            run, total = [], 0
            while i < len(part) and total < prompt_len and part[i] > 0:  # a prompt's chunks run in consecutive steps
                run.append(i)
                total += part[i]
                i += 1
            runs.append(run)
        else:
            i += 1
    return runs


def step_summary(steps: pd.DataFrame, run: list[int]) -> dict:
    """The steps of one long prompt: how many, the longest, their sum, and the decode batch beside them."""
    if not run:
        return {"prefill_steps": 0, "max_step_ms": math.nan, "sum_step_ms": math.nan, "chunk_tokens_max": math.nan,
                "gen_reqs_beside": math.nan}
    s = steps.iloc[run]
    return {"prefill_steps": len(run), "max_step_ms": float(s["elapsed_ms"].max()),
            "sum_step_ms": float(s["elapsed_ms"].sum()), "chunk_tokens_max": int(s["ctx_tokens"].max()),
            "gen_reqs_beside": float(s["gen_reqs"].median())}


def decode_step_ms(steps: pd.DataFrame) -> float:
    """Median elapsed time of steps that only decoded (no context tokens)."""
    d = steps[(steps["ctx_tokens"] == 0) & (steps["gen_reqs"] > 0)]
    return float(d["elapsed_ms"].median()) if len(d) else math.nan


def timeline(steps: pd.DataFrame, run: list[int], before: int = 8, after: int = 8) -> pd.DataFrame:
    """The steps around one long prompt, indexed from its first step (negative before it)."""
    if not run:
        return steps.iloc[0:0].assign(step=[], long_prompt=[])
    lo, hi = max(0, run[0] - before), min(len(steps), run[-1] + after + 1)
    out = steps.iloc[lo:hi].copy()
    out["step"] = np.arange(lo, hi) - run[0]
    out["long_prompt"] = [i in set(run) for i in range(lo, hi)]
    return out


# ---------------------------------------------------------------------------------------------
# Predictions
# ---------------------------------------------------------------------------------------------


def predicted_freeze_ms(solo_prefill_ms: float, prompt_len: int, budget: int | None, baseline_ms: float
                        ) -> tuple[float, float]:
    """What a stream decoding beside a long prompt should wait, from independent measurements: the prefill the
    longest step carries, which is the whole prompt without chunking (budget None) or one budget's worth of it with
    chunking (the prompt's solo prefill time scaled by budget / prompt length), and at most one ordinary decode step
    more. Returns (low, high) in ms."""
    share = 1.0 if budget is None or budget >= prompt_len else budget / prompt_len
    work = solo_prefill_ms * share
    return work, work + baseline_ms


def compute_floor_ms(params: float, tokens: int, peak_flops: float) -> float:
    """The compute floor of a prefill step: 2 x parameters x tokens over the rig's peak dense FLOP/s (ms)."""
    return 1000 * 2 * params * tokens / peak_flops
