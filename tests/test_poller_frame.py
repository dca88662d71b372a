"""poller.poll_frame reads only the sample lines of the series it keeps: the same frame as parsing every line."""
from __future__ import annotations

import pandas as pd

from inference_wall.records import poller
from inference_wall.records.logs import parse_metrics
from inference_wall.records.store import load_points, open_artefact


def _full_frame(polls: list[dict]) -> pd.DataFrame:
    """poll_frame as it was: every line of each sample through parse_metrics."""
    rows = []
    for rec in polls:
        if rec.get("status") != 200 or "text" not in rec:
            continue
        m = parse_metrics(rec["text"])
        row = {"t": (rec["t0"] + rec.get("t1", rec["t0"])) / 2}
        for key, names in poller.SERIES.items():
            row[key] = poller._first(m, names)
        row["kv_usage_pct"] = 100 * row.pop("kv_usage")
        rows.append(row)
    frame = pd.DataFrame(rows, columns=[c for c in poller.POLL_COLUMNS if c != "t_s"])
    frame.insert(1, "t_s", frame["t"] - frame["t"].iloc[0] if len(frame) else [])
    return frame[poller.POLL_COLUMNS].astype(float)


def test_a_committed_pass_reads_the_same_as_every_line_parsed():
    pt = next(p for p in load_points("04-kv-starvation", rigs=["h200"])
              if (p.path / poller.artefact_name("bench")).exists())
    polls = poller.read_poll_file(open_artefact(pt.path, poller.artefact_name("bench")))[:40]
    assert any("_bucket{" in r.get("text", "") for r in polls)  # the lines left out are there
    pd.testing.assert_frame_equal(poller.poll_frame(polls), _full_frame(polls))


def test_labels_sum_and_lookalike_names_are_left_out():
    text = "\n".join([
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
        'vllm:num_requests_running{engine="1",model_name="m"} 2.0',
        'vllm:num_requests_running_other{engine="0"} 100.0',
        "# TYPE vllm:num_preemptions counter",
        'vllm:num_preemptions_total{engine="0"} 7.0',
        'vllm:num_preemptions_created{engine="0"} 1.7e9',
        "# TYPE vllm:iteration_tokens_total histogram",
        'vllm:iteration_tokens_total_bucket{le="1.0"} 4.0',
        'vllm:iteration_tokens_total_sum{engine="0"} 640.0',
        'vllm:iteration_tokens_total_count{engine="0"} 10.0',
        "vllm:kv_cache_usage_perc 0.25",
    ])
    f = poller.poll_frame([{"t0": 10.0, "t1": 10.2, "status": 200, "text": text},
                           {"t0": 11.0, "status": 503, "error": "busy"}])
    assert len(f) == 1
    row = f.iloc[0]
    assert row["running"] == 5.0 and row["preemptions_total"] == 7.0 and row["kv_usage_pct"] == 25.0
    assert row["step_tokens_total"] == 640.0 and row["steps_total"] == 10.0 and row["t"] == 10.1
    assert pd.isna(row["waiting"])


def test_poll_table_is_the_frame_and_is_cached(tmp_path, monkeypatch):
    from inference_wall.records import store

    monkeypatch.setenv("IW_CACHE_DIR", str(tmp_path / "cache"))
    store.clear_memo()
    pt = next(p for p in load_points("04-kv-starvation", rigs=["h200"])
              if (p.path / poller.artefact_name("bench")).exists())
    path = open_artefact(pt.path, poller.artefact_name("bench"))
    frame = poller.poll_table(path)
    pd.testing.assert_frame_equal(frame, poller.poll_frame(poller.read_poll_file(path)))
    assert list((tmp_path / "cache").glob("polls-*/*.pkl"))  # one entry, under a kind that names poller.py's digest
    store.clear_memo()
    monkeypatch.setattr(poller, "read_poll_file", lambda p: (_ for _ in ()).throw(AssertionError("parsed again")))
    pd.testing.assert_frame_equal(poller.poll_table(path), frame)
    store.clear_memo()
