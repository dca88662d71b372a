"""/metrics over time: a background thread polls a server's Prometheus text during a pass.

vLLM's stats line comes once a second and says nothing about preemptions in the versions that matter
(0.22 prints the field only when it is non-zero, and logs no line per preemption); `/metrics` carries the
running and waiting gauges, KV usage and the preemption counter at any moment. The poller keeps every
response as it came, with the wall-clock time before and after the request, as one xz-compressed JSON-lines
artefact (`<label>-metrics.jsonl.xz`): the raw record, parsed at book time like every other artefact. xz, not
gzip: one sample is 20-60 KB of text that changes in a few numbers, and xz's window spans many samples where
gzip's 32 KB does not (a 19 MB pass is 1.7 MB gzipped, 32 KB as xz).
"""
from __future__ import annotations

import hashlib
import json
import lzma
import math
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import requests

from .logs import parse_metrics
from .store import write_failed

SUFFIX = "-metrics.jsonl.xz"

# Gauges and counters read from each sample; the first name present wins (vLLM renamed a few).
SERIES = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),  # a fraction, 0-1
    "preemptions_total": ("vllm:num_preemptions_total",),
    "prompt_tokens_total": ("vllm:prompt_tokens_total",),
    "generation_tokens_total": ("vllm:generation_tokens_total",),
    "step_tokens_total": ("vllm:iteration_tokens_total_sum",),  # every token any engine step computed
    "steps_total": ("vllm:iteration_tokens_total_count",),
}
# The sample lines poll_frame reads: one sample is hundreds of lines (histogram buckets above all), and parsing
# them all made a pass's frame cost seconds; the other lines cannot change these names' sums (parse_metrics sums
# a name over its label sets, a sample's name is as written), so only these lines reach the parser.
_SERIES_LINES = re.compile(r"^[ \t]*(?:" + "|".join(re.escape(n) for names in SERIES.values() for n in names)
                           + r")(?:[{ \t].*)?$", re.MULTILINE)
POLL_COLUMNS = ["t", "t_s", "running", "waiting", "kv_usage_pct", "preemptions_total", "prompt_tokens_total",
                "generation_tokens_total", "step_tokens_total", "steps_total"]


class MetricsPoller:
    """Polls `url` + "/metrics" every `interval_s` in a daemon thread until `stop()`; each response is written
    at once as a line {"t0": epoch before, "t1": epoch after, "status": HTTP status or null, "text": body}.
    A failed request is recorded with its error instead of a body (the gap stays visible)."""

    def __init__(self, url: str, path: Path, interval_s: float = 0.5, timeout_s: float = 5.0):
        if interval_s <= 0:
            raise ValueError(f"poll interval must be positive, got {interval_s}")
        self.url, self.path, self.interval_s, self.timeout_s = url.rstrip("/") + "/metrics", Path(path), interval_s, timeout_s
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._file = None
        self._error: OSError | None = None  # a write that failed (a full disk): stop() removes the file, names it

    def start(self) -> "MetricsPoller":
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = lzma.open(self.path, "wt", preset=6)
        except OSError as e:
            self.path.unlink(missing_ok=True)
            raise write_failed(self.path, e) from None
        self._session = requests.Session()
        self._thread = threading.Thread(target=self._run, name="metrics-poller", daemon=True)
        self._thread.start()
        return self

    def _poll_once(self) -> None:
        t0 = time.time()
        record = {"t0": t0}
        try:
            r = self._session.get(self.url, timeout=self.timeout_s)
            record.update(t1=time.time(), status=r.status_code, text=r.text)
        except requests.RequestException as e:
            record.update(t1=time.time(), status=None, error=type(e).__name__ + ": " + str(e)[:200])
        self._file.write(json.dumps(record) + "\n")
        self.samples += 1

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                self._poll_once()
            except OSError as e:  # the file cannot take more: stop polling; stop() reports it
                self._error = e
                return
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - time.monotonic()))

    def stop(self) -> None:
        """Stops the thread after one last sample (the state at the pass's end) and closes the file."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=self.timeout_s + 5)
        try:
            if not self._thread.is_alive() and self._error is None:
                self._poll_once()
        except OSError as e:
            self._error = e
        try:
            self._file.close()
        except OSError as e:
            self._error = self._error or e
        self._session.close()
        self._thread = None
        if self._error is not None:  # a truncated poll file would pass for the pass's record: none is kept
            self.path.unlink(missing_ok=True)
            raise write_failed(self.path, self._error) from None


@contextmanager
def polling(url: str, path: Path, interval_s: float | None):
    """`with polling(server.url, pdir / artefact_name("bench"), 0.5):` around a pass; None: no poller."""
    if not interval_s:
        yield None
        return
    poller = MetricsPoller(url, path, interval_s).start()
    try:
        yield poller
    finally:
        poller.stop()


def artefact_name(label: str) -> str:
    return f"{label}{SUFFIX}"


# ---------------------------------------------------------------------------------------------
# Book side: the samples as a tidy frame
# ---------------------------------------------------------------------------------------------

def read_poll_file(path: Path) -> list[dict]:
    """The samples of a poll artefact (see read_polls; .xz, or .xz.gz past compress_large's limit); a truncated
    file names itself."""
    from .store import read_xz_text

    return read_polls(read_xz_text(path))


def read_polls(text: str) -> list[dict]:
    """The JSON lines of a poll artefact (a last line cut short by a crash is skipped)."""
    out = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            if i == len(lines) - 1:
                break
            raise ValueError(f"poll line {i + 1} is not JSON: {line[:80]!r}") from None
    return out


def _first(metrics: dict, names: tuple[str, ...]) -> float:
    for n in names:
        if n in metrics:
            return metrics[n]
    return math.nan


# The derived-table cache keys on logs.py and store.py; this module's own reading (SERIES, poll_frame) adds its digest.
_CACHE_KIND = "polls-" + hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


def poll_table(path: Path) -> pd.DataFrame:
    """poll_frame of a poll artefact (a path from store.open_artefact), parsed once per file version and parser
    version (store.derived, shared within a process: treat it as read-only)."""
    from .store import derived

    return derived(_CACHE_KIND, Path(path), lambda: poll_frame(read_poll_file(path)))


def poll_frame(polls: list[dict]) -> pd.DataFrame:
    """One row per successful sample (POLL_COLUMNS): `t` the epoch midway through the request, `t_s` seconds
    since the first sample; KV usage in percent; counters as the server reported them (cumulative)."""
    rows = []
    for rec in polls:
        if rec.get("status") != 200 or "text" not in rec:
            continue
        m = parse_metrics("\n".join(_SERIES_LINES.findall(rec["text"])))
        row = {"t": (rec["t0"] + rec.get("t1", rec["t0"])) / 2}
        for key, names in SERIES.items():
            row[key] = _first(m, names)
        row["kv_usage_pct"] = 100 * row.pop("kv_usage")
        rows.append(row)
    frame = pd.DataFrame(rows, columns=[c for c in POLL_COLUMNS if c != "t_s"])
    frame.insert(1, "t_s", frame["t"] - frame["t"].iloc[0] if len(frame) else [])
    return frame[POLL_COLUMNS].astype(float)
