"""measure/tracewindow: the step inside a profiler window and the GPU timeline's gaps, on synthetic traces."""
import json
import math

import pandas as pd
import pytest

from inference_wall.measure import tracewindow


def _trace(steps: list[tuple[float, float]], kernels: list[tuple[float, float]]) -> dict:
    ev = [{"ph": "X", "cat": "gpu_user_annotation", "name": "execute_context_0(0)_generation_64(64)", "ts": a,
           "dur": b - a} for a, b in steps]
    ev += [{"ph": "X", "cat": "kernel", "name": "k", "ts": a, "dur": b - a} for a, b in kernels]
    ev += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "dur": 1e6}]  # host work is not GPU time
    return {"traceEvents": ev}


def test_the_timeline_counts_overlapping_kernels_once_and_gaps_between_them():
    # three steps 10 ms apart (two whole periods), kernels busy 6 ms of each, two of them overlapping
    steps = [(0, 9000), (10000, 19000), (20000, 29000)]
    kernels = [(0, 4000), (3000, 6000), (10000, 16000), (20000, 26000)]
    t = tracewindow.timeline(_trace(steps, kernels))
    assert t["timeline_steps"] == 2 and t["timeline_period_ms"] == pytest.approx(10.0)
    assert t["timeline_busy_ms"] == pytest.approx(6.0) and t["timeline_gap_ms"] == pytest.approx(4.0)
    assert tracewindow.timeline(_trace(steps[:1], kernels)) is None


def test_a_window_reads_its_step_from_the_counters_and_a_prefill_window_is_left_out(tmp_path):
    point = tmp_path / "r" / "4b-trace-b0064"
    point.mkdir(parents=True)
    w = {"batch": 64, "started": {"t": 10.0, "steps": 100, "prompt_tokens": 0},
         "ended": {"t": 10.5, "steps": 150, "prompt_tokens": 0}}
    (point / "trace-summary.json").write_text(json.dumps({"windows": [w]}))
    table = tracewindow.window_table(tmp_path, "r", prefix="4b-trace-")
    assert table["window_step_ms"].iloc[0] == pytest.approx(10.0) and math.isnan(table["timeline_gap_ms"].iloc[0])
    rows = tracewindow.chapter_table(table, {64: 8.0}, {64: 7.0})
    assert rows["profiler_cost_ms"].iloc[0] == pytest.approx(2.0) and rows["unattributed_ms"].iloc[0] == pytest.approx(1.0)
    assert tracewindow.chapter_table(table, {64: 8.0}, {}).empty  # no pure-decode kernels: a prefill was caught
    prefilled = table.assign(window_prompt_tokens=512)
    assert tracewindow.chapter_table(prefilled, {64: 8.0}, {64: 7.0}).empty
    words = " ".join(tracewindow.sentences(rows))
    assert "unattributed" in words and "+25%" in words  # a profiler that costs 25% leaves the idle unattributed
