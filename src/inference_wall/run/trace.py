"""Part 2's profiler pass: vLLM's torch profiler started and stopped over the server's HTTP endpoints around one
long prompt, and the trace summarised by kernel family.

vLLM 0.22.1 enables the profiler with `--profiler-config '{"profiler": "torch", "torch_profiler_dir": <absolute dir>,
...}'` (vllm/config/profiler.py); `/start_profile` and `/stop_profile` exist only then
(vllm/entrypoints/serve/profile/api_router.py). Each stop writes one Chrome trace per worker,
`<worker>.<time>.pt.trace.json[.gz]`, into that folder. Two windows per traced point: `decode` (a fraction of a second
of the background alone) and `injection` (from just before the long prompt is sent to its last token).
A server without the endpoints, or a stop that writes no trace, is recorded as unsupported, not as a failure.
"""
from __future__ import annotations

import gzip
import json
import re
import shutil
import time
from pathlib import Path

import requests

from .inject import InjectSpec, Injection, stream_completion
from ..errors import UserError
from ..records.store import read_trace

KEEP_RAW_BYTES = 2**20  # a compressed raw trace is kept beside its summary only under this size (a call of
# gpu/h200-run.sh brings back at most 16 MiB of runs)

# Kernel (or CPU operator) families, first match wins; names are matched lower-case.
FAMILIES = [
    ("attention", r"flash|attn|attention|fmha|paged|mha|sdpa|unified_|kv_cache|reshape_and_cache"),
    ("linear attention (GDN)", r"gated_delta|delta_rule|chunk_|fused_recurrent|fla_|causal_conv|conv1d|gdn|recurrent"),
    ("matmul", r"gemm|cutlass|cublas|xmma|nvjet|matmul|onednn_mm|_mm\b|\bmm\b|aten::addmm|aten::linear|aten::bmm|"
               r"sm90|wgmma"),
    ("norm", r"norm"),
    ("activation", r"silu|gelu|act_and_mul|swiglu|sigmoid"),
    ("rotary", r"rotary|rope"),
    ("sampling", r"sampl|topk|top_k|softmax|argmax|multinomial|logits"),
    ("memory", r"memcpy|memset|copy|aten::to\b|contiguous|aten::cat|index|gather|scatter|fill"),
    ("elementwise", r"elementwise|aten::(mul|add|pow|mean|sub|div|rsqrt|neg|exp)\b"),
]
_FAMILY_RE = [(name, re.compile(pattern)) for name, pattern in FAMILIES]


def family(name: str) -> str:
    low = name.lower()
    return next((fam for fam, rx in _FAMILY_RE if rx.search(low)), "other")


def _top_level(events: list[dict]) -> list[dict]:
    """CPU operators nest (aten::linear calls aten::addmm): keep those not inside another on the same thread."""
    out = []
    by_thread: dict = {}
    for e in sorted(events, key=lambda e: (e.get("pid"), e.get("tid"), e["ts"], -e["dur"])):
        key = (e.get("pid"), e.get("tid"))
        end = by_thread.get(key, -1.0)
        if e["ts"] >= end:
            out.append(e)
            by_thread[key] = e["ts"] + e["dur"]
    return out


def summarise(trace: dict, top: int = 12) -> dict:
    """Time by family over a Chrome trace: GPU kernels where there are any (cat 'kernel', 'gpu_memcpy',
    'gpu_memset'), else top-level CPU operators (the CPU build)."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))]
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    device = "gpu" if kernels else "cpu"
    chosen = kernels if kernels else _top_level([e for e in events if e.get("cat") == "cpu_op"])
    fams: dict[str, float] = {}
    names: dict[str, float] = {}
    for e in chosen:
        ms = e["dur"] / 1000.0
        fams[family(e.get("name", ""))] = fams.get(family(e.get("name", "")), 0.0) + ms
        names[e.get("name", "")] = names.get(e.get("name", ""), 0.0) + ms
    span = (max(e["ts"] + e["dur"] for e in chosen) - min(e["ts"] for e in chosen)) / 1000.0 if chosen else 0.0
    return {"device": device, "events": len(chosen), "busy_ms": sum(fams.values()), "span_ms": span,
            "families_ms": dict(sorted(fams.items(), key=lambda kv: -kv[1])),
            "top_ms": sorted(names.items(), key=lambda kv: -kv[1])[:top]}


def take_trace(entry: dict, src: Path, keep_as: Path, load=read_trace) -> dict | None:
    """One trace file into its window's `entry`: its summary with its whole kernel table (`summaries`), the raw file
    copied to `keep_as` when small (`kept`), or the reason it could not be read (`errors`); the trace, or None."""
    try:
        trace = load(src)
    except (OSError, EOFError, ValueError) as e:  # a truncated or unreadable trace
        entry.setdefault("errors", []).append(f"{src.name}: {e}")
        return None
    entry.setdefault("summaries", []).append({"file": src.name, **summarise(trace), "kernels": kernel_table(trace)})
    if src.stat().st_size <= KEEP_RAW_BYTES:
        shutil.copy(src, keep_as)
        entry.setdefault("kept", []).append(src.name)
    return trace


class TracedInjection(Injection):
    """An Injection of one long prompt with the profiler on around it, and a decode-only window before it."""

    def __init__(self, spec: InjectSpec, url: str, model: str, point_dir: Path, label: str, trace_dir: Path,
                 decode_window_s: float):
        super().__init__(spec, url, model, point_dir, label)
        self.trace_dir, self.decode_window_s = Path(trace_dir), decode_window_s
        self.point_dir = Path(point_dir)
        self.windows: list[dict] = []
        self.unsupported: str | None = None

    def _post(self, path: str) -> bool:
        if self.unsupported:
            return False
        try:
            r = requests.post(self.url.rstrip("/") + path, timeout=600)
        except requests.RequestException as e:
            self.unsupported = f"POST {path} failed: {e}"
            return False
        if r.status_code != 200:
            self.unsupported = f"POST {path} answered HTTP {r.status_code} (no profiler endpoint on this server?)"
            return False
        return True

    def _window(self, name: str, body):
        """`body()` inside a profiler window named `name`; its result (without the profiler where it has none)."""
        before = set(self.trace_dir.glob("*")) if self.trace_dir.exists() else set()
        t0 = time.perf_counter()
        if not self._post("/start_profile"):
            return body()
        result = body()
        t1 = time.perf_counter()
        self._post("/stop_profile")
        t2 = time.perf_counter()
        new = sorted(p for p in (set(self.trace_dir.glob("*.pt.trace.json*")) - before))
        self.windows.append({"window": name, "started": t0, "ended": t1, "stop_s": t2 - t1,
                             "files": [p.name for p in new]})
        return result

    def _prelude(self) -> None:
        self._window("decode", lambda: time.sleep(self.decode_window_s))

    def _inject(self, k: int) -> dict:
        return self._window("injection", lambda: super(TracedInjection, self)._inject(k))

    def __exit__(self, exc_type, exc, tb) -> None:
        super().__exit__(exc_type, exc, tb)
        summary = {"unsupported": self.unsupported, "windows": []}
        for w in self.windows:
            entry = dict(w)
            for name in w["files"]:
                take_trace(entry, self.trace_dir / name, self.point_dir / f"trace-{w['window']}-{name}")
            summary["windows"].append(entry)
        if not self.unsupported and not any(w.get("summaries") for w in summary["windows"]):
            summary["unsupported"] = "the profiler wrote no trace into " + str(self.trace_dir)
        (self.point_dir / "trace-summary.json").write_text(json.dumps(summary, indent=1))
        self.record = {**self.record, "trace": "trace-summary.json", "trace_unsupported": summary["unsupported"]}


class SoloTrace(TracedInjection):
    """A long prompt alone on the idle server, traced: `spec.solo` untraced prompts first (the first warms the
    prefill's kernels; the rest are its untraced times), then one more inside a profiler window (`solo`), all before
    the pass's background starts; nothing injected during the pass (spec.count 0) and no decode window. The traced
    prompt's record is `traced_solo` in `<label>-inject.json`, apart from the untraced `solo` ones."""

    def __enter__(self) -> "SoloTrace":
        super().__enter__()  # the untraced solos; the injecting thread waits for the bench (count 0: it sends nothing)
        self.traced_solo = self._window("solo", lambda: stream_completion(
            self.url, self.model, self._prompt(900), self.spec.output_len, self.spec.timeout_s))
        if self.traced_solo["error"]:
            raise UserError(f"the traced solo prompt ({self.spec.prompt_len} tokens) failed: {self.traced_solo['error']}")
        return self

    traced_solo: dict | None = None

    def _prelude(self) -> None:
        pass

    def _body(self) -> dict:
        return {**super()._body(), "traced_solo": self.traced_solo}


def solo_trace(spec: InjectSpec, trace_dir: Path):
    """A PassPlan.side factory for SoloTrace."""
    return lambda url, model, point_dir, label: SoloTrace(spec, url, model, point_dir, label, trace_dir, 0.0)


def traced_injection(spec: InjectSpec, trace_dir: Path, decode_window_s: float):
    """A PassPlan.side factory for a traced injection (see sweep.PassPlan.side)."""
    return lambda url, model, point_dir, label: TracedInjection(spec, url, model, point_dir, label, trace_dir,
                                                                decode_window_s)


# ---------------------------------------------------------------------------------------------
# A decode window: the profiler on for a fraction of a second once a closed-loop pass runs pure decode
# ---------------------------------------------------------------------------------------------

def kernel_table(trace: dict) -> dict[str, list[float]]:
    """Every GPU kernel (or, without any, top-level CPU operator) of a trace: name -> [count, total ms]. Kept whole
    in the point, so that a better family map needs no new run."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))]
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    chosen = kernels if kernels else _top_level([e for e in events if e.get("cat") == "cpu_op"])
    out: dict[str, list[float]] = {}
    for e in chosen:
        entry = out.setdefault(e.get("name", ""), [0, 0.0])
        entry[0] += 1
        entry[1] += e["dur"] / 1000.0
    return out


def _metrics_now(url: str) -> dict | None:
    from ..records.logs import parse_metrics

    try:
        r = requests.get(url.rstrip("/") + "/metrics", timeout=5)
        r.raise_for_status()
    except requests.RequestException:
        return None
    m = parse_metrics(r.text)
    return {"t": time.time(), "running": m.get("vllm:num_requests_running"),
            "waiting": m.get("vllm:num_requests_waiting"), "prompt_tokens": m.get("vllm:prompt_tokens_total"),
            "generation_tokens": m.get("vllm:generation_tokens_total"),
            "steps": m.get("vllm:iteration_tokens_total_count")}


class DecodeWindowTrace:
    """A PassPlan side (see sweep.PassPlan.side) for a closed-loop pass of `batch` streams: once the server runs
    `batch` requests, none waiting, and no prompt token was counted between two polls (pure decode), the torch
    profiler is started for `window_s` and stopped; the engine's counters are read just before the start and just
    after the stop. The counters can miss a refill's prefill inside the window (a closed loop at a large batch
    refills a stream every few steps), so each window's trace is read at once: where one of its annotated steps
    computed prompt tokens (`prefill_steps` > 0), another window is opened once the pass is back in pure decode, up
    to `max_windows`. The point keeps `trace-summary.json`: per window the counters, its prefill steps, each trace's
    families and its whole kernel table (kernel_table), and the raw trace when small. A server without the profiler
    endpoints, or a pass that never reaches pure decode, is recorded as such, not as a failure."""

    def __init__(self, url: str, point_dir: Path, label: str, trace_dir: Path, batch: int, window_s: float,
                 settle_timeout_s: float = 120.0, poll_s: float = 0.05, max_windows: int = 4):
        self.url, self.point_dir, self.label = url.rstrip("/"), Path(point_dir), label
        self.trace_dir, self.batch, self.window_s = Path(trace_dir), int(batch), float(window_s)
        self.settle_timeout_s, self.poll_s, self.max_windows = settle_timeout_s, poll_s, int(max_windows)
        self.windows: list[dict] = []
        self.unsupported: str | None = None
        self.unsettled: str | None = None  # why the last wait for pure decode ended without it
        self.record: dict = {}
        self._thread = None
        self._stop = None

    def _pure_decode(self, before: dict, now: dict) -> bool:
        return (now["running"] is not None and now["running"] >= self.batch and not now["waiting"]
                and now["prompt_tokens"] == before["prompt_tokens"] and now["t"] - before["t"] >= 0.1)

    def _settle(self) -> bool:
        """Wait for pure decode at the batch; False (the reason in `unsettled`) where it never comes."""
        deadline = time.monotonic() + self.settle_timeout_s
        before = _metrics_now(self.url)
        while not self._stop.is_set() and time.monotonic() < deadline:
            time.sleep(self.poll_s)
            now = _metrics_now(self.url)
            if before is None or now is None:
                before = now
                continue
            if self._pure_decode(before, now):
                return True
            if now["prompt_tokens"] != before["prompt_tokens"] or now["t"] - before["t"] >= 0.5:
                before = now
        if self._stop.is_set():
            self.unsettled = "the pass ended before it ran pure decode"
        else:
            self.unsettled = (f"the pass never ran {self.batch} requests in pure decode within "
                              f"{self.settle_timeout_s:.0f} s")
        return False

    def _new_traces(self, before: set, wait_s: float = 10.0) -> list[Path]:
        """The traces the stop wrote (the workers write them on stop: wait until some appear and stop growing)."""
        deadline, sizes = time.monotonic() + wait_s, None
        while time.monotonic() < deadline:
            new = sorted(p for p in self.trace_dir.glob("*.pt.trace.json*") if p.name not in before)
            now = [p.stat().st_size for p in new]
            if new and now == sizes:
                return new
            sizes = now
            time.sleep(0.25)
        return sorted(p for p in self.trace_dir.glob("*.pt.trace.json*") if p.name not in before)

    @staticmethod
    def _load(src: Path, wait_s: float = 15.0) -> dict:
        """A trace the workers may still be writing: read again every half second until it parses or `wait_s`."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return read_trace(src)
            except (OSError, EOFError, ValueError):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)

    def _read(self, entry: dict, files: list[Path]) -> None:
        from ..measure.tracewindow import prefill_steps

        entry["files"], entry["prefill_steps"] = [p.name for p in files], 0
        for src in files:
            trace = take_trace(entry, src, self.point_dir / f"trace-decode-{src.name}", load=self._load)
            entry["prefill_steps"] += prefill_steps(trace) if trace is not None else 0

    def _window(self) -> dict | None:
        files_before = {p.name for p in self.trace_dir.glob("*")} if self.trace_dir.exists() else set()
        start = _metrics_now(self.url)
        try:
            r = requests.post(self.url + "/start_profile", timeout=600)
        except requests.RequestException as e:
            self.unsupported = f"POST /start_profile failed: {e}"
            return None
        if r.status_code != 200:
            self.unsupported = f"POST /start_profile answered HTTP {r.status_code} (no profiler endpoint on this server?)"
            return None
        started = _metrics_now(self.url)
        time.sleep(self.window_s)
        ended = _metrics_now(self.url)
        t_stop = time.perf_counter()
        try:
            requests.post(self.url + "/stop_profile", timeout=600)
        except requests.RequestException as e:
            self.unsupported = f"POST /stop_profile failed: {e}"
        stopped = _metrics_now(self.url)
        entry = {"batch": self.batch, "window_s": self.window_s, "before_start": start, "started": started,
                 "ended": ended, "stopped": stopped, "stop_s": time.perf_counter() - t_stop}
        self._read(entry, self._new_traces(files_before))
        return entry

    def _run(self) -> None:
        for _ in range(self.max_windows):
            if not self._settle():
                if not self.windows:
                    self.unsupported = self.unsettled
                return
            entry = self._window()
            if entry is None:
                return
            self.windows.append(entry)
            if self.unsupported or not entry.get("summaries") or entry["prefill_steps"] == 0:
                return

    def __enter__(self) -> "DecodeWindowTrace":
        import threading

        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="decode-trace", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=900)
        summary = {"unsupported": self.unsupported, "windows": self.windows}
        if self.windows and self.windows[-1].get("prefill_steps"):
            summary["no_pure_window"] = self.unsettled or f"{len(self.windows)} windows, each with a prefill step"
        if self.windows and not any(w.get("summaries") for w in self.windows) and not self.unsupported:
            summary["unsupported"] = "the profiler wrote no trace into " + str(self.trace_dir)
        (self.point_dir / "trace-summary.json").write_text(json.dumps(summary, indent=1))
        self.record = {"trace": "trace-summary.json", "trace_unsupported": summary["unsupported"]}


def decode_window_trace(trace_dir: Path, batch: int, window_s: float):
    """A PassPlan.side factory for DecodeWindowTrace."""
    return lambda url, model, point_dir, label: DecodeWindowTrace(url, point_dir, label, trace_dir, batch, window_s)
