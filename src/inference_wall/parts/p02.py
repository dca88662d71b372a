"""Part 2, the prefill freeze: a steady stream of short requests, one long prompt injected into it, with chunked
prefill off and on at several token budgets. One server session per configuration; one point per prompt length.

Each point: a mixed warm-up (the background with one long prompt of the point's length, so every shape the
measurement meets is compiled first), then the measured pass: `solo` long prompts alone on the idle server (the
prefill time without a batch), then the background stream at a fixed rate with `injections` long prompts sent
into it one after another (the repeats). See inject.py for the client and freeze.py for the definitions.
"""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
import numpy as np
import pandas as pd

from ..measure import freeze
from ..run.bench import Workload, PassSpec
from ..measure.analysis import Interval, combine
from ..measure.claims import NOT_MEASURED, Claim, Judgement, Missing, fmt_num, need
from ..errors import UserError
from ..run.inject import InjectSpec, injection
from ..run.trace import traced_injection
from ..model.modelshape import ModelShape
from ..records.reference import load_reference
from ..schema import PARTS, PUBLISHED_RIG
from ..records.store import bench_result, derived, load_points, open_artefact, read_artefact, read_text
from ..run.sweep import PassPlan, PointPlan
from ..model.weightbytes import config_matmul_params  # noqa: F401  (its home is weightbytes; p02's name stays)
from .protocol import DATA_DIR, REFERENCE, Part, judged

NAME = "02-prefill-freeze"
NOTEBOOK = "notebooks/02-prefill-freeze.md"

OFF = 0  # a budget of 0 in `budgets`: chunked prefill off
A10G_BUDGET = 2048  # vLLM's default max_num_batched_tokens for a served model on a GPU under 70 GiB (the A10G)
H200_BUDGET = 8192  # ... and at or above it (not an A100): vLLM 0.22.1, EngineArgs.get_batch_defaults
BIG_GPU_GIB = 70

DEFAULTS = {
    "input_len": 256,  # the background: the series' 256 in / 128 out
    "output_len": 128,
    "background_rate_rps": 8.0,  # the background's fixed offered rate (Poisson arrivals)
    "max_num_seqs": 256,
    "prompt_lens": [4096, 8192, 16384, 32768],  # the long prompts
    "long_output_len": 16,  # the long request's own output tokens
    "budgets": [OFF, A10G_BUDGET, H200_BUDGET, 512],  # max_num_batched_tokens per session, in run order (the claims need
    # off and 2,048 first); 0: chunked prefill off
    "long_prefill_token_threshold": None,  # optional: passed to the chunked sessions (--long-prefill-token-threshold)
    "injections": 3,  # long prompts per measured pass: the repeats
    "first_after_s": 3.0,  # first injection after the bench's main run starts
    "spacing_s": 4.0,  # between injections
    "tail_s": 3.0,  # background after the last injection's slot
    "solo": 2,  # long prompts alone before the measured background
    "warmup_background_s": 4.0,  # the mixed warm-up's background
    "seed": 0,
    "trace": False,  # one more point per configuration, last in its session: the torch profiler around one long prompt
    "trace_prompt_len": None,  # the traced prompt's length (default: the middle of prompt_lens)
    "trace_decode_s": 0.3,  # the decode-only window traced before it
    "peak_dense_tflops": None,  # the rig's peak dense fp16/bf16 FLOP/s, for the prefill roofline (set per rig profile)
    "peak_source": None,  # where that peak comes from (shown with it)
    # Back to part 1: part 1's server and workload at part 1's knee rate on the same rig, one server per budget
    "knee_budgets": None,  # max_num_batched_tokens per knee server (None: the chunked budgets above; []: none)
    "knee_rps": None,  # the offered rate (None: part 1's knee on this rig, from its data; no knee, no knee points)
    "knee_window_s": 20.0,  # the measured pass's length at that rate
}


def config_name(budget: int) -> str:
    return "off" if budget == OFF else f"b{budget:05d}"


def point_name(budget: int, prompt_len: int) -> str:
    return f"{config_name(budget)}-p{prompt_len:05d}"


def max_model_len(p: dict) -> int:
    """Room for the longest prompt, its output, and a decode token of every running sequence beside it."""
    return max(p["prompt_lens"]) + p["long_output_len"] + p["max_num_seqs"]


def trace_dir(rig: str, budget: int) -> Path:
    """Where the profiler of one session writes its traces (absolute, as vLLM requires; outside the repo: the point
    keeps a summary, and a raw trace only when small)."""
    return Path(tempfile.gettempdir()) / "iw-trace" / rig / config_name(budget)


def session_args(p: dict, budget: int, rig: str = "rig") -> list[str]:
    mml = max_model_len(p)
    args = ["--enable-logging-iteration-details", "--max-model-len", str(mml)]
    if p["trace"]:
        config = {"profiler": "torch", "torch_profiler_dir": str(trace_dir(rig, budget)),
                  "torch_profiler_with_stack": False, "ignore_frontend": True,
                  "torch_profiler_dump_cuda_time_total": False}
        args += ["--profiler-config", json.dumps(config)]
    if budget == OFF:  # the whole prompt in one step: the budget must hold it (vLLM refuses less than max_model_len)
        return args + ["--no-enable-chunked-prefill", "--max-num-batched-tokens", str(mml)]
    args += ["--enable-chunked-prefill", "--max-num-batched-tokens", str(budget)]
    if p["long_prefill_token_threshold"]:
        args += ["--long-prefill-token-threshold", str(p["long_prefill_token_threshold"])]
    return args


def token_range(preset: str) -> tuple[int, int]:
    """Ordinary token ids of the preset's vocabulary for the long prompts (special tokens sit at its top)."""
    return 100, int(0.9 * ModelShape.of(preset).vocab_size)


def check(p: dict) -> None:
    if p["input_len"] >= min(p["prompt_lens"]):
        raise UserError(f"part 2: every long prompt must be longer than a background prompt ({p['input_len']} tokens); "
                        f"prompt_lens {p['prompt_lens']}")
    small = [b for b in p["budgets"] if b != OFF and b < p["max_num_seqs"]]
    if small:
        raise UserError(f"part 2: budgets {small} are below max_num_seqs {p['max_num_seqs']} (vLLM refuses them)")
    if p["background_rate_rps"] <= 0:
        raise UserError(f"part 2: background_rate_rps must be positive, not {p['background_rate_rps']}")


def knee_budgets(p: dict) -> list[int]:
    return [b for b in p["budgets"] if b != OFF] if p["knee_budgets"] is None else [int(b) for b in p["knee_budgets"]]


def knee_points(p: dict, profile, data_dir=None) -> list[PointPlan]:
    """Back to part 1: one server per budget with part 1's configuration and workload (its max_num_seqs, prompt and
    output lengths, on this rig) plus `--max-num-batched-tokens`, offered part 1's knee rate for a fixed window.
    Whether a budget moves the knee: at the rate where part 1's server (vLLM's default budget) fell behind, does
    this one keep up? Without a knee (part 1 not run on this rig, or it never fell behind) there are none."""
    from . import parameters
    from .p01 import part1_knee

    budgets = knee_budgets(p)
    rate = p["knee_rps"] or (part1_knee(profile.name, data_dir) if budgets else None)
    if not budgets or not rate:
        return []
    p1 = parameters(1, profile.name, data_dir)
    source = "parameter knee_rps" if p["knee_rps"] else "part 1's knee on this rig"
    return [PointPlan(name=f"knee-b{b:05d}", session=f"knee-b{b:05d}", max_num_seqs=p1["max_num_seqs"],
                      passes=[PassPlan("bench", "measured", PassSpec(num_prompts=max(8, math.ceil(rate * p["knee_window_s"])),
                                                                     request_rate=float(rate), seed=7_000 + i))],
                      serve_args=["--enable-chunked-prefill", "--max-num-batched-tokens", str(b)],
                      workload=Workload(p1["input_len"], p1["output_len"]),
                      params={"kind": "knee", "budget": b, "offered_rate_rps": float(rate), "knee_from": source})
            for i, b in enumerate(budgets)]


def plan(p: dict, profile, pools: dict | None = None, data_dir=None) -> list[PointPlan]:
    check(p)
    low, high = token_range(profile.model_preset)
    rate = float(p["background_rate_rps"])
    seeds = iter(range(1, 100_000))
    plans = []
    for budget in p["budgets"]:
        for length in p["prompt_lens"]:
            name = point_name(budget, length)
            warm = InjectSpec(prompt_len=length, output_len=p["long_output_len"], count=1, first_after_s=1.0,
                              seed=next(seeds), token_low=low, token_high=high)
            measured = InjectSpec(prompt_len=length, output_len=p["long_output_len"], count=p["injections"],
                                  first_after_s=p["first_after_s"], spacing_s=p["spacing_s"], solo=p["solo"],
                                  seed=next(seeds), token_low=low, token_high=high)
            window_s = p["first_after_s"] + p["injections"] * p["spacing_s"] + p["tail_s"]
            passes = [
                PassPlan("warmup-mixed", "warmup",
                         PassSpec(num_prompts=max(4, math.ceil(rate * p["warmup_background_s"])), request_rate=rate,
                                  seed=50_000 + next(seeds), detailed=False), side=injection(warm)),
                PassPlan("bench", "measured", PassSpec(num_prompts=math.ceil(rate * window_s), request_rate=rate,
                                                       seed=next(seeds)), side=injection(measured)),
            ]
            plans.append(PointPlan(name=name, session=config_name(budget), max_num_seqs=p["max_num_seqs"],
                                   passes=passes, serve_args=session_args(p, budget, profile.name),
                                   params={"budget": budget, "chunked": budget != OFF, "prompt_len": length,
                                           "background_rate_rps": rate, "max_model_len": max_model_len(p)}))
        if p["trace"]:
            plans.append(trace_point(p, profile, budget, rate, low, high, seeds))
    return plans + knee_points(p, profile, data_dir)


def trace_length(p: dict) -> int:
    lens = sorted(p["prompt_lens"])
    return int(p["trace_prompt_len"] or lens[len(lens) // 2])


def trace_point(p: dict, profile, budget: int, rate: float, low: int, high: int, seeds) -> PointPlan:
    """The profiler pass of one configuration: the same warm-up, then a background with one long prompt, traced."""
    length = trace_length(p)
    warm = InjectSpec(prompt_len=length, output_len=p["long_output_len"], count=1, first_after_s=1.0,
                      seed=next(seeds), token_low=low, token_high=high)
    traced = InjectSpec(prompt_len=length, output_len=p["long_output_len"], count=1, first_after_s=p["first_after_s"],
                        seed=next(seeds), token_low=low, token_high=high)
    window_s = p["first_after_s"] + p["spacing_s"] + p["tail_s"]
    passes = [
        PassPlan("warmup-mixed", "warmup", PassSpec(num_prompts=max(4, math.ceil(rate * p["warmup_background_s"])),
                                                    request_rate=rate, seed=50_000 + next(seeds), detailed=False),
                 side=injection(warm)),
        PassPlan("bench", "measured", PassSpec(num_prompts=math.ceil(rate * window_s), request_rate=rate,
                                               seed=next(seeds)),
                 side=traced_injection(traced, trace_dir(profile.name, budget), p["trace_decode_s"])),
    ]
    return PointPlan(name=f"{config_name(budget)}-trace", session=config_name(budget), max_num_seqs=p["max_num_seqs"],
                     passes=passes, serve_args=session_args(p, budget, profile.name),
                     params={"kind": "trace", "budget": budget, "chunked": budget != OFF, "prompt_len": length,
                             "background_rate_rps": rate, "max_model_len": max_model_len(p)})


def measured_points(data_dir=None, rigs: list[str] | None = None) -> list:
    """The freeze points (not the traced ones, whose profiler slows the steps it records, nor the knee points)."""
    return [pt for pt in load_points(NAME, data_dir, rigs) if pt.params.get("kind") not in ("trace", "knee")]


def knee_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Back to part 1, per rig: part 1's own pass at its knee rate (vLLM's default budget, read from its log) and
    each knee point's (one budget each): completed against offered, whether it kept up (part 1's rule), the
    latencies, and the split of generation throughput between intervals that also prefilled and decode alone."""
    from . import p01
    from ..records.store import pass_summary

    rows = []

    def row(pt, budget, source):
        s = pass_summary(pt)
        rate = float(pt.params["offered_rate_rps"])
        mix = p01.mixed_split(pt, rate) or {}
        return {"rig": pt.rig, "budget": budget, "server": source, "offered_rate_rps": rate,
                "completed_rps": s["completed_rps"], "completed_share": s["completed_rps"] / rate,
                "kept_up": s["completed_rps"] / rate >= p01.KEEP_UP, "ttft_p50_ms": s["ttft_p50_ms"],
                "ttft_p99_ms": s["ttft_p99_ms"], "itl_p50_ms": s["itl_p50_ms"], "itl_p99_ms": s["itl_p99_ms"],
                "gen_with_prefill_tok_s": mix.get("gen_with_prefill_tok_s", math.nan),
                "gen_decode_only_tok_s": mix.get("gen_decode_only_tok_s", math.nan),
                "needed_gen_tok_s": mix.get("needed_gen_tok_s", math.nan)}

    knees = [pt for pt in load_points(NAME, data_dir, rigs) if pt.params.get("kind") == "knee"]
    for rig in sorted({pt.rig for pt in knees}):
        rate = float(next(pt for pt in knees if pt.rig == rig).params["offered_rate_rps"])
        part1 = p01.measured_points(data_dir, [rig]).get(rig, {})
        same = [pt for pt in part1.values() if pt.params.get("kind") == "rate"
                and math.isclose(float(pt.params["offered_rate_rps"]), rate, rel_tol=1e-9)]
        if same:
            starts = (q.startup() for q in part1.values())
            default = next((r.max_num_batched_tokens for r in starts if r is not None and r.max_num_batched_tokens), None)
            rows.append(row(same[0], default if default else math.nan, "part 1 (vLLM's default budget)"))
        rows += [row(pt, int(pt.params["budget"]), "knee point") for pt in knees if pt.rig == rig]
    cols = ["rig", "budget", "server", "offered_rate_rps", "completed_rps", "completed_share", "kept_up", "ttft_p50_ms",
            "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "gen_with_prefill_tok_s", "gen_decode_only_tok_s",
            "needed_gen_tok_s"]
    return pd.DataFrame(rows, columns=cols)


def knee_findings(knees: pd.DataFrame) -> str:
    """What the knee table says, per rig: each budget's completed share at part 1's knee rate, whether any budget
    kept up, and, where a knee point ran part 1's own budget (the same configuration in a new server session), how
    far the two sessions differ: a budget whose share differs from part 1's by less than that is within the spread
    between sessions, not an effect of the budget."""
    lines = []
    for rig, k in knees.groupby("rig", sort=True):
        rate = k["offered_rate_rps"].iloc[0]
        said = "; ".join(f"budget {int(r.budget):,}" + (" (part 1's server)" if r.server != "knee point" else "")
                         + f" completed {r.completed_share:.0%}" for r in k.dropna(subset=["budget"]).itertuples())
        moved = [int(r.budget) for r in k.itertuples() if r.server == "knee point" and r.kept_up]
        line = f"On {rig}, offered {rate:.1f} req/s: {said}. " + (
            f"Budget{'s' if len(moved) > 1 else ''} {', '.join(f'{b:,}' for b in moved)} kept up: the budget moved the "
            "knee." if moved else "No budget kept up: the budget did not move the knee on this rig.")
        part1 = k[k["server"] != "knee point"].dropna(subset=["budget"])
        if len(part1):
            default = part1.iloc[0]
            again = k[(k["server"] == "knee point") & (k["budget"] == default["budget"])]
            if len(again):
                gap = abs(float(again["completed_share"].iloc[0]) - float(default["completed_share"]))
                others = k[(k["server"] == "knee point") & (k["budget"] != default["budget"])]
                beyond = [int(r.budget) for r in others.itertuples()
                          if abs(r.completed_share - default["completed_share"]) > gap]
                line += (f" The knee point at budget {int(default['budget']):,} repeats part 1's configuration in a new "
                         f"server session: it completed {float(again['completed_share'].iloc[0]):.0%} against part 1's "
                         f"{float(default['completed_share']):.0%}, {100 * gap:.1f} points apart (one pair of sessions: one sample of "
                         "their spread). " + (
                             f"Budget{'s' if len(beyond) > 1 else ''} {', '.join(f'{b:,}' for b in beyond)} differ"
                             f"{'' if len(beyond) > 1 else 's'} from part 1's share by more than that."
                             if beyond else "No other budget differs from part 1's share by more than that."))
        lines.append(line)
    return " ".join(lines)


# ---------------------------------------------------------------------------------------------
# Replay: per injection, per configuration and prompt length, per rig
# ---------------------------------------------------------------------------------------------


def _injections(pt, label: str = "bench") -> dict:
    return json.loads(read_artefact(pt.path, f"{label}-inject.json"))


def _steps(pt) -> pd.DataFrame:
    from ..records.logs import parse_iterations

    path = open_artefact(pt.path, "server.log")
    return derived("iterations", path, lambda: parse_iterations(read_text(path), path))


def _ttft_ms(rec: dict) -> float:
    return 1000 * (rec["token_times"][0] - rec["sent"]) if rec.get("token_times") else math.nan


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
    solo_ttft = [_ttft_ms(r) for r in inj["solo"]]
    rows = []
    for k, rec in enumerate(recs):
        f = freeze.freeze_in_window(streams, rec["sent"], rec["token_times"][0], base_s)
        row = {"rig": pt.rig, "point": pt.name, "budget": int(pt.params["budget"]), "prompt_len": length,
               "injection": k, "ttft_ms": _ttft_ms(rec), "baseline_itl_ms": 1000 * base_s,
               "solo_ttft_ms": float(np.median(solo_ttft)) if solo_ttft else math.nan,
               "solo_ttft_min_ms": min(solo_ttft) if solo_ttft else math.nan,
               "solo_ttft_max_ms": max(solo_ttft) if solo_ttft else math.nan,
               "solo_step_ms": float(np.median([steps.iloc[r]["elapsed_ms"].sum() for r in solo_runs]))
               if solo_runs else math.nan,
               "decode_step_ms": freeze.decode_step_ms(bench_steps), **f.as_dict(),
               **freeze.step_summary(steps, measured_runs[k] if k < len(measured_runs) else [])}
        rows.append(row)
    return pd.DataFrame(rows)


INJECTION_COLUMNS = ["rig", "point", "budget", "prompt_len", "injection", "ttft_ms", "baseline_itl_ms", "solo_ttft_ms",
                     "solo_ttft_min_ms", "solo_ttft_max_ms",
                     "solo_step_ms", "decode_step_ms", "streams", "freeze_ms", "freeze_max_ms", "lost_ms",
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


def comparable_length(frame: pd.DataFrame, rig: str) -> int | None:
    """The longest prompt a rig measured both with chunking off and at a budget below the prompt (the length at
    which the configurations compare); else its longest with chunking off; None without either."""
    f = frame[(frame["rig"] == rig)].dropna(subset=["freeze_ms"])
    off = set(f[f["budget"] == OFF]["prompt_len"])
    both = [n for n in off if ((f["prompt_len"] == n) & (f["budget"] != OFF) & (f["budget"] < n)).any()]
    return int(max(both)) if both else (int(max(off)) if off else None)


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


def timeline_table(data_dir=None, rig: str | None = None, prompt_len: int | None = None, injection_no: int = 0,
                   before: int = 8, after: int = 8) -> pd.DataFrame:
    """The engine's steps around one injection, per configuration (from the iteration log): for the step timeline.
    Only servers whose iteration log times its steps: under asynchronous scheduling the log's elapsed time is a wait
    for a result, not a step (steps_timed), and an untimed step is not drawn as a time."""
    frames = []
    pts = measured_points(data_dir, [rig] if rig else None)
    modes = _async_by_session(pts)
    for pt in pts:
        if prompt_len is not None and int(pt.params["prompt_len"]) != prompt_len:
            continue
        if modes.get((pt.rig, pt.record.session_id)) is True:
            continue
        steps = _steps(pt)
        inj = _injections(pt)
        runs = freeze.long_prompt_steps(steps, int(pt.params["prompt_len"]),
                                        int(pt.record.workload.get("input_len", 256))) if len(steps) else []
        n = len(inj["injections"])
        if len(runs) < n or injection_no >= n:
            continue
        t = freeze.timeline(steps, runs[len(runs) - n + injection_no], before, after)
        frames.append(t.assign(rig=pt.rig, budget=int(pt.params["budget"]), config=config_label(int(pt.params["budget"])),
                               prompt_len=int(pt.params["prompt_len"])))
    if not frames:
        return pd.DataFrame(columns=["rig", "config", "budget", "prompt_len", "step", "elapsed_ms", "ctx_tokens",
                                     "gen_tokens", "long_prompt"])
    return pd.concat(frames, ignore_index=True)[["rig", "config", "budget", "prompt_len", "step", "elapsed_ms",
                                                 "ctx_tokens", "gen_tokens", "gen_reqs", "long_prompt"]]


def token_timeline(data_dir=None, rig: str | None = None, prompt_len: int | None = None, injection_no: int = 0,
                   before_s: float = 0.5, after_s: float = 0.5, max_streams: int = 6) -> pd.DataFrame:
    """Background tokens around one injection, per configuration, in ms from the long prompt's send (row per token;
    at most `max_streams` streams per configuration, those decoding across the window first: with 128 tokens a
    stream, four configurations stay under the 5,000 rows a chart may draw unaggregated)."""
    rows = []
    for pt in measured_points(data_dir, [rig] if rig else None):
        if prompt_len is not None and int(pt.params["prompt_len"]) != prompt_len:
            continue
        recs = _injections(pt)["injections"]
        if injection_no >= len(recs) or not recs[injection_no].get("token_times"):
            continue
        rec = recs[injection_no]
        sent, first = rec["sent"], rec["token_times"][0]
        streams = freeze.stream_token_times(bench_result(open_artefact(pt.path, "bench.json")).raw)
        near = [t for t in streams if len(t) and t[-1] > sent - before_s and t[0] < first + after_s]
        near.sort(key=lambda t: not (t[0] < sent and t[-1] > first))
        budget = int(pt.params["budget"])
        for s, t in enumerate(near[:max_streams]):
            keep = t[(t > sent - before_s) & (t < first + after_s)]
            rows += [{"rig": pt.rig, "config": config_label(budget), "budget": budget, "stream": s,
                      "t_ms": 1000 * (x - sent)} for x in keep]
        rows += [{"rig": pt.rig, "config": config_label(budget), "budget": budget, "stream": -1,
                  "t_ms": 1000 * (x - sent)} for x in rec["token_times"] if x < first + after_s]
    return pd.DataFrame(rows, columns=["rig", "config", "budget", "stream", "t_ms"])


# ---------------------------------------------------------------------------------------------
# The prefill roofline
# ---------------------------------------------------------------------------------------------


def matmul_params(pt) -> float | None:
    """config_matmul_params of the model a point's server loaded (its preset's config); None where unknown."""
    model = pt.record.model
    try:
        return float(ModelShape.of(model["preset"]).matmul_params)
    except (KeyError, OSError, ValueError, UserError):
        return None


def roofline_table(freezes: pd.DataFrame, data_dir=None, params_by_rig: dict[str, float | None] | None = None,
                   peaks: dict[str, dict] | None = None) -> pd.DataFrame:
    """Per rig and prompt length: the prefill's compute floor (2 x the language model's matmul parameters x tokens /
    the rig's peak dense FLOP/s, the peak from the rig profile's part-2 parameters) beside the solo prefill time
    measured with chunking off (TTFT alone on the idle server: a chunked server's solo prompt is several steps).
    `params_by_rig` and `peaks` (rig -> {"peak_dense_tflops", "peak_source"}) replace what the points and the rig
    profiles say."""
    from . import parameters

    rows = []
    if params_by_rig is None:
        params_by_rig = {}
        for pt in load_points(NAME, data_dir, sorted(set(freezes["rig"])) if len(freezes) else []):
            if params_by_rig.get(pt.rig) is None:
                params_by_rig[pt.rig] = matmul_params(pt)
    off = freezes[freezes["budget"] == OFF] if len(freezes) else freezes
    solo = off.groupby(["rig", "prompt_len"])["solo_ttft_ms"].median().reset_index() if len(off) else off
    for r in solo.itertuples():
        p = (peaks or {}).get(r.rig) if peaks is not None else parameters(NAME, r.rig, data_dir)
        p = p or {}
        peak = p.get("peak_dense_tflops")
        n = params_by_rig.get(r.rig)
        floor = freeze.compute_floor_ms(n, r.prompt_len, peak * 1e12) if (peak and n) else math.nan
        rows.append({"rig": r.rig, "prompt_len": r.prompt_len, "params_b": n / 1e9 if n else math.nan,
                     "peak_dense_tflops": peak if peak else math.nan, "compute_floor_ms": floor,
                     "solo_ttft_ms": r.solo_ttft_ms, "floor_fraction": floor / r.solo_ttft_ms if peak and n else math.nan,
                     "peak_source": p.get("peak_source") or "no peak on record for this rig"})
    return pd.DataFrame(rows, columns=["rig", "prompt_len", "params_b", "peak_dense_tflops", "compute_floor_ms",
                                       "solo_ttft_ms", "floor_fraction", "peak_source"])


# ---------------------------------------------------------------------------------------------
# Per-rig views and claims
# ---------------------------------------------------------------------------------------------


def rig_view(injections: pd.DataFrame, rig: str, claim_budget: int = A10G_BUDGET) -> dict:
    """What the claims need about one rig. `off`: at its longest prompt measured with chunking off (`prompt_len`),
    where the prefill dominates every other cost; `off_cmp` and `chunked`: at the longest prompt measured both off and
    at a budget below it (`cmp_len`, comparable_length), at the claim budget or else the smallest measured one. Each
    side: the freeze over the repeats, the prompt's solo prefill time (TTFT alone, over the solo prompts), the
    background's baseline gap, as Intervals; `steps_timed`: whether the iteration log's elapsed times are step times
    (not under asynchronous scheduling, see steps_timed)."""
    f = injections[injections["rig"] == rig].dropna(subset=["freeze_ms"])
    view: dict = {"rig": rig}
    off_lens = f[f["budget"] == OFF]["prompt_len"]
    if not len(off_lens):
        return view
    longest, cmp_len = int(off_lens.max()), comparable_length(f, rig)

    def side(b: int, n: int) -> dict:
        rows = f[(f["budget"] == b) & (f["prompt_len"] == n)]
        mean_step = (rows["ttft_ms"] / rows["prefill_steps"].where(rows["prefill_steps"] > 0)).dropna()
        return {"freeze": Interval.spread(rows["freeze_ms"]), "ttft": Interval.spread(rows["ttft_ms"]),
                "solo": Interval(float(rows["solo_ttft_ms"].median()), float(rows["solo_ttft_min_ms"].min()),
                                 float(rows["solo_ttft_max_ms"].max())),
                "baseline_ms": float(rows["baseline_itl_ms"].median()),
                "max_step": Interval.spread(rows["max_step_ms"]),
                "mean_step": Interval.spread(mean_step) if len(mean_step) else None,
                "steps": float(rows["prefill_steps"].median())}

    view.update(prompt_len=longest, off=side(OFF, longest), cmp_len=cmp_len, off_cmp=side(OFF, cmp_len))
    view["off_by_len"] = {int(n): side(OFF, int(n)) for n in sorted(set(off_lens))}
    view["shrink_by_len"] = {}  # freeze off / freeze at the claim budget, at each length measured both ways
    for n in sorted(set(off_lens)):
        at_b = f[(f["budget"] == claim_budget) & (f["prompt_len"] == n)]
        if claim_budget < n and len(at_b):
            view["shrink_by_len"][int(n)] = combine(lambda a, d: a / d, view["off_by_len"][int(n)]["freeze"],
                                                    side(claim_budget, int(n))["freeze"])
    at = f[f["prompt_len"] == cmp_len]
    view["steps_timed"] = bool(steps_timed(at).all()) if "async_scheduling" in at else True
    chunked = sorted(b for b in set(at["budget"]) if b != OFF and b < cmp_len)
    budget = claim_budget if claim_budget in chunked else (chunked[0] if chunked else None)
    if budget is not None:
        view.update(budget=budget, chunked=side(budget, cmp_len))
    return view


def predicted_freeze(solo: Interval, prompt_len: int, budget: int | None, baseline_ms: float) -> Interval:
    """freeze.predicted_freeze_ms over the solo prefill's spread: the prefill share of the longest step, plus between
    none and one decode step (the central value takes half of one)."""
    lo, _ = freeze.predicted_freeze_ms(solo.low, prompt_len, budget, baseline_ms)
    mid_lo, mid_hi = freeze.predicted_freeze_ms(solo.value, prompt_len, budget, baseline_ms)
    _, hi = freeze.predicted_freeze_ms(solo.high, prompt_len, budget, baseline_ms)
    return Interval((mid_lo + mid_hi) / 2, lo, hi)


_fmt = fmt_num  # words.number


def _freeze_off_at(n: int):
    """freeze-is-prefill at one prompt length: the freeze with chunking off against that prompt's solo prefill."""
    def judge(v: dict) -> Judgement:
        o = (v.get("off_by_len") or {}).get(n)
        if o is None:
            raise Missing(f"freeze with chunking off at {n:,} tokens")
        return _freeze_off_side(o, n)
    return judge


def _freeze_off_side(o: dict, n: int) -> Judgement:
    pred = predicted_freeze(o["solo"], n, None, o["baseline_ms"])
    how = (f"{n:,}-token prompt alone: TTFT {_fmt(o['solo'].value)} ms; + 0 to 1 decode step of "
           f"{_fmt(o['baseline_ms'])} ms = {_fmt(pred.low)} to {_fmt(pred.high)} ms")
    return Judgement(pred, o["freeze"], how)


def _freeze_chunked(v: dict) -> Judgement:
    c, n, b = need(v, "chunked"), need(v, "cmp_len"), need(v, "budget")
    pred = predicted_freeze(c["solo"], n, b, c["baseline_ms"])
    how = (f"{_fmt(c['solo'].value)} ms x {b:,} / {n:,} tokens = {_fmt(c['solo'].value * b / n)} ms; + 0 to 1 decode "
           f"step of {_fmt(c['baseline_ms'])} ms = {_fmt(pred.low)} to {_fmt(pred.high)} ms")
    return Judgement(pred, c["freeze"], how)


def _chunk_step(v: dict) -> Judgement:
    """The step that carried a chunk, from the server's side: the longest logged step where the iteration log times
    steps; where vLLM scheduled asynchronously (the log times a wait, not a step), the long prompt's own TTFT over the
    number of steps the log shows carrying it (the log still counts each step's prompt tokens): the mean such step."""
    c, b = need(v, "chunked"), need(v, "budget")
    base = c["baseline_ms"]
    if v.get("steps_timed", True):
        step = c["max_step"]
        what = f"longest step carrying the prompt at budget {b:,} (iteration log, over the repeats): {_fmt(step.value)} ms"
    else:
        step = c["mean_step"]
        if step is None:  # no step of the log carried the prompt
            raise Missing("the steps that carried the prompt in the iteration log")
        what = (f"the prompt's TTFT in the stream over the {c['steps']:.0f} steps that carried it at budget {b:,} "
                f"(vLLM scheduled asynchronously: the log counts steps, does not time them): {_fmt(step.value)} ms")
    pred = Interval(step.value + base / 2, step.low, step.high + base)
    return Judgement(pred, c["freeze"], f"{what}; + 0 to 1 decode step of {_fmt(base)} ms = {_fmt(pred.low)} to "
                                        f"{_fmt(pred.high)} ms")


def _shrink(v: dict) -> Judgement:
    o, c, n, b = need(v, "off_cmp"), need(v, "chunked"), need(v, "cmp_len"), need(v, "budget")
    p_off = predicted_freeze(o["solo"], n, None, o["baseline_ms"])
    p_on = predicted_freeze(c["solo"], n, b, c["baseline_ms"])
    pred = combine(lambda a, d: a / d, p_off, p_on)
    meas = combine(lambda a, d: a / d, o["freeze"], c["freeze"])
    how = (f"predicted freeze off / at budget {b:,} ({n:,}-token prompt): {_fmt(p_off.value)} / {_fmt(p_on.value)} ms "
           f"= {_fmt(pred.value)}x")
    return Judgement(pred, meas, how)


def _published_shrink(v: dict) -> Judgement:
    """The post's shrink against this rig's at the A10G's budget, at every prompt length measured both ways: the
    measurement spans the rig's shrinks over the lengths (the post does not give its prompt's length)."""
    post = need(v, "published_shrink")
    by_len = v.get("shrink_by_len") or {}
    if not by_len:
        raise Missing(f"a freeze at the A10G's budget of {A10G_BUDGET:,}")
    n = max(by_len)
    at = by_len[n]
    meas = Interval(at.value, min(i.low for i in by_len.values()), max(i.high for i in by_len.values()))
    how = (f"the post's {post.value:g}x (its prompt length not given) against this rig's freeze off / at budget "
           f"{A10G_BUDGET:,}, per prompt length: " + "; ".join(f"{k:,} tokens {_fmt(i.value)}x" for k, i in sorted(by_len.items())))
    return Judgement(post, meas, how)


NOT_COMPARABLE = "not comparable"


class _LengthFreeClaim(Claim):
    """A claim against a published figure whose prompt length the post never gives: where the rig's measurement
    over the lengths it ran spans the figure (or one length alone was run), the figure is not comparable with it;
    differs only where no length measured comes near it."""

    def evaluate(self, view: dict, ref: dict | None = None) -> dict:
        row = super().evaluate(view, ref)
        if row["verdict"] == NOT_MEASURED:
            return row
        j = self.judge(view)
        by_len = view.get("shrink_by_len") or {}
        overlap = j.predicted.low <= j.measured.high and j.measured.low <= j.predicted.high
        if overlap or len(by_len) < 2:
            row.update(verdict=NOT_COMPARABLE, note=self.why)
        return row


def reference_view(data_dir=None) -> dict:
    f = load_reference(2, data_dir)["facts"]
    facts = dict(zip(f["key"], f["value"]))
    facts["a10g_budget"] = A10G_BUDGET
    return facts


def with_reference(view: dict, ref: dict) -> dict:
    """A rig's view with the post's figures its claims compare with."""
    return {**view, "published_shrink": Interval.printed(ref["freeze_shrink_chunked"])}


def length_id(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else f"{n}"


def freeze_is_prefill(n: int) -> Claim:
    """freeze-is-prefill judged at one prompt length (the freeze's share of the solo prefill changes with it)."""
    return Claim(f"freeze-is-prefill-{length_id(n)}",
                 f"A long prompt freezes every stream that is decoding beside it (prompt of {n:,} tokens).",
                 f"with chunking off, the freeze at {n:,} tokens = that prompt's prefill time measured alone (TTFT on "
                 "the idle server) + 0 to 1 decode step", "ms", _freeze_off_at(n), (0.8, 1.25),
                 "a freeze shorter than the solo TTFT: a candidate is that the TTFT also holds what the server does "
                 "before the prefill step (receiving, tokenizing and scheduling the prompt), which stalls no stream; "
                 "a freeze longer than it means more than the prefill stalled the streams (the scheduler holding "
                 "decodes back, a first-seen shape compiling)")


def claims_for(lengths) -> list[Claim]:
    """Part 2's claims with freeze-is-prefill at each of `lengths`."""
    return [freeze_is_prefill(int(n)) for n in sorted(set(lengths))] + OTHER_CLAIMS


def page_claims(views: dict[str, dict]) -> list[Claim]:
    """The claims for the rigs shown: freeze-is-prefill at every length any of them measured with chunking off
    (the part's default lengths where none did)."""
    lengths = {n for v in views.values() for n in (v.get("off_by_len") or {})}
    return claims_for(lengths or DEFAULTS["prompt_lens"])


OTHER_CLAIMS = [
    Claim("freeze-is-one-chunk", "With chunked prefill the freeze shrinks.",
          "with chunking on, the freeze = one budget's share of the solo prefill time (solo TTFT x budget / prompt) + 0 "
          "to 1 decode step", "ms", _freeze_chunked, (0.75, 1.33),
          "a chunk step costs more than its share of the solo prefill when a fixed cost per step dominates (small "
          "chunks, a small model) or when late chunks attend over a long prefix, less when the decodes ride free"),
    Claim("freeze-is-one-step", "With chunked prefill the streams wait one chunk step at a time.",
          "with chunking on, the freeze (client side) = one engine step that carried part of the prompt (server side, "
          "vLLM's iteration log: its longest such step, or, where vLLM schedules asynchronously and the log does not "
          "time steps, the prompt's TTFT over the steps the log shows carrying it) + 0 to 1 decode step", "ms",
          _chunk_step, (0.8, 1.25),
          "a stall outside the model (the scheduler, the HTTP stream) shows in the freeze and not in the log; late "
          "chunks attend over a longer prefix, so the longest chunk step exceeds the mean one that TTFT over steps "
          "gives"),
    Claim("shrink-ratio", "Flipping one flag shrinks the freeze by a factor.",
          "freeze off / freeze chunked = the ratio of the two predictions above", "x", _shrink, (0.75, 1.33),
          "the ratio inherits both predictions' errors"),
    _LengthFreeClaim("published-shrink", "On the A10G, chunked prefill (budget {a10g_budget:,.0f}) shrank the freeze "
                     "{freeze_shrink_chunked:g}x.",
                     "this rig's shrink at the same budget at every prompt length it measured both ways, against the "
                     "post's figure (the post does not state its prompt length); not comparable where the rig's "
                     "shrinks over the lengths span the figure", "x", _published_shrink, (0.75, 1.33),
                     "the shrink grows with the prompt's length over the budget and with how much of a step is fixed "
                     "cost; the post states neither its prompt length nor the freeze's definition"),
]

CLAIMS = claims_for(DEFAULTS["prompt_lens"])


# ---------------------------------------------------------------------------------------------
# Sentences for the page
# ---------------------------------------------------------------------------------------------


def no_data_note() -> str:
    return ("**Not measured yet.** No rig shown on this page has run part 2's freeze points. `make reproduce PART=2 RIG=<rig>` runs it "
            "(on the H200: see `gpu/README.md`); the CPU test rig's run is on the [method page](../book/method.md), "
            "where it only shows that the path works.")


def findings(freezes: pd.DataFrame, rig: str) -> str:
    """One paragraph per rig: the freeze off and at each budget for its longest prompt, against the prediction."""
    f = freezes[freezes["rig"] == rig]
    if not len(f):
        return f"**{rig}:** no complete point."
    longest = comparable_length(f, rig)
    if longest is None:
        return f"**{rig}:** no complete point with chunking off."
    at = f[f["prompt_len"] == longest].sort_values("budget", key=lambda b: b.where(b > 0, 10**9), ascending=False)
    parts_ = []
    for r in at.itertuples():
        parts_.append(f"{r.config}: {fmt_num(r.freeze_ms)} ms (range {fmt_num(r.freeze_min_ms)} to "
                      f"{fmt_num(r.freeze_max_ms)} over {r.repeats} repeat{'s' if r.repeats != 1 else ''}; predicted {fmt_num(r.predicted_low_ms)} to "
                      f"{fmt_num(r.predicted_high_ms)} ms), the long prompt's TTFT {fmt_num(r.ttft_ms)} ms")
    off = at[at["budget"] == OFF]
    solo = (f"; alone on the idle server its time to first token was {fmt_num(off['solo_ttft_ms'].iloc[0])} ms"
            if len(off) else "")
    longer = sorted(set(f[f["prompt_len"] > longest]["prompt_len"]))
    more = (f" Longer prompts ({', '.join(f'{int(n):,}' for n in longer)} tokens) were measured with chunking off only "
            "(the table above)." if longer else "")
    both = " (the longest measured both with chunking off and on)" if (at["budget"] != OFF).any() else ""
    return (f"**{rig}**, the {longest:,}-token prompt{both}{solo}. "
            "Freeze of the streams decoding beside it: " + "; ".join(parts_) + "." + more)


def trade_words(freezes: pd.DataFrame, rig: str) -> str:
    """What chunking did to the freeze and to the long prompt's own TTFT on one rig, per prompt length, against
    chunking off at the same length (medians over the repeats), from the budgets below the prompt: where every
    budget stalled the streams less, where some did not, and how the TTFT moved. '' without both sides."""
    f = freezes[freezes["rig"] == rig]
    off = f[f["budget"] == OFF].set_index("prompt_len")
    rows = f[(f["budget"] != OFF) & (f["budget"] < f["prompt_len"]) & f["prompt_len"].isin(off.index)]
    if not len(rows):
        return ""
    less, mixed, ttft = [], [], []
    for n, g in rows.groupby("prompt_len", sort=True):
        base = off.loc[n]
        longer = g[g["freeze_ms"] >= base["freeze_ms"]].sort_values("budget")
        ttft += list(g["ttft_ms"] / base["ttft_ms"])
        if not len(longer):
            less.append(f"{int(n):,}")
            continue
        shorter = g[g["freeze_ms"] < base["freeze_ms"]].sort_values("budget")
        said = ", ".join(f"budget {int(r.budget):,} froze them {fmt_num(r.freeze_ms)} ms" for r in longer.itertuples())
        also = (" (" + ", ".join(f"budget {int(r.budget):,}: {fmt_num(r.freeze_ms)} ms" for r in shorter.itertuples())
                + ")") if len(shorter) else ""
        mixed.append(f"At {int(n):,} tokens not every budget did: {said} against {fmt_num(base['freeze_ms'])} ms with "
                     f"chunking off{also}.")
    text = f"On {rig}"
    if less:
        names = less[0] if len(less) == 1 else ", ".join(less[:-1]) + " and " + less[-1]
        text += f" every budget below the prompt froze the streams less than chunking off at {names} tokens."
    else:
        text += ":"
    if mixed:
        text += " " + " ".join(mixed)
    lo, hi = min(ttft), max(ttft)
    verb = ("waited longer for its first token at every budget" if lo > 1 else
            "waited less for its first token at every budget" if hi < 1 else "waited longer at some budgets, less at others")
    return (text + f" The long prompt itself {verb} than with chunking off ({fmt_num(lo)}x to {fmt_num(hi)}x its "
            "TTFT there).")


def trace_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Kernel (or, on the CPU build, operator) time by family per traced window: one row per (rig, configuration,
    window, family), with its share of the window's busy time."""
    rows = []
    for pt in load_points(NAME, data_dir, rigs):
        if pt.params.get("kind") != "trace":
            continue
        summary = json.loads(read_artefact(pt.path, "trace-summary.json"))
        budget = int(pt.params["budget"])
        for w in summary.get("windows", []):
            for sm in w.get("summaries", []):
                for fam, ms in sm["families_ms"].items():
                    rows.append({"rig": pt.rig, "config": config_label(budget), "budget": budget,
                                 "prompt_len": int(pt.params["prompt_len"]), "window": w["window"],
                                 "device": sm["device"], "family": fam, "time_ms": ms,
                                 "share_pct": 100 * ms / sm["busy_ms"] if sm["busy_ms"] else math.nan,
                                 "busy_ms": sm["busy_ms"], "span_ms": sm["span_ms"]})
    return pd.DataFrame(rows, columns=["rig", "config", "budget", "prompt_len", "window", "device", "family", "time_ms",
                                       "share_pct", "busy_ms", "span_ms"])


def _by_config(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows per rig in the page's order of configurations: chunking off, then the budgets from the largest."""
    order = frame["budget"].where(frame["budget"] != OFF, 10**9)
    return frame.assign(_o=order).sort_values(["rig", "_o"], ascending=[True, False]).drop(columns="_o").reset_index(
        drop=True)


def clock_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """What the GPU ran at during the freeze points, per rig and configuration (from each point's GPU samples, taken
    once a second by nvidia-smi during its passes): the lowest and the median busy SM clock over its points, the most
    power drawn, and the share of busy samples at the software power cap. Bigger chunks draw more power; a freeze
    measured at lower clocks is a longer one."""
    from ..records.gpuclocks import points_table

    pts = measured_points(data_dir, rigs)
    budget = {(pt.rig, pt.name): int(pt.params["budget"]) for pt in pts}
    t = points_table(pts)
    cols = ["rig", "config", "points", "sampled", "sm_mhz_min", "sm_mhz_median", "power_w_max", "sw_power_cap_pct"]
    if not len(t):
        return pd.DataFrame(columns=cols)
    t["budget"] = [budget[(r.rig, r.point)] for r in t.itertuples()]
    out = t.groupby(["rig", "budget"], sort=True).agg(
        sampled=("point", "count"), sm_mhz_min=("sm_mhz_min", "min"), sm_mhz_median=("sm_mhz_median", "median"),
        power_w_max=("power_w_max", "max"), sw_power_cap_pct=("sw_power_cap_share", lambda x: 100 * x.mean())
    ).reset_index()
    counts = pd.DataFrame([(r, b) for (r, _), b in budget.items()], columns=["rig", "budget"]).value_counts()
    out = counts.rename("points").reset_index().merge(out, on=["rig", "budget"], how="left")
    out = out[out["rig"].isin(t["rig"])]  # rigs that sampled at all
    out["sampled"] = out["sampled"].fillna(0).astype(int)
    out.insert(1, "config", out["budget"].map(config_label))
    return _by_config(out)[cols]


def clock_note(clocks: pd.DataFrame) -> str:
    """Which configurations ran into the power cap, per rig ('' when none did or nothing was sampled)."""
    lines = []
    for rig, c in clocks.groupby("rig", sort=True):
        unsampled = ", ".join(c[c["sampled"] == 0]["config"])
        missing = (f" Not sampled: {unsampled} (points from before each point kept its GPU samples)."
                   if unsampled else "")
        c = c[c["sampled"] > 0]
        capped = c[c["sw_power_cap_pct"] > 0]
        if not len(capped):
            lines.append(f"On {rig} no sampled freeze point met the power cap.{missing}")
            continue
        said = "; ".join(f"{r.config}: {r.sw_power_cap_pct:.0f}% of busy samples, down to {r.sm_mhz_min:,.0f} MHz"
                         for r in capped.itertuples())
        clear = ", ".join(c[c["sw_power_cap_pct"] == 0]["config"])
        lines.append(f"On {rig} the GPU met its software power cap during {said}" +
                     (f"; never during {clear}" if clear else "") +
                     ". Those freezes were measured at the lower clocks, which lengthen a step." + missing)
    return " ".join(lines)


def chunk_step_table(injections: pd.DataFrame) -> pd.DataFrame:
    """What one step that carried a chunk cost, per rig, budget and prompt length (chunked, where the same length was
    also measured with chunking off): the steps that carried the prompt (iteration log, which counts them even where
    it does not time them), the mean such step (the long prompt's TTFT in the stream over those steps), the prompt's
    unchunked prefill over the same number of steps (its solo TTFT with chunking off / steps: what a step would cost
    if a chunk cost only its share of the whole prefill) and the rest, per step."""
    cols = ["rig", "config", "budget", "prompt_len", "steps", "mean_step_ms", "share_ms", "extra_ms", "freeze_ms"]
    f = injections.dropna(subset=["freeze_ms"])
    f = f[f["prefill_steps"] > 0].assign(mean_step_ms=lambda d: d["ttft_ms"] / d["prefill_steps"])
    g = f.groupby(["rig", "budget", "prompt_len"], sort=True).agg(
        steps=("prefill_steps", "median"), mean_step_ms=("mean_step_ms", "median"), freeze_ms=("freeze_ms", "median"),
        solo_ttft_ms=("solo_ttft_ms", "median")).reset_index()
    off = g[g["budget"] == OFF][["rig", "prompt_len", "solo_ttft_ms"]].rename(columns={"solo_ttft_ms": "off_solo_ms"})
    out = g[(g["budget"] != OFF) & (g["budget"] < g["prompt_len"])].merge(off, on=["rig", "prompt_len"])
    out["share_ms"] = out["off_solo_ms"] / out["steps"]
    out["extra_ms"] = out["mean_step_ms"] - out["share_ms"]
    out.insert(1, "config", out["budget"].map(config_label))
    return _by_config(out)[cols] if len(out) else pd.DataFrame(columns=cols)


def chunk_step_note(steps: pd.DataFrame, injections: pd.DataFrame) -> str:
    """Per rig, at its comparable length: the mean chunk step per budget against its share of the unchunked prefill."""
    lines = []
    for rig, t in steps.groupby("rig", sort=True):
        n = comparable_length(injections, rig)
        at = t[t["prompt_len"] == n].sort_values("budget")
        if not len(at):
            continue
        said = "; ".join(f"budget {int(r.budget):,}: {r.steps:.0f} steps of {fmt_num(r.mean_step_ms)} ms against a share "
                         f"of {fmt_num(r.share_ms)} ms" for r in at.itertuples())
        small = at.iloc[0]
        base = float(injections[injections["rig"] == rig]["baseline_itl_ms"].median())
        lines.append(f"On {rig}, the {n:,}-token prompt: {said}. At budget {int(small.budget):,} a step that carried a "
                     f"chunk cost {fmt_num(small.extra_ms)} ms more than its share of the prefill, "
                     f"{small.extra_ms / base:.1f}x the background's ordinary gap between tokens ({fmt_num(base)} ms)"
                     + (": most of such a step is not its share of the prompt, so a smaller budget no longer shrinks "
                        "the freeze much, and the long prompt's TTFT grows with the number of steps."
                        if small.extra_ms > small.share_ms else
                        ": a chunk step costs about its share of the prompt, so the freeze shrinks with the budget."))
    return " ".join(lines)


def trace_unsupported(data_dir=None, rigs: list[str] | None = None) -> list[str]:
    """'rig config: reason' for each traced point whose server recorded no trace."""
    out = []
    for pt in load_points(NAME, data_dir, rigs):
        if pt.params.get("kind") == "trace":
            reason = json.loads(read_artefact(pt.path, "trace-summary.json")).get("unsupported")
            if reason:
                out.append(f"{pt.rig} {config_label(int(pt.params['budget']))}: {reason}")
    return out


def trace_note(data_dir=None, rigs: list[str] | None = None) -> str:
    """What the page says about the profiler pass of the shown rigs."""
    traced = sorted({pt.rig for pt in load_points(NAME, data_dir, rigs) if pt.params.get("kind") == "trace"})
    if not traced:
        return ("**No trace recorded** for the rigs shown: the profiler pass (part parameter `trace`) is off by "
                "default and on in a rig profile that asks for it (the h200's; `gpu/README.md`). What it shows: "
                "kernel time by family (matrix multiplies, attention, the recurrent layers' kernels, the rest) in a "
                "window of decode alone and in the window of one long prompt, per configuration.")
    bad = trace_unsupported(data_dir, rigs)
    return f"Traced: {', '.join(traced)}." + (" No trace from: " + "; ".join(bad) + "." if bad else "")


# ---------------------------------------------------------------------------------------------
# What the post's own figures predict (the A10G, at the compute floor)
# ---------------------------------------------------------------------------------------------


def a10g_inputs(data_dir=None) -> dict:
    """The series' A10G figures the floor prediction uses (part 1's facts): operations per token, the quoted peak,
    and one decode step (a single stream's time per token)."""
    f = load_reference(1, data_dir)["facts"]
    facts = dict(zip(f["key"], f["value"]))
    return {"gflop_per_token": facts["flops_per_token"], "peak_tflops": facts["a10g_fp16_peak"],
            "decode_ms": facts["single_request_ms_per_token"]}


def floor_freeze_ms(prompt_len: int, budget: int, a: dict) -> float:
    """The freeze if a prefill ran at the GPU's peak: the largest step's prompt tokens (all of them without
    chunking, at most a budget with it) x operations per token / peak, plus one decode step."""
    tokens = prompt_len if budget == OFF else min(prompt_len, budget)
    return 1000 * tokens * a["gflop_per_token"] * 1e9 / (a["peak_tflops"] * 1e12) + a["decode_ms"]


def floor_table(data_dir=None, prompt_lens: list[int] | None = None, budgets: list[int] | None = None) -> pd.DataFrame:
    """The A10G's freeze at the compute floor per configuration and prompt length, from the post's own figures."""
    a = a10g_inputs(data_dir)
    rows = [{"rig": PUBLISHED_RIG, "config": config_label(b), "budget": b, "prompt_len": n,
             "floor_freeze_ms": floor_freeze_ms(n, b, a)}
            for b in (budgets or DEFAULTS["budgets"]) for n in (prompt_lens or DEFAULTS["prompt_lens"])]
    return pd.DataFrame(rows)


def implied_prompt_len(shrink: float, a: dict, budget: int = A10G_BUDGET) -> float:
    """The prompt length at which the floor model gives a `shrink`-fold smaller freeze at `budget` than without
    chunking: solve floor(L) = shrink x floor(budget) (both with one decode step)."""
    per_token_ms = 1000 * a["gflop_per_token"] * 1e9 / (a["peak_tflops"] * 1e12)
    target = shrink * floor_freeze_ms(budget, budget, a)
    return (target - a["decode_ms"]) / per_token_ms


def key_findings(freezes: pd.DataFrame, views: dict[str, dict], facts: dict) -> list[str]:
    """The findings box of part 2: 3-5 sentences from the shown rigs' freezes and views."""
    out = []
    for rig in sorted(set(freezes["rig"])) if len(freezes) else []:
        f = freezes[freezes["rig"] == rig]
        off = f[f["budget"] == OFF].set_index("prompt_len").sort_index()
        if not len(off):
            continue
        lo, hi = off.index[0], off.index[-1]
        out.append(f"On {rig}, with chunking off, a long prompt froze the streams decoding beside it for "
                   f"{fmt_num(off.loc[lo, 'freeze_ms'])} ms at {lo:,} tokens and {fmt_num(off.loc[hi, 'freeze_ms'])} ms "
                   f"at {hi:,} (medians of the repeats).")
        v = views.get(rig, {})
        shares = [(n, s["freeze"].value / s["solo"].value) for n, s in sorted((v.get("off_by_len") or {}).items())]
        if shares:
            out.append("The freeze against the prompt's TTFT alone on the idle server, per length: "
                       + ", ".join(f"{r:.2f} at {n:,}" for n, r in shares) + " tokens (the claims judge each length).")
        b = v.get("budget")
        at = f[(f["prompt_len"] == hi) & (f["budget"] == b)] if b is not None else f.iloc[0:0]
        if len(at):
            r = at.iloc[0]
            verb = "cut" if r.freeze_ms < off.loc[hi, "freeze_ms"] else "took"
            out.append(f"At {hi:,} tokens a budget of {b:,} {verb} the freeze from {fmt_num(off.loc[hi, 'freeze_ms'])} to "
                       f"{fmt_num(r.freeze_ms)} ms, and the long prompt's own TTFT went from "
                       f"{fmt_num(off.loc[hi, 'ttft_ms'])} to {fmt_num(r.ttft_ms)} ms.")
        by_len = v.get("shrink_by_len") or {}
        if by_len and facts.get("freeze_shrink_chunked"):
            (n0, s0), (n1, s1) = min(by_len.items()), max(by_len.items())
            out.append(f"The post's {facts['freeze_shrink_chunked']:g}x shrink at budget {A10G_BUDGET:,} cannot be "
                       f"placed: the post gives no prompt length, and {rig}'s own shrink at that budget runs from "
                       f"{fmt_num(s0.value)}x at {n0:,} tokens to {fmt_num(s1.value)}x at {n1:,}.")
    return out[:5]


def protocol_tables(data_dir, rigs: list[str]) -> dict:
    """The protocol's tables: the measured rigs' injections and freezes, the post's figures (reference_view) and
    the data dir."""
    injections = injection_table(data_dir, [r for r in rigs if r != PUBLISHED_RIG])
    return {"injections": injections, "freezes": freeze_table(injections), REFERENCE: reference_view(data_dir),
            DATA_DIR: data_dir}


def protocol_view(rig: str, tables: dict, params: dict) -> dict:
    """The protocol's view: rig_view at the claims' budget, with the post's figures, and the rig's freezes."""
    freezes = tables["freezes"]
    return {**with_reference(rig_view(tables["injections"], rig), tables[REFERENCE]), REFERENCE: tables[REFERENCE],
            "freezes": freezes[freezes["rig"] == rig]}


def rig_findings(view: dict) -> list[str]:
    """The protocol's findings: the rig's paragraph (findings)."""
    return [findings(view["freezes"], view["rig"])]


def has_freezes(rig: str, tables: dict) -> bool:
    """The rigs part 2's page views: the published one and those with freeze points (a rig may hold knee points
    only, which the page reads elsewhere)."""
    return rig == PUBLISHED_RIG or bool((tables["freezes"]["rig"] == rig).any())


# its knee points read part 1's knee from the data dir
PART = Part(NAME, DEFAULTS, plan, tables=protocol_tables, view=protocol_view, findings=rig_findings,
            claims=judged(page_claims), shows=has_freezes,
            reads=(PARTS[0], PARTS[1]))  # the step chapter's answers (p00.part_answers); part 1's knee and points
