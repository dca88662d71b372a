"""Claims: a sentence of the text, a function of a rig's data, and the range the post's own numbers allow.

The expected range is computed from the published reference (data/reference), never typed in: a claim
names the reference facts it compares with and a relative tolerance. Evaluated per rig, a claim
either holds, differs (shown with the measured value and the reason a rig may differ), or is not
covered by that rig's data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import pandas as pd

HOLDS, DIFFERS, NOT_COVERED = "holds", "differs", "not covered"


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str  # what the post says, in our words: a template filled from the reference facts
    unit: str
    measure: Callable[[dict], float | None]  # a rig's view (see parts.*.rig_view) -> the measured value
    expected: Callable[[dict], tuple[float, float]]  # the published reference facts -> (low, high)
    tolerance: float = 0.0  # relative, widens (low, high)
    why_it_may_differ: str = ""  # shown when a measured rig differs

    def bounds(self, ref: dict) -> tuple[float, float]:
        lo, hi = self.expected(ref)
        return lo * (1 - self.tolerance), hi * (1 + self.tolerance)

    def evaluate(self, view: dict, ref: dict) -> dict:
        try:
            value = self.measure(view)
        except (KeyError, IndexError, ValueError, ZeroDivisionError, TypeError):
            value = None
        lo, hi = self.bounds(ref)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            verdict = NOT_COVERED
        else:
            verdict = HOLDS if lo <= value <= hi else DIFFERS
        return {
            "rig": view.get("rig"),
            "claim": self.id,
            "statement": self.statement.format(**ref),
            "expected": f"{fmt_num(lo)} to {fmt_num(hi)} {self.unit}".strip(),
            "measured": None if verdict == NOT_COVERED else f"{fmt_num(value)} {self.unit}".strip(),
            "value": value if verdict != NOT_COVERED else math.nan,
            "low": lo,
            "high": hi,
            "verdict": verdict,
            "note": self.why_it_may_differ if verdict == DIFFERS else "",
        }


def fmt_num(x: float) -> str:
    """Three significant figures, thousands separated, never scientific notation."""
    if x == 0 or not math.isfinite(x):
        return str(x)
    digits = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    return f"{round(x, digits):,.{digits}f}"


def evaluate(claims: list[Claim], views: dict[str, dict], ref: dict) -> pd.DataFrame:
    """One row per (rig, claim)."""
    rows = [c.evaluate(view, ref) for view in views.values() for c in claims]
    return pd.DataFrame(rows)


def around(key: str) -> Callable[[dict], tuple[float, float]]:
    """Expected: the reference fact `key` itself (widen it with the claim's tolerance)."""
    return lambda ref: (ref[key], ref[key])


def between(low_key: str, high_key: str) -> Callable[[dict], tuple[float, float]]:
    return lambda ref: (ref[low_key], ref[high_key])


def wide(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One row per claim (its statement and expected range, then each rig's measured value and verdict),
    and the notes that explain each difference, for display."""
    out = []
    for claim, group in rows.groupby("claim", sort=False):
        first = group.iloc[0]
        row = {"claim": claim, "statement": first["statement"], "expected": first["expected"]}
        for r in group.itertuples():
            row[r.rig] = f"{r.measured} ({r.verdict})" if r.measured else r.verdict
        out.append(row)
    notes = [f"{r.rig}, {r.claim}: {r.note}" for r in rows.itertuples() if r.verdict == DIFFERS]
    return pd.DataFrame(out), notes
