"""Mechanism claims: a statement of the posts, turned into a prediction of one measurement of a rig from
other, independent measurements of the same rig, and judged against that measurement with the
uncertainty of both.

A claim's `judge` takes a rig's view (see parts.p01.rig_view, parts.p03.rig_view) and returns the
prediction and the measurement, each an `Interval` (a fit's confidence interval, a printed figure's
rounding, the spread of repeated runs), and the arithmetic with the numbers plugged in. The verdict
compares the ratio measured / predicted with the claim's `band` (the ratios that count as agreement):

- holds: every ratio the two intervals allow lies inside the band;
- differs: none does;
- inconclusive: the intervals allow ratios on both sides of an edge of the band;
- not measured on this rig: an input is missing (the judge raises `Missing`).

The published rig is judged by the same rule from the post's own inputs, so every row can fail on
every rig; no claim compares a figure with itself.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from .analysis import Interval

HOLDS, DIFFERS, INCONCLUSIVE, NOT_MEASURED = "holds", "differs", "inconclusive", "not measured on this rig"
VERDICTS = (HOLDS, DIFFERS, INCONCLUSIVE, NOT_MEASURED)


from ..words import known_number, missing, number as fmt_num, sig  # noqa: E402,F401 (the claims' number words)

class Missing(Exception):
    """A claim's input is not measured on this rig."""


def need(view: dict, key: str):
    """view[key], or Missing if the rig has no such measurement (absent, None or NaN)."""
    value = view.get(key)
    if missing(value):
        raise Missing(key)
    if isinstance(value, Interval) and math.isnan(value.value):
        raise Missing(key)
    return value


@dataclass(frozen=True)
class Judgement:
    predicted: Interval
    measured: Interval
    how: str  # the prediction with the numbers plugged in


@dataclass(frozen=True)
class Claim:
    id: str
    post: str  # what the post says, in our words (a template filled from the reference facts)
    mechanism: str  # what predicts what
    unit: str
    judge: Callable[[dict], Judgement]
    band: tuple[float, float]  # measured / predicted ratios that count as agreement
    why: str = ""  # shown when a rig's verdict is not "holds": what can make it differ
    rule: str = "ratio"  # "ratio": measured / predicted inside `band`; "contains": the prediction inside the
    # measured range (a measurement that is itself a bracket, e.g. between two caps)

    def evaluate(self, view: dict, ref: dict | None = None) -> dict:
        row = {"rig": view.get("rig"), "claim": self.id, "post": self.post.format(**ref) if ref else self.post,
               "mechanism": self.mechanism.format(**ref) if ref else self.mechanism,
               "band": band_text(self.band) if self.rule == "ratio" else "prediction inside the measured range"}
        try:
            j = self.judge(view)
        except (Missing, KeyError, IndexError, ZeroDivisionError) as e:
            return {**row, "predicted": "", "measured": "", "ratio": math.nan, "ratio_low": math.nan,
                    "ratio_high": math.nan, "verdict": NOT_MEASURED, "how": f"no {e.args[0] if e.args else 'data'}",
                    "note": ""}
        verdict, r = judge_ratio(j.predicted, j.measured, self.band)
        if self.rule == "contains":
            verdict = judge_contains(j.predicted, j.measured)
        return {**row, "predicted": interval_text(j.predicted, self.unit), "measured": interval_text(j.measured, self.unit),
                "ratio": r.value, "ratio_low": r.low, "ratio_high": r.high, "verdict": verdict, "how": j.how,
                "note": self.why if verdict in (DIFFERS, INCONCLUSIVE) else ""}


def ratio_interval(predicted: Interval, measured: Interval) -> Interval:
    """measured / predicted, from the least to the largest ratio the two intervals allow (positive values)."""
    if predicted.high <= 0:  # nothing positive is predicted: every ratio is possible
        return Interval(0.0, 0.0, math.inf)
    low = measured.low / predicted.high
    # a range that reaches zero or below (a wide fit on few points) bounds the ratio from below only
    high = measured.high / predicted.low if predicted.low > 0 else math.inf
    value = measured.value / predicted.value if predicted.value > 0 else low
    return Interval(value, min(low, value), max(high, value))


def judge_ratio(predicted: Interval, measured: Interval, band: tuple[float, float]) -> tuple[str, Interval]:
    r = ratio_interval(predicted, measured)
    lo, hi = band
    if lo <= r.low and r.high <= hi:
        return HOLDS, r
    if r.high < lo or r.low > hi:
        return DIFFERS, r
    return INCONCLUSIVE, r


def judge_contains(predicted: Interval, measured: Interval) -> str:
    """holds: the prediction's whole range inside the measured range; differs: no overlap; else inconclusive."""
    if measured.low <= predicted.low and predicted.high <= measured.high:
        return HOLDS
    if predicted.high < measured.low or predicted.low > measured.high:
        return DIFFERS
    return INCONCLUSIVE


def interval_text(i: Interval, unit: str = "") -> str:
    """A prediction or measurement for the claims tables: three significant figures at most (1,130 tok/s, not
    1,132), its range in brackets where it has one."""
    unit = f" {unit}" if unit else ""
    if i.low == i.high:
        return f"{sig(i.value)}{unit}"
    return f"{sig(i.value)}{unit} ({sig(i.low)} to {sig(i.high)})"


def band_text(band: tuple[float, float]) -> str:
    lo, hi = band
    if hi == math.inf:
        return f"at least {fmt_num(lo)}"
    return f"{fmt_num(lo)} to {fmt_num(hi)}"


def points_text(verdicts: list[str]) -> str:
    """A claim judged point by point (part 4), in words counting every verdict it got: 'holds on 13 of 14 points,
    differs on 1' ('' where no point was judged): the part's table and the glance page print the same words."""
    judged = [v for v in verdicts if v != NOT_MEASURED]
    if not judged:
        return ""
    counts = [(v, judged.count(v)) for v in (HOLDS, DIFFERS, INCONCLUSIVE) if judged.count(v)]
    n = len(judged)
    return ", ".join(f"{v} on {k}" + (f" of {n} point{'s' if n > 1 else ''}" if i == 0 else "")
                     for i, (v, k) in enumerate(counts))


ROW_COLUMNS = ["rig", "claim", "post", "mechanism", "band", "predicted", "measured", "ratio", "ratio_low", "ratio_high",
               "verdict", "how", "note"]


def evaluate(claims: list[Claim], views: dict[str, dict], ref: dict | None = None) -> pd.DataFrame:
    """One row per (rig, claim); no rows (with the columns) where no rig is shown."""
    return pd.DataFrame([c.evaluate(view, ref) for view in views.values() for c in claims], columns=ROW_COLUMNS)


def verdict_matrix(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per claim (what the post says), one column per rig holding that rig's verdict."""
    out = []
    for claim, group in rows.groupby("claim", sort=False):
        row = {"claim": claim, "the post says": group.iloc[0]["post"]}
        row.update({r.rig: r.verdict for r in group.itertuples()})
        out.append(row)
    return pd.DataFrame(out)


def details(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (claim, rig): predicted and measured with their ranges, the ratio, the band and the
    verdict, for display."""
    out = rows.assign(ratio_range=[
        "" if math.isnan(r.ratio) else (sig(r.ratio) if r.ratio_low == r.ratio_high else
                                        f"{sig(r.ratio)} ({sig(r.ratio_low)} to {sig(r.ratio_high)})")
        for r in rows.itertuples()])
    cols = ["claim", "rig", "predicted", "measured", "ratio_range", "band", "verdict", "how"]
    return out[cols].rename(columns={"ratio_range": "measured / predicted", "band": "agreement band"})


def notes(rows: pd.DataFrame) -> list[str]:
    """Why a claim may differ, once per claim that does not hold on some rig, naming the rigs."""
    out = []
    for claim, group in rows.groupby("claim", sort=False):
        off = group[group["verdict"].isin([DIFFERS, INCONCLUSIVE])]
        if len(off) and off.iloc[0]["note"]:
            rigs = ", ".join(f"{r.rig} ({r.verdict})" for r in off.itertuples())
            out.append(f"**{claim}** on {rigs}: {off.iloc[0]['note']}")
    return out


def takeaway_data(rows: pd.DataFrame, claim_ids: list[str]) -> str:
    """What the data say on a part's take-away, from its claims' own rows: per claim and rig judged, the measurement
    against the prediction and the verdict (a claim judged point by point: its count of verdicts, points_text);
    'Not measured on the rigs shown.' where none was judged."""
    said = []
    for cid in claim_ids:
        mine = rows[(rows["claim"] == cid) & (rows["verdict"] != NOT_MEASURED)]
        if "point" in rows:  # judged on every point it applies to
            for rig, g in mine.groupby("rig", sort=False):
                said.append(f"{cid} on {rig}: {points_text(list(g['verdict']))}")
            continue
        for r in mine.itertuples():
            said.append(f"{cid} on {r.rig}: {r.measured} measured against {r.predicted} predicted, {r.verdict}")
    return ("; ".join(said) + ".") if said else "Not measured on the rigs shown."


def takeaways(rows: pd.DataFrame, lessons: list[tuple[str, list[str]]]) -> list[tuple[str, str]]:
    """A part's take-aways: each lesson (the mechanism it tested, in words) with what its claims' rows say
    (takeaway_data), for p01.takeaways_markdown."""
    return [(lesson, takeaway_data(rows, ids)) for lesson, ids in lessons]
