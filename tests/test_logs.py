"""Tests for inference_wall.records.logs on real vLLM artefacts and on format variants from vLLM's source.

Expected values are read off the fixture text in the test (by a regex or the raw JSON), never typed.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from inference_wall.errors import LogParseError
from inference_wall.records.logs import (
    ITERATION_COLUMNS,
    REQUEST_COLUMNS,
    STATS_COLUMNS,
    bench_from_dict,
    count_preemptions,
    histogram_sum_count,
    iter_metric_samples,
    metrics_delta,
    parse_bench,
    parse_iterations,
    parse_metrics,
    parse_startup,
    parse_stats,
    read_log,
    scan_log,
    split_lines,
)

FIXTURES = Path(__file__).parent / "fixtures" / "logs"
GPU = FIXTURES / "h200-vllm-0.22.1"
CPU = FIXTURES / "cpu-vllm-0.32.0"

SERVER_LOGS = sorted(FIXTURES.glob("*/*.log"))
ITERATION_LOGS = [p for p in SERVER_LOGS if "Iteration(" in read_log(p)]
BENCH_FILES = sorted(FIXTURES.glob("*/bench*.json"))
METRICS_FILES = sorted(FIXTURES.glob("*/metrics*.txt"))


def ids(paths):
    return [f"{p.parent.name}/{p.name}" for p in paths]


def first_float(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    assert m, pattern
    return float(m[1].replace(",", ""))


def test_the_fixtures_are_there():
    assert len(list(GPU.glob("server_*.log"))) == 4
    assert len(list(GPU.glob("bench_*.json"))) == 5
    for name in ("server.log", "server-seqs1-stats-only.log", "bench.json", "metrics.txt"):
        assert (CPU / name).is_file(), name
    assert CPU / "server.log" in ITERATION_LOGS


# ---------------------------------------------------------------------------------------------
# Real logs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SERVER_LOGS, ids=ids(SERVER_LOGS))
def test_startup_of_a_real_log(path):
    text = read_log(path)
    report = parse_startup(text, path)
    report.require()  # a completed start reports the stock facts
    version = path.parent.name.split("vllm-")[1]
    assert report.vllm_version == version
    assert report.first_ts == re.search(r"\b(\d\d-\d\d \d\d:\d\d:\d\d)\b", text)[1]
    assert report.kv_cache_tokens == int(first_float(r"KV cache size: ([\d,]+) tokens", text))
    assert report.kv_cache_device == re.search(r"\b(GPU|CPU) KV cache size", text)[1]
    assert report.max_concurrency == first_float(r"per request: ([\d.]+)x", text)
    assert report.max_concurrency_tokens_per_request == int(first_float(r"Maximum concurrency for ([\d,]+) tokens", text))
    # the three numbers of the capacity report agree with each other (to vLLM's rounding)
    ratio = report.kv_cache_tokens / report.max_concurrency_tokens_per_request
    assert ratio == pytest.approx(report.max_concurrency, abs=0.01)
    assert report.init_engine_s == first_float(r"init engine \([^)]*\) took ([\d.]+)", text)
    assert 0 < report.init_engine_s < report.healthy_at
    if "Model loading took" in text:
        assert report.weights_gib == first_float(r"Model loading took ([\d.]+) GiB", text)
        assert report.model_load_s == first_float(r"GiB(?: memory)? and ([\d.]+) seconds", text)
    if "Available KV cache memory" in text:
        assert report.kv_cache_gib == first_float(r"Available KV cache memory: ([\d.]+) GiB", text)


@pytest.mark.parametrize("path", sorted(GPU.glob("server_*.log")), ids=ids(sorted(GPU.glob("server_*.log"))))
def test_gpu_startup_has_compile_and_graphs(path):
    text = read_log(path)
    report = parse_startup(text, path).require("weights_gib", "kv_cache_gib", "torch_compile_s", "graph_capture_s", "graph_capture_gib")
    assert report.kv_cache_device == "GPU"
    assert report.torch_compile_s == first_float(r"torch\.compile took ([\d.]+) s in total", text)
    assert report.graph_capture_s == first_float(r"Graph capturing finished in (\d+) secs", text)
    assert report.graph_capture_gib == first_float(r"Graph capturing finished in \d+ secs, took ([\d.]+) GiB", text)
    assert report.init_engine_compile_s == report.torch_compile_s  # "(compilation: X s)" repeats it
    if "max_num_batched_tokens=" in text:  # the budget a server without the flag got from vLLM's defaults
        assert report.max_num_batched_tokens == int(first_float(r"max_num_batched_tokens=(\d+)", text))
    # the log's own word on scheduling: the iteration log's elapsed times mean a step only when it is off
    assert report.async_scheduling is ("Asynchronous scheduling is enabled" in text)
    assert parse_startup(text.replace("scheduling is enabled", "scheduling is disabled"), path).async_scheduling is (
        False if "Asynchronous scheduling is enabled" in text else None)
    # the engine's init is one part of the time to ready; model loading is a small part of it
    assert report.model_load_s < report.init_engine_s < report.healthy_at


def test_cpu_startup():
    text = read_log(CPU / "server.log")
    r = parse_startup(text).require("kv_cache_gib")
    assert r.kv_cache_device == "CPU"
    assert r.kv_cache_gib == first_float(r"Explicitly set \(([\d.]+)/", text)
    # --enforce-eager and the CPU build: no compile, no graphs; the CPU runner prints no "Model loading took"
    assert "Model loading took" not in text and r.weights_gib is None
    assert r.torch_compile_s is None and r.graph_capture_s is None
    assert r.async_scheduling is None  # the CPU build does not say
    with pytest.raises(LogParseError, match="graph_capture_s"):
        r.require("graph_capture_s")


def test_healthy_at_is_the_last_timestamp_before_uvicorn_says_ready():
    path = GPU / "server_mns64.log"
    lines = split_lines(read_log(path))
    ready = next(i for i, line in enumerate(lines) if "Application startup complete" in line)
    stamp = next(re.search(r"\d\d-\d\d (\d\d):(\d\d):(\d\d)", l) for l in reversed(lines[:ready]) if re.search(r"INFO \d\d-\d\d ", l))
    first = re.search(r"\d\d-\d\d (\d\d):(\d\d):(\d\d)", lines[0])
    to_s = lambda m: int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3])  # noqa: E731 (same day in this log)
    assert parse_startup("\n".join(lines), path).healthy_at == to_s(stamp) - to_s(first)


@pytest.mark.parametrize("path", SERVER_LOGS, ids=ids(SERVER_LOGS))
def test_stats_of_a_real_log(path):
    text = read_log(path)
    stats = parse_stats(text, path)
    raw_lines = [(n, l) for n, l in enumerate(split_lines(text), 1) if "Avg prompt throughput" in l]
    assert list(stats.columns) == STATS_COLUMNS
    assert len(stats) == len(raw_lines) > 0
    assert list(stats["line"]) == [n for n, _ in raw_lines]
    assert stats["t_s"].is_monotonic_increasing
    assert (stats["t_s"] > 0).all()
    for (_, raw), row in zip(raw_lines, stats.itertuples()):
        assert row.running == int(re.search(r"Running: (\d+) reqs", raw)[1])
        assert row.waiting == int(re.search(r"Waiting: (\d+) reqs", raw)[1])
        assert row.gen_tok_s == float(re.search(r"Avg generation throughput: ([\d.]+)", raw)[1])
        assert row.kv_usage_pct == float(re.search(r"KV cache usage: ([\d.]+)%", raw)[1])
    assert stats["kv_usage_pct"].between(0, 100).all()
    assert count_preemptions(text, path) == int(stats["preemptions"].sum())


def test_the_flood_stats_show_a_full_batch_and_a_queue():
    """Under a flood at max_num_seqs=256 a stats line catches the batch at the cap with a queue."""
    stats = parse_stats(read_log(GPU / "server_mns256_lmo_greedy.log"))
    busiest = stats.loc[stats["running"].idxmax()]
    assert busiest["running"] == 256 and busiest["waiting"] > 0
    assert (stats["running"] <= 256).all()
    mns1 = parse_stats(read_log(GPU / "server_mns1.log"))
    assert mns1["running"].max() == 1


@pytest.mark.parametrize("path", SERVER_LOGS, ids=ids(SERVER_LOGS))
def test_iterations_of_a_log_without_the_flag_is_empty(path):
    text = read_log(path)
    frame = parse_iterations(text, path)
    if "Iteration(" in text:
        assert len(frame) > 0
    else:
        assert frame.empty and list(frame.columns) == ITERATION_COLUMNS


@pytest.mark.parametrize("path", ITERATION_LOGS, ids=ids(ITERATION_LOGS))
def test_iterations_of_a_real_log(path):
    text = read_log(path)
    frame = parse_iterations(text, path)
    raw = [l for l in split_lines(text) if re.search(r"Iteration\(\d+\): \d+ context requests", l)]
    assert len(frame) == len(raw) > 0
    assert list(frame["iteration"]) == list(range(len(frame)))  # one engine, every step logged, in order
    assert (frame["batch_reqs"] == frame["ctx_reqs"] + frame["gen_reqs"]).all()
    assert (frame["elapsed_ms"] > 0).all() and frame["t_s"].is_monotonic_increasing
    for i in (0, len(raw) - 1):
        m = re.search(r"(\d+) context tokens, (\d+) generation requests.*time: ([\d.]+) ms", raw[i])
        row = frame.iloc[i]
        assert (row["ctx_tokens"], row["gen_reqs"], row["elapsed_ms"]) == (int(m[1]), int(m[2]), float(m[3]))
    # the batch never exceeds --max-num-seqs, read off the command line in the fixture's README
    readme = (path.parent / "README.md").read_text()
    cap = int(re.search(r"--max-num-seqs (\d+)", readme)[1])
    assert frame["batch_reqs"].max() == cap
    if "CPU KV cache usage" in raw[0]:
        assert frame["kv_usage_pct"].notna().all()


def test_cpu_stats_name_the_cpu_kv_cache():
    for name in ("server.log", "server-seqs1-stats-only.log"):
        stats = parse_stats(read_log(CPU / name))
        assert set(stats["kv_device"]) == {"CPU"}
    one = parse_stats(read_log(CPU / "server-seqs1-stats-only.log"))
    assert one["running"].max() == 1 and one["waiting"].max() > 0  # --max-num-seqs 1 under a flood: a queue


def test_cpu_metrics_agree_with_the_bench():
    m = parse_metrics((CPU / "metrics.txt").read_text())
    bench = parse_bench(CPU / "bench.json")
    s, n = histogram_sum_count(m, "vllm:time_to_first_token_seconds")
    assert n == bench.completed  # the snapshot was taken after the bench, on a server that saw only it
    assert 0 < s / n
    assert m["vllm:num_preemptions_total"] == count_preemptions(read_log(CPU / "server.log"))


def test_reading_keeps_line_numbers_of_progress_bars():
    """`\\r` progress bars stay one line, so line numbers match `grep -n`."""
    path = GPU / "server_mns64.log"
    text = read_log(path)
    assert "\r" in text
    assert len(split_lines(text)) == text.count("\n")


# ---------------------------------------------------------------------------------------------
# Bench results
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", BENCH_FILES, ids=ids(BENCH_FILES))
def test_bench_of_a_real_file(path):
    raw = json.loads(path.read_text())
    bench = parse_bench(path)
    assert bench.duration_s == raw["duration"]
    assert bench.completed == raw["completed"]
    assert bench.num_prompts == raw.get("num_prompts")
    assert bench.output_throughput == raw["output_throughput"]
    assert bench.total_token_throughput == raw["total_token_throughput"]
    latency_keys = [k for k in raw if re.fullmatch(r"(mean|median|std|p[\d.]+)_(ttft|tpot|itl|e2el)_ms", k)]
    assert latency_keys
    for key in latency_keys:
        stat, metric, _ = key.split("_")
        assert bench.ms(metric, stat) == raw[key]
    for metric, stats in bench.latency_ms.items():
        assert stats["p50"] == stats["median"]
    assert bench.ms("ttft", "p999") != bench.ms("ttft", "p999")  # absent -> NaN
    if raw.get("request_rate") == "inf":
        assert bench.request_rate == math.inf
    if "ttfts" in raw:
        reqs = bench.requests
        assert list(reqs.columns) == REQUEST_COLUMNS
        assert len(reqs) == len(raw["ttfts"])
        assert reqs["ok"].sum() == raw["completed"]
        done = reqs[reqs["ok"]]
        assert done["ttft_ms"].mean() == pytest.approx(raw["mean_ttft_ms"], rel=1e-9)
        # at most one gap per token after the first (a stream chunk may carry several tokens)
        assert all(0 < len(itl) <= n - 1 for itl, n in zip(done["itl_ms"], done["output_len"]))
        assert (done["e2el_ms"] >= done["ttft_ms"]).all()
        if "mean_e2el_ms" in raw:
            assert done["e2el_ms"].mean() == pytest.approx(raw["mean_e2el_ms"], rel=1e-6)
        if "start_times" in raw:
            assert reqs["start_s"].min() == 0.0
    else:
        assert bench.requests is None


def test_bench_with_detailed_arrays_and_no_start_times():
    raw = {
        "duration": 2.0, "completed": 2, "failed": 1, "request_rate": 4.0, "median_ttft_ms": 10.0, "p90_itl_ms": 3.0,
        "input_lens": [4, 4, 4], "output_lens": [3, 2, 0], "ttfts": [0.010, 0.020, 0.0],
        "itls": [[0.002, 0.004], [0.003], []], "errors": ["", "", "Bad Request"],
    }
    bench = bench_from_dict(raw)
    assert bench.ms("ttft", "p50") == 10.0 and bench.ms("itl", "p90") == 3.0
    reqs = bench.requests
    assert list(reqs["ok"]) == [True, True, False]
    assert reqs["itl_mean_ms"].iloc[0] == pytest.approx(3.0)
    assert reqs["e2el_ms"].iloc[0] == pytest.approx(16.0)
    assert reqs["start_s"].isna().all()
    assert reqs["error"].iloc[2] == "Bad Request"


def test_truncated_bench_json_names_file_and_line(tmp_path):
    source = GPU / "bench_mns64.json"
    pretty = json.dumps(json.loads(source.read_text()), indent=1)
    lines = pretty.splitlines()
    cut = tmp_path / "bench_cut.json"
    cut.write_text("\n".join(lines[: len(lines) // 2]))
    with pytest.raises(LogParseError) as err:
        parse_bench(cut)
    assert err.value.path == cut
    assert err.value.line == len(lines) // 2  # the cut: json stops at the end of the last line
    assert str(cut) in str(err.value) and "column" in str(err.value)


def test_bench_that_is_not_a_result(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    with pytest.raises(LogParseError, match="JSON object"):
        parse_bench(path)
    path.write_text('{"completed": 3}')
    with pytest.raises(LogParseError, match="duration"):
        parse_bench(path)
    bad = {"duration": 1.0, "completed": 1, "ttfts": [0.1, 0.2], "itls": [[]]}
    with pytest.raises(LogParseError, match="itls"):
        bench_from_dict(bad, "b.json")


# ---------------------------------------------------------------------------------------------
# /metrics
# ---------------------------------------------------------------------------------------------

METRICS_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="/tmp/m, a"} 3.0
vllm:num_requests_running{engine="1",model_name="/tmp/m, a"} 4.0
vllm:num_preemptions_total{engine="0",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 5.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 8.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.5
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 8.0
process_start_time_seconds 1.7e+09
vllm:something_nan NaN
"""


def test_metrics_sum_over_labels_and_keep_histogram_sum_count():
    m = parse_metrics(METRICS_TEXT)
    assert m["vllm:num_requests_running"] == 7.0
    assert m["vllm:num_preemptions_total"] == 2.0
    assert "vllm:time_to_first_token_seconds_bucket" not in m
    assert histogram_sum_count(m, "vllm:time_to_first_token_seconds") == (1.5, 8.0)
    assert all(math.isnan(x) for x in histogram_sum_count(m, "vllm:nope"))
    assert math.isnan(m["vllm:something_nan"])
    after = dict(m, **{"vllm:num_preemptions_total": 5.0, "vllm:new_total": 1.0})
    delta = metrics_delta(m, after)
    assert delta["vllm:num_preemptions_total"] == 3.0 and delta["vllm:new_total"] == 1.0


def test_metrics_garbage_names_the_line():
    with pytest.raises(LogParseError) as err:
        parse_metrics("# ok\nvllm:x 1\nvllm:y{a=\"b\"} one\n", "metrics.txt")
    assert err.value.line == 3 and "metrics.txt:3" in str(err.value)


def test_metrics_samples_come_from_prometheus_clients_parser():
    """Labels are parsed (escapes undone), and a counter keeps the sample name it was written with
    (prometheus_client's parser appends `_total` to a counter sample that lacks it)."""
    text = ('# TYPE vllm:old_counter counter\nvllm:old_counter{model_name="a\\"b, c"} 2\n'
            '# TYPE vllm:new_total counter\nvllm:new_total 3\nvllm:new_created 1.7e9\n')
    samples = list(iter_metric_samples(text))
    assert samples[0] == ("vllm:old_counter", {"model_name": 'a"b, c'}, 2.0)
    assert parse_metrics(text) == {"vllm:old_counter": 2.0, "vllm:new_total": 3.0}


@pytest.mark.parametrize("path", METRICS_FILES, ids=ids(METRICS_FILES))
def test_metrics_of_a_real_snapshot(path):
    text = path.read_text()
    m = parse_metrics(text, path)
    assert len(m) > 10
    names = {line.split("{")[0].split()[0] for line in text.splitlines() if line and not line.startswith("#")}
    assert {n for n in names if not n.endswith(("_bucket", "_created"))} == set(m)
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
        if name in names:
            assert m[name] >= 0
    # the buckets and creation times parse_metrics drops before parsing change no sum: the whole text parsed agrees
    whole: dict[str, float] = {}
    for name, _labels, value in iter_metric_samples(text, path):
        if not name.endswith(("_bucket", "_created")):
            whole[name] = whole.get(name, 0.0) + value
    assert whole.keys() == m.keys() and all(whole[k] == m[k] or (math.isnan(whole[k]) and math.isnan(m[k])) for k in m)


# ---------------------------------------------------------------------------------------------
# Format variants from vLLM's source, 0.18-0.33 (short synthetic lines)
# ---------------------------------------------------------------------------------------------

OLDER_STARTUP = """\
INFO 03-18 06:53:01 [api_server.py:1880] vLLM API server version 0.18.0
INFO 03-18 06:53:30 [gpu_model_runner.py:2008] Model loading took 15.2700 GiB and 88.890731 seconds
INFO 03-18 06:57:23 [monitor.py:34] torch.compile takes 92.20 s in total
INFO 03-18 06:57:25 [gpu_worker.py:375] Available KV cache memory: 11.15 GiB
INFO 03-18 06:57:25 [kv_cache_utils.py:1319] GPU KV cache size: 458,128 tokens
INFO 03-18 06:57:25 [kv_cache_utils.py:1323] Maximum concurrency for 32,768 tokens per request: 13.98x
INFO 03-18 06:57:40 [gpu_model_runner.py:2708] Graph capturing finished in 15 secs, took 0.59 GiB
INFO 03-18 06:57:40 [core.py:218] init engine (profile, create kv cache, warmup model) took 94.98 seconds
INFO 03-18 06:57:50 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000
"""


def test_startup_older_wording():
    r = parse_startup(OLDER_STARTUP)
    assert r.vllm_version == "0.18.0"
    assert (r.weights_gib, r.model_load_s) == (15.27, 88.890731)
    assert r.torch_compile_s == 92.20 and r.kv_cache_gib == 11.15
    assert (r.kv_cache_tokens, r.max_concurrency, r.max_concurrency_tokens_per_request) == (458128, 13.98, 32768)
    assert (r.graph_capture_s, r.graph_capture_gib) == (15.0, 0.59)
    assert r.init_engine_s == 94.98 and r.init_engine_compile_s is None
    assert r.healthy_at == 289.0  # 06:57:50 - 06:53:01


def test_startup_newer_wording_with_prefixes_and_colour():
    text = (
        "(APIServer pid=7) INFO 07-08 00:00:00 [utils.py:233]        \u2588     \u2588  version 0.33.0rc1\n"
        "(EngineCore_DP0 pid=9) \x1b[0;36mINFO\x1b[0m 07-08 00:00:05 [gpu_model_runner.py:4100] "
        "Model loading took 8.61 GiB memory and 0.62 seconds\n"
        "(EngineCore_DP0 pid=9) INFO 07-08 00:00:09 [gpu_worker.py:400] Available KV cache memory: 20.5 GiB "
        "(total=79.2, util=0.9, weights=8.61)\n"
        "(EngineCore_DP0 pid=9) INFO 07-08 00:00:09 [kv_cache_utils.py:1800] GPU KV cache size: 1,000 tokens, "
        "Maximum concurrency for 500 tokens per request: 2.00x\n"
        "(EngineCore_DP0 pid=9) INFO 07-08 00:00:10 [core.py:337] init engine took 22.68 s (compilation: 11.57 s)\n"
        "(APIServer pid=7) INFO:     Application startup complete.\n"
    )
    r = parse_startup(text)
    assert r.vllm_version == "0.33.0rc1"
    assert (r.weights_gib, r.kv_cache_gib) == (8.61, 20.5)
    assert (r.kv_cache_tokens, r.max_concurrency_tokens_per_request, r.max_concurrency) == (1000, 500, 2.0)
    assert (r.init_engine_s, r.init_engine_compile_s) == (22.68, 11.57)
    assert r.healthy_at == 10.0
    assert r.torch_compile_s is None and r.graph_capture_s is None


def test_startup_cpu_wording_and_old_v0_weights_line():
    text = (
        "INFO 11-30 01:00:00 [cpu_worker.py:80] Loading model weights took 0.2 GB\n"
        "INFO 11-30 01:00:01 [kv_cache_utils.py:1200] CPU KV cache size: 65,536 tokens\n"
    )
    r = parse_startup(text)
    assert (r.weights_gib, r.model_load_s) == (0.2, None)
    assert (r.kv_cache_device, r.kv_cache_tokens) == ("CPU", 65536)


def test_require_names_what_a_cut_log_lacks():
    cut = "".join(OLDER_STARTUP.splitlines(keepends=True)[:3])
    r = parse_startup(cut, "server.log")
    assert r.weights_gib == 15.27 and r.kv_cache_tokens is None
    with pytest.raises(LogParseError) as err:
        r.require("weights_gib", "kv_cache_tokens", "healthy_at")
    msg = str(err.value)
    assert msg.startswith("server.log:") and "kv_cache_tokens" in msg and "healthy_at" in msg
    assert "weights_gib," not in msg
    assert r.require("weights_gib") is r
    with pytest.raises(ValueError):
        r.require("no_such_field")


def test_timestamps_roll_over_midnight_month_and_year():
    text = (
        "INFO 12-31 23:59:58 [a.py:1] one\n"
        "INFO 01-01 00:00:03 [a.py:1] two\n"
        "INFO 01-31 23:59:59 [a.py:1] three\n"
        "INFO 02-01 00:00:00.500 [a.py:1] four\n"
    )
    t = [line.t_s for line in scan_log(text)]
    assert t[:2] == [0.0, 5.0]
    assert t[2] == 5.0 + 31 * 86400 - 4
    assert t[3] == t[2] + 1.5


def test_old_source_form_and_outside_prefix():
    text = (
        "2026-04-19 12:10:56.886 | WARNING 05-09 00:49:33 scheduler.py:1057] Sequence group 0 is preempted by "
        "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.\n"
        "2026-04-19 12:11:06.886 | INFO 05-09 00:49:43 metrics.py:345] Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 12.5 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 1 reqs, "
        "GPU KV cache usage: 99.0%, CPU KV cache usage: 0.0%.\n"
    )
    lines = scan_log(text)
    assert [l.source for l in lines] == ["scheduler.py:1057", "metrics.py:345"]
    assert count_preemptions(text) == 1  # the V0 warning
    row = parse_stats(text).iloc[0]
    assert (row["running"], row["waiting"], row["kv_usage_pct"], row["kv_device"]) == (3, 1, 99.0, "GPU")


STATS_VARIANTS = [
    # 0.22.1 as printed
    ("Engine 000: Avg prompt throughput: 1638.4 tokens/s, Avg generation throughput: 819.2 tokens/s, "
     "Running: 64 reqs, Waiting: 128 reqs, GPU KV cache usage: 3.6%, Prefix cache hit rate: 0.0%",
     dict(engine=0, running=64, waiting=128, kv_usage_pct=3.6, prefix_hit_pct=0.0, preemptions=0, kv_device="GPU")),
    # log_parts builder (0.2x-0.3x): optional Deferred / Preemptions / extra hit rates
    ("Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 3000.5 tokens/s, "
     "Running: 256 reqs, Waiting: 40 reqs, Deferred: 2 reqs, Preemptions: 7, GPU KV cache usage: 99.9%, "
     "Prefix cache hit rate: 12.5%, External prefix cache hit rate: 50.0%, MM cache hit rate: 1.0%",
     dict(engine=1, running=256, waiting=40, kv_usage_pct=99.9, prefix_hit_pct=12.5, preemptions=7)),
    # data parallel, aggregated
    ("2 Engines Aggregated: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
     "Running: 5 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%, Prefix cache hit rate: 0.0%",
     dict(engine=-1, running=5)),
    # no engine prefix, no prefix-cache field, "n/a" usage
    ("Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, "
     "Waiting: 0 reqs, GPU KV cache usage: n/a, Prefix cache hit rate: n/a",
     dict(engine=0, running=1, kv_usage_pct=math.nan, prefix_hit_pct=math.nan)),
    ("Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
     "Running: 1 reqs, Waiting: 0 reqs, KV cache usage: 2.0%",
     dict(kv_usage_pct=2.0, kv_device=None, prefix_hit_pct=math.nan)),
]


@pytest.mark.parametrize("message,expected", STATS_VARIANTS)
def test_stats_line_variants(message, expected):
    text = f"(APIServer pid=1) INFO 11-30 05:03:18 [loggers.py:271] {message}\n"
    row = parse_stats(text).iloc[0].to_dict()
    for key, value in expected.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(row[key]), key
        else:
            assert row[key] == value, key


def test_count_preemptions_sums_the_stats_lines():
    base = "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 1.0 tokens/s, Running: 2 reqs, Waiting: 1 reqs, "
    text = (
        f"INFO 11-30 05:00:00 [loggers.py:1] {base}Preemptions: 3, GPU KV cache usage: 99.0%, Prefix cache hit rate: 0.0%\n"
        f"INFO 11-30 05:00:10 [loggers.py:1] {base}GPU KV cache usage: 80.0%, Prefix cache hit rate: 0.0%\n"
        f"INFO 11-30 05:00:20 [loggers.py:1] {base}Preemptions: 4, GPU KV cache usage: 99.0%, Prefix cache hit rate: 0.0%\n"
    )
    assert count_preemptions(text) == 7
    assert list(parse_stats(text)["t_s"]) == [0.0, 10.0, 20.0]


ITERATION_TEXT = (
    "(EngineCore_DP0 pid=1) INFO 07-08 00:00:02 [core.py:359] Iteration(7): 2 context requests, 7957 context tokens, "
    "43 generation requests, 43 generation tokens, iteration elapsed time: 1125.94 ms\n"
    "(EngineCore_DP1 pid=2) INFO 07-08 00:00:03 [core.py:359] Iteration(0): 0 context requests, 0 context tokens, "
    "0 generation requests, 0 generation tokens, iteration elapsed time: 0.05 ms (dummy)\n"
    "INFO 10-08 13:00:00 [loggers.py:182] Engine 003: Iteration(8): 0 context requests, 0 context tokens, "
    "44 generation requests, 44 generation tokens, iteration elapsed time: 40.00 ms, GPU KV cache usage: 12.5%\n"
)


def test_iteration_variants():
    frame = parse_iterations(ITERATION_TEXT)
    assert list(frame.columns) == ITERATION_COLUMNS
    assert list(frame["engine"]) == [0, 1, 3]
    assert list(frame["iteration"]) == [7, 0, 8]
    assert list(frame["batch_reqs"]) == [45, 0, 44]
    assert list(frame["tokens"]) == [8000, 0, 44]
    assert list(frame["dummy"]) == [False, True, False]
    assert list(frame["elapsed_ms"]) == [1125.94, 0.05, 40.0]
    assert math.isnan(frame["kv_usage_pct"].iloc[0]) and frame["kv_usage_pct"].iloc[2] == 12.5


# ---------------------------------------------------------------------------------------------
# Errors and cut-short logs
# ---------------------------------------------------------------------------------------------


def test_garbled_stats_line_names_file_and_line(tmp_path):
    source = GPU / "server_mns64.log"
    lines = split_lines(read_log(source))
    n = next(i for i, l in enumerate(lines) if "Running: 64 reqs" in l)
    lines[n] = lines[n].replace("Running: 64 reqs", "Running: 6x4 reqs")
    path = tmp_path / "server.log"
    text = "\n".join(lines) + "\n"
    with pytest.raises(LogParseError) as err:
        parse_stats(text, path)
    assert (err.value.path, err.value.line) == (path, n + 1)
    assert f"{path}:{n + 1}:" in str(err.value)


def test_cut_short_log_is_parsed_as_far_as_it_goes():
    text = read_log(GPU / "server_mns64.log")
    lines = split_lines(text)
    last_stats = max(i for i, l in enumerate(lines) if "Avg prompt throughput" in l)
    cut = "\n".join(lines[:last_stats]) + "\n" + lines[last_stats][: len(lines[last_stats]) // 2]
    full, partial = parse_stats(text), parse_stats(cut)
    assert len(partial) == len(full) - 1
    assert partial.equals(full.iloc[:-1])
    # the same half line inside the log, followed by more lines, is an error
    with pytest.raises(LogParseError):
        parse_stats(cut + "\nINFO 11-30 06:00:00 [x.py:1] later\n")
    # and a cut-off startup just lacks the later facts
    early = "\n".join(lines[: next(i for i, l in enumerate(lines) if "KV cache size" in l)])
    r = parse_startup(early)
    assert r.weights_gib is not None and r.kv_cache_tokens is None and r.healthy_at is None


def test_text_without_vllm_lines_is_an_error():
    for text in ("", "hello\nworld\n", '{"duration": 1}'):
        with pytest.raises(LogParseError) as err:
            parse_stats(text, "x.log")
        assert err.value.line is None and "x.log" in str(err.value)
    with pytest.raises(LogParseError):
        parse_startup("Traceback (most recent call last):\n", "x.log")
    with pytest.raises(LogParseError):
        parse_iterations("", "x.log")


def test_garbled_iteration_line_names_the_line():
    text = ITERATION_TEXT.replace("43 generation tokens", "forty generation tokens") + "INFO 07-08 00:00:09 [a.py:1] end\n"
    with pytest.raises(LogParseError) as err:
        parse_iterations(text, "it.log")
    assert err.value.line == 1


def test_a_slice_of_access_lines_only_is_a_log_without_stats_and_garbage_is_not_a_log():
    """With several API servers (data parallel), vLLM turns its stats lines off; a short pass's slice of the
    session log then holds only uvicorn's access lines: no stats, not an error. Text with neither is refused."""
    from inference_wall.records.logs import parse_stats, scan_log

    access = ('INFO:     127.0.0.1:54694 - "GET /metrics HTTP/1.1" 200 OK\n'
              '(APIServer pid=7) INFO:     127.0.0.1:54720 - "POST /v1/completions HTTP/1.1" 200 OK\n')
    assert len(parse_stats(access)) == 0 and len(scan_log(access)) == 2
    with pytest.raises(LogParseError, match="no vLLM log line"):
        scan_log("Traceback (most recent call last):\nOSError: nothing here\n")
