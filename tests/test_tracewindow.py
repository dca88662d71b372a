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


def _annotated(names: list[str]) -> dict:
    return {"traceEvents": [{"ph": "X", "cat": "gpu_user_annotation", "name": n, "ts": 10.0 * i, "dur": 5.0}
                            for i, n in enumerate(names)]}


def test_a_window_that_caught_a_refill_is_passed_over_for_one_of_pure_decode(tmp_path):
    # the h200's window at 1,024: one of its steps prefilled a refill (context 1, 256 tokens)
    refill = ["execute_context_1(256)_generation_1023(1023)", "execute_context_0(0)_generation_1023(1023)"]
    assert tracewindow.prefill_steps(_annotated(refill)) == 1
    assert tracewindow.prefill_steps(_annotated(refill[1:] * 3)) == 0
    point = tmp_path / "r" / "4b-trace-b1024"
    point.mkdir(parents=True)
    caught = {"batch": 1024, "prefill_steps": 1, "started": {"t": 0.0, "steps": 0, "prompt_tokens": 0},
              "ended": {"t": 1.0, "steps": 2, "prompt_tokens": 0}}
    pure = {**caught, "prefill_steps": 0, "ended": {"t": 1.0, "steps": 20, "prompt_tokens": 0}}
    (point / "trace-summary.json").write_text(json.dumps({"windows": [caught, pure]}))
    assert tracewindow.window_table(tmp_path, "r")["window_step_ms"].iloc[0] == pytest.approx(50.0)
    assert tracewindow.chosen_window({"windows": [caught]}) is caught  # none pure: the first, as before
    assert tracewindow.chosen_window({"windows": [{"batch": 1}]}) == {"batch": 1}  # a point made before the count


def test_the_decode_trace_opens_another_window_after_a_refill_and_stops_at_the_first_pure_one(tmp_path):
    import threading

    from inference_wall.run.trace import DecodeWindowTrace

    def run(counts, max_windows=4):
        side = DecodeWindowTrace("http://127.0.0.1:9", tmp_path, "bench", tmp_path, 1024, 0.25, max_windows=max_windows)
        it = iter(counts)
        side._settle = lambda: True
        side._window = lambda: {"prefill_steps": next(it), "summaries": [{}]}
        side._stop = threading.Event()
        side._run()
        side._thread = None
        side.__exit__(None, None, None)
        return json.loads((tmp_path / "trace-summary.json").read_text())

    summary = run([2, 1, 0, 0])
    assert [w["prefill_steps"] for w in summary["windows"]] == [2, 1, 0] and "no_pure_window" not in summary
    summary = run([1, 1, 1], max_windows=3)
    assert len(summary["windows"]) == 3 and "prefill" in summary["no_pure_window"]
