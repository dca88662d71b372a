"""Part 3's tables: the only file of the part that reads the disk (the sweep of every cap, each server's CUDA
graph limit, part 1's view of each rig through part 1's PART, the post's figures)."""
from __future__ import annotations

import math

import pandas as pd

from ...records.reference import load_reference
from ...records.store import load_points, pass_summary
from ...schema import PUBLISHED_RIG
from ..protocol import DATA_DIR, REFERENCE
from .plan import MID_CAP, NAME, PLATEAU_GAIN, SERIES_CAPS, STEADY_SHARE


def sweep_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Published rows (rig a10g-published) and measured rows, one per (rig, model, cap); measured rows also
    carry the largest batch vLLM captured a CUDA graph for (`graph_max_batch`, from /server_info) and, beside the
    whole-pass figures, the flood's steady window (steady.STEADY_COLUMNS, from /metrics polled during the pass: the
    running batch at the cap; NaN where the pass was not polled or holds no such window)."""
    from ...measure.steady import point_flood_row, steady_row

    ref = load_reference(3, data_dir)["mns_sweep"].assign(model="main", source="published")
    rows = []
    for pt in load_points(NAME, data_dir, rigs):
        row = pass_summary(pt)
        row.update(model=pt.params.get("model", "main"), source="measured",
                   window_s=row["duration_s"], min_window_s=pt.record.parameters.get("min_window_s", 0),
                   graph_max_batch=graph_capture_limit(pt), poll_s=pt.record.parameters.get("poll_s", math.nan),
                   **point_flood_row(pt, share=STEADY_SHARE))
        if row["model"] == "small" and pt.record.has_startup:
            row["weights_gib"] = pt.startup().weights_gib  # the small model's weight stream (few, small logs)
        rows.append(row)
    measured = pd.DataFrame(rows)
    table = pd.concat([ref, measured], ignore_index=True) if len(measured) else ref.assign(**steady_row(None, False))
    table = table.assign(steady_polled=table["steady_polled"].eq(True))  # published rows: not polled
    if rigs is not None:
        table = table[table["rig"].isin(rigs)]
    return table.sort_values(["rig", "model", "max_num_seqs"]).reset_index(drop=True)


def part1_rig(rig: str, data_dir=None) -> str:
    """The rig whose part 1 this rig's part 3 is judged against: itself, or the rig it repeats."""
    if rig == PUBLISHED_RIG:
        return rig
    from ...run.rig import load_profile

    return load_profile(rig, data_dir).repeat_of or rig


def graph_capture_limit(point) -> float:
    """The largest batch (in tokens per step) vLLM captured a CUDA graph for on this point's server
    (serverinfo.graph_capture_limit: its /server_info config, else its log's config line); NaN where neither says.
    A step of more tokens runs without the captured graphs."""
    from ...records.serverinfo import graph_capture_limit as limit

    return limit(point.path)


def run_to_run(table: pd.DataFrame) -> dict[str, dict[float, float]]:
    """For each rig that has a repeat (its profile's `repeat_of`, or another rig's), the relative difference
    of output throughput between the two runs at each cap both measured: rig -> {cap: |a - b| / b}."""
    from ...run.rig import load_profile

    main = table[(table["model"] == "main") & (table["source"] == "measured")]
    out: dict[str, dict[float, float]] = {}
    for repeat in main["rig"].unique():
        try:
            of = load_profile(repeat).repeat_of
        except Exception:  # a rig without a profile has no repeat
            of = None
        if not of or of not in set(main["rig"]):
            continue
        a = main[main["rig"] == repeat].set_index("max_num_seqs")["output_tok_s"]
        b = main[main["rig"] == of].set_index("max_num_seqs")["output_tok_s"]
        both = a.index.intersection(b.index)
        rel = {float(c): abs(a[c] - b[c]) / b[c] for c in both}
        out.setdefault(repeat, {}).update(rel)
        out.setdefault(of, {}).update(rel)
    return out


def reference_view(data_dir=None) -> dict:
    """The post's scattered facts for part 3 (statements and prose), with part 1's step fit."""
    f3 = load_reference(3, data_dir)["facts"]
    facts = dict(zip(f3["key"], f3["value"]))
    fit = load_reference(1, data_dir)["step_time_fit"].iloc[0]
    facts.update(mid_cap=MID_CAP, top_cap=SERIES_CAPS[-1], plateau_gain_pct=100 * PLATEAU_GAIN,
                 fit_a=fit["intercept_ms"], fit_b=fit["slope_ms_per_seq"],
                 crossover=fit["intercept_ms"] / fit["slope_ms_per_seq"])
    sweep = load_reference(3, data_dir)["mns_sweep"].set_index("max_num_seqs")
    facts["itl_top"] = float(sweep.loc[SERIES_CAPS[-1], "itl_p50_ms"])
    return facts


def protocol_tables(data_dir, rigs: list[str]) -> dict:
    """The protocol's tables: the sweep, part 1's view of each rig (of the rig it repeats), the run-to-run spread,
    the post's figures (reference_view) and the data dir."""
    from .. import protocol
    from ..p01 import PART as PART1

    table = sweep_table(data_dir, rigs)
    rigs1 = {rig: part1_rig(rig, data_dir) for rig in rigs}
    views1 = protocol.views(PART1, data_dir, sorted(set(rigs1.values())))
    return {"sweep": table, "part1": {rig: views1[r] for rig, r in rigs1.items()}, "spread": run_to_run(table),
            REFERENCE: reference_view(data_dir), DATA_DIR: data_dir}
