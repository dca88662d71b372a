"""Serving within a target: the share of requests meeting TTFT and time-per-token targets, and the highest rate."""
from __future__ import annotations

import pandas as pd
import pytest

from inference_wall import figures
from inference_wall.measure import slo


def requests(ttfts, tpots, ok=None):
    return pd.DataFrame({"ttft_ms": ttfts, "itl_mean_ms": tpots, "ok": ok or [True] * len(ttfts)})


def test_share_counts_both_targets_and_failed_requests_miss():
    req = requests([50, 150, 50, 50], [5, 5, 30, 5], ok=[True, True, True, False])
    assert slo.share_within(req, 100, 20) == pytest.approx(0.25)  # only the first meets both and succeeded
    assert slo.share_within(req, 200, 50) == pytest.approx(0.75)


def goodput(rows):
    return pd.DataFrame([{"rig": "r", "offered_rate_rps": rate, "ttft_target_ms": 500, "tpot_target_ms": 50,
                          "requests": 100, "share_ok": share, "goodput_rps": rate * share} for rate, share in rows])


def test_highest_rate_stops_at_the_first_rate_that_misses():
    assert slo.highest_rate(goodput([(1, 1.0), (2, 0.995), (4, 0.9), (8, 1.0)]), 500, 50) == {"r": 2}
    assert slo.highest_rate(goodput([(1, 1.0), (2, 1.0), (4, 1.0)]), 500, 50) == {"r": 4}
    assert slo.highest_rate(goodput([(1, 0.5), (2, 1.0)]), 500, 50) == {"r": None}


def test_the_table_says_in_words_when_no_rate_is_kept():
    table = slo.highest_rate_table(goodput([(1, 0.5), (2, 1.0)]), targets=[(500, 50)])
    assert table.iloc[0]["highest_rate_kept"].startswith("below the lowest rate measured")


def test_the_chart_offers_both_targets_as_controls():
    spec = figures.p01.goodput_chart(goodput([(1, 1.0), (2, 0.9)])).to_dict()
    params = spec.get("params", []) + [p for layer in spec["layer"] for p in layer.get("params", [])]
    bound = {p["name"]: p for p in params if "bind" in p}
    assert {"ttft_target", "tpot_target"} <= set(bound)
    assert all(p["value"] in p["bind"]["options"] for p in bound.values())
