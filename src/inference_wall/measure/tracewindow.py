"""What a profiler window of pure decode measured besides its kernels: the step it ran at (the engine's own counters,
read just after the profiler started and just before it stopped), and, where the raw trace was kept, the GPU's own
timeline (each step's span from vLLM's `execute_context_..._generation_...` GPU annotation, the kernels' busy time as
the union of their intervals, and the gaps between them).

Definitions, per traced point (a closed loop of B streams, the window opened in pure decode, run.trace):

- `window_step_ms`: (counter time at the window's end - at its start) / (engine steps between them): the step while
  the profiler records.
- `timeline_period_ms`: the mean distance between consecutive steps' GPU annotations on the trace's timeline (None
  without a raw trace).
- `timeline_busy_ms`: the union of every kernel, copy and set interval inside the annotated steps, per step;
  `timeline_gap_ms` = period - busy: the GPU's idle inside the profiler, measured on its timeline.
- `kernels_ms`: the kernels' summed time per step (the trace summary; what the chapter's components add up).

The chapter sets these beside the untraced step of the same batch (its decode point): the profiler's own cost is
`window_step_ms` - untraced step; the untraced step less `kernels_ms` is time no measurement names (unattributed),
unless the profiler's cost is small enough that the timeline's gaps stand for it.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

STEP_ANNOTATION = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\(\d+\)$")
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
COLUMNS = ["rig", "point", "batch", "window_steps", "window_step_ms", "window_prompt_tokens", "timeline_steps",
           "timeline_period_ms", "timeline_busy_ms", "timeline_gap_ms", "kernels_ms"]


def _union_ms(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total / 1000.0


def timeline(trace: dict) -> dict | None:
    """The GPU timeline of a decode window: steps (annotated), their mean period, the union of device intervals and
    the gaps per step; None where the trace has fewer than two annotated steps."""
    ev = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                   if e.get("cat") == "gpu_user_annotation" and STEP_ANNOTATION.match(e.get("name", "")))
    if len(steps) < 2:
        return None
    t0, t1 = steps[0][0], steps[-1][0]  # whole periods: from the first step's start to the last's
    inside = [(max(e["ts"], t0), min(e["ts"] + e["dur"], t1)) for e in ev
              if e.get("cat") in DEVICE_CATS and e["ts"] + e["dur"] > t0 and e["ts"] < t1]
    n = len(steps) - 1
    period = (t1 - t0) / 1000.0 / n
    busy = _union_ms([iv for iv in inside if iv[1] > iv[0]]) / n
    return {"timeline_steps": n, "timeline_period_ms": period, "timeline_busy_ms": busy,
            "timeline_gap_ms": period - busy}


def prefill_steps(trace: dict) -> int:
    """How many annotated steps of a trace computed prompt tokens (vLLM names each step
    `execute_context_<requests>(<tokens>)_generation_<requests>(<tokens>)`): 0 for a window of pure decode."""
    return sum(1 for e in trace.get("traceEvents", []) if e.get("cat") == "gpu_user_annotation"
               and (m := STEP_ANNOTATION.match(e.get("name", ""))) and int(m.group(2)) > 0)


def chosen_window(summary: dict) -> dict | None:
    """The window a traced point is read from: the first whose steps computed no prompt token (a window records
    `prefill_steps` from its trace; run.trace opens another where one caught a refill), else the first."""
    windows = summary.get("windows") or []
    return next((w for w in windows if w.get("prefill_steps") == 0), windows[0] if windows else None)


def window_row(point: Path) -> dict | None:
    """The row of COLUMNS for one traced point's chosen decode window (None where it has no window)."""
    from ..records.store import read_trace

    path = Path(point) / "trace-summary.json"
    if not path.exists():
        return None
    w = chosen_window(json.loads(path.read_text()))
    if w is None:
        return None
    a, b = w.get("started") or {}, w.get("ended") or {}
    steps = (b.get("steps") or 0) - (a.get("steps") or 0)
    row = {"point": Path(point).name, "batch": int(w["batch"]), "window_steps": steps,
           "window_step_ms": 1000 * (b["t"] - a["t"]) / steps if steps > 0 else math.nan,
           "window_prompt_tokens": (b.get("prompt_tokens") or 0) - (a.get("prompt_tokens") or 0),
           "timeline_steps": math.nan, "timeline_period_ms": math.nan, "timeline_busy_ms": math.nan,
           "timeline_gap_ms": math.nan, "kernels_ms": math.nan}
    raw = ([Path(point) / f"trace-decode-{name}" for name in w["kept"]] if "kept" in w
           else sorted(Path(point).glob("trace-decode-*.pt.trace.json*")))
    if raw:
        t = timeline(read_trace(raw[0]))
        if t:
            row.update(t)
    return row


def window_table(runs: Path, rig: str, prefix: str = "4b-trace-") -> pd.DataFrame:
    """Every traced point of `rig` under a part's runs folder whose name starts with `prefix`."""
    rows = []
    for point in sorted(Path(runs).glob(f"{rig}/{prefix}*")):
        r = window_row(point)
        if r is not None:
            rows.append({"rig": rig, **r})
    return pd.DataFrame(rows, columns=COLUMNS)


def chapter_table(windows: pd.DataFrame, steps: dict[int, float], kernels: dict[int, float]) -> pd.DataFrame:
    """One row per traced batch of one rig: the untraced step (`steps`: batch -> ms, the chapter's decode points),
    the step inside the profiler window and the profiler's cost, the traced kernels per step (`kernels`: batch -> ms,
    pure-decode windows only), the gaps on the traced GPU timeline, and what the untraced step leaves after the
    kernels (a subtraction: `unattributed_ms`). A window that counted prompt tokens, or has no pure-decode kernels,
    held a prefill and is left out."""
    rows = []
    for r in windows.itertuples():
        if r.window_prompt_tokens or r.batch not in steps or r.batch not in kernels:
            continue  # a window that held a prefill (by the counters, or by its kernels: `kernels` leaves it out)
        step, k = steps[r.batch], kernels.get(r.batch, math.nan)
        rows.append({"rig": r.rig, "batch": r.batch, "step_ms": step, "window_step_ms": r.window_step_ms,
                     "profiler_cost_ms": r.window_step_ms - step,
                     "profiler_cost_pct": 100 * (r.window_step_ms - step) / step, "kernels_ms": k,
                     "timeline_gap_ms": r.timeline_gap_ms, "unattributed_ms": step - k})
    return pd.DataFrame(rows, columns=["rig", "batch", "step_ms", "window_step_ms", "profiler_cost_ms",
                                       "profiler_cost_pct", "kernels_ms", "timeline_gap_ms", "unattributed_ms"])


QUIET_PROFILER_PCT = 5.0  # a profiler that slows the step by less than this leaves its timeline's gaps as the idle


def sentences(table: pd.DataFrame) -> list[str]:
    """Per rig: what the profiler cost, and whether the timeline's gaps measure the idle or it stays unattributed."""
    from ..words import join_and, percent, sig

    out = []
    for rig, g in table.groupby("rig", sort=True):
        costs = join_and([f"{percent(c, 2, signed=True, points=True)} at {b:,}"
                          for b, c in zip(g["batch"], g["profiler_cost_pct"])])
        quiet = g[g["profiler_cost_pct"].abs() < QUIET_PROFILER_PCT].dropna(subset=["timeline_gap_ms"])
        said = f"On the {rig} the profiler's window changed the step by {costs}, against the same batch untraced"
        if len(quiet):
            said += ("; where it cost under " + percent(QUIET_PROFILER_PCT, points=True) + ", the gaps between "
                     "kernels on the traced timeline measure the GPU's idle: "
                     + join_and([f"{sig(x)} ms a step at {b:,} (the untraced step less the kernels: {sig(u)})"
                                 for b, x, u in zip(quiet["batch"], quiet["timeline_gap_ms"], quiet["unattributed_ms"])]))
        loud = g[g["profiler_cost_pct"].abs() >= QUIET_PROFILER_PCT]
        if len(loud):
            said += (f"; {'elsewhere ' if len(quiet) else ''}the profiler's own cost is too large for its timeline to "
                     "stand for an untraced step, and what the untraced step leaves after the kernels stays "
                     "unattributed: "
                     + join_and([f"{sig(u)} ms at {b:,}" for b, u in zip(loud["batch"], loud["unattributed_ms"])]))
        out.append(said + ".")
    return out
