"""Parsers for what vLLM writes: the server log, `vllm bench serve` results, `/metrics` text (through prometheus_client).

Pure functions of text (or of one JSON file, for `parse_bench`): no process, no network.
Tolerant across vLLM 0.18 to 0.33 and across its CUDA and CPU builds; the variants met are
listed next to each pattern. What a log line looks like in these versions:

    (EngineCore_DP0 pid=165) INFO 11-30 05:02:25 [kv_cache_utils.py:1733] GPU KV cache size: ...
    ^ process tag, optional   ^ level, month-day time (no year)  ^ source    ^ message

with optional ANSI colour codes anywhere, an optional outside prefix (docker's
`2026-04-19 12:10:56.886 | `), optional fractional seconds, and the older `file.py:123]`
source form without the opening bracket. Lines that uvicorn prints (`INFO:     Application
startup complete.`), progress bars and tracebacks carry no timestamp: they are kept as lines
but have no time of their own.

Error policy (all raise `inference_wall.errors.LogParseError(path, line, problem)`):
- a text with no recognisable vLLM log line at all: line None;
- a line that announces a known record (a stats line, an iteration line) but whose numbers do
  not parse: that line's number (1-based, counting `\\n` only, as `grep -n` does);
- a bench result that is not valid JSON: the line json reports, the column in the message.
A log that is merely cut short is not an error: the last line, when the text does not end with a
newline, may be a partial record and is skipped. Startup facts that the log never reached are
None; `StartupReport.require(...)` turns the missing ones into an error when a caller needs them.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from inference_wall.errors import LogParseError

# ---------------------------------------------------------------------------------------------
# Lines
# ---------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PROCESS = re.compile(r"\((?P<process>[A-Za-z][\w.-]*) pid=(?P<pid>\d+)\)")
_PREFIX = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) "
    r"(?P<month>\d\d)-(?P<day>\d\d) (?P<hour>\d\d):(?P<minute>\d\d):(?P<second>\d\d)(?:[.,](?P<frac>\d+))? "
    r"\[?(?P<source>[\w./<>-]+:\d+)\] ?(?P<message>.*)$"
)
# How far into a line the vLLM prefix may start: room for a process tag and an outside timestamp,
# not so far that a message quoting another log line would count.
_PREFIX_MAX_START = 100


@dataclass(frozen=True)
class LogLine:
    """One line of a server log. `t_s` is None for lines without a vLLM timestamp."""

    lineno: int  # 1-based
    raw: str  # the line without its newline, ANSI codes removed
    t_s: float | None = None  # seconds since the log's first timestamped line
    stamp: str | None = None  # the timestamp as printed, e.g. "11-30 05:02:25"
    level: str | None = None
    process: str | None = None  # e.g. "EngineCore_DP0", "APIServer"
    source: str | None = None  # e.g. "loggers.py:271"
    message: str = ""  # the text after the source; the whole line when there is no prefix

    @property
    def is_vllm(self) -> bool:
        return self.t_s is not None


class _Clock:
    """Turns year-less `MM-DD HH:MM:SS` stamps into seconds since the first one.

    Midnight and month ends are handled by the calendar; a jump back by more than half a year is
    taken as New Year. The base year is a leap year so that a log starting on 02-29 parses.
    """

    def __init__(self) -> None:
        self.year = 2000
        self.first: _dt.datetime | None = None
        self.last: _dt.datetime | None = None

    def seconds(self, month: int, day: int, hour: int, minute: int, second: int, frac: str | None) -> float:
        when = _dt.datetime(self.year, month, day, hour, minute, second)
        if self.last is not None and when < self.last - _dt.timedelta(days=183):
            self.year += 1
            when = _dt.datetime(self.year, month, day, hour, minute, second)
        if self.first is None:
            self.first = when
        self.last = max(when, self.last) if self.last is not None else when
        offset = (when - self.first).total_seconds()
        return offset + (float("0." + frac) if frac else 0.0)


def read_log(path: str | Path) -> str:
    """A log file's text with its line ends untouched (`Path.read_text` would turn the progress
    bars' bare `\r`s into line breaks and shift every line number after them)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        return f.read()


def split_lines(text: str) -> list[str]:
    """Lines as `grep -n` counts them: split on `\\n` only (progress bars keep their `\\r`s)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


# uvicorn's access log line: `INFO:     127.0.0.1:54694 - "GET /metrics HTTP/1.1" 200 OK`
_ACCESS = re.compile(r'^(?:\(\w+ pid=\d+\) )?INFO:\s+\S+:\d+ - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3}')


def scan_log(text: str, path: str | Path | None = None) -> list[LogLine]:
    """Every line of a server log, with its time, level, process and message where it has them.

    Raises LogParseError (line None) when no line at all looks like vLLM's logger output (or uvicorn's access
    log, which vLLM's API server writes).
    """
    clock = _Clock()
    out: list[LogLine] = []
    found = False
    for lineno, line in enumerate(split_lines(text), 1):
        clean = _ANSI.sub("", line)
        m = _PREFIX.search(clean)
        if m is None or m.start() > _PREFIX_MAX_START:
            # uvicorn's access lines are the server's own too: with several API servers (data parallel) vLLM
            # turns its stats lines off, and a short pass's slice of the log can hold nothing else
            found = found or bool(_ACCESS.match(clean))
            out.append(LogLine(lineno, clean, message=clean, process=_process_of(clean)))
            continue
        try:
            t_s = clock.seconds(*(int(m[k]) for k in ("month", "day", "hour", "minute", "second")), m["frac"])
        except ValueError as exc:  # e.g. 02-30: not a date
            raise LogParseError(path, lineno, f"bad timestamp {m['month']}-{m['day']}: {exc}") from None
        found = True
        head = clean[: m.start()]
        out.append(
            LogLine(
                lineno,
                clean,
                t_s=t_s,
                stamp=f"{m['month']}-{m['day']} {m['hour']}:{m['minute']}:{m['second']}",
                level=m["level"],
                process=_process_of(head),
                source=m["source"],
                message=m["message"],
            )
        )
    if not found:
        raise LogParseError(path, None, "no vLLM log line found (expected lines like 'INFO 11-30 05:02:25 [file.py:12] ...')")
    return out


def _process_of(text: str) -> str | None:
    m = _PROCESS.search(text[:_PREFIX_MAX_START])
    return m["process"] if m else None


def _is_cut_short(text: str, line: LogLine, n_lines: int) -> bool:
    """True for the last line of a text that does not end with a newline: a write cut short."""
    return line.lineno == n_lines and not text.endswith("\n")


# ---------------------------------------------------------------------------------------------
# Startup
# ---------------------------------------------------------------------------------------------

_NUM = r"(\d[\d,]*(?:\.\d+)?)"

# Each pattern is searched in every message; the first line that matches wins (with tensor
# parallelism every worker prints its own memory lines: the first is one worker's figure).
_STARTUP_PATTERNS: dict[str, re.Pattern[str]] = {
    # "Initializing a V1 LLM engine (v0.22.1) with config: ..."; older: "vLLM API server version 0.18.0";
    # the ASCII-art banner (0.11+): "...  version 0.22.1".
    "vllm_version": re.compile(
        r"(?:LLM engine \(v|vLLM API server version |^\W*version |\s{2}version )(\d+\.\d+(?:\.\d+)?[\w.+-]*)"
    ),
    # "Model loading took 8.61 GiB memory and 0.622406 seconds" (0.22); "Model loading took 8.6123 GiB
    # and 0.622406 seconds" (other 0.1x-0.3x); "Model loading took 8.61 GB and 0.6 seconds" (older).
    "model_loading": re.compile(r"Model loading took " + _NUM + r" (GiB|GB)(?: memory)? and " + _NUM + r" s"),
    # V0 and some platform runners: "Loading model weights took 8.61 GB".
    "model_weights": re.compile(r"Loading model weights took " + _NUM + r" (GiB|GB)"),
    # "Available KV cache memory: 115.1 GiB" (format_gib, 0.2x); "...: 115.10 GiB" (%.2f); an optional
    # parenthesised breakdown may follow (some builds).
    "kv_cache_memory": re.compile(r"Available KV cache memory: (-?" + _NUM[1:-1] + r") (GiB|GB)"),
    # The CPU build with --kv-cache-memory-bytes (0.32.0): "Explicitly set (0.25/20.21) GiB for KV cache on node 0."
    "kv_cache_memory_cpu": re.compile(r"Explicitly set \(" + _NUM + r"/[\d.]+\) GiB for KV cache"),
    # "GPU KV cache size: 3,744,989 tokens"; the CPU build prints "CPU KV cache size"; newer builds may
    # print the concurrency on the same line (", Maximum concurrency for ...").
    "kv_cache_size": re.compile(r"\b([A-Z]{2,5}) KV cache size: " + _NUM + r" tokens"),
    # "Maximum concurrency for 262,144 tokens per request: 14.29x"
    "max_concurrency": re.compile(r"Maximum concurrency for " + _NUM + r" tokens per request: " + _NUM + r"x"),
    # "torch.compile took 53.91 s in total" (0.2x+); "torch.compile takes 92.20 s in total" (older).
    "torch_compile": re.compile(r"torch\.compile (?:took|takes) " + _NUM + r" s in total"),
    # "Initial profiling/warmup run took 97.90 s" (0.2x)
    "profile_warmup": re.compile(r"Initial profiling/warmup run took " + _NUM + r" s"),
    # "Graph capturing finished in 4 secs, took 0.19 GiB"
    "graph_capture": re.compile(r"Graph capturing finished in " + _NUM + r" secs?, took (-?" + _NUM[1:-1] + r") (GiB|GB)"),
    # "init engine (profile, create kv cache, warmup model) took 172.38 s (compilation: 53.91 s)" (0.2x);
    # "... took 94.98 seconds" (older); "init engine took 22.68 s" (some builds).
    "init_engine": re.compile(r"init engine(?: \([^)]*\))? took " + _NUM + r" (?:s|secs?|seconds)\b"),
    # "Using max model len 262144"
    "max_model_len": re.compile(r"Using max model len " + _NUM),
    # Hybrid models (0.2x): "Setting attention block size to 528 tokens to ensure that attention page size is
    # >= mamba page size."
    "block_size": re.compile(r"Setting attention block size to " + _NUM + r" tokens"),
    "async_scheduling": re.compile(r"Asynchronous scheduling is (enabled|disabled)"),
    "max_num_batched_tokens": re.compile(r"max_num_batched_tokens=" + _NUM),
    # "Overriding num_gpu_blocks=7302 with num_gpu_blocks_override=586"
    "num_gpu_blocks_override": re.compile(r"Overriding num_gpu_blocks=" + _NUM + r" with num_gpu_blocks_override=" + _NUM),
}

_STARTUP_KEYWORDS = ("took", "takes", "KV cache", "version", "concurrency", "max model len", "block size",
                     "num_gpu_blocks", "scheduling is", "max_num_batched_tokens")  # cheap pre-filter
_HEALTHY_MARKERS = ("Application startup complete", "Starting vLLM server on", "Starting vLLM API server")

_WHERE_TO_LOOK = {
    "vllm_version": "'Initializing a V1 LLM engine (vX.Y.Z)' or the banner",
    "weights_gib": "'Model loading took X GiB'",
    "model_load_s": "'Model loading took ... and Y seconds'",
    "kv_cache_gib": "'Available KV cache memory: X GiB'",
    "kv_cache_tokens": "'GPU KV cache size: N tokens' (or CPU)",
    "kv_cache_device": "'GPU KV cache size: N tokens' (or CPU)",
    "max_concurrency": "'Maximum concurrency for N tokens per request: Xx'",
    "max_concurrency_tokens_per_request": "'Maximum concurrency for N tokens per request: Xx'",
    "torch_compile_s": "'torch.compile took X s in total' (absent with --enforce-eager)",
    "graph_capture_s": "'Graph capturing finished in N secs' (absent with --enforce-eager and on CPU)",
    "graph_capture_gib": "'Graph capturing finished in N secs, took X GiB'",
    "init_engine_s": "'init engine (profile, create kv cache, warmup model) took X s'",
    "healthy_at": "'Application startup complete.'",
}


def _num(s: str) -> float:
    return float(s.replace(",", ""))


@dataclass
class StartupReport:
    """What a server log says about its start. Every fact is None when the log does not say it.

    Times are seconds; memory is GiB (vLLM divides by 2**30 even where older versions print "GB").
    `healthy_at` is seconds since `first_ts` (the first timestamped line) at which the API server
    said it was ready: uvicorn's "Application startup complete." has no timestamp of its own, so it
    takes the time of the last timestamped line before it.
    """

    path: str | None = None
    first_ts: str | None = None  # the first timestamp as printed ("MM-DD HH:MM:SS"; vLLM prints no year)
    vllm_version: str | None = None
    weights_gib: float | None = None
    model_load_s: float | None = None
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = None
    kv_cache_device: str | None = None  # "GPU", "CPU", ...: the word before "KV cache size"
    max_concurrency: float | None = None
    max_concurrency_tokens_per_request: int | None = None
    max_model_len: int | None = None
    block_size: int | None = None  # tokens per attention page, where the log says (hybrid models)
    num_gpu_blocks: int | None = None  # the pool's own size, where the log says (with an override)
    num_gpu_blocks_override: int | None = None
    torch_compile_s: float | None = None
    profile_warmup_s: float | None = None
    graph_capture_s: float | None = None
    graph_capture_gib: float | None = None
    init_engine_s: float | None = None
    init_engine_compile_s: float | None = None  # the "(compilation: X s)" part, where printed
    healthy_at: float | None = None
    # vLLM 0.11+ logs "Asynchronous scheduling is enabled/disabled.": with it on, the engine schedules step n+1
    # before step n's result is back, so the iteration log's elapsed time is the wait for a result, not a step
    async_scheduling: bool | None = None
    max_num_batched_tokens: int | None = None  # "Chunked prefill is enabled with max_num_batched_tokens=N."

    def require(self, *names: str) -> "StartupReport":
        """Return self if every named fact is known; else raise LogParseError naming the missing ones.

        With no names, requires the facts every completed start of a stock server reports
        (version, KV cache size, concurrency, init time, readiness).
        """
        known = {f.name for f in fields(self)}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"StartupReport has no field(s) {unknown}")
        wanted = names or ("vllm_version", "kv_cache_tokens", "max_concurrency", "init_engine_s", "healthy_at")
        missing = [n for n in wanted if getattr(self, n) is None]
        if missing:
            hints = "; ".join(f"{n}: look for {_WHERE_TO_LOOK.get(n, n)}" for n in missing)
            raise LogParseError(self.path, None, f"the log never reports {', '.join(missing)} ({hints}); did the server finish starting?")
        return self

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def parse_startup(text: str, path: str | Path | None = None) -> StartupReport:
    """The startup facts of one `vllm serve` log (see StartupReport). Missing facts are None."""
    lines = scan_log(text, path)
    report = StartupReport(path=str(path) if path is not None else None)
    report.first_ts = next(line.stamp for line in lines if line.is_vllm)
    last_t: float | None = None
    for line in lines:
        if line.is_vllm:
            last_t = line.t_s
        msg = line.message
        if report.healthy_at is None and last_t is not None and any(k in msg for k in _HEALTHY_MARKERS):
            # The uvicorn line comes after "Starting vLLM server on"; both mean ready; take the first.
            report.healthy_at = last_t
        if not any(k in msg for k in _STARTUP_KEYWORDS):
            continue
        _startup_line(report, msg)
    return report


def _startup_line(r: StartupReport, msg: str) -> None:
    p = _STARTUP_PATTERNS
    if r.vllm_version is None and (m := p["vllm_version"].search(msg)):
        r.vllm_version = m[1]
    if r.weights_gib is None and (m := p["model_loading"].search(msg)):
        r.weights_gib, r.model_load_s = _num(m[1]), _num(m[3])
    if r.weights_gib is None and (m := p["model_weights"].search(msg)):
        r.weights_gib = _num(m[1])
    if r.kv_cache_gib is None and (m := p["kv_cache_memory"].search(msg) or p["kv_cache_memory_cpu"].search(msg)):
        r.kv_cache_gib = _num(m[1])
    if r.kv_cache_tokens is None and (m := p["kv_cache_size"].search(msg)):
        r.kv_cache_device, r.kv_cache_tokens = m[1], int(_num(m[2]))
    if r.max_concurrency is None and (m := p["max_concurrency"].search(msg)):
        r.max_concurrency_tokens_per_request, r.max_concurrency = int(_num(m[1])), _num(m[2])
    if r.torch_compile_s is None and (m := p["torch_compile"].search(msg)):
        r.torch_compile_s = _num(m[1])
    if r.profile_warmup_s is None and (m := p["profile_warmup"].search(msg)):
        r.profile_warmup_s = _num(m[1])
    if r.graph_capture_s is None and (m := p["graph_capture"].search(msg)):
        r.graph_capture_s, r.graph_capture_gib = _num(m[1]), _num(m[2])
    if r.init_engine_s is None and (m := p["init_engine"].search(msg)):
        r.init_engine_s = _num(m[1])
        if c := re.search(r"\(compilation: " + _NUM + r" s", msg):
            r.init_engine_compile_s = _num(c[1])
    if r.max_model_len is None and (m := p["max_model_len"].search(msg)):
        r.max_model_len = int(_num(m[1]))
    if r.block_size is None and (m := p["block_size"].search(msg)):
        r.block_size = int(_num(m[1]))
    if r.max_num_batched_tokens is None and (m := p["max_num_batched_tokens"].search(msg)):
        r.max_num_batched_tokens = int(_num(m[1]))
    if r.async_scheduling is None and (m := p["async_scheduling"].search(msg)):
        r.async_scheduling = m[1] == "enabled"
    if r.num_gpu_blocks_override is None and (m := p["num_gpu_blocks_override"].search(msg)):
        r.num_gpu_blocks, r.num_gpu_blocks_override = int(_num(m[1])), int(_num(m[2]))


# ---------------------------------------------------------------------------------------------
# Periodic stats lines
# ---------------------------------------------------------------------------------------------

STATS_COLUMNS = [
    "t_s",  # seconds since the log's first timestamp
    "line",  # line number in the log
    "engine",  # "Engine 000:" -> 0; "N Engines Aggregated:" -> -1; no prefix -> 0
    "prompt_tok_s",
    "gen_tok_s",
    "running",
    "waiting",
    "kv_usage_pct",  # NaN where printed as "n/a"
    "prefix_hit_pct",  # NaN when absent or "n/a"
    "preemptions",  # preemptions in the interval; vLLM prints the field only when > 0
    "kv_device",  # the word before "KV cache usage": "GPU" (also on the CPU build), "CPU", ...
]

_STATS_TRIGGER = "Avg prompt throughput:"
_PCT = r"(\d+(?:\.\d+)?%|n/a|nan%)"
# The stats line (vllm/v1/metrics/loggers.py, LoggingStatLogger.log), e.g. 0.22.1:
#   Engine 000: Avg prompt throughput: 1638.4 tokens/s, Avg generation throughput: 819.2 tokens/s,
#   Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%
# Variants handled: no "Engine 000: " prefix; "N Engines Aggregated: " (data parallel); the optional
# parts appended only when they apply ("Deferred: N reqs", "Preemptions: N", "Corrupted: N reqs",
# "External prefix cache hit rate", "MM cache hit rate"); "n/a" for usage and hit rate; the V0
# "Swapped: N reqs" and trailing "CPU KV cache usage" (swap space), ignored here.
_STATS_FIELDS = {
    "prompt_tok_s": re.compile(r"Avg prompt throughput: (\S+) tokens/s"),
    "gen_tok_s": re.compile(r"Avg generation throughput: (\S+) tokens/s"),
    "running": re.compile(r"Running: (\S+) reqs?"),
    "waiting": re.compile(r"(?:Waiting|Pending): (\S+) reqs?"),  # V0 said "Pending"
}
_STATS_KV = re.compile(r"(?:\b([A-Z]{2,5}) )?KV cache usage: " + _PCT)
_STATS_PREFIX_HIT = re.compile(r"(?<![a-z] )\bPrefix cache (?:token )?hit rate: " + _PCT)
_STATS_PREEMPTIONS = re.compile(r"Preemptions: (\d+)")
_STATS_ENGINE = re.compile(r"(?:Engine (\d+)|(\d+) Engines Aggregated): Avg prompt")


def _pct(s: str | None) -> float:
    if s is None or s in ("n/a", "nan%"):
        return math.nan
    return float(s.rstrip("%"))


def parse_stats(text: str, path: str | Path | None = None) -> pd.DataFrame:
    """One row per periodic stats line ("Avg prompt throughput: ..."), columns STATS_COLUMNS.

    vLLM prints the line every VLLM_LOG_STATS_INTERVAL seconds (10 by default) and only while it is not
    idle, so rows are a sample of the engine state, not a trace. The throughputs are averages
    over the interval before the line; running/waiting/KV usage are the state at the last step.
    A log that is cut short is parsed as far as it goes; a stats line whose numbers do not parse
    raises LogParseError with its line number.
    """
    lines = scan_log(text, path)
    rows = []
    for line in lines:
        msg = line.message
        if _STATS_TRIGGER not in msg:
            continue
        try:
            rows.append(_stats_row(line))
        except ValueError as exc:
            if _is_cut_short(text, line, len(lines)):
                break
            raise LogParseError(path, line.lineno, f"stats line does not parse ({exc}): {msg[:200]!r}") from None
    frame = pd.DataFrame(rows, columns=STATS_COLUMNS)
    return frame.astype(
        {"t_s": float, "line": int, "engine": int, "prompt_tok_s": float, "gen_tok_s": float,
         "running": int, "waiting": int, "kv_usage_pct": float, "prefix_hit_pct": float,
         "preemptions": int, "kv_device": object}
    )


def _stats_row(line: LogLine) -> dict[str, Any]:
    msg = line.message
    row: dict[str, Any] = {"t_s": line.t_s if line.t_s is not None else math.nan, "line": line.lineno}
    for name, pattern in _STATS_FIELDS.items():
        m = pattern.search(msg)
        if m is None:
            raise ValueError(f"no {name}")
        value = float(m[1])  # ValueError on garbage
        if name in ("running", "waiting"):
            if not value.is_integer():
                raise ValueError(f"{name} is not a count: {m[1]}")
            value = int(value)
        row[name] = value
    kv = _STATS_KV.search(msg)
    if kv is None:
        raise ValueError("no KV cache usage")
    row["kv_device"] = kv[1]
    row["kv_usage_pct"] = _pct(kv[2])
    hit = _STATS_PREFIX_HIT.search(msg)
    row["prefix_hit_pct"] = _pct(hit[1] if hit else None)
    pre = _STATS_PREEMPTIONS.search(msg)
    row["preemptions"] = int(pre[1]) if pre else 0
    eng = _STATS_ENGINE.search(msg)
    row["engine"] = int(eng[1]) if eng and eng[1] is not None else (-1 if eng else 0)
    return row


def count_preemptions(text: str, path: str | Path | None = None) -> int:
    """Preemptions the log reports: the sum of the stats lines' "Preemptions: N" fields.

    V1 (all of 0.18-0.33) logs no line per preemption; the stats line carries the count for its
    interval, and only when it is > 0 (in versions that print it at all, so 0 can also mean "this
    version does not say": prefer the `vllm:num_preemptions_total` counter from /metrics where one
    was taken). V0's "... is preempted by PreemptionMode..." warnings are counted too.
    """
    stats = parse_stats(text, path)
    v0 = sum("is preempted by PreemptionMode" in line.message for line in scan_log(text, path))
    return int(stats["preemptions"].sum()) + v0


# ---------------------------------------------------------------------------------------------
# Per-iteration lines (--enable-logging-iteration-details)
# ---------------------------------------------------------------------------------------------

ITERATION_COLUMNS = [
    "t_s",
    "line",
    "engine",  # data-parallel rank: from "EngineCore_DP<k>" or "Engine 00k:"; 0 otherwise
    "iteration",  # vLLM's own step counter (per engine core)
    "ctx_reqs",  # requests in prefill (context) phase this step
    "ctx_tokens",
    "gen_reqs",  # requests in decode (generation) phase this step
    "gen_tokens",
    "batch_reqs",  # ctx_reqs + gen_reqs
    "tokens",  # ctx_tokens + gen_tokens
    "elapsed_ms",
    "dummy",  # a data-parallel dummy step
    "kv_usage_pct",  # NaN unless the line carries it
]

# vllm/v1/engine/core.py, EngineCore.log_iteration_details, behind
# `--enable-logging-iteration-details` (ObservabilityConfig.enable_logging_iteration_details;
# present in 0.22.1's config dump), e.g.
#   Iteration(7): 2 context requests, 7957 context tokens, 43 generation requests,
#   43 generation tokens, iteration elapsed time: 1125.94 ms
# Variants: a " (dummy)" suffix for DP dummy steps; 0.32.0 logs it from the API server
# (loggers.py:199) with an "Engine 000: " prefix and a trailing ", CPU KV cache usage: 0.4%"
# (GPU on the CUDA build). In 0.32.0 the lines reach the log in bursts, so many steps share one
# timestamp: order steps by `iteration`, time them by `elapsed_ms`, not by `t_s`.
_ITERATION = re.compile(
    r"(?:Engine (?P<engine>\d+): )?Iteration\((?P<iteration>\d+)\): "
    r"(?P<ctx_reqs>\d+) context requests?, (?P<ctx_tokens>\d+) context tokens?, "
    r"(?P<gen_reqs>\d+) generation requests?, (?P<gen_tokens>\d+) generation tokens?, "
    r"iteration elapsed time: (?P<elapsed_ms>\d+(?:\.\d+)?) ms(?P<dummy> \(dummy\))?"
    r"(?:, (?:[A-Z]{2,5} )?KV cache usage: (?P<kv>\d+(?:\.\d+)?)%)?"
)
_DP_RANK = re.compile(r"_DP(\d+)")


def parse_iterations(text: str, path: str | Path | None = None) -> pd.DataFrame:
    """One row per engine step from `--enable-logging-iteration-details` lines (ITERATION_COLUMNS).

    Without the flag the frame is empty (with the columns). `elapsed_ms` is what vLLM measures
    around waiting for the step's model output; under async scheduling that is not the whole
    step time. A line that starts like an iteration record but does not parse raises
    LogParseError, unless it is the cut-short last line of the text.
    """
    lines = scan_log(text, path)
    rows = []
    for line in lines:
        msg = line.message
        if "Iteration(" not in msg or "context requests" not in msg:
            continue
        m = _ITERATION.search(msg)
        if m is None:
            if _is_cut_short(text, line, len(lines)):
                break
            raise LogParseError(path, line.lineno, f"iteration line does not parse: {msg[:200]!r}")
        engine = m["engine"]
        if engine is None and line.process and (dp := _DP_RANK.search(line.process)):
            engine = dp[1]
        ctx_reqs, gen_reqs = int(m["ctx_reqs"]), int(m["gen_reqs"])
        ctx_tokens, gen_tokens = int(m["ctx_tokens"]), int(m["gen_tokens"])
        rows.append(
            {
                "t_s": line.t_s if line.t_s is not None else math.nan,
                "line": line.lineno,
                "engine": int(engine) if engine is not None else 0,
                "iteration": int(m["iteration"]),
                "ctx_reqs": ctx_reqs,
                "ctx_tokens": ctx_tokens,
                "gen_reqs": gen_reqs,
                "gen_tokens": gen_tokens,
                "batch_reqs": ctx_reqs + gen_reqs,
                "tokens": ctx_tokens + gen_tokens,
                "elapsed_ms": float(m["elapsed_ms"]),
                "dummy": m["dummy"] is not None,
                "kv_usage_pct": float(m["kv"]) if m["kv"] else math.nan,
            }
        )
    frame = pd.DataFrame(rows, columns=ITERATION_COLUMNS)
    ints = ["line", "engine", "iteration", "ctx_reqs", "ctx_tokens", "gen_reqs", "gen_tokens", "batch_reqs", "tokens"]
    return frame.astype({**{c: int for c in ints}, "t_s": float, "elapsed_ms": float, "dummy": bool, "kv_usage_pct": float})


# ---------------------------------------------------------------------------------------------
# vllm bench serve --save-result
# ---------------------------------------------------------------------------------------------

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
_LATENCY_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")

REQUEST_COLUMNS = [
    "request",  # index in the result's arrays
    "start_s",  # start offset from the first request (NaN if the file has no start_times)
    "input_len",
    "output_len",
    "ttft_ms",
    "itl_mean_ms",
    "itl_ms",  # list of inter-token latencies, ms
    "e2el_ms",  # the bench's `latencies` where saved (0.3x), else ttft + sum(itl)
    "queue_ms",  # the bench's `queue_times` where saved (0.3x), else NaN
    "ok",  # no error recorded
    "error",
]


@dataclass
class BenchResult:
    """One `vllm bench serve --save-result` JSON file.

    `latency_ms[metric][stat]` for metric in ttft/tpot/itl/e2el and stat in mean, median, std,
    p50, p90, p99, ... (whichever percentiles were asked for); "median" and "p50" stand for each
    other when only one was written. `requests` is one row per request (REQUEST_COLUMNS) when
    the file was saved with --save-detailed, else None. `raw` is the whole JSON object.
    """

    path: str | None
    duration_s: float
    completed: int
    failed: int | None
    num_prompts: int | None
    request_rate: float | None  # math.inf for "inf"
    max_concurrency: int | None
    total_input_tokens: int | None
    total_output_tokens: int | None
    request_throughput: float | None
    output_throughput: float | None
    total_token_throughput: float | None
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    requests: pd.DataFrame | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    def ms(self, metric: str, stat: str) -> float:
        """E.g. ms("itl", "p99"); NaN when the file does not have it."""
        return self.latency_ms.get(metric, {}).get(stat, math.nan)


def parse_bench(path: str | Path) -> BenchResult:
    """Read one `vllm bench serve --save-result` file (with or without --save-detailed)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LogParseError(path, exc.lineno, f"not valid JSON at column {exc.colno}: {exc.msg}") from None
    return bench_from_dict(raw, path)


def bench_from_dict(raw: Any, path: str | Path | None = None) -> BenchResult:
    """The BenchResult of an already-loaded result object (see parse_bench)."""
    if not isinstance(raw, dict):
        raise LogParseError(path, None, f"a bench result is a JSON object, not {type(raw).__name__}")
    for key in ("duration", "completed"):
        if not isinstance(raw.get(key), (int, float)) or isinstance(raw.get(key), bool):
            raise LogParseError(path, None, f"bench result has no numeric '{key}'")

    def opt(key: str, kind: type = float) -> Any:
        value = raw.get(key)
        if value is None or isinstance(value, bool):
            return None
        if kind is int and isinstance(value, (int, float)):
            return int(value)
        return _float_or_inf(value)

    latency: dict[str, dict[str, float]] = {}
    for key, value in raw.items():
        m = _LATENCY_KEY.match(key)
        if m and isinstance(value, (int, float)):
            latency.setdefault(m[2], {})[m[1]] = float(value)
    for stats in latency.values():
        if "median" in stats and "p50" not in stats:
            stats["p50"] = stats["median"]
        if "p50" in stats and "median" not in stats:
            stats["median"] = stats["p50"]

    return BenchResult(
        path=str(path) if path is not None else None,
        duration_s=float(raw["duration"]),
        completed=int(raw["completed"]),
        failed=opt("failed", int),
        num_prompts=opt("num_prompts", int),
        request_rate=opt("request_rate"),
        max_concurrency=opt("max_concurrency", int),
        total_input_tokens=opt("total_input_tokens", int),
        total_output_tokens=opt("total_output_tokens", int),
        request_throughput=opt("request_throughput"),
        output_throughput=opt("output_throughput"),
        total_token_throughput=opt("total_token_throughput"),
        latency_ms=latency,
        requests=_bench_requests(raw, path),
        raw=raw,
    )


def _float_or_inf(value: Any) -> float | None:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)  # "inf" -> inf
        except ValueError:
            return None
    return None


def _bench_requests(raw: dict[str, Any], path: str | Path | None) -> pd.DataFrame | None:
    """Per-request rows from the --save-detailed arrays; None when the file has none."""
    if not isinstance(raw.get("ttfts"), list):
        return None
    n = len(raw["ttfts"])
    arrays = {
        k: raw.get(k)
        for k in ("input_lens", "output_lens", "ttfts", "itls", "errors", "start_times", "latencies", "queue_times")
    }
    for key, value in arrays.items():
        if value is not None and (not isinstance(value, list) or len(value) != n):
            raise LogParseError(path, None, f"detailed array '{key}' has {len(value) if isinstance(value, list) else 'no'} entries, ttfts has {n}")
    itls = arrays["itls"] or [[] for _ in range(n)]
    errors = arrays["errors"] or ["" for _ in range(n)]
    starts, latencies, queues = arrays["start_times"], arrays["latencies"], arrays["queue_times"]
    first = min((s for s in starts if s is not None), default=math.nan) if starts else math.nan
    rows = []
    for i in range(n):
        itl_ms = [1000.0 * x for x in (itls[i] or [])]
        ttft_ms = _ms(raw["ttfts"][i])
        rows.append(
            {
                "request": i,
                "start_s": (starts[i] - first) if starts and starts[i] is not None else math.nan,
                "input_len": (arrays["input_lens"] or [None] * n)[i],
                "output_len": (arrays["output_lens"] or [None] * n)[i],
                "ttft_ms": ttft_ms,
                "itl_mean_ms": float(np.mean(itl_ms)) if itl_ms else math.nan,
                "itl_ms": itl_ms,
                "e2el_ms": _ms(latencies[i]) if latencies else ttft_ms + sum(itl_ms),
                "queue_ms": _ms(queues[i]) if queues else math.nan,
                "ok": not errors[i],
                "error": errors[i] or "",
            }
        )
    frame = pd.DataFrame(rows, columns=REQUEST_COLUMNS)
    return frame.astype(
        {"input_len": "Int64", "output_len": "Int64", "start_s": float, "ttft_ms": float, "e2el_ms": float, "queue_ms": float}
    )


def _ms(seconds: Any) -> float:
    return 1000.0 * float(seconds) if isinstance(seconds, (int, float)) else math.nan


# ---------------------------------------------------------------------------------------------
# Prometheus /metrics text
# ---------------------------------------------------------------------------------------------

def iter_metric_samples(text: str, path: str | Path | None = None) -> Iterator[tuple[str, dict[str, str], float]]:
    """(sample name, labels, value) for every sample of a Prometheus text exposition, as parsed by
    prometheus_client's own parser (the library vLLM exports its metrics with). Sample names are as
    written: prometheus_client adds `_total` to a counter's samples that lack it; that is undone here.
    A line the parser refuses is an error naming that line."""
    from prometheus_client.parser import text_fd_to_metric_families

    lines = split_lines(text)
    written: set[str] = set()
    at = 0

    def feed():
        nonlocal at
        for at, line in enumerate(lines, 1):
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                written.add(re.split(r"[{\s]", stripped, maxsplit=1)[0])
            yield line

    try:
        for family in text_fd_to_metric_families(feed()):
            for sample in family.samples:
                name = sample.name
                if name not in written and name.endswith("_total") and name[: -len("_total")] in written:
                    name = name[: -len("_total")]
                yield name, dict(sample.labels), float(sample.value)
    except (ValueError, IndexError, KeyError) as e:
        detail = f" ({e})" if str(e) else ""
        line = lines[at - 1].strip() if 0 < at <= len(lines) else ""
        raise LogParseError(path, at or None, f"not a Prometheus sample line{detail}: {line[:200]!r}") from None


# The sample lines parse_metrics leaves out (histogram buckets, creation timestamps), removed before the parser sees
# them: they are most of a vLLM snapshot's lines, and parsing them only to drop them took two thirds of the time
# (tests/test_logs.py checks the sums are the same with and without them).
_UNSUMMED = re.compile(r"^[ \t]*[A-Za-z_:][\w:]*_(?:bucket|created)(?=[{ \t]).*$", re.MULTILINE)


def parse_metrics(text: str, path: str | Path | None = None) -> dict[str, float]:
    """Prometheus /metrics text -> {metric name: value summed over its label sets}.

    Histogram buckets (`*_bucket`) and prometheus_client's `*_created` timestamps are left out
    (a sum over `le`, or of creation times, means nothing); a histogram's
    `*_sum` and `*_count` are ordinary entries (see `histogram_sum_count`). Counters appear under
    their sample names (e.g. `vllm:num_preemptions_total`). Snapshots taken before and after a
    pass subtract with `metrics_delta`.
    """
    out: dict[str, float] = {}
    text = _UNSUMMED.sub("", text)  # blank lines keep the line numbers an error names
    for name, _labels, value in iter_metric_samples(text, path):
        if name.endswith(("_bucket", "_created")):
            continue
        out[name] = out.get(name, 0.0) + value
    return out


def histogram_sum_count(metrics: dict[str, float], name: str) -> tuple[float, float]:
    """(sum, count) of histogram `name` (e.g. "vllm:time_to_first_token_seconds"); NaNs if absent."""
    return metrics.get(f"{name}_sum", math.nan), metrics.get(f"{name}_count", math.nan)


def metrics_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """after - before for every name in `after` (a name new in `after` counts from 0)."""
    return {name: value - before.get(name, 0.0) for name, value in after.items()}
