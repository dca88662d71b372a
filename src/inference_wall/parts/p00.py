"""Inside a step: what a decode step is made of, measured component by component on one server per model.

Every later part explains its numbers with one model of a step (a fixed part plus a part per sequence), fitted
through its own points. This chapter takes the step apart instead. One server per variant (a model preset with its
serve flags) runs closed loops of B streams of equal lengths; the engine's counters, polled during each pass, give
the step's period in the pure-decode window (steady.decode_window), not the client's per-token gaps. What each
point isolates:

- `decode-bNNNN`: the step against the batch, with the server's sampling defaults (the checkpoint's generation
  config: top-k and top-p);
- `nofilter-bNNNN` / `greedy-bNNNN`: the same batch with the client's sampling parameters set to no top-k/top-p, and
  to greedy: what the top-k/top-p filter costs, and what random sampling costs over an argmax;
- `ctxNNNNN-bNNNN`: the same batch at longer prompts: attention over the KV cache per token of context;
- `trace-bNNNN`: the torch profiler on for a fraction of a second of pure decode (trace.DecodeWindowTrace): GPU
  time by kernel family per step, and the GPU's idle share;
- a variant with `--no-async-scheduling`: what overlapping the host's work with the GPU's hides.

The bytes a step must move (weights of the language model, each sequence's recurrent state, its KV cache) come from
the shapes (weightbytes, analysis) over the bandwidth the run measured on its GPU.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ..bench import PassSpec, Workload
from ..errors import UserError
from ..sweep import PassPlan, PointPlan
from ..trace import decode_window_trace

NAME = "00-inside-a-step"
NOTEBOOK = "notebooks/00-inside-a-step.md"

# A variant: one server. preset None is the rig's own model; `serve_args` come after the rig's; `measure` names the
# point kinds this server runs (decode always first). `base` names the variant this one differs from by its flags.
DEFAULT_VARIANTS = {
    "4b": {"preset": None, "serve_args": [], "measure": ["decode", "sampling", "context", "trace"]},
    "4b-sync": {"preset": None, "serve_args": ["--no-async-scheduling"], "measure": ["decode"], "base": "4b"},
    "0.5b": {"preset": "qwen2.5-0.5b", "serve_args": [], "measure": ["decode", "sampling", "context", "trace"],
             "sampling_batches": [1, 256, 1024]},
    "9b-fp16": {"preset": "qwen3.5-9b", "serve_args": [], "measure": ["decode", "trace"],
                "decode_batches": [1, 8, 64, 256, 1024], "trace_batches": [1, 256]},
    "9b-int4": {"preset": "qwen3.5-9b-gptq-int4", "serve_args": [], "measure": ["decode", "trace"],
                "decode_batches": [1, 8, 64, 256, 1024], "trace_batches": [1, 256]},
}
# A variant may set its own batches (these keys), else the part's; a variant with a `base` uses sync_batches.
VARIANT_KEYS = ("decode_batches", "sampling_batches", "trace_batches")
MEASURES = ("decode", "sampling", "context", "trace")

DEFAULTS = {
    "variants": DEFAULT_VARIANTS,
    "order": ["4b", "4b-sync", "0.5b", "9b-fp16", "9b-int4"],  # servers in this order (the budget cuts the tail)
    "max_num_seqs": 1024,
    "input_len": 256,  # the session's warm-up flood (the part's workload)
    "output_len": 128,
    "decode_input_len": 256,  # every decode point's lengths: long outputs, so each wave has a long pure-decode run
    "decode_output_len": 256,
    "decode_batches": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    "sync_batches": [1, 8, 64, 256, 1024],  # a variant with a `base`: fewer batches
    "decode_waves": 2,  # prompts per decode point: waves x batch (at least min_prompts)
    "min_prompts": 4,
    "sampling_batches": [1, 64, 256, 1024],
    "sampling": {"nofilter": [["top-k", "0"], ["top-p", "1"]], "greedy": [["temperature", "0"]]},
    "context_batch": 64,
    "context_lens": [2048, 8192],  # beside decode_input_len at the same batch
    "context_output_len": 128,
    "trace_batches": [1, 64, 256, 1024],
    "trace_window_s": 0.25,
    "poll_s": 0.1,  # /metrics during every measured pass
    "seed": 0,
}


def _variants(p: dict) -> dict:
    variants = p["variants"]
    if not isinstance(variants, dict):
        raise UserError(f"part {NAME}: parameter variants must map a name to its server, got {type(variants).__name__}")
    for name in p["order"]:
        if name not in variants:
            raise UserError(f"part {NAME}: order names variant {name!r}, not among {', '.join(variants)}")
        extra = set(variants[name]) - {"preset", "serve_args", "measure", "base", *VARIANT_KEYS}
        if extra:
            raise UserError(f"part {NAME}: variant {name!r} has unknown key(s) {sorted(extra)}")
        unknown = set(variants[name].get("measure", [])) - set(MEASURES)
        if unknown:
            raise UserError(f"part {NAME}: variant {name!r} measures {sorted(unknown)}; known: {', '.join(MEASURES)}")
        base = variants[name].get("base")
        if base and base not in variants:
            raise UserError(f"part {NAME}: variant {name!r} has base {base!r}, not a variant")
    return variants


def variant_preset(p: dict, variant: str, profile) -> str:
    return _variants(p)[variant].get("preset") or profile.model_preset


def served_presets(p: dict, profile) -> list[str]:
    return list(dict.fromkeys(variant_preset(p, v, profile) for v in p["order"]))


def trace_dir(rig: str, variant: str) -> Path:
    """Where one session's profiler writes (absolute, as vLLM requires; outside the repository: the point keeps a
    summary with every kernel's count and time, and the raw trace only when small)."""
    return Path(tempfile.gettempdir()) / "iw-trace" / rig / NAME / variant


def profiler_args(rig: str, variant: str) -> list[str]:
    config = {"profiler": "torch", "torch_profiler_dir": str(trace_dir(rig, variant)),
              "torch_profiler_with_stack": False, "ignore_frontend": True,
              "torch_profiler_dump_cuda_time_total": False}
    return ["--profiler-config", json.dumps(config)]


def point_name(variant: str, kind: str, batch: int, context: int | None = None) -> str:
    what = f"ctx{context:05d}" if kind == "context" else kind
    return f"{variant}-{what}-b{batch:04d}"


def plan(p: dict, profile, pools: dict | None = None) -> list[PointPlan]:
    """One session per variant in `order`; in each, decode at every batch first (smallest first), then the sampling
    points, the context points and, last (the profiler's own cost stays out of the others), the traced windows."""
    variants = _variants(p)
    mns = int(p["max_num_seqs"])
    decode_load = Workload(int(p["decode_input_len"]), int(p["decode_output_len"]))
    plans: list[PointPlan] = []
    for name in p["order"]:
        v = variants[name]
        measure = list(v.get("measure", ["decode"]))
        preset = variant_preset(p, name, profile)
        args = [*v.get("serve_args", [])] + (profiler_args(profile.name, name) if "trace" in measure else [])
        seeds = iter(range(1, 100_000))
        common = {"variant": name, "preset": preset, "base": v.get("base"),
                  "async": "--no-async-scheduling" not in v.get("serve_args", [])}

        def point(kind, batch, workload, sampling=(), side=None, extra=None):
            spec = PassSpec(num_prompts=max(int(p["min_prompts"]), int(p["decode_waves"]) * batch),
                            max_concurrency=batch, seed=next(seeds), sampling=tuple(tuple(x) for x in sampling),
                            detailed=False)
            context = workload.input_len if kind == "context" else None
            return PointPlan(name=point_name(name, kind, batch, context), session=f"{name}-main", max_num_seqs=mns,
                             passes=[PassPlan("bench", "measured", spec, side=side)],
                             params={**common, "kind": kind, "batch": batch, "input_len": workload.input_len,
                                     "output_len": workload.output_len, **(extra or {})},
                             preset=preset, serve_args=list(args), poll_metrics_s=float(p["poll_s"]),
                             workload=workload)

        own = {k: v.get(k, p[k]) for k in VARIANT_KEYS}
        batches = [int(b) for b in (v.get("decode_batches") or p["sync_batches"] if v.get("base") else own["decode_batches"])
                   if int(b) <= mns]
        plans += [point("decode", b, decode_load, extra={"sampling": "server"}) for b in sorted(batches)]
        if "sampling" in measure:
            for label, sampling in p["sampling"].items():
                plans += [point(label, b, decode_load, sampling, extra={"sampling": label})
                          for b in sorted(int(x) for x in own["sampling_batches"]) if b <= mns]
        if "context" in measure:
            b = int(p["context_batch"])
            plans += [point("context", b, Workload(int(L), int(p["context_output_len"])), extra={"sampling": "server"})
                      for L in sorted(int(x) for x in p["context_lens"])]
        if "trace" in measure:
            plans += [point("trace", b, decode_load,
                            side=decode_window_trace(trace_dir(profile.name, name), b, float(p["trace_window_s"])),
                            extra={"sampling": "server"})
                      for b in sorted(int(x) for x in own["trace_batches"]) if b <= mns]
    return plans
