"""Part 2's plan: its name and defaults, the configurations (chunked prefill off, and each token budget), the
sessions that inject a long prompt into a stream of short ones, the traced points and the knee points (part 1's
knee rate, through part 1's PART)."""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

from ...errors import UserError
from ...run.bench import PassSpec, Workload
from ...run.inject import InjectSpec, injection
from ...run.sweep import PassPlan, PointPlan
from ...run.trace import traced_injection
from .. import injections


NAME = "02-prefill-freeze"


NOTEBOOK = "notebooks/02-prefill-freeze.md"


OFF = injections.OFF  # a budget of 0 in `budgets`: chunked prefill off (the wing's, which part 0 reads too)


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
    "trace_first_after_s": None,  # when the traced prompt is due in its background (default: first_after_s); the
    # traced pass's background lasts this, spacing_s and tail_s
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


token_range = injections.token_range  # the long prompts' token ids (part 0's prompts alone draw the same)


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
    from ..p01 import PART as PART1
    from ..protocol import rig_parameters

    budgets = knee_budgets(p)
    rate = p["knee_rps"] or (part1_knee(PART1, profile.name, data_dir) if budgets else None)
    if not budgets or not rate:
        return []
    p1 = rig_parameters(PART1, profile.name, data_dir)
    source = "parameter knee_rps" if p["knee_rps"] else "part 1's knee on this rig"
    return [PointPlan(name=f"knee-b{b:05d}", session=f"knee-b{b:05d}", max_num_seqs=p1["max_num_seqs"],
                      passes=[PassPlan("bench", "measured", PassSpec(num_prompts=max(8, math.ceil(rate * p["knee_window_s"])),
                                                                     request_rate=float(rate), seed=7_000 + i))],
                      serve_args=["--enable-chunked-prefill", "--max-num-batched-tokens", str(b)],
                      workload=Workload(p1["input_len"], p1["output_len"]),
                      params={"kind": "knee", "budget": b, "offered_rate_rps": float(rate), "knee_from": source})
            for i, b in enumerate(budgets)]


def part1_knee(part1, rig: str, data_dir=None) -> float | None:
    """The knee of part 1's rate sweep on a rig (part 1's view of it, through `part1`, its PART), None where part 1
    has no such rate there."""
    from .. import protocol

    knee = protocol.rig_view(part1, data_dir, rig).get("knee_rps")
    return float(knee) if knee is not None and math.isfinite(knee) else None


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
    first = p["first_after_s"] if p["trace_first_after_s"] is None else float(p["trace_first_after_s"])
    traced = InjectSpec(prompt_len=length, output_len=p["long_output_len"], count=1, first_after_s=first,
                        seed=next(seeds), token_low=low, token_high=high)
    window_s = first + p["spacing_s"] + p["tail_s"]
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
