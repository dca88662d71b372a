"""Part 2's view of one rig, pure over its tables: the freeze at each prompt length and budget, the shrink a
budget buys, and the floor a step's budget sets."""
from __future__ import annotations

import pandas as pd

from ...measure.analysis import Interval, combine
from ...schema import PUBLISHED_RIG
from ..injections import chunk_step_table  # noqa: F401 (part 2's name, read by the page before the wing)
from ..protocol import REFERENCE
from .plan import A10G_BUDGET, OFF
from .tables import floor_freeze_ms, steps_timed


def comparable_length(frame: pd.DataFrame, rig: str) -> int | None:
    """The longest prompt a rig measured both with chunking off and at a budget below the prompt (the length at
    which the configurations compare); else its longest with chunking off; None without either."""
    f = frame[(frame["rig"] == rig)].dropna(subset=["freeze_ms"])
    off = set(f[f["budget"] == OFF]["prompt_len"])
    both = [n for n in off if ((f["prompt_len"] == n) & (f["budget"] != OFF) & (f["budget"] < n)).any()]
    return int(max(both)) if both else (int(max(off)) if off else None)


def fullest_rig(freezes: pd.DataFrame, rigs: list[str]) -> str | None:
    """The page's example rig: of `rigs`, the one with the most configurations measured (the first of those in
    `rigs`' order), so that the example shows every budget a rig ran; None without rigs."""
    return max(rigs, key=lambda r: freezes[freezes["rig"] == r]["budget"].nunique(), default=None)


def rig_view(injections: pd.DataFrame, rig: str, claim_budget: int = A10G_BUDGET) -> dict:
    """What the claims need about one rig. `off`: at its longest prompt measured with chunking off (`prompt_len`),
    where the prefill dominates every other cost; `off_cmp` and `chunked`: at the longest prompt measured both off and
    at a budget below it (`cmp_len`, comparable_length), at the claim budget or else the smallest measured one. Each
    side: the freeze over the repeats, the prompt's solo prefill time (TTFT alone, over the solo prompts), the
    background's baseline gap, as Intervals; `steps_timed`: whether the iteration log's elapsed times are step times
    (not under asynchronous scheduling, see steps_timed)."""
    f = injections[injections["rig"] == rig].dropna(subset=["freeze_ms"])
    view: dict = {"rig": rig}
    off_lens = f[f["budget"] == OFF]["prompt_len"]
    if not len(off_lens):
        return view
    longest, cmp_len = int(off_lens.max()), comparable_length(f, rig)

    def side(b: int, n: int) -> dict:
        rows = f[(f["budget"] == b) & (f["prompt_len"] == n)]
        mean_step = (rows["ttft_ms"] / rows["prefill_steps"].where(rows["prefill_steps"] > 0)).dropna()
        return {"freeze": Interval.spread(rows["freeze_ms"]), "ttft": Interval.spread(rows["ttft_ms"]),
                "solo": Interval(float(rows["solo_ttft_ms"].median()), float(rows["solo_ttft_min_ms"].min()),
                                 float(rows["solo_ttft_max_ms"].max())),
                "baseline_ms": float(rows["baseline_itl_ms"].median()),
                "max_step": Interval.spread(rows["max_step_ms"]),
                "mean_step": Interval.spread(mean_step) if len(mean_step) else None,
                "steps": float(rows["prefill_steps"].median())}

    view.update(prompt_len=longest, off=side(OFF, longest), cmp_len=cmp_len, off_cmp=side(OFF, cmp_len))
    view["off_by_len"] = {int(n): side(OFF, int(n)) for n in sorted(set(off_lens))}
    view["shrink_by_len"] = {}  # freeze off / freeze at the claim budget, at each length measured both ways
    for n in sorted(set(off_lens)):
        at_b = f[(f["budget"] == claim_budget) & (f["prompt_len"] == n)]
        if claim_budget < n and len(at_b):
            view["shrink_by_len"][int(n)] = combine(lambda a, d: a / d, view["off_by_len"][int(n)]["freeze"],
                                                    side(claim_budget, int(n))["freeze"])
    at = f[f["prompt_len"] == cmp_len]
    view["steps_timed"] = bool(steps_timed(at).all()) if "async_scheduling" in at else True
    chunked = sorted(b for b in set(at["budget"]) if b != OFF and b < cmp_len)
    budget = claim_budget if claim_budget in chunked else (chunked[0] if chunked else None)
    if budget is not None:
        view.update(budget=budget, chunked=side(budget, cmp_len))
    return view


def with_reference(view: dict, ref: dict) -> dict:
    """A rig's view with the post's figures its claims compare with."""
    return {**view, "published_shrink": Interval.printed(ref["freeze_shrink_chunked"])}


def implied_prompt_len(shrink: float, a: dict, budget: int = A10G_BUDGET) -> float:
    """The prompt length at which the floor model gives a `shrink`-fold smaller freeze at `budget` than without
    chunking: solve floor(L) = shrink x floor(budget) (both with one decode step)."""
    per_token_ms = 1000 * a["gflop_per_token"] * 1e9 / (a["peak_tflops"] * 1e12)
    target = shrink * floor_freeze_ms(budget, budget, a)
    return (target - a["decode_ms"]) / per_token_ms


def protocol_view(rig: str, tables: dict, params: dict) -> dict:
    """The protocol's view: rig_view at the claims' budget, with the post's figures, and the rig's freezes."""
    freezes = tables["freezes"]
    return {**with_reference(rig_view(tables["injections"], rig), tables[REFERENCE]), REFERENCE: tables[REFERENCE],
            "freezes": freezes[freezes["rig"] == rig]}


def has_freezes(rig: str, tables: dict) -> bool:
    """The rigs part 2's page views: the published one and those with freeze points (a rig may hold knee points
    only, which the page reads elsewhere)."""
    return rig == PUBLISHED_RIG or bool((tables["freezes"]["rig"] == rig).any())
