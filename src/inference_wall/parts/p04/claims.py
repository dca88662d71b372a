"""Part 4's claims: each predicts one pass's running batch, preemptions, stalls or throughput from its own
pool and lengths (exact counts: an absolute range, not a ratio band)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from ... import words
from ...measure.claims import DIFFERS, HOLDS, INCONCLUSIVE, NOT_MEASURED, fmt_num, missing, points_text


@dataclass(frozen=True)
class PointClaim:
    """A mechanism claim judged on every point it applies to: `predict` turns the point's own inputs (its pool,
    its lengths, its cap; for the cost, the same rig's calm pool) into the range the measurement must fall in,
    `measure` reads the measurement; either returns None where the claim does not apply to the point.

    Part 4's predictions are exact counts (a running batch, zero preemptions), so the range is absolute, not a
    ratio band."""

    id: str
    statement: str  # the mechanism with the point's numbers plugged in (a template over the point's row)
    unit: str
    predict: Callable[[dict], tuple[float, float] | None]
    measure: Callable[[dict], float | None]
    why: str = ""  # shown where it differs: what can make it differ
    # where the measurement cannot be evidence for this point: the reason (the verdict is then inconclusive)
    doubt: Callable[[dict], str | None] | None = None

    def evaluate(self, r: dict) -> dict | None:
        """One row for a point, or None where the claim does not apply to it."""
        expected = self.predict(r)
        if expected is None:
            return None
        lo, hi = expected
        value = self.measure(r)
        absent = missing(value)
        verdict = NOT_MEASURED if absent else (HOLDS if lo <= value <= hi else DIFFERS)
        doubt = self.doubt(r) if self.doubt is not None and not absent else None
        if doubt:
            verdict = INCONCLUSIVE
        return {"claim": self.id, "rig": r.get("rig"), "statement": self.statement.format(**_format_safe(r)),
                "expected": _range_text(lo, hi, self.unit), "measured": "" if absent else f"{fmt_num(value)} {self.unit}",
                "value": math.nan if absent else float(value), "low": lo, "high": hi, "verdict": verdict,
                "note": doubt or (self.why if verdict == DIFFERS else "")}


def _range_text(lo: float, hi: float, unit: str) -> str:
    if lo == hi:
        return f"{fmt_num(lo)} {unit}"
    if hi == math.inf:
        return f"at least {fmt_num(lo)} {unit}"
    return f"{fmt_num(lo)} to {fmt_num(hi)} {unit}"


def _format_safe(r: dict) -> dict:
    return {k: (math.nan if v is None else v) for k, v in r.items()}


def _flood(r: dict) -> bool:
    return math.isinf(r.get("offered_rate_rps", math.inf))


def _preempting(r: dict) -> bool:
    return bool(r.get("preemptions")) and r.get("preemptions") > 0


def _ratio_over_ref(key: str):
    def measure(r: dict):
        ref = r.get(f"ref_{key}")
        if missing(ref) or not ref:
            return None
        return r[key] / ref
    return measure


def _cost_applies(r: dict):
    if not _preempting(r) or missing(r.get("ref_pool_pages")):
        return None
    return (1.0, math.inf)


def stall_band(preemptions: float) -> tuple[int, float]:
    """The stalls a pass of `preemptions` must show for one stall per preemption: from STALL_SHARE of them (repeats
    on one request merge into one gap) to all of them."""
    return (math.ceil(STALL_SHARE * float(preemptions)), float(preemptions))


def one_stall_each(preemptions: float, stalls: float) -> bool:
    """Whether `stalls` falls in stall_band(preemptions): the claim's band, for the page's sentences."""
    lo, hi = stall_band(preemptions)
    return not missing(stalls) and lo <= stalls <= hi


def _stall_applies(r: dict):
    if not _preempting(r) or missing(r.get("ref_max_gap_ms")):
        return None
    return stall_band(r["preemptions"])


def stall_doubt(r: dict) -> str | None:
    """The stall count is no evidence where a pass of the same pool that preempted nothing crossed its line more
    often than the claim lets stalls go missing (the preemptions' tenth, STALL_SHARE): false alarms of that size
    could fill the band without one stall per preemption."""
    calm, pre = r.get("calm_pool_stalls"), r.get("preemptions")
    if missing(calm) or missing(pre) or not pre:
        return None
    slack = pre - math.ceil(STALL_SHARE * pre)
    if calm <= slack:
        return None
    return (f"not evidence on this pool: a pass of the same {int(r['pool_pages']):,} pages that preempted nothing crossed "
            f"its line {sig(calm)} times, more than the {sig(slack)} stalls this claim lets go missing of "
            f"{sig(pre)} preemptions, so the line cannot tell a preemption's stall from this pool's own")


PEAK_SAMPLING = 0.9  # a sampled peak may fall this far under the batch the pool admits and still count


STALL_SHARE = 0.9  # the share of preemptions a pass's stalls must reach (repeats on one request merge into one gap)


THROUGHPUT_TOLERANCE = 0.15  # the throughput ratio's band around its prediction (run-to-run spread, prefill share)


def _throughput_applies(r: dict):
    pred = r.get("pred_tok_ratio")
    if _preempting(r) or missing(pred) or r.get("ref_pool_pages") == r.get("pool_pages"):
        return None
    return (pred * (1 - THROUGHPUT_TOLERANCE), pred * (1 + THROUGHPUT_TOLERANCE))


CLAIMS = [
    PointClaim("pool-override", "vLLM ran the pool it was given: its log says num_gpu_blocks_override={pool_pages:.0f}.",
               "pages", lambda r: (float(r["pool_pages"]), float(r["pool_pages"])), lambda r: r.get("pool_logged"),
               "vLLM ignored or changed --num-gpu-blocks-override: every prediction on this pool is off"),
    PointClaim("running-batch", "The running batch peaks at min(max_num_seqs, (pool - 1) // pages per prompt) = "
               "min({max_num_seqs:.0f}, ({pool_pages:.0f} - 1) // {pages_prompt:.0f}) = {admitted:.0f}.", "reqs",
               lambda r: (math.floor(PEAK_SAMPLING * r["admitted"]), r["admitted"]) if _flood(r) else None,
               lambda r: r.get("running_peak"),
               "the peak is sampled (a stats line each second, /metrics each poll): a batch that stays at its peak for "
               "less than one sample is missed; a peak above the prediction would mean the page arithmetic is wrong"),
    PointClaim("no-preemption-fit", "{admitted:.0f} admitted requests x {pages_full:.0f} pages at full length fit in "
               "{pool_pages:.0f} - 1 pages: none is ever preempted.", "preemptions",
               lambda r: (0.0, 0.0) if r.get("fits") else None, lambda r: r.get("preemptions"),
               "requests took more pages than their lengths need (a different page layout or prefix-cache copies)"),
    PointClaim("preemption-outgrow", "{admitted:.0f} admitted requests x {pages_full:.0f} pages at full length exceed "
               "{pool_pages:.0f} - 1 pages: the server preempts.", "preemptions",
               lambda r: (1.0, math.inf) if r.get("fits") is False and _flood(r) else None, lambda r: r.get("preemptions"),
               "the requests did not all grow at once (they were admitted or finished at different times), or the "
               "scheduler reserved pages for the whole output up front"),
    PointClaim("preemption-itl", "Preemption costs the stream: p99 ITL at {pool_pages:.0f} pages is above its value on "
               "the rig's largest pool without preemptions ({ref_pool_pages:.0f} pages), although the batch is smaller.",
               "x", _cost_applies, _ratio_over_ref("itl_p99_ms"),
               "a smaller batch shortens every step; where that outweighs the victims' wait for recompute, the tail "
               "does not grow"),
    PointClaim("preemption-stall", "Each preemption stalls one stream while its request waits for pages and is "
               "recomputed: the pass has as many gaps between tokens longer than any on the rig's largest pool without "
               "preemptions ({ref_max_gap_ms:,.0f} ms at {ref_pool_pages:.0f} pages) as it counted preemptions "
               "({preemptions:.0f}), never more; a request preempted again before its next token merges two into one gap.",
               "stalls", _stall_applies, lambda r: r.get("stalls"),
               "requests were preempted again before they resumed (likelier the more preemptions per request), or before "
               "their first token, where the wait lands in TTFT, not between tokens", doubt=stall_doubt),
    PointClaim("throughput-batch", "Without preemptions a smaller pool costs only its smaller batch: throughput here over "
               "throughput at {ref_pool_pages:.0f} pages = decode rate at a batch of {running_median:.0f} over that at "
               "{ref_running_median:.0f}, from part 1's step fit on this rig ({pred_tok_ratio:.2f}).", "x",
               _throughput_applies, lambda r: r.get("tok_ratio"),
               "prefill takes a different share of the steps at a different batch, or the runs' speed drifted between "
               "server starts (run-to-run spread)"),
]


def evaluate_claims(views: dict[str, dict]) -> pd.DataFrame:
    """One row per (claim, rig, point) the claim applies to."""
    rows = []
    for view in views.values():
        for r in view["points"].to_dict("records"):
            for c in CLAIMS:
                row = c.evaluate({**r, "rig": view["rig"]})
                if row is not None:
                    rows.append({**row, "point": r["point"], "model": r["model"], "workload": r["workload"],
                                 "pool_pages": r["pool_pages"]})
    cols = ["claim", "rig", "model", "workload", "pool_pages", "statement", "expected", "measured", "verdict", "note",
            "value", "low", "high", "point"]
    return pd.DataFrame(rows, columns=cols)


def claim_summary(claims: pd.DataFrame, rigs: list[str]) -> pd.DataFrame:
    """Per claim and rig: on how many of the points it applies to it holds, differs and is inconclusive
    (measure.claims.points_text; the glance page's part 4 cells print the same words)."""
    rows = []
    for cid in [c.id for c in CLAIMS]:
        row = {"claim": cid}
        for rig in rigs:
            g = claims[(claims["claim"] == cid) & (claims["rig"] == rig)]
            row[rig] = points_text(list(g["verdict"])) or NOT_MEASURED
        rows.append(row)
    return pd.DataFrame(rows)


def sig(x: float, digits: int = 3) -> str:
    """A number for a reader: at most `digits` significant digits (8,197.5 -> 8,200); a whole number (a count, a
    pool's pages) exactly (words.sig)."""
    return words.sig(x, digits, whole=True)


LESSONS = [
    ("The KV pool, counted in pages, sets the running batch: as many requests as their prompts' pages fit, up to "
     "max_num_seqs.", ["pool-override", "running-batch"]),
    ("A pool that holds every admitted request at full length never preempts; one that cannot, does.",
     ["no-preemption-fit", "preemption-outgrow"]),
    ("Each preemption stalls a stream; without preemptions a smaller pool costs only its smaller batch.",
     ["preemption-stall", "preemption-itl", "throughput-batch"]),
]  # the part's take-aways: what it tested, and the claims whose rows say what the data show
