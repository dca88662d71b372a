"""Injected prompts: the readers and tables of part 2's sessions (a steady stream of short requests with one long
prompt injected into it, chunked prefill off or at a token budget), per measured injection (its TTFT, the freeze it
caused, the steps that carried it), per configuration (the freeze, the step that carried a chunk) and the prefill's
roofline. Part 2's page and claims read them, and part 0's mixed steps and step model, over part 2's sessions and
its own sessions of the same kind (a wing the parts share, not a part: it imports none)."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ..errors import UserError
from ..measure import freeze
from ..model.modelshape import ModelShape
from ..records.store import bench_result, derived, load_points, open_artefact, read_artefact, read_text
from ..schema import PARTS

NAME = PARTS[2]  # the folder of part 2's runs, whose sessions these tables read
OFF = 0  # a budget of 0: chunked prefill off

def token_range(preset: str) -> tuple[int, int]:
    """Ordinary token ids of the preset's vocabulary for the long prompts (special tokens sit at its top)."""
    from ..model.modelshape import ModelShape

    return 100, int(0.9 * ModelShape.of(preset).vocab_size)


def measured_points(data_dir=None, rigs: list[str] | None = None) -> list:
    """The freeze points (not the traced ones, whose profiler slows the steps it records, nor the knee points)."""
    return [pt for pt in load_points(NAME, data_dir, rigs) if pt.params.get("kind") not in ("trace", "knee")]


def _injections(pt, label: str = "bench") -> dict:
    return json.loads(read_artefact(pt.path, f"{label}-inject.json"))


def _steps(pt) -> pd.DataFrame:
    from ..records.logs import parse_iterations

    path = open_artefact(pt.path, "server.log")
    return derived("iterations", path, lambda: parse_iterations(read_text(path), path))


def ttft_ms(rec: dict | None) -> float:
    """A streamed long prompt's time to its first token (run.inject's record), NaN without one."""
    return 1000 * (rec["token_times"][0] - rec["sent"]) if rec and rec.get("token_times") else math.nan


def point_injections(pt) -> pd.DataFrame:
    """One row per measured injection of one point: the long request's TTFT, the freeze it caused (client side)
    and the steps that carried it (server side)."""
    raw = bench_result(open_artefact(pt.path, "bench.json")).raw
    streams = freeze.stream_token_times(raw)
    inj = _injections(pt)
    recs = inj["injections"]
    windows = [(r["sent"], r["token_times"][0]) for r in recs if r.get("token_times")]
    base_s = freeze.baseline_gap_s(streams, windows)
    steps = _steps(pt)
    wl = pt.record.workload
    length = int(pt.params["prompt_len"])
    runs = freeze.long_prompt_steps(steps, length, int(wl.get("input_len", 256))) if len(steps) else []
    n_solo = len(inj["solo"])
    measured_runs = runs[-len(recs):] if len(runs) >= len(recs) + n_solo else [[] for _ in recs]
    solo_runs = runs[-len(recs) - n_solo:-len(recs)] if len(runs) >= len(recs) + n_solo and n_solo else []
    bench_steps = steps.iloc[measured_runs[0][0]:measured_runs[-1][-1] + 1] if measured_runs and measured_runs[0] else steps
    solo_ttft = [ttft_ms(r) for r in inj["solo"]]
    rows = []
    for k, rec in enumerate(recs):
        f = freeze.freeze_in_window(streams, rec["sent"], rec["token_times"][0], base_s)
        row = {"rig": pt.rig, "point": pt.name, "budget": int(pt.params["budget"]), "prompt_len": length,
               "injection": k, "ttft_ms": ttft_ms(rec), "baseline_itl_ms": 1000 * base_s,
               "solo_ttft_ms": float(np.median(solo_ttft)) if solo_ttft else math.nan,
               "solo_ttft_min_ms": min(solo_ttft) if solo_ttft else math.nan,
               "solo_ttft_max_ms": max(solo_ttft) if solo_ttft else math.nan,
               "solo_step_ms": float(np.median([steps.iloc[r]["elapsed_ms"].sum() for r in solo_runs]))
               if solo_runs else math.nan,
               "solo_prefill_steps": float(np.median([len(r) for r in solo_runs])) if solo_runs else math.nan,
               "decode_step_ms": freeze.decode_step_ms(bench_steps), **f.as_dict(),
               **freeze.step_summary(steps, measured_runs[k] if k < len(measured_runs) else [])}
        rows.append(row)
    return pd.DataFrame(rows)


INJECTION_COLUMNS = ["rig", "point", "budget", "prompt_len", "injection", "ttft_ms", "baseline_itl_ms", "solo_ttft_ms",
                     "solo_ttft_min_ms", "solo_ttft_max_ms",
                     "solo_step_ms", "solo_prefill_steps", "decode_step_ms", "streams", "freeze_ms", "freeze_max_ms", "lost_ms",
                     "prefill_steps", "max_step_ms", "sum_step_ms", "chunk_tokens_max", "gen_reqs_beside"]


def _async_by_session(points: list) -> dict[tuple, bool | None]:
    """Per (rig, server session): whether the server's start logged asynchronous scheduling (None: it did not say)."""
    out: dict[tuple, bool | None] = {}
    for pt in points:
        rep = pt.startup()
        if rep is not None:
            out[(pt.rig, pt.record.session_id)] = rep.async_scheduling
    return out


def injection_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """One row per measured injection (point_injections) on every rig, with `async_scheduling`: whether the server
    logged asynchronous scheduling, under which the iteration log's elapsed time is not a step's time (steps_timed)."""
    return injections_of(measured_points(data_dir, rigs))


def injections_of(pts: list) -> pd.DataFrame:
    """injection_table's rows of these points (part 2's, or another part's sessions planned by this part's plan)."""
    modes = _async_by_session(pts)
    frames = []
    for pt in pts:
        f = point_injections(pt)
        if len(f):
            frames.append(f.assign(async_scheduling=modes.get((pt.rig, pt.record.session_id))))
    if not frames:
        return pd.DataFrame(columns=INJECTION_COLUMNS + ["async_scheduling"])
    return pd.concat(frames, ignore_index=True)[INJECTION_COLUMNS + ["async_scheduling"]]


def steps_timed(injections: pd.DataFrame) -> pd.Series:
    """Per injection: whether the iteration log's elapsed times are step times. vLLM's EngineCore times the wait
    for a step's result (`log_iteration_details` around `future.result()`); with asynchronous scheduling the next
    step is already scheduled and running, so that wait is a remainder, not the step (0.22.1, v1/engine/core.py)."""
    return injections["async_scheduling"].map(lambda a: a is not True)


def config_label(budget: int) -> str:
    return "chunking off" if budget == OFF else f"chunked, budget {budget:,}"


def freeze_table(injections: pd.DataFrame) -> pd.DataFrame:
    """One row per (rig, budget, prompt length): the freeze's median and range over the repeats, beside the long
    request's TTFT, the server's longest step, and the freeze that the solo prefill predicts."""
    if not len(injections):
        return pd.DataFrame(columns=["rig", "config", "budget", "prompt_len", "repeats", "freeze_ms", "freeze_min_ms",
                                     "freeze_max_ms", "lost_ms", "ttft_ms", "max_step_ms", "solo_ttft_ms",
                                     "baseline_itl_ms", "predicted_low_ms", "predicted_high_ms", "streams"])
    g = injections.groupby(["rig", "budget", "prompt_len"], sort=True)
    out = g.agg(repeats=("freeze_ms", "count"), freeze_ms=("freeze_ms", "median"), freeze_min_ms=("freeze_ms", "min"),
                freeze_max_ms=("freeze_ms", "max"), lost_ms=("lost_ms", "median"), ttft_ms=("ttft_ms", "median"),
                max_step_ms=("max_step_ms", "median"), solo_ttft_ms=("solo_ttft_ms", "median"),
                baseline_itl_ms=("baseline_itl_ms", "median"), streams=("streams", "median")).reset_index()
    pred = [freeze.predicted_freeze_ms(r.solo_ttft_ms, r.prompt_len, None if r.budget == OFF else r.budget,
                                       r.baseline_itl_ms) for r in out.itertuples()]
    if "async_scheduling" in injections:  # a logged wait is not a step: no step time where vLLM scheduled ahead
        keys = ["rig", "budget", "prompt_len"]
        timed = injections.assign(timed=steps_timed(injections)).groupby(keys)["timed"].all().reset_index()
        out = out.merge(timed, on=keys, how="left")
        out["max_step_ms"] = out["max_step_ms"].where(out.pop("timed").fillna(True).astype(bool))
    out["predicted_low_ms"] = [lo for lo, _ in pred]
    out["predicted_high_ms"] = [hi for _, hi in pred]
    out.insert(1, "config", out["budget"].map(config_label))
    return out


def by_config(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows per rig in the page's order of configurations: chunking off, then the budgets from the largest."""
    order = frame["budget"].where(frame["budget"] != OFF, 10**9)
    return frame.assign(_o=order).sort_values(["rig", "_o"], ascending=[True, False]).drop(columns="_o").reset_index(
        drop=True)


# What the pages say where the predicate below holds (part 0's mixed steps and part 2's chunk step, one wording).
FLOOR_IS_CHUNKED_PREFILL = "the floor belongs to chunked prefill itself on this rig"


def floor_is_chunked_prefill(solo_chunk_step_ms, share_ms, decode_step_ms) -> bool:
    """Whether a chunk step's floor is chunked prefill's own: the chunk step alone on the idle server (no decodes beside
    it, the same budget) sits above its share of the unchunked prefill (over the same solo steps: chunk_step_table's
    `solo_share_ms`) by more than one decode step, the most that carrying the decodes could explain. False where any
    of the three is unknown (NaN or None): no verdict without its measurements."""
    vals = [solo_chunk_step_ms, share_ms, decode_step_ms]
    if any(v is None or not math.isfinite(float(v)) for v in vals):
        return False
    return float(solo_chunk_step_ms) - float(share_ms) > float(decode_step_ms)


def chunk_step_table(injections: pd.DataFrame) -> pd.DataFrame:
    """What one step that carried a chunk cost, per rig, budget and prompt length (chunked, where the same length was
    also measured with chunking off): the steps that carried the prompt (iteration log, which counts them even where
    it does not time them), the mean such step (the long prompt's TTFT in the stream over those steps), the prompt's
    unchunked prefill over the same number of steps (its solo TTFT with chunking off / steps: what a step would cost
    if a chunk cost only its share of the whole prefill) and the rest, per step. Beside them the same point's solo
    chunk step (`solo_chunk_step_ms`: the prompt alone on the idle server at the same budget, its TTFT over the
    `solo_steps` the log shows carrying it: what a chunk step costs with no decodes beside it) and its own share
    (`solo_share_ms`: the unchunked prefill over those `solo_steps`; a share is always over the steps of the step it
    is set against, so that step over its share is that run's TTFT over the unchunked prefill), `riding_ms` (the mean
    step less the solo chunk step: what the decodes riding along added) and the background's gap between tokens
    (`decode_ms`, one decode step of the same background)."""
    cols = ["rig", "config", "budget", "prompt_len", "steps", "mean_step_ms", "share_ms", "extra_ms",
            "solo_steps", "solo_chunk_step_ms", "solo_share_ms", "riding_ms", "decode_ms", "freeze_ms"]
    f = injections.dropna(subset=["freeze_ms"])
    f = f[f["prefill_steps"] > 0].assign(mean_step_ms=lambda d: d["ttft_ms"] / d["prefill_steps"])
    solo_steps = f["solo_prefill_steps"] if "solo_prefill_steps" in f else pd.Series(float("nan"), index=f.index)
    f = f.assign(solo_steps=solo_steps, solo_chunk_step_ms=f["solo_ttft_ms"] / solo_steps.where(solo_steps > 0))
    g = f.groupby(["rig", "budget", "prompt_len"], sort=True).agg(
        steps=("prefill_steps", "median"), mean_step_ms=("mean_step_ms", "median"), freeze_ms=("freeze_ms", "median"),
        solo_ttft_ms=("solo_ttft_ms", "median"), solo_steps=("solo_steps", "median"),
        solo_chunk_step_ms=("solo_chunk_step_ms", "median"),
        decode_ms=("baseline_itl_ms", "median")).reset_index()
    off = g[g["budget"] == OFF][["rig", "prompt_len", "solo_ttft_ms"]].rename(columns={"solo_ttft_ms": "off_solo_ms"})
    out = g[(g["budget"] != OFF) & (g["budget"] < g["prompt_len"])].merge(off, on=["rig", "prompt_len"])
    out["share_ms"] = out["off_solo_ms"] / out["steps"]
    out["extra_ms"] = out["mean_step_ms"] - out["share_ms"]
    out["solo_share_ms"] = out["off_solo_ms"] / out["solo_steps"].where(out["solo_steps"] > 0)
    out["riding_ms"] = out["mean_step_ms"] - out["solo_chunk_step_ms"]
    out.insert(1, "config", out["budget"].map(config_label))
    return by_config(out)[cols] if len(out) else pd.DataFrame(columns=cols)


def matmul_params(pt) -> float | None:
    """config_matmul_params of the model a point's server loaded (its preset's config); None where unknown."""
    model = pt.record.model
    try:
        return float(ModelShape.of(model["preset"]).matmul_params)
    except (KeyError, OSError, ValueError, UserError):
        return None


def roofline_table(freezes: pd.DataFrame, peaks: dict[str, dict], data_dir=None,
                   params_by_rig: dict[str, float | None] | None = None) -> pd.DataFrame:
    """Per rig and prompt length: the prefill's compute floor (2 x the language model's matmul parameters x tokens /
    the rig's peak dense FLOP/s, `peaks`: rig -> {"peak_dense_tflops", "peak_source"}, none for a rig it leaves out)
    beside the solo prefill time measured with chunking off (TTFT alone on the idle server: a chunked server's solo
    prompt is several steps). `params_by_rig` replaces what the points say of their models."""
    rows = []
    if params_by_rig is None:
        params_by_rig = {}
        for pt in load_points(NAME, data_dir, sorted(set(freezes["rig"])) if len(freezes) else []):
            if params_by_rig.get(pt.rig) is None:
                params_by_rig[pt.rig] = matmul_params(pt)
    off = freezes[freezes["budget"] == OFF] if len(freezes) else freezes
    solo = off.groupby(["rig", "prompt_len"])["solo_ttft_ms"].median().reset_index() if len(off) else off
    for r in solo.itertuples():
        p = peaks.get(r.rig) or {}
        peak = p.get("peak_dense_tflops")
        n = params_by_rig.get(r.rig)
        floor = freeze.compute_floor_ms(n, r.prompt_len, peak * 1e12) if (peak and n) else math.nan
        rows.append({"rig": r.rig, "prompt_len": r.prompt_len, "params_b": n / 1e9 if n else math.nan,
                     "peak_dense_tflops": peak if peak else math.nan, "compute_floor_ms": floor,
                     "solo_ttft_ms": r.solo_ttft_ms, "floor_fraction": floor / r.solo_ttft_ms if peak and n else math.nan,
                     "peak_source": p.get("peak_source") or "no peak on record for this rig"})
    return pd.DataFrame(rows, columns=["rig", "prompt_len", "params_b", "peak_dense_tflops", "compute_floor_ms",
                                       "solo_ttft_ms", "floor_fraction", "peak_source"])
