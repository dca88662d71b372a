"""The injecting client: long prompts sent straight to the server's OpenAI completions endpoint while a `vllm bench
serve` pass runs, each streamed and timed token by token.

Clock: every time here is `time.perf_counter()`, which on Linux is CLOCK_MONOTONIC, one clock for every process on
the host; `vllm bench serve --save-detailed` stamps its requests' `start_times` with the same call, so an injected
request and the background's tokens land on one time axis (the record also keeps `time.time()` at one instant, to
place that axis in wall-clock time).

Timing: the injections start `first_after_s` after the bench prints "Starting main benchmark run..." (after its
readiness request, which is therefore one of the background's short prompts, never a long one) and follow each other
`spacing_s` apart, one at a time (the next waits for the previous to finish). Optionally, before the pass, `solo`
long prompts run alone on the idle server: their time to first token is the prefill without a batch beside it.

Prompts are token ids (no tokenizer involved, so the length is exact), drawn from ordinary ids with a seed of their
own: every long prompt in a session differs from every other, so vLLM's prefix cache cannot skip a prefill.
"""
from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import requests

from ..errors import UserError

MAIN_RUN_MARKER = "Starting main benchmark run"


@dataclass(frozen=True)
class InjectSpec:
    prompt_len: int
    output_len: int = 16  # the long request's own output: enough to see its tokens resume
    count: int = 3  # injections during the pass (each one a repeat)
    first_after_s: float = 3.0  # after the bench's main run starts: the background reaches its steady batch first
    spacing_s: float = 4.0  # between injection starts: the background recovers in between
    solo: int = 0  # long prompts alone before the pass (prefill without a batch)
    seed: int = 0
    token_low: int = 100  # ordinary token ids to draw from: [token_low, token_high)
    token_high: int = 7000
    timeout_s: float = 600.0  # one long request, end to end

    def __post_init__(self):
        if self.prompt_len < 1 or self.output_len < 1 or self.count < 0 or self.solo < 0:
            raise UserError(f"bad injection: prompt_len {self.prompt_len}, output_len {self.output_len}, "
                            f"count {self.count}, solo {self.solo} (lengths >= 1, counts >= 0)")
        if not 0 <= self.token_low < self.token_high:
            raise UserError(f"bad token id range [{self.token_low}, {self.token_high})")


def long_prompt(length: int, seed: int, low: int, high: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(low, high) for _ in range(length)]


def stream_completion(url: str, model: str, prompt: list[int], max_tokens: int, timeout_s: float) -> dict:
    """Send one streamed completion and time it: when it was sent, when each streamed message with text arrived,
    when the stream ended; the server's own token counts from the final usage message."""
    payload = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0.0,
               "stream": True, "stream_options": {"include_usage": True}}
    rec = {"prompt_len": len(prompt), "max_tokens": max_tokens, "sent": time.perf_counter(), "wall_sent": time.time(),
           "token_times": [], "prompt_tokens": None, "completion_tokens": None, "end": None, "error": ""}
    try:
        with requests.post(url.rstrip("/") + "/v1/completions", json=payload, stream=True,
                           timeout=(10, timeout_s)) as r:
            if r.status_code != 200:
                rec["error"] = f"HTTP {r.status_code}: {r.text[:300]}"
                return rec
            buf = b""
            for chunk in r.iter_content(chunk_size=None):
                now = time.perf_counter()
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    line = line.strip()
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        continue
                    msg = json.loads(data)
                    if msg.get("choices"):
                        rec["token_times"].append(now)
                    if msg.get("usage"):
                        rec["prompt_tokens"] = msg["usage"].get("prompt_tokens")
                        rec["completion_tokens"] = msg["usage"].get("completion_tokens")
    except (requests.RequestException, ValueError) as e:
        rec["error"] = f"{type(e).__name__}: {e}"[:500]
    rec["end"] = time.perf_counter()
    if not rec["error"] and not rec["token_times"]:
        rec["error"] = "no token arrived"
    return rec


def _wait_for_marker(log: Path, offset: int, stop: threading.Event, poll_s: float = 0.05) -> float | None:
    """perf_counter time at which MAIN_RUN_MARKER appeared in `log` past `offset`; None if `stop` came first."""
    while not stop.is_set():
        try:
            with open(log, "rb") as f:
                f.seek(offset)
                if MAIN_RUN_MARKER.encode() in f.read():
                    return time.perf_counter()
        except FileNotFoundError:
            pass
        stop.wait(poll_s)
    return None


class Injection:
    """The side task of one bench pass (see sweep.PassPlan.side): solo prompts on entry, injections during the
    pass from a thread, everything written to `<label>-inject.json` in the point's folder on exit."""

    def __init__(self, spec: InjectSpec, url: str, model: str, point_dir: Path, label: str):
        self.spec, self.url, self.model = spec, url, model
        self.path = Path(point_dir) / f"{label}-inject.json"
        self.bench_log = Path(point_dir) / "bench.log"
        self.solo: list[dict] = []
        self.injections: list[dict] = []
        self.main_run_at: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.record: dict = {}

    def _prompt(self, k: int) -> list[int]:
        s = self.spec
        return long_prompt(s.prompt_len, s.seed * 1000 + k, s.token_low, s.token_high)

    def __enter__(self) -> "Injection":
        for k in range(self.spec.solo):
            rec = stream_completion(self.url, self.model, self._prompt(500 + k), self.spec.output_len,
                                    self.spec.timeout_s)
            self.solo.append(rec)
            if rec["error"]:
                raise UserError(f"solo long prompt ({self.spec.prompt_len} tokens) failed: {rec['error']}")
        offset = self.bench_log.stat().st_size if self.bench_log.exists() else 0
        self._thread = threading.Thread(target=self._run, args=(offset,), daemon=True, name="inject")
        self._thread.start()
        return self

    def _run(self, offset: int) -> None:
        try:
            self.main_run_at = _wait_for_marker(self.bench_log, offset, self._stop)
            if self.main_run_at is None:
                return
            if self._stop.wait(self.spec.first_after_s / 2):
                return
            self._prelude()
            for k in range(self.spec.count):
                due = self.main_run_at + self.spec.first_after_s + k * self.spec.spacing_s
                if self._stop.wait(max(0.0, due - time.perf_counter())):
                    return
                rec = self._inject(k)
                rec.update(index=k, due=due)
                self.injections.append(rec)
        except BaseException as e:  # noqa: BLE001 - reported by __exit__
            self._error = e

    def _body(self) -> dict:
        """What `<label>-inject.json` keeps besides the clock (a subclass adds its own)."""
        return {"spec": asdict(self.spec), "main_run_at": self.main_run_at, "solo": self.solo,
                "injections": self.injections}

    def _prelude(self) -> None:
        """Halfway to the first injection, with the background running (a subclass's hook)."""

    def _inject(self, k: int) -> dict:
        return stream_completion(self.url, self.model, self._prompt(k), self.spec.output_len, self.spec.timeout_s)

    def __exit__(self, exc_type, exc, tb) -> None:
        s = self.spec
        if exc_type is not None:
            self._stop.set()
        if self._thread is not None:
            if exc_type is None and self.main_run_at is None:  # the pass ended: the marker is in the log or never comes
                deadline = time.monotonic() + 5
                while self.main_run_at is None and self._thread.is_alive() and time.monotonic() < deadline:
                    time.sleep(0.05)
                if self.main_run_at is None:
                    self._stop.set()
            self._thread.join(timeout=None if exc_type is None else 5)
        self._stop.set()
        clock = {"perf_counter": time.perf_counter(), "time": time.time()}
        self.path.write_text(json.dumps({**self._body(), "clock": clock}))
        self.record = {"file": self.path.name, "prompt_len": self.spec.prompt_len, "solo": len(self.solo),
                       "injections": len(self.injections)}
        if exc_type is not None:
            return
        if self._error is not None:
            raise UserError(f"injection failed: {self._error}")
        if self.main_run_at is None:
            raise UserError(f"the bench never printed {MAIN_RUN_MARKER!r} in {self.bench_log}: nothing injected")
        bad = [r for r in self.injections if r["error"]]
        if bad or len(self.injections) != s.count:
            raise UserError(f"{len(self.injections) - len(bad)} of {s.count} injections of {s.prompt_len} tokens "
                            f"completed" + (f": {bad[0]['error']}" if bad else ""))


def injection(spec: InjectSpec):
    """A PassPlan.side factory for `spec`."""
    return lambda url, model, point_dir, label: Injection(spec, url, model, point_dir, label)
