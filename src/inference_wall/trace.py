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

from .inject import InjectSpec, Injection

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


def read_trace(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


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

    def _window(self, name: str, body) -> None:
        before = set(self.trace_dir.glob("*")) if self.trace_dir.exists() else set()
        t0 = time.perf_counter()
        if not self._post("/start_profile"):
            body()
            return
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
                src = self.trace_dir / name
                try:
                    entry.setdefault("summaries", []).append({"file": name, **summarise(read_trace(src))})
                except (OSError, EOFError, ValueError) as e:  # a truncated or unreadable trace
                    entry.setdefault("errors", []).append(f"{name}: {e}")
                    continue
                if src.stat().st_size <= KEEP_RAW_BYTES:
                    shutil.copy(src, self.point_dir / f"trace-{w['window']}-{name}")
                    entry.setdefault("kept", []).append(name)
            summary["windows"].append(entry)
        if not self.unsupported and not any(w.get("summaries") for w in summary["windows"]):
            summary["unsupported"] = "the profiler wrote no trace into " + str(self.trace_dir)
        (self.point_dir / "trace-summary.json").write_text(json.dumps(summary, indent=1))
        self.record = {**self.record, "trace": "trace-summary.json", "trace_unsupported": summary["unsupported"]}


def traced_injection(spec: InjectSpec, trace_dir: Path, decode_window_s: float):
    """A PassPlan.side factory for a traced injection (see sweep.PassPlan.side)."""
    return lambda url, model, point_dir, label: TracedInjection(spec, url, model, point_dir, label, trace_dir,
                                                                decode_window_s)
