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
- a variant with `--no-async-scheduling`: what overlapping the host's work with the GPU's hides;
- `clientsN-bNNNN`: a flood at the server's cap from one `vllm bench serve` process, then the same flood shared by N
  processes at once (each its share of the prompts, its own seed): whether one client limits a flood (clients_table);
- `mixed-<part 2's point>`: part 2's sessions (a background at a fixed rate, one long prompt injected, and its
  profiler window last) on this variant's model: a step that carries prefill tokens beside decodes (mixedsteps).

The bytes a step must move (weights of the language model, each sequence's recurrent state, its KV cache) come from
the shapes (weightbytes, analysis) over the bandwidth the run measured on its GPU.
"""
from __future__ import annotations

import json
import math
import re
import tempfile
from pathlib import Path

import pandas as pd

from ...measure.analysis import Interval
from ...run.bench import PassSpec, Workload
from ...measure.claims import Claim, Judgement, Missing, known_number, missing
from ...records.store import load_points, open_artefact, pass_summary, read_artefact
from ...errors import UserError
from ...words import MISSING, join_and, number
from ...run.sweep import PassPlan, PointPlan
from ...run.trace import decode_window_trace
from ..protocol import (EVERY_PART, Part, ids_of, judged, measured_rigs,
                       reading_data_dir, with_data_dir, without_data_dir)

NAME = "00-inside-a-step"
NOTEBOOK = "notebooks/00-inside-a-step.md"

# A variant: one server. preset None is the rig's own model; `serve_args` come after the rig's; `measure` names the
# point kinds this server runs (decode always first). `base` names the variant this one differs from by its flags.
DEFAULT_VARIANTS = {
    "4b": {"preset": None, "serve_args": [], "measure": ["decode", "sampling", "context", "trace"]},
    "4b-sync": {"preset": None, "serve_args": ["--no-async-scheduling"], "measure": ["decode"], "base": "4b"},
    "0.5b": {"preset": "qwen2.5-0.5b", "serve_args": [],
             "measure": ["decode", "sampling", "context", "clients", "trace", "mixed"], "sampling_batches": [1, 256, 1024]},
    "9b-fp16": {"preset": "qwen3.5-9b", "serve_args": [], "measure": ["decode", "trace"],
                "decode_batches": [1, 8, 64, 256, 1024], "trace_batches": [1, 256]},
    "9b-int4": {"preset": "qwen3.5-9b-gptq-int4", "serve_args": [], "measure": ["decode", "trace"],
                "decode_batches": [1, 8, 64, 256, 1024], "trace_batches": [1, 256]},
    # the API server's share (component 6): the dense 0.5B, whose passes at 64, 512 and 1,024 never held their batch
    # with one API server, again with two (the engine the same)
    "0.5b-api2": {"preset": "qwen2.5-0.5b", "serve_args": ["--api-server-count", "2"], "measure": ["decode"],
                  "base": "0.5b", "decode_batches": [64, 256, 512, 1024]},
}
# A variant may set its own batches (these keys), else the part's; a variant with a `base` uses sync_batches.
VARIANT_KEYS = ("decode_batches", "sampling_batches", "trace_batches")
MEASURES = ("decode", "sampling", "context", "clients", "trace", "mixed")
TRACED_KINDS = ("trace", "mixed-trace")  # points with a profiler window: last in their server session
MIXED_KINDS = ("mixed", "mixed-trace")

DEFAULTS = {
    "variants": DEFAULT_VARIANTS,
    "order": ["4b", "4b-sync", "0.5b", "9b-fp16", "9b-int4", "0.5b-api2"],  # servers in this order (the budget cuts the tail)
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
    # a variant that measures "clients": one flood of clients_waves x max_num_seqs prompts (the part's input_len and
    # output_len) per client count, in this order, before the session's traces; seeds from clients_seed on, apart
    # from the session's own (a new point never changes an older point's seed)
    "clients": [1, 2],
    "clients_waves": 4,
    "clients_seed": 30_000,
    # a variant that measures "mixed": part 2's sessions on its model (p02.plan), one per budget (None: part 2's
    # budgets on this rig), each an untraced point and its profiler window at one prompt length (None: the length part
    # 2 traces on this rig)
    "mixed_budgets": None,
    "mixed_prompt_len": None,
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
        if "clients" in measure:
            plans += client_points(p, name, preset, args, common)
        if "trace" in measure:
            plans += [point("trace", b, decode_load,
                            side=decode_window_trace(trace_dir(profile.name, name), b, float(p["trace_window_s"])),
                            extra={"sampling": "server"})
                      for b in sorted(int(x) for x in own["trace_batches"]) if b <= mns]
        if "mixed" in measure:
            plans += mixed_points(p, name, preset, profile)
    return plans


def client_points(p: dict, variant: str, preset: str, serve_args: list[str], common: dict) -> list[PointPlan]:
    """A flood at the server's cap (clients_waves x max_num_seqs prompts at once, the part's lengths) per client count
    in `clients`: the prompts shared by that many `vllm bench serve` processes at once (bench.client_specs), the
    engine's counters polled."""
    mns = int(p["max_num_seqs"])
    load = Workload(int(p["input_len"]), int(p["output_len"]))
    return [PointPlan(name=f"{variant}-clients{n}-b{mns:04d}", session=f"{variant}-main", max_num_seqs=mns,
                      passes=[PassPlan("bench", "measured",
                                       PassSpec(num_prompts=int(p["clients_waves"]) * mns, seed=int(p["clients_seed"]) + i,
                                                detailed=False, clients=int(n)))],
                      params={**common, "kind": "clients", "clients": int(n), "batch": mns, "input_len": load.input_len,
                              "output_len": load.output_len, "sampling": "server"},
                      preset=preset, serve_args=list(serve_args), poll_metrics_s=float(p["poll_s"]), workload=load)
            for i, n in enumerate(p["clients"])]


def mixed_parameters(p: dict, profile) -> dict:
    """Part 2's parameters on this rig (its defaults and the rig's part-2 overrides) for part 0's mixed sessions: one
    prompt length (mixed_prompt_len, else the one part 2 traces), traced, part 0's budgets if set, no knee points."""
    from .. import p02

    q = {**p02.DEFAULTS, **{k: v for k, v in profile.for_part(p02.NAME).items() if v is not None}}
    length = int(p["mixed_prompt_len"] or p02.trace_length(q))
    budgets = p["mixed_budgets"] if p["mixed_budgets"] is not None else q["budgets"]
    return {**q, "prompt_lens": [length], "trace": True, "trace_prompt_len": length, "knee_budgets": [],
            "budgets": [int(b) for b in budgets]}


def mixed_points(p: dict, variant: str, preset: str, profile) -> list[PointPlan]:
    """Part 2's sessions (p02.plan: a background at a fixed rate with one long prompt injected, solo prefills, and
    each session's profiler window last) on `variant`'s model, named `<variant>-mixed-<part 2's name>`: its points are
    kind "mixed" and its traced ones "mixed-trace"; /metrics polled. The profile part 2 plans on carries the model
    and a trace folder of this part's own."""
    from dataclasses import replace

    from .. import p02

    shim = replace(profile, model_preset=preset, name=f"{profile.name}/{NAME}/{variant}")
    q = mixed_parameters(p, profile)
    out = []
    for pt in p02.plan(q, shim):
        kind = "mixed-trace" if pt.params.get("kind") == "trace" else "mixed"
        out.append(replace(pt, name=f"{variant}-mixed-{pt.name}", session=f"{variant}-mixed-{pt.session}",
                           preset=preset, poll_metrics_s=float(p["poll_s"]),
                           workload=Workload(int(q["input_len"]), int(q["output_len"])),
                           params={**pt.params, "variant": variant, "preset": preset, "kind": kind}))
    return out


# ---------------------------------------------------------------------------------------------
# Replay: the step per point, the trace per step, the components per variant, the claims
# ---------------------------------------------------------------------------------------------



# Kernel families of a decode step, first match wins (names lower-case). The trace keeps every kernel's name, count
# and time, so this map can improve without a new run.
STEP_FAMILIES = [
    ("recurrent state (GDN)", r"gated_delta|delta_rule|fused_recurrent|causal_conv|chunk_fwd|chunk_scaled|"
                              r"recompute_w_u|merge_16x16|solve_tril|l2norm"),
    ("attention", r"flash|attn|attention|fmha|paged|reshape_and_cache"),
    ("norms, activations, other", r"norm|silu|gelu|act_and_mul|swiglu|rotary|rope"),
    ("sampling", r"topk|top_k|topp|softmax|argmax|multinomial|exponential|sort|cumsum|logits|sampl"),
    ("weights (matmul)", r"gemm|cutlass|cublas|xmma|nvjet|matmul|splitkreduce|wgmma|machete|marlin|gptq|scaled_mm|"
                         r"onednn_mm|aten::addmm|aten::linear|aten::mm\b|aten::bmm"),
    ("memory copies", r"memcpy|memset|copy|index|gather|scatter|fill"),
    ("norms, activations, other", r"."),
]
COMPONENTS = ["recurrent state (GDN)", "attention", "sampling", "weights (matmul)", "memory copies",
              "norms, activations, other", "GPU idle"]  # the families above, each once, and the GPU's idle time
BAND = (0.9, 1.1)  # the parts add up within 10% either way


def step_family(name: str) -> str:
    low = name.lower()
    return next(fam for fam, rx in STEP_FAMILIES if re.search(rx, low))


def _fmt(preset: str) -> str:
    return "int4" if "int4" in preset else "fp16"


def shape_bytes(preset: str, data_dir=None) -> dict:
    """What one decode step must move, from the shapes: the language model's weights (weightbytes), each
    sequence's recurrent state read and written (Gated DeltaNet layers), each token of context's K and V read."""
    from ...model.modelshape import ModelShape
    from ...model.modelshape import preset_decode_bytes

    shape = ModelShape.of(preset, data_dir)
    return {"weights_bytes": preset_decode_bytes(preset, _fmt(preset), data_dir).total,
            "state_bytes_per_seq": shape.state_bytes_per_seq, "kv_bytes_per_token": shape.kv_bytes_per_token,
            "attention_layers": shape.attention_layers, "recurrent_layers": shape.recurrent_layers}


def _window(pt, batch: int):
    """(window, kind, the pass's largest running batch, why it has no window): the pure-decode window of the pass,
    else the window that lets refills' prefills ride along ('with prefills'), else None and the reason
    (steady.no_decode_window's words, or that the pass was not polled)."""
    from ...records.poller import artefact_name, poll_table
    from ...measure.steady import decode_window, no_decode_window

    try:
        frame = poll_table(open_artefact(pt.path, artefact_name("bench")))
    except FileNotFoundError:
        return None, None, math.nan, "not polled: the pass has no poll artefact"
    top = float(frame["running"].max()) if len(frame) else math.nan
    pure = decode_window(frame, batch)
    if pure is not None:
        return pure, "pure decode", top, None
    mixed = decode_window(frame, batch, allow_prefill=True)
    if mixed is not None:
        return mixed, "with prefills", top, None
    return None, None, top, no_decode_window(frame, batch)


def point_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """One row per point: what it varied, the pure-decode window's step (engine counters) and the client's view."""
    rows = []
    for pt in load_points(NAME, data_dir, rigs):
        p = pt.params
        if p.get("kind") in MIXED_KINDS:  # part 2's passes on this part's models: mixedsteps reads them
            continue
        s = pass_summary(pt)
        w, window, top, no_window = _window(pt, int(p["batch"]))
        halves = w.halves_ms if w else ()
        rows.append({"rig": pt.rig, "point": pt.name, "variant": p.get("variant"), "preset": p.get("preset"),
                     "kind": p.get("kind"), "sampling": p.get("sampling"), "async": bool(p.get("async", True)),
                     "base": p.get("base"), "batch": int(p["batch"]), "input_len": p.get("input_len"),
                     "output_len": p.get("output_len"),
                     "context": (p.get("input_len") or 0) + (p.get("output_len") or 0) / 2,
                     "step_ms": w.step_ms if w else math.nan, "window": window, "no_window": no_window,
                     "step_lo_ms": min(halves) if halves else math.nan, "step_hi_ms": max(halves) if halves else math.nan,
                     "prompt_per_step": w.prompt / w.steps if w and w.steps else math.nan,
                     "running_max_window": w.running_max if w else math.nan, "running_max_pass": top,
                     "window_s": w.duration_s if w else math.nan,
                     "window_steps": w.steps if w else math.nan,
                     "tokens_per_step": w.tokens_per_step if w else math.nan,
                     "window_tok_s": w.output_tok_s if w else math.nan,
                     "itl_p50_ms": s["itl_p50_ms"], "tpot_p50_ms": s["tpot_p50_ms"], "output_tok_s": s["output_tok_s"],
                     "duration_s": s["duration_s"],
                     "bandwidth_gb_s": pt.record.rig_info.get("hbm_bandwidth_gb_s"),
                     "session_id": pt.record.session.id if pt.record.session else None,
                     "session_index": pt.record.session.index if pt.record.session else None,
                     "linear_kernel": linear_kernel(pt) if pt.record.session and pt.record.session.has_startup
                     else None})
    cols = ["rig", "point", "variant", "preset", "kind", "sampling", "async", "base", "batch", "input_len", "output_len",
            "context", "step_ms", "window", "no_window", "step_lo_ms", "step_hi_ms", "prompt_per_step", "running_max_window",
            "running_max_pass", "window_s", "window_steps", "tokens_per_step", "window_tok_s", "itl_p50_ms",
            "tpot_p50_ms", "output_tok_s", "duration_s", "bandwidth_gb_s", "session_id", "session_index",
            "linear_kernel"]
    frame = pd.DataFrame(rows, columns=cols)
    frame["after_trace"] = after_trace(frame)
    return frame


def after_trace(frame: pd.DataFrame) -> pd.Series:
    """Per point: whether a profiler window ran before it in the same server (a trace point of its session with a
    lower index). The plan puts each server's traces last; a point run after one (by an explicit --points order) is
    flagged, and the step curves leave it out: the server that has run the profiler is not the stock one."""
    traced = frame[frame["kind"] == "trace"].dropna(subset=["session_id", "session_index"])
    first = traced.groupby("session_id")["session_index"].min().to_dict()
    return pd.Series([bool(k != "trace" and sid in first and idx is not None and idx == idx and idx > first[sid])
                      for k, sid, idx in zip(frame["kind"], frame["session_id"], frame["session_index"])],
                     index=frame.index, dtype=bool)


LINEAR_KERNEL = re.compile(r"Using (\w+LinearKernel) for (\w+)")


def linear_kernel(pt) -> str | None:
    """The matmul kernel vLLM chose for a quantized model's linear layers, as its start logged it
    ("Using MacheteLinearKernel for AutoGPTQLinearMethod"); None where the start logged none (fp16)."""
    try:
        m = LINEAR_KERNEL.search(pt.server_log())
    except FileNotFoundError:
        return None
    return m.group(1) if m else None


# One launch per attention layer and step: FlashAttention 3's (Hopper) or 2's main kernel, or FlashInfer's
ATTENTION_MAIN = r"flashattnfwdsm\d+|flash_fwd_(splitkv_)?kernel|batchdecodewithpagedkv|batchprefillwithpagedkv"


def trace_steps(kernels: dict, shape: dict) -> float:
    """Steps in a traced window, counted from the trace itself: every step runs each attention layer's kernel once
    (flash attention, any variant) and, on a hybrid model, each recurrent layer's state kernel once (decode or
    chunked prefill); the larger of the two counts over its layers (a step missing from both would be one
    without attention at all)."""
    attn = sum(c for n, (c, _) in kernels.items()
               if re.search(ATTENTION_MAIN, n.lower()) and "combine" not in n.lower())
    rec = sum(c for n, (c, _) in kernels.items()
              if re.search(r"fused_recurrent_gated_delta|chunk_gated_delta_rule_fwd_kernel_h", n.lower()))
    out = []
    if shape["attention_layers"] and attn:
        out.append(attn / shape["attention_layers"])
    if shape["recurrent_layers"] and rec:
        out.append(rec / shape["recurrent_layers"])
    return max(out) if out else math.nan


FILTER_KERNELS = r"topk|top_k|topp|top_p|sort"  # the top-k/top-p filter's kernels (names lower-case)


def trace_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """One row per (traced point, family): GPU milliseconds per step in the traced window, the steps counted in the
    trace, whether a step in it computed prompt tokens (a chunked-prefill kernel ran: not pure decode), and the
    window's wall time per step (the span of its kernels over its steps; the profiler slows the steps it records)."""
    rows = []
    for pt in load_points(NAME, data_dir, rigs):
        if pt.params.get("kind") != "trace":
            continue
        summary = json.loads(read_artefact(pt.path, "trace-summary.json"))
        shape = shape_bytes(pt.params["preset"], data_dir)
        for w in summary.get("windows", []):
            for sm in w.get("summaries", []):
                kernels = sm.get("kernels") or {}
                steps = trace_steps(kernels, shape)
                mixed = any("chunk_gated_delta_rule_fwd" in n.lower() for n in kernels)
                fams: dict[str, float] = {}
                for n, (_, ms) in kernels.items():
                    fams[step_family(n)] = fams.get(step_family(n), 0.0) + ms
                topk = sum(t for n, (_, t) in kernels.items() if re.search(FILTER_KERNELS, n.lower()))
                for fam in COMPONENTS[:-1]:
                    rows.append({"rig": pt.rig, "point": pt.name, "variant": pt.params["variant"],
                                 "batch": int(pt.params["batch"]), "device": sm.get("device"), "family": fam,
                                 "ms_per_step": fams.get(fam, 0.0) / steps if steps else math.nan,
                                 "steps": steps, "mixed": mixed, "busy_ms_per_step": sm["busy_ms"] / steps if steps else math.nan,
                                 "span_ms_per_step": sm["span_ms"] / steps if steps else math.nan,
                                 "filter_ms_per_step": topk / steps if steps else math.nan})
    return pd.DataFrame(rows, columns=["rig", "point", "variant", "batch", "device", "family", "ms_per_step", "steps",
                                       "mixed", "busy_ms_per_step", "span_ms_per_step", "filter_ms_per_step"])


# ---------------------------------------------------------------------------------------------
# Clients: one flood from one `vllm bench serve` process, and the same flood shared by several at once
# ---------------------------------------------------------------------------------------------

CLIENT_COLUMNS = ["rig", "point", "variant", "clients", "client", "prompts", "completed", "start", "end", "duration_s",
                  "output_tok_s", "ttft_p50_ms", "itl_p50_ms"]


def client_runs(pt) -> pd.DataFrame:
    """One row per client of a point's measured pass, from its own result JSON: its prompts, its main run in epoch
    seconds (its process's end, recorded by the sweep, less the run's duration), and its own figures. A pass of
    one client has no `clients` record: the pass's own end and result."""
    rec = pt.passes("measured")[0]
    entries = rec.get("clients") or [{"client": 1, "result": rec["result"], "num_prompts": rec["spec"]["num_prompts"],
                                      "ended": rec["ended"]}]
    rows = []
    for c in entries:
        b = pt.bench(Path(c["result"]).stem)
        rows.append({"rig": pt.rig, "point": pt.name, "variant": pt.params.get("variant"), "clients": len(entries),
                     "client": int(c["client"]), "prompts": int(c["num_prompts"]), "completed": b.completed,
                     "start": float(c["ended"]) - b.duration_s, "end": float(c["ended"]), "duration_s": b.duration_s,
                     "output_tok_s": b.output_throughput, "ttft_p50_ms": b.ms("ttft", "p50"),
                     "itl_p50_ms": b.ms("itl", "p50")})
    return pd.DataFrame(rows, columns=CLIENT_COLUMNS)


def window_rates(frame: pd.DataFrame, t0: float, t1: float) -> dict:
    """The engine's counters (poller.poll_frame) over the polls inside [t0, t1] (epoch seconds): steps and generated
    tokens per second between the first and the last of them, the step's period, the mean running batch, and the
    output rate over each half of the polls (low and high: the window's own spread). NaN each where fewer than three
    polls fall inside."""
    f = frame[(frame["t"] >= t0) & (frame["t"] <= t1)].dropna(subset=["steps_total", "generation_tokens_total"])
    out = dict.fromkeys(["window_s", "polls", "steps_per_s", "step_ms", "tok_s", "tok_s_lo", "tok_s_hi",
                         "running_mean"], math.nan)
    out["polls"] = len(f)
    if len(f) < 3:
        return out

    def rate(a, b, col):
        dt = float(b["t"] - a["t"])
        return float(b[col] - a[col]) / dt if dt > 0 else math.nan

    first, mid, last = f.iloc[0], f.iloc[len(f) // 2], f.iloc[-1]
    halves = [rate(first, mid, "generation_tokens_total"), rate(mid, last, "generation_tokens_total")]
    steps_per_s = rate(first, last, "steps_total")
    out.update(window_s=float(last["t"] - first["t"]), steps_per_s=steps_per_s,
               step_ms=1000 / steps_per_s if steps_per_s and steps_per_s > 0 else math.nan,
               tok_s=rate(first, last, "generation_tokens_total"), tok_s_lo=min(halves), tok_s_hi=max(halves),
               running_mean=float(f["running"].mean()))
    return out


CLIENTS_COLUMNS = ["rig", "point", "variant", "clients", "prompts", "cap", "window_s", "polls", "steps_per_s", "step_ms",
                   "tok_s", "tok_s_lo", "tok_s_hi", "running_mean", "clients_tok_s"]


def clients_table(data_dir=None, rigs: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per point, per client) of the clients points: per point the server's rates over the clients' common window
    (from the latest client's start to the earliest client's end; window_rates of its polls) and the sum of what the
    clients reported; per client, client_runs."""
    from ...records.poller import artefact_name, poll_table

    points, each = [], []
    for pt in load_points(NAME, data_dir, rigs):
        if pt.params.get("kind") != "clients":
            continue
        runs = client_runs(pt)
        each.append(runs)
        try:
            frame = poll_table(open_artefact(pt.path, artefact_name("bench")))
        except FileNotFoundError:
            frame = pd.DataFrame(columns=["t", "steps_total", "generation_tokens_total", "running"])
        rates = window_rates(frame, float(runs["start"].max()), float(runs["end"].min()))
        points.append({"rig": pt.rig, "point": pt.name, "variant": pt.params.get("variant"),
                       "clients": int(pt.params.get("clients", len(runs))), "prompts": int(runs["prompts"].sum()),
                       "cap": int(pt.record.max_num_seqs), **rates,
                       "clients_tok_s": float(runs["output_tok_s"].sum())})
    per_client = pd.concat(each, ignore_index=True) if each else pd.DataFrame(columns=CLIENT_COLUMNS)
    return pd.DataFrame(points, columns=CLIENTS_COLUMNS), per_client


def page_tables(data_dir=None, rigs: list[str] | None = None) -> dict:
    clients, client_rows = clients_table(data_dir, rigs)
    return {"points": point_table(data_dir, rigs), "trace": trace_table(data_dir, rigs), "clients": clients,
            "client_runs": client_rows}


def _steps(points: pd.DataFrame, variant: str, kind: str = "decode", sampling: str | None = "server") -> pd.Series:
    f = points[(points["variant"] == variant) & (points["kind"] == kind)]
    if "after_trace" in f:
        f = f[~f["after_trace"]]
    if sampling is not None:
        f = f[f["sampling"] == sampling]
    return f.set_index("batch")["step_ms"].sort_index()


def components(points: pd.DataFrame, traces: pd.DataFrame, rig: str, variant: str, data_dir=None) -> pd.DataFrame:
    """One row per traced batch of `variant` on `rig`: the measured step (engine counters, untraced), each kernel
    family's GPU milliseconds per step (the trace), and the GPU's idle time: the untraced step less the traced
    kernels' time (what the kernels leave of the step). Columns: batch, step_ms, one per component, sum_ms
    (the kernels), mixed."""
    pts = points[points["rig"] == rig]
    step = _steps(pts, variant)
    tr = traces[(traces["rig"] == rig) & (traces["variant"] == variant)]
    rows = []
    for b, g in tr.groupby("batch"):
        measured = step.get(b, math.nan)
        row = {"batch": int(b), "step_ms": measured, "mixed": bool(g["mixed"].any()),
               "traced_step_ms": float(g["span_ms_per_step"].iloc[0])}
        for fam, ms in zip(g["family"], g["ms_per_step"]):
            row[fam] = ms
        busy = float(g["ms_per_step"].sum())
        row["kernels_ms"] = busy
        row["GPU idle"] = measured - busy if measured == measured else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def sampling_cost(points: pd.DataFrame, rig: str, variant: str) -> pd.DataFrame:
    """Per batch: the step with the server's sampling defaults (the checkpoint's top-k/top-p), with no top-k/top-p,
    and greedy; what the filter costs (defaults - none) and what random sampling costs over an argmax."""
    pts = points[points["rig"] == rig]
    out = pd.DataFrame({"server": _steps(pts, variant),
                        "nofilter": _steps(pts, variant, "nofilter", "nofilter"),
                        "greedy": _steps(pts, variant, "greedy", "greedy")})
    out = out.dropna(how="all", subset=["nofilter", "greedy"])
    out["filter_ms"] = out["server"] - out["nofilter"]
    out["random_ms"] = out["nofilter"] - out["greedy"]
    # the spread of the server's step between the two halves of its pass: a difference inside it is not a cost
    f = pts[(pts["variant"] == variant) & (pts["kind"] == "decode") & (pts["sampling"] == "server")].set_index("batch")
    out["spread_ms"] = [(f.loc[b, "step_hi_ms"] - f.loc[b, "step_lo_ms"]) if b in f.index else math.nan
                        for b in out.index]
    return out.reset_index(names="batch")


def sampling_words(view: dict) -> str | None:
    """Where the filter's cost stands out of the step's own spread, and where it does not."""
    sam = view["sampling"]
    if not len(sam):
        return None
    known = sam.dropna(subset=["filter_ms", "spread_ms"])
    inside = known[known["filter_ms"].abs() <= known["spread_ms"]]
    outside = known[known["filter_ms"].abs() > known["spread_ms"]]
    words = []
    if len(outside):
        words.append("the filter's cost stands out of the step's own spread (between the two halves of its pass) at "
                     + ", ".join(f"{int(r.batch)} sequence{'' if r.batch == 1 else 's'} ({_n(r.filter_ms)} ms against "
                                 f"{_n(r.spread_ms)})"
                                 for r in outside.itertuples()))
    if len(inside):
        words.append("it does not at " + ", ".join(f"{int(r.batch)} ({_n(r.filter_ms)} ms against a spread of "
                                                    f"{_n(r.spread_ms)})" for r in inside.itertuples())
                     + ", where the table's difference is not a cost")
    return ("On " + view["rig"] + ", " + "; ".join(words) + ".") if words else None


def host_overlap(points: pd.DataFrame, rig: str, variants: dict) -> pd.DataFrame:
    """Per variant with a `base` and per batch: the step without asynchronous scheduling, the base's step with it,
    and what the overlap hides (the difference)."""
    pts = points[points["rig"] == rig]
    rows = []
    for name, v in variants.items():
        base = v.get("base")
        if not base or SYNC_FLAG not in v.get("serve_args", []):
            continue
        sync, asyn = _steps(pts, name), _steps(pts, base)
        for b in sync.index:
            if b in asyn.index:
                rows.append({"variant": base, "batch": int(b), "sync_ms": sync[b], "async_ms": asyn[b],
                             "hidden_ms": sync[b] - asyn[b]})
    return pd.DataFrame(rows, columns=["variant", "batch", "sync_ms", "async_ms", "hidden_ms"])


def api_servers(points: pd.DataFrame, rig: str, variants: dict) -> pd.DataFrame:
    """Per variant that adds API servers to a `base` (its serve_args name --api-server-count) and per batch: the
    step and the most requests running at once with the base's one API server and with the variant's, so a reader
    sees whether the front end held the batch back (a pass that never held its batch has no step)."""
    pts = points[(points["rig"] == rig) & (points["kind"] == "decode")]
    rows = []
    for name, v in variants.items():
        args = v.get("serve_args", [])
        base = v.get("base")
        if not base or API_FLAG not in args:
            continue
        count = args[args.index(API_FLAG) + 1] if args.index(API_FLAG) + 1 < len(args) else "?"
        mine = pts[pts["variant"] == name].set_index("batch")
        theirs = pts[(pts["variant"] == base) & (pts["sampling"] == "server")].set_index("batch")
        for b in sorted(set(mine.index) | set(theirs.index) if len(mine) else []):
            one, more = (theirs.loc[b] if b in theirs.index else None), (mine.loc[b] if b in mine.index else None)
            rows.append({"variant": base, "api_servers": count, "batch": int(b),
                         "step_one_ms": one["step_ms"] if one is not None else math.nan,
                         "running_one": one["running_max_pass"] if one is not None else math.nan,
                         "step_more_ms": more["step_ms"] if more is not None else math.nan,
                         "running_more": more["running_max_pass"] if more is not None else math.nan})
    return pd.DataFrame(rows, columns=["variant", "api_servers", "batch", "step_one_ms", "running_one",
                                       "step_more_ms", "running_more"])


def api_table(api: pd.DataFrame) -> pd.DataFrame:
    """api_servers' rows as the page shows them: the batches the server with more API servers ran, each step a number
    or 'never held' (the pass ran and never held its batch long enough to time), headed for a reader."""
    rows = api.dropna(subset=["running_more"])
    out = pd.DataFrame({"Batch": rows["batch"].astype(int).map("{:,}".format)})
    for col, head in (("step_one_ms", "step, one API server (ms)"), ("step_more_ms", "step, more API servers (ms)")):
        out[head] = [_n(x) if known_number(x) else "never held" for x in rows[col]]
    out["most running, one"] = [f"{x:,.0f}" if known_number(x) else MISSING for x in rows["running_one"]]
    out["most running, more"] = [f"{x:,.0f}" for x in rows["running_more"]]
    return out.reset_index(drop=True)


def context_cost(points: pd.DataFrame, rig: str, variant: str, batch: int, data_dir=None) -> dict | None:
    """The step at one batch against the mean context of its sequences (the decode point and the longer prompts):
    its slope per 1,000 tokens of context per sequence, and what reading K and V predicts for it."""
    pts = points[(points["rig"] == rig) & (points["variant"] == variant) & (points["batch"] == batch)]
    pts = pts[(pts["kind"] == "context") | ((pts["kind"] == "decode") & (pts["sampling"] == "server"))]
    pts = pts.dropna(subset=["step_ms"])
    if len(pts) < 2:
        return None
    pts = pts.sort_values("context")
    x = pts["context"].to_numpy(float) / 1000.0
    y = pts["step_ms"].to_numpy(float)
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    preset = pts["preset"].iloc[0]
    bw = pts["bandwidth_gb_s"].dropna()
    kv = shape_bytes(preset, data_dir)["kv_bytes_per_token"]
    predicted = batch * 1000 * kv / (bw.iloc[0] * 1e9) * 1000 if len(bw) else math.nan
    return {"batch": batch, "contexts": pts["context"].tolist(), "steps_ms": y.tolist(),
            "slope_ms_per_k": slope, "kv_predicted_ms_per_k": predicted,
            "after_trace": sorted(pts[pts["after_trace"]]["point"]) if "after_trace" in pts else []}


def floors(points: pd.DataFrame, rig: str, variant: str, data_dir=None) -> dict:
    """The shapes' bytes over the rig's measured bandwidth: the weight stream of one step, and per sequence the
    recurrent state read and written once."""
    pts = points[(points["rig"] == rig) & (points["variant"] == variant)]
    if not len(pts):
        return {}
    sb = shape_bytes(pts["preset"].iloc[0], data_dir)
    bw = pts["bandwidth_gb_s"].dropna()
    if not len(bw):
        return {**sb, "bandwidth_gb_s": math.nan, "weights_ms": math.nan, "state_ms_per_seq": math.nan}
    gbs = float(bw.median())
    return {**sb, "bandwidth_gb_s": gbs, "weights_ms": sb["weights_bytes"] / (gbs * 1e9) * 1000,
            "state_ms_per_seq": 2 * sb["state_bytes_per_seq"] / (gbs * 1e9) * 1000}


def step_curve(points: pd.DataFrame, rig: str) -> pd.DataFrame:
    """The measured pure-decode step of every variant against the batch (server sampling defaults), with the
    per-sequence cost between neighbouring batches ((step(B2) - step(B1)) / (B2 - B1))."""
    f = points[(points["rig"] == rig) & (points["kind"] == "decode")].dropna(subset=["step_ms"])
    if "after_trace" in f:
        f = f[~f["after_trace"]]
    f = f.sort_values(["variant", "batch"]).copy()
    f["per_seq_ms"] = f.groupby("variant")["step_ms"].diff() / f.groupby("variant")["batch"].diff()
    f["tok_s"] = f["batch"] / f["step_ms"] * 1000
    return f[["variant", "preset", "async", "batch", "step_ms", "per_seq_ms", "tok_s", "itl_p50_ms", "tpot_p50_ms"]]


# ---------------------------------------------------------------------------------------------
# A rig's view, its claims and its words
# ---------------------------------------------------------------------------------------------

MAIN = "4b"  # the hybrid model every part uses: the variant the decomposition is read on
LABELS = {"4b": "4B", "4b-sync": "4B without async scheduling", "0.5b": "0.5B", "9b-fp16": "9B (fp16)",
          "9b-int4": "9B (4-bit)", "0.5b-api2": "0.5B, two API servers"}
SYNC_FLAG, API_FLAG = "--no-async-scheduling", "--api-server-count"


def label(variant: str) -> str:
    return LABELS.get(variant, variant)
DENSE = "0.5b"


def _row(frame: pd.DataFrame, **where) -> pd.Series | None:
    f = frame
    for k, v in where.items():
        f = f[f[k] == v]
    return f.iloc[0] if len(f) else None


def _step_interval(points: pd.DataFrame, variant: str, batch: int, kind: str = "decode") -> Interval:
    r = _row(points, variant=variant, batch=batch, kind=kind)
    if r is None or missing(r["step_ms"]):
        raise Missing(f"{variant} step at batch {batch}")
    lo = r["step_lo_ms"] if known_number(r["step_lo_ms"]) else r["step_ms"]
    hi = r["step_hi_ms"] if known_number(r["step_hi_ms"]) else r["step_ms"]
    return Interval(float(r["step_ms"]), float(min(lo, r["step_ms"])), float(max(hi, r["step_ms"])))


def _of_rig(frame: pd.DataFrame | None, rig: str, columns: list[str]) -> pd.DataFrame:
    return frame[frame["rig"] == rig] if frame is not None and len(frame) else pd.DataFrame(columns=columns)


def rig_view(rig: str, tables: dict, params: dict | None = None, data_dir=None) -> dict:
    """Everything the page and the claims read for one rig: per variant its floors and step curve, the main
    variant's components at each traced batch, sampling, host overlap and context costs."""
    params = params or DEFAULTS
    points = tables["points"][tables["points"]["rig"] == rig]
    traces = tables["trace"][tables["trace"]["rig"] == rig] if len(tables["trace"]) else tables["trace"]
    variants = params.get("variants", DEFAULT_VARIANTS)
    main = MAIN if MAIN in set(points["variant"]) else next(iter(points["variant"].dropna().unique()), None)
    view = {"rig": rig, "main": main, "points": points, "traces": traces,
            "curve": step_curve(points, rig) if len(points) else pd.DataFrame(),
            "floors": {v: floors(points, rig, v, data_dir) for v in points["variant"].dropna().unique()},
            "components": components(points, traces, rig, main, data_dir) if main and len(traces) else pd.DataFrame(),
            "sampling": sampling_cost(points, rig, main) if main else pd.DataFrame(),
            "host": host_overlap(points, rig, variants),
            "api": api_servers(points, rig, variants),
            "context": context_cost(points, rig, main, int(params.get("context_batch", 64)), data_dir) if main else None,
            "clients": _of_rig(tables.get("clients"), rig, CLIENTS_COLUMNS),
            "client_runs": _of_rig(tables.get("client_runs"), rig, CLIENT_COLUMNS)}
    comp = view["components"]
    if len(comp):
        pure = comp[~comp["mixed"]].sort_values("batch")
        view["pure_components"] = pure
    traced = set(traces["variant"].dropna()) if len(traces) else set()
    view["variant_components"] = {v: components(points, traces, rig, v, data_dir) for v in sorted(traced)}
    view["models"] = model_table(view)
    return view


# ---------------------------------------------------------------------------------------------
# The models side by side: the single stream against its weight floor, the batch of 256, the cost per sequence
# ---------------------------------------------------------------------------------------------

MODEL_ORDER = ["0.5b", "4b", "9b-fp16", "9b-int4"]


def _comp_at(view: dict, variant: str, batch: int, name: str) -> float:
    comp = view.get("variant_components", {}).get(variant)
    if comp is None or not len(comp):
        return math.nan
    c = comp[~comp["mixed"]].set_index("batch")
    return float(c.loc[batch, name]) if batch in c.index and known_number(c.loc[batch, name]) else math.nan


def _per_seq(curve: pd.DataFrame, variant: str, a: int, b: int) -> float:
    c = curve[curve["variant"] == variant].set_index("batch")["step_ms"]
    return (c[b] - c[a]) / (b - a) if a in c.index and b in c.index else math.nan


def _from_batch(curve: pd.DataFrame, variant: str, upto: int = 64, least: int = 8) -> int | None:
    """The largest measured batch from `least` to `upto` (64, or the next below where 64 never held its batch)."""
    have = [int(b) for b in curve[curve["variant"] == variant]["batch"] if least <= b <= upto]
    return max(have) if have else None


def model_table(view: dict) -> pd.DataFrame:
    """One row per model served with async scheduling (variants without a `base`): the single stream's step against
    its weight floor (the language model's bytes over the measured bandwidth), what the trace splits it into (the
    weight matmuls, and the rate at which they read the weights; every other kernel; the GPU idle), the step and the
    GPU's idle share at 256 sequences, and the cost of an added sequence between batches 64 and 256 and 256 and
    1,024 (the step curve: engine counters, points after a profiler window in their server left out)."""
    curve, pts = view["curve"], view["points"]
    rows = []
    present = set(curve["variant"]) if len(curve) else set()
    for v in [m for m in MODEL_ORDER if m in present] + sorted(present - set(MODEL_ORDER) - {"4b-sync"}):
        if v not in present or (pts[pts["variant"] == v]["base"].dropna().any()):
            continue
        f = view["floors"].get(v) or {}
        c = curve[curve["variant"] == v].set_index("batch")["step_ms"]
        s1 = float(c[1]) if 1 in c.index else math.nan
        mm = _comp_at(view, v, 1, "weights (matmul)")
        k1 = _comp_at(view, v, 1, "kernels_ms")
        s256 = float(c[256]) if 256 in c.index else math.nan
        k256 = _comp_at(view, v, 256, "kernels_ms")
        kern = pts[(pts["variant"] == v)]["linear_kernel"].dropna()
        rows.append({"variant": v, "model": label(v), "weights_gb": f.get("weights_bytes", math.nan) / 1e9,
                     "floor_ms": f.get("weights_ms", math.nan), "step_b1_ms": s1,
                     "step_over_floor": s1 / f["weights_ms"] if f.get("weights_ms") else math.nan,
                     "matmul_b1_ms": mm,
                     "matmul_gb_s": f.get("weights_bytes", math.nan) / 1e9 / (mm / 1000) if mm == mm and mm else math.nan,
                     "matmul_pct_bw": 100 * f["weights_ms"] / mm if mm == mm and mm and f.get("weights_ms") else math.nan,
                     "other_kernels_b1_ms": k1 - mm, "idle_b1_ms": s1 - k1,
                     "step_b256_ms": s256, "kernels_b256_ms": k256,
                     "idle_b256_pct": 100 * (s256 - k256) / s256 if s256 == s256 and s256 else math.nan,
                     "from_batch": _from_batch(curve, v),
                     "per_seq_to_256_us": 1000 * _per_seq(curve, v, _from_batch(curve, v) or 0, 256),
                     "per_seq_256_1024_us": 1000 * _per_seq(curve, v, 256, 1024),
                     "state_mb_per_seq": f.get("state_bytes_per_seq", math.nan) / 1e6,
                     "linear_kernel": str(kern.iloc[0]) if len(kern) else ""})
    return pd.DataFrame(rows)


MODEL_COLUMNS = {"model": "model", "weights_gb": "weights a step reads (GB)", "floor_ms": "weight floor (ms)",
                 "step_b1_ms": "step at 1 (ms)", "step_over_floor": "step / floor", "matmul_b1_ms": "matmuls at 1 (ms)",
                 "matmul_pct_bw": "matmuls' read rate (% of bandwidth)", "other_kernels_b1_ms": "other kernels at 1 (ms)",
                 "idle_b1_ms": "GPU idle at 1 (ms)", "step_b256_ms": "step at 256 (ms)",
                 "idle_b256_pct": "GPU idle at 256 (%)", "from_batch": "from batch", "per_seq_to_256_us": "per added sequence, to 256 (us)",
                 "per_seq_256_1024_us": "per added sequence, 256-1,024 (us)"}


def skipped_points(view: dict) -> list[str]:
    """The points left out of the curves because a profiler window ran before them in the same server."""
    pts = view["points"]
    return sorted(pts[pts["after_trace"]]["point"]) if "after_trace" in pts else []


def model_words(view: dict) -> list[str]:
    """What the models' table shows, each sentence with its numbers: the single stream against the floor and its
    matmuls' read rate, the GPU's idle share at 256, the per-sequence costs side by side."""
    m = view.get("models")
    if m is None or not len(m):
        return []
    t = m.set_index("variant")
    out = []
    traced = t.dropna(subset=["matmul_b1_ms"])
    if len(traced):
        rs = list(traced.itertuples())
        floors_ = [f"{_n(r.step_over_floor, 2)}x {'its weight floor ' if k == 0 else ''}on the {r.model} "
                   f"({_n(r.step_b1_ms)} against {_n(r.floor_ms)}{' ms' if k == 0 else ''})" for k, r in enumerate(rs)]
        rates = [f"{_n(r.matmul_pct_bw, 2)}%" for r in rs]
        kernels = [f"the {r.model}'s through vLLM's {r.linear_kernel}" for r in rs if r.linear_kernel]
        out.append("A single stream steps at " + join_and(floors_) + "; the weight matmuls read the weights at "
                   + join_and(rates) + " of the measured bandwidth, in that order"
                   + (f" ({join_and(kernels)}, as its start logged)" if kernels else "") + ".")
    idle = t.dropna(subset=["idle_b256_pct"])
    if len(idle):
        out.append("At 256 sequences the GPU is idle for " + ", ".join(
            f"{_n(r.idle_b256_pct, 2)}% of the {r.model}'s {_n(r.step_b256_ms)} ms step" for r in idle.itertuples())
            + " (the untraced step less the traced kernels).")
    per = t.dropna(subset=["per_seq_to_256_us"])
    if len(per) >= 2:
        far = per.dropna(subset=["per_seq_256_1024_us"])
        out.append("Each sequence added up to 256 costs the step " + ", ".join(
            f"{_n(r.per_seq_to_256_us)} us on the {r.model} (from {int(r.from_batch)})" for r in per.itertuples())
            + ("; from 256 to 1,024, " + ", ".join(f"{_n(r.per_seq_256_1024_us)} us on the {r.model}"
                                                   for r in far.itertuples()) if len(far) else "") + ".")
    return out


def _component(view: dict, batch: int, name: str) -> float:
    comp = view.get("pure_components")
    if comp is None or not len(comp) or batch not in set(comp["batch"]):
        raise Missing(f"a pure-decode trace at batch {batch}")
    value = comp.set_index("batch").loc[batch, name]
    if missing(value):
        raise Missing(f"{name} at batch {batch}")
    return float(value)


def _traced_pair(view: dict) -> tuple[int, int]:
    comp = view.get("pure_components")
    if comp is None or len(comp) < 2:
        raise Missing("two pure-decode traces")
    batches = sorted(int(b) for b in comp["batch"])
    return batches[-2], batches[-1]


def judge_kernels(view: dict, batch: int) -> Judgement:
    step = _step_interval(view["points"], view["main"], batch)
    kernels = _component(view, batch, "kernels_ms")
    return Judgement(step, Interval(kernels, kernels, kernels),
                     f"kernels {kernels:.2f} ms per step (trace) against the untraced step {step.value:.2f} ms "
                     f"({step.low:.2f} to {step.high:.2f} over the pass's two halves)")


def judge_weights(view: dict) -> Judgement:
    f = view["floors"].get(view["main"]) or {}
    if missing(f.get("weights_ms")):
        raise Missing("bandwidth")
    mm = _component(view, 1, "weights (matmul)")
    return Judgement(Interval(f["weights_ms"], f["weights_ms"], f["weights_ms"]), Interval(mm, mm, mm),
                     f"{f['weights_bytes'] / 1e9:.2f} GB / {f['bandwidth_gb_s']:,.0f} GB/s = {f['weights_ms']:.2f} ms "
                     f"predicted; the weight matmuls take {mm:.2f} ms per step at batch 1")


def judge_state(view: dict) -> Judgement:
    f = view["floors"].get(view["main"]) or {}
    if missing(f.get("state_ms_per_seq")) or not f.get("state_bytes_per_seq"):
        raise Missing("a recurrent state")
    a, b = _traced_pair(view)
    name = "recurrent state (GDN)"
    slope = (_component(view, b, name) - _component(view, a, name)) / (b - a)
    return Judgement(Interval(f["state_ms_per_seq"], f["state_ms_per_seq"], f["state_ms_per_seq"]),
                     Interval(slope, slope, slope),
                     f"2 x {f['state_bytes_per_seq'] / 1e6:.1f} MB / {f['bandwidth_gb_s']:,.0f} GB/s = "
                     f"{1000 * f['state_ms_per_seq']:.1f} us per sequence predicted; the state kernels grow "
                     f"{1000 * slope:.1f} us per added sequence from batch {a} to {b}")


def judge_context(view: dict) -> Judgement:
    c = view.get("context")
    if not c or missing(c.get("kv_predicted_ms_per_k")):
        raise Missing("steps at several context lengths")
    pts = view["points"]
    rows = pts[(pts["variant"] == view["main"]) & (pts["batch"] == c["batch"])
               & (pts["kind"].isin(["context", "decode"])) & (pts["sampling"] == "server")].dropna(subset=["step_ms"])
    rows = rows.sort_values("context")
    first, last = rows.iloc[0], rows.iloc[-1]
    dx = (last["context"] - first["context"]) / 1000
    lo = (last["step_lo_ms"] - first["step_hi_ms"]) / dx
    hi = (last["step_hi_ms"] - first["step_lo_ms"]) / dx
    s = c["slope_ms_per_k"]
    return Judgement(Interval(c["kv_predicted_ms_per_k"], c["kv_predicted_ms_per_k"], c["kv_predicted_ms_per_k"]),
                     Interval(s, min(lo, s), max(hi, s)),
                     f"{c['batch']} sequences x 1,000 tokens x K and V of every attention layer over the measured "
                     f"bandwidth = {c['kv_predicted_ms_per_k']:.2f} ms per 1,000 tokens of context predicted; the step "
                     f"grows {s:.2f} ms per 1,000 tokens (a line through {len(rows)} context lengths)")


def judge_filter(view: dict, batch: int = 256) -> Judgement:
    pts = view["points"]
    server = _step_interval(pts, view["main"], batch)
    none = _step_interval(pts, view["main"], batch, "nofilter")
    traced = view["traces"]
    row = traced[(traced["variant"] == view["main"]) & (traced["batch"] == batch)]
    if not len(row) or missing(row["filter_ms_per_step"].iloc[0]):
        raise Missing(f"a trace at batch {batch}")
    kernel = float(row["filter_ms_per_step"].iloc[0])
    diff = Interval(server.value - none.value, server.low - none.high, server.high - none.low)
    return Judgement(Interval(kernel, kernel, kernel), diff,
                     f"the top-k/top-p kernels take {kernel:.2f} ms per step in the trace at batch {batch}; the step "
                     f"with them minus without ({server.value:.2f} - {none.value:.2f} ms) is {diff.value:.2f} ms")


def client_pair(view: dict) -> tuple[pd.Series, pd.Series]:
    """(one client's point, the most clients' point) of the first variant that ran both, the dense model first."""
    c = view.get("clients")
    if c is None or not len(c):
        raise Missing("two clients at once against one server")
    for variant in [DENSE, *sorted(set(c["variant"].dropna()) - {DENSE})]:
        v = c[(c["variant"] == variant)].dropna(subset=["tok_s"])
        if 1 in set(v["clients"]) and (v["clients"] > 1).any():
            return v[v["clients"] == 1].iloc[0], v.sort_values("clients").iloc[-1]
    raise Missing("a flood from one client and from several with the counters polled in both")


def judge_clients(view: dict) -> Judgement:
    one, more = client_pair(view)

    def interval(r):
        return Interval(float(r.tok_s), float(min(r.tok_s_lo, r.tok_s)), float(max(r.tok_s_hi, r.tok_s)))

    return Judgement(interval(one), interval(more),
                     f"one client: the server generated {one.tok_s:,.0f} tok/s over the pass ({one.steps_per_s:,.1f} "
                     f"steps/s); {int(more.clients)} clients at once, {int(more.prompts) // int(more.clients):,} prompts "
                     f"each: {more.tok_s:,.0f} tok/s over their common window ({more.steps_per_s:,.1f} steps/s); "
                     "engine counters, the range over each half of the window")


TEN = BAND
WITHIN_20 = (1 / 1.2, 1.2)
CLAIMS = [
    Claim("kernels-b1", "A step is its kernels: at batch 1 the GPU is never idle",
          "the kernels of one step (a profiler trace) against the untraced step (engine counters)", "ms",
          lambda v: judge_kernels(v, 1), TEN,
          why="the GPU idles between kernels: host work (scheduling, sampling's bookkeeping, output processing) "
              "that the asynchronous scheduler does not hide is a candidate"),
    Claim("kernels-b256", "A step is its kernels at batch 256 too",
          "the kernels of one step at batch 256 against the untraced step", "ms",
          lambda v: judge_kernels(v, 256), TEN,
          why="the GPU idles for part of each step at this batch: work on the host per sequence is a candidate"),
    Claim("weights-floor", "The weight stream is a step's fixed cost: the matmuls read the weights at the bandwidth",
          "the language model's weight bytes (shapes) over the measured bandwidth against the matmul kernels at batch 1",
          "ms", judge_weights, WITHIN_20,
          why="the matmul kernels of a one-sequence step read the weights slower than a device-to-device copy moves bytes"),
    Claim("state-floor", "Each sequence's recurrent state is read and written once a step at the bandwidth",
          "2 x the Gated DeltaNet state bytes of one sequence over the bandwidth against the state kernels' growth per "
          "sequence", "ms", judge_state, WITHIN_20,
          why="the state kernels move each sequence's state at another rate than the bandwidth"),
    Claim("kv-floor", "Attention reads every token of context's K and V once a step",
          "K and V bytes of 1,000 tokens in every attention layer, times the batch, over the bandwidth, against the "
          "step's growth with context", "ms", judge_context, WITHIN_20,
          why="attention reads the cache at another rate than the bandwidth, or the steps' spread hides the slope"),
    Claim("filter-kernels", "The top-k/top-p filter costs what its kernels take",
          "the filter's kernels in the trace at batch 256 against the step with the filter minus without", "ms",
          judge_filter, (0.8, 1.25),
          why="the filter costs the step more than its kernels take: host-side work or synchronisation around it is "
              "a candidate"),
    Claim("one-client", "One client does not hold a flood back: two clients at once draw no more from the server",
          "the server's output (engine counters) over the pass of one `vllm bench serve` process against the same flood "
          "shared by two processes at once, on the same server", "tok/s", judge_clients, TEN,
          why="the server's rate moves by more than a tenth with a second client: above, one client (one process "
              "reading every stream) held the flood back; below, the two clients' own work shares the machine's cores "
              "with the server"),
]


def component_long(view: dict) -> pd.DataFrame:
    """The main variant's pure-decode components as long rows (batch, component, ms, share_pct, order) for the bars."""
    comp = view.get("pure_components")
    if comp is None or not len(comp):
        return pd.DataFrame(columns=["batch", "component", "ms", "share_pct", "order"])
    rows = []
    for d in comp.to_dict("records"):
        for i, name in enumerate(COMPONENTS):
            ms = d.get(name)
            if ms is None or missing(ms):
                continue
            rows.append({"batch": str(int(d["batch"])), "component": name, "ms": max(float(ms), 0.0),
                         "share_pct": 100 * max(float(ms), 0.0) / d["step_ms"], "order": i})
    return pd.DataFrame(rows)


_n = number  # a number as a reader reads it (words.number)


def findings(view: dict) -> list[str]:
    """The page's findings for one rig, each a sentence with its numbers (only where the data hold them)."""
    out = []
    pts, main = view["points"], view["main"]
    f = view["floors"].get(main) or {}
    comp = view.get("pure_components")
    curve = view["curve"]
    try:
        s1 = _step_interval(pts, main, 1).value
        mm, k1, idle = (_component(view, 1, "weights (matmul)"), _component(view, 1, "kernels_ms"),
                        _component(view, 1, "GPU idle"))
        out.append(f"A single stream of the {label(main)} steps every {_n(s1)} ms, {_n(s1 / f['weights_ms'])}x its weight "
                   f"floor ({_n(f['weights_bytes'] / 1e9)} GB at {_n(f['bandwidth_gb_s'])} GB/s = "
                   f"{_n(f['weights_ms'])} ms). The trace splits it into the weight matmuls ({_n(mm)} ms, reading at "
                   f"{_n(100 * f['weights_ms'] / mm, 2)}% of the measured bandwidth), every other kernel "
                   f"({_n(k1 - mm)} ms) and the GPU idle ({_n(idle)} ms).")
    except (Missing, KeyError, ZeroDivisionError):
        pass
    try:
        a, b = _traced_pair(view)
        grow = (_step_interval(pts, main, b).value - _step_interval(pts, main, a).value) / (b - a)
        gdn = (_component(view, b, "recurrent state (GDN)") - _component(view, a, "recurrent state (GDN)")) / (b - a)
        idle = (_component(view, b, "GPU idle") - _component(view, a, "GPU idle")) / (b - a)
        out.append(f"From {a} to {b} sequences each added sequence costs the step {_n(1000 * grow)} us: "
                   f"{_n(1000 * gdn)} us of it in the recurrent-state kernels (reading and writing its "
                   f"{_n(f['state_bytes_per_seq'] / 1e6)} MB state once at the measured bandwidth takes "
                   f"{_n(1000 * f['state_ms_per_seq'])} us) and {_n(1000 * idle)} us of GPU idle time, which "
                   f"grows with the batch.")
    except (Missing, KeyError, ZeroDivisionError, TypeError):
        pass
    mc = curve[curve["variant"] == main].set_index("batch") if len(curve) else pd.DataFrame()
    if len(mc) and {256, 512, 1024} <= set(mc.index):
        lo_hi = _step_interval(pts, main, 1024)
        tok = [mc.loc[b, "tok_s"] for b in (256, 512, 1024)]
        shape = ("holds within a tenth" if min(tok) >= 0.9 * max(tok) else
                 "falls" if tok[2] < tok[0] else "rises")
        out.append(f"Past 256 sequences the pure-decode output {shape}: {_n(tok[0])} tok/s at 256, {_n(tok[1])} at "
                   f"512 and {_n(tok[2])} at 1,024 (the step at 1,024 ranges {_n(lo_hi.low)} to {_n(lo_hi.high)} ms "
                   f"between the halves of its pass).")
    sam = view["sampling"]
    if len(sam) and 256 in set(sam["batch"]):
        r = sam.set_index("batch").loc[256]
        out.append(f"The checkpoint's top-k/top-p filter, which the rig's server applies to every request, costs "
                   f"{_n(r['filter_ms'])} ms of a {_n(r['server'])} ms step at 256 sequences; below 64 it costs "
                   f"at most {_n(max(sam[sam['batch'] <= 64]['filter_ms'].max(), 0.0), 2)} ms.")
    host = view["host"]
    if len(host):
        h = host.set_index("batch")
        ends = [b for b in (1, 256) if b in h.index]
        if ends:
            out.append("Without asynchronous scheduling the step is " + " and ".join(
                f"{_n(h.loc[b, 'sync_ms'])} ms instead of {_n(h.loc[b, 'async_ms'])} at batch {b}" for b in ends)
                + ": the overlap of the host's work with the GPU's hides "
                + " and ".join(f"{_n(h.loc[b, 'hidden_ms'])} ms" for b in ends) + " of each step.")
    models = model_finding(view)
    if models:
        out.insert(min(3, len(out)), models)
    if len(out) > 5:  # the box holds five: the filter's cost has its own section (What sampling costs)
        out = [s for s in out if not s.startswith("The checkpoint's top-k/top-p filter")]
    return out[:5]


def model_finding(view: dict) -> str | None:
    """One findings bullet across the other models: the 9B's cost per added sequence against the 4B's, the 4-bit
    matmuls' read rate against fp16's, the dense model's idle share at 256 (each only where measured)."""
    m = view.get("models")
    if m is None or not len(m):
        return None
    t = m.set_index("variant")
    parts = []
    if {"4b", "9b-fp16"} <= set(t.index) and known_number(t.loc["9b-fp16", "per_seq_to_256_us"]):
        a, b = t.loc["4b", "per_seq_to_256_us"], t.loc["9b-fp16", "per_seq_to_256_us"]
        parts.append(f"the 9B in fp16 costs {_n(b)} us per added sequence up to 256 against the 4B's {_n(a)}")
    if {"9b-fp16", "9b-int4"} <= set(t.index) and known_number(t.loc["9b-int4", "matmul_pct_bw"]):
        parts.append(f"the 4-bit 9B's weight matmuls read at {_n(t.loc['9b-int4', 'matmul_pct_bw'], 2)}% of the "
                     f"bandwidth, the fp16 9B's at {_n(t.loc['9b-fp16', 'matmul_pct_bw'], 2)}%")
    if DENSE in t.index and known_number(t.loc[DENSE, "idle_b256_pct"]):
        idle = f"the dense 0.5B's GPU is idle for {_n(t.loc[DENSE, 'idle_b256_pct'], 2)}% of its step at 256"
        api = view.get("api")
        both = api.dropna(subset=["step_one_ms", "step_more_ms"]) if api is not None and len(api) else None
        if both is not None and 256 in set(both["batch"]):
            r = both.set_index("batch").loc[256]
            idle += (f", and behind {r.api_servers} API servers the same engine steps in {_n(r.step_more_ms)} ms instead "
                     f"of {_n(r.step_one_ms)}: one API server holds it back")
        parts.append(idle)
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def flood_gap(view: dict, part3: pd.DataFrame) -> pd.DataFrame:
    """Part 3's floods of the same rig and model (the client's whole-pass output) beside the pure-decode output at
    the same batch: where the floods lose throughput past 256, the decode step does or does not."""
    if part3 is None or not len(part3) or "variant" not in view["curve"]:  # no decode point here (a partial run)
        return pd.DataFrame()
    f = part3[(part3["rig"] == view["rig"]) & (part3["model"] == "main")]
    mc = view["curve"][view["curve"]["variant"] == view["main"]].set_index("batch")
    rows = []
    for r in f.itertuples():
        b = int(r.max_num_seqs)
        if b not in mc.index:  # a cap this chapter did not decode at
            continue
        row = {"batch": b, "flood_tok_s": r.output_tok_s, "decode_tok_s": mc.loc[b, "tok_s"],
               "flood_over_decode": r.output_tok_s / mc.loc[b, "tok_s"],
               "flood_itl_ms": r.itl_p50_ms, "decode_step_ms": mc.loc[b, "step_ms"]}
        for k in ("phase_active_tok_s", "phase_mixed_share", "phase_mixed_step_ms", "phase_mixed_prompt_per_step",
                  "phase_stalled_s", "phase_active_s"):  # the flood's polled counters (p03.sweep_table), NaN unpolled
            row[k] = getattr(r, k, math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def _polled_flood_words(g: pd.DataFrame) -> str:
    """The rest of the past-256 answer: what part 3's polled floods at 256 and 1,024 show inside the pass, or that
    they were not polled."""
    if not all(known_number(g.loc[b, "phase_active_tok_s"]) for b in (256, 1024)):
        return (" What else a whole pass holds (each wave's prefills, its ramp and drain) is the candidate; part 3's "
                "floods at these caps were not polled, so what happens inside them is still to be measured.")
    a, b = g.loc[256], g.loc[1024]
    return (f" Polled, the floods generated {_n(a.phase_active_tok_s)} and {_n(b.phase_active_tok_s)} tok/s over the "
            f"time the engine had work, so the pass's idle ends do not carry the loss either. At 1,024, "
            f"{_n(100 * b.phase_mixed_share, 2)}% of that time went to steps that carried a refill's prompt tokens "
            f"(about {_n(b.phase_mixed_prompt_per_step)} a step, {_n(b.phase_mixed_step_ms)} ms a step, against "
            f"{_n(a.phase_mixed_prompt_per_step)} and {_n(a.phase_mixed_step_ms)} ms at 256), and for "
            f"{_n(b.phase_stalled_s)} s ({_n(100 * b.phase_stalled_s / b.phase_active_s, 2)}%) its step counter did not "
            "move while requests were in it: the refills' mixed steps and those stalls are where the flood spends the "
            "time pure decode does not; which of the two costs more, and what the stalls are (steps longer than a "
            "poll, or the API server's counters lagging), is not separated here.")


def api_words(view: dict, name_untimed: bool = True) -> str | None:
    """What the server with more API servers in front of the same engine shows (view["api"]): at which batches it
    held the batch that one API server did not, and its step against one API server's at the batches both timed."""
    api = view.get("api")
    if api is None or not len(api) or not api["step_more_ms"].notna().any():
        return None
    count = api["api_servers"].iloc[0]
    held = api.dropna(subset=["step_more_ms"])
    only = held[held["step_one_ms"].isna()]
    both = held.dropna(subset=["step_one_ms"])
    words = (f"With {count} API servers in front of the same engine the passes held their batch at "
             + ", ".join(f"{int(r.batch):,}" for r in held.itertuples()) + " (steps of "
             + ", ".join(f"{_n(r.step_more_ms)} ms" for r in held.itertuples()) + ")")
    if len(only) and name_untimed:
        words += ("; with one API server the passes at " + ", ".join(f"{int(b):,}" for b in only["batch"])
                  + " never held it long enough to time")
    if len(both):
        words += ("; where both timed a step, one API server's was " + ", ".join(
            f"{_n(r.step_one_ms)} against {_n(r.step_more_ms)} ms at {int(r.batch):,}" for r in both.itertuples()))
    return words


def clients_words(view: dict) -> str | None:
    """What one flood from one client and the same flood from several at once drew from the same server (engine
    counters over each pass's common window) and what each client reported; None where the rig has not run both."""
    try:
        one, more = client_pair(view)
    except Missing:
        return None
    runs = view["client_runs"]
    mine = runs[runs["point"] == more.point].sort_values("client")
    return (f"On {view['rig']}, the {label(one.variant)} flooded with {int(one.prompts):,} requests at its cap of "
            f"{int(one.cap):,}: from one client the server generated {_n(one.tok_s)} tok/s ({_n(one.steps_per_s)} "
            f"steps a second, a step every {_n(one.step_ms)} ms, {_n(one.running_mean)} requests running on average); "
            f"from {int(more.clients)} clients at once it generated {_n(more.tok_s)} tok/s over their common window of "
            f"{_n(more.window_s)} s ({_n(more.steps_per_s)} steps a second, a step every {_n(more.step_ms)} ms, "
            f"{_n(more.running_mean)} running), {_n(more.tok_s / one.tok_s)}x one client's. The clients themselves "
            "reported " + join_and([f"{_n(r.output_tok_s)} tok/s" for r in mine.itertuples()])
            + f" over their own passes, against {_n(one.clients_tok_s)} from the one client.")


def clients_page_table(view: dict) -> pd.DataFrame:
    """The clients points as the page shows them: per client count, the server's rates over the common window and
    each client's own output rate."""
    c, runs = view.get("clients"), view.get("client_runs")
    if c is None or not len(c):
        return pd.DataFrame()
    rows = []
    for r in c.sort_values(["variant", "clients"]).itertuples():
        mine = runs[runs["point"] == r.point].sort_values("client")
        rows.append({"model": label(r.variant), "clients": int(r.clients), "prompts": f"{int(r.prompts):,}",
                     "common window (s)": _n(r.window_s), "steps a second": _n(r.steps_per_s),
                     "step (ms)": _n(r.step_ms), "server's output (tok/s)": _n(r.tok_s),
                     "running (mean)": _n(r.running_mean),
                     "each client's output (tok/s)": ", ".join(_n(x) for x in mine["output_tok_s"]) or MISSING})
    return pd.DataFrame(rows)


def dense_words(view: dict) -> str | None:
    """What the dense 0.5B's passes show: its step where a window held the batch, and where the batch never ran."""
    pts = view["points"]
    d = pts[(pts["variant"] == DENSE) & (pts["kind"] == "decode")].sort_values("batch")
    if not len(d):
        return None
    held = d.dropna(subset=["step_ms"])
    lost = d[d["step_ms"].isna()]
    parts = []
    if len(held):
        parts.append("its pure-decode step is " + ", ".join(f"{_n(r.step_ms)} ms at {int(r.batch)}"
                                                            for r in held.itertuples()))
    if len(lost):
        parts.append("the passes at " + ", ".join(str(int(b)) for b in lost["batch"]) + " never held their batch in "
                     "a window (the most requests running at once: " + ", ".join(
                         f"{_n(r.running_max_pass)} of {int(r.batch)}" for r in lost.itertuples()) + ")")
    return "On the dense 0.5B " + "; ".join(parts) + "."


def unmeasured(rig: str, data_dir=None) -> list[PointPlan]:
    """The points of the rig's plan that have no complete point yet."""
    from ... import parts

    done = {pt.name for pt in load_points(NAME, data_dir, [rig])}
    return [pt for pt in parts.plan(0, rig, data_dir) if pt.name not in done]


def mixed_missing_words(rig: str, mixed: pd.DataFrame, data_dir=None) -> str | None:
    """The variants whose mixed sessions the rig's plan holds and the mixed table has no row of, in words."""
    from ... import parts
    from .mixed import PART0

    traced = [pt for pt in parts.plan(0, rig, data_dir) if pt.params.get("kind") == "mixed-trace"]
    have = set(mixed[(mixed["rig"] == rig) & (mixed["source"] == PART0)]["model"]) if len(mixed) else set()
    left = [pt for pt in traced if pt.preset not in have]
    if not left:
        return None
    models = join_and(list(dict.fromkeys(f"the {label(pt.params['variant'])}" for pt in left)))
    return (f"Not measured on {rig}: the mixed steps of {models} (part 0's points "
            + ", ".join(f"`{pt.name}`" for pt in left) + f"; `make reproduce PART=0 RIG={rig}` runs them).")


def _growth(view: dict, variant: str, name: str, a: int = 1, b: int = 256) -> float:
    """A traced component's growth per added sequence between two traced batches (us)."""
    return 1000 * (_comp_at(view, variant, b, name) - _comp_at(view, variant, a, name)) / (b - a)


def part_answers(part: int, data_dir=None, rigs: list[str] | None = None) -> list[str]:
    """The paragraphs of this chapter that answer part `part`'s open questions, for that part's page: each rig
    that measured this chapter, its answers whose heading names the part ("(part N)"), the rig named where several."""
    from ... import parts
    from .mixed import mixed_table
    from ...schema import PUBLISHED_RIG
    from ..p03 import sweep_table

    shown = [r for r in parts.page_rigs(0, data_dir, rigs) if r != PUBLISHED_RIG]
    if not shown:
        return []
    tables = page_tables(data_dir, shown)
    part3 = sweep_table(data_dir, shown) if part == 3 else None
    mixed = mixed_table(data_dir, shown) if part == 2 else None
    out = []
    for rig in shown:
        view = rig_view(rig, tables, parts.parameters(0, rig, data_dir), data_dir)
        for words in open_answers(view, part3, mixed):
            if f"(part {part})" in words.split("**")[1] if words.startswith("**") else False:
                words = words.replace(f" (part {part}).**", ".**", 1)  # on the part's own page
                out.append(words if len(shown) == 1 else f"*{rig}:* {words}")
    return out


def nine_b_answers(view: dict) -> list[str]:
    """Part 5's two questions from the models' table: the 9B's cost per added sequence against the 4B's, in pure
    decode and by component; the 4-bit single stream against its weight floor."""
    m = view.get("models")
    out = []
    if m is None or not len(m):
        return out
    t = m.set_index("variant")
    if {"4b", "9b-fp16"} <= set(t.index) and known_number(t.loc["9b-fp16", "per_seq_to_256_us"]):
        a, b = t.loc["4b"], t.loc["9b-fp16"]
        rel = "more" if b.per_seq_to_256_us > a.per_seq_to_256_us else "less"
        words = (f"**Why the 9B's per-sequence cost comes out below the 4B's (part 5).** In pure decode it does not: "
                 f"each sequence added from {int(b.from_batch)} to 256 costs the 9B's step {_n(b.per_seq_to_256_us)} us "
                 f"and the 4B's {_n(a.per_seq_to_256_us)} us ({rel} on the 9B)")
        if known_number(b.per_seq_256_1024_us) and known_number(a.per_seq_256_1024_us):
            words += (f", and from 256 to 1,024 {_n(b.per_seq_256_1024_us)} against {_n(a.per_seq_256_1024_us)} us")
        names = [("recurrent state (GDN)", "the recurrent-state kernels"), ("weights (matmul)", "the matmuls"),
                 ("GPU idle", "the GPU's idle time")]
        grow = [(w, _growth(view, "9b-fp16", n), _growth(view, "4b", n)) for n, w in names]
        if all(known_number(x) and known_number(y) for _, x, y in grow):
            words += (". Between the traces at 1 and 256 sequences, per added sequence: " + "; ".join(
                f"{w} {_n(x)} us on the 9B against {_n(y)} on the 4B" for w, x, y in grow)
                + f" (both models carry {_n(b.state_mb_per_seq)} MB of recurrent state per sequence)")
        out.append(words + ". Part 5 fits its per-sequence cost to the client's gaps between tokens (ITL and "
                   "TPOT) over its own passes, where its page says whether the two estimators agree; the engine's "
                   "step here is a third estimator, free of the client.")
    if {"9b-fp16", "9b-int4"} <= set(t.index) and known_number(t.loc["9b-int4", "matmul_b1_ms"]):
        q, f = t.loc["9b-int4"], t.loc["9b-fp16"]
        kernel = f" ({q.linear_kernel}, the kernel vLLM's start logged for the 4-bit layers)" if q.linear_kernel else ""
        out.append(f"**Why the 4-bit step at batch 1 sits far above its weight floor (part 5).** The 4-bit 9B's "
                   f"single stream steps every {_n(q.step_b1_ms)} ms against a floor of {_n(q.floor_ms)} ms "
                   f"({_n(q.weights_gb)} GB): its weight matmuls{kernel} take {_n(q.matmul_b1_ms)} ms, reading "
                   f"the weights at {_n(q.matmul_pct_bw, 2)}% of the measured bandwidth where the fp16 9B's "
                   f"matmuls read at {_n(f.matmul_pct_bw, 2)}%; the other kernels ({_n(q.other_kernels_b1_ms)} ms) "
                   f"and the GPU's idle time ({_n(q.idle_b1_ms)} ms) are about the fp16 model's "
                   f"({_n(f.other_kernels_b1_ms)} and {_n(f.idle_b1_ms)} ms). What holds the 4-bit matmuls to that "
                   "rate (dequantising in the kernel, its tile shapes at one row) is a candidate, not measured here.")
    return out


def open_answers(view: dict, part3: pd.DataFrame | None, mixed: pd.DataFrame | None = None) -> list[str]:
    """The parts' open questions that this rig's data answer, each with its numbers; the rest named as open."""
    out = []
    pts, main = view["points"], view["main"]
    gap = flood_gap(view, part3)
    if len(gap) and {256, 1024} <= set(gap["batch"]):
        g = gap.set_index("batch")
        out.append(f"**Why the flood loses throughput past 256 (part 3).** Part 3's flood gave {_n(g.loc[256, 'flood_tok_s'])}"
                   f" tok/s at cap 256 and {_n(g.loc[1024, 'flood_tok_s'])} at 1,024; pure decode here gives "
                   f"{_n(g.loc[256, 'decode_tok_s'])} and {_n(g.loc[1024, 'decode_tok_s'])} at those batches, and the "
                   f"flood's median ITL ({_n(g.loc[256, 'flood_itl_ms'])} and {_n(g.loc[1024, 'flood_itl_ms'])} ms) "
                   f"tracks the decode step ({_n(g.loc[256, 'decode_step_ms'])} and {_n(g.loc[1024, 'decode_step_ms'])}"
                   f" ms). The flood's whole pass reaches {_n(g.loc[256, 'flood_over_decode'], 2)} of the decode rate "
                   f"at 256 and {_n(g.loc[1024, 'flood_over_decode'], 2)} at 1,024: the loss is not in the decode step."
                   + _polled_flood_words(g))
    try:
        s1 = _step_interval(pts, main, 1).value
        f = view["floors"][main]
        mm = _component(view, 1, "weights (matmul)")
        out.append(f"**Why a single stream runs above its weight floor (part 1).** {_n(s1)} ms against a floor of "
                   f"{_n(f['weights_ms'])} ms: the weight matmuls alone take {_n(mm)} ms, "
                   f"{_n(mm / f['weights_ms'])}x the floor; the other {_n(s1 - mm)} ms are the other kernels and "
                   "the GPU's idle time (the findings above).")
    except (Missing, KeyError):
        pass
    dense = pts[(pts["variant"] == DENSE) & (pts["kind"] == "decode")].dropna(subset=["step_ms"]).set_index("batch")
    hyb = pts[(pts["variant"] == main) & (pts["kind"] == "decode")].dropna(subset=["step_ms"]).set_index("batch")
    common = sorted(set(dense.index) & set(hyb.index))
    if len(common) >= 2:
        a, b = common[-2], common[-1]
        dd = (dense.loc[b, "step_ms"] - dense.loc[a, "step_ms"]) / (b - a)
        dh = (hyb.loc[b, "step_ms"] - hyb.loc[a, "step_ms"]) / (b - a)
        p3, cliffs = None, ""
        if part3 is not None and len(part3):
            # the series' data dependency: part 3's floods of the same rig
            from ..p03 import added_sequence_ms, cliff, cliff_comparison
            r3 = part3[part3["rig"] == view["rig"]]
            s3, m3 = (r3[r3["model"] == m] for m in ("small", "main"))
            small, big = added_sequence_ms(s3), added_sequence_ms(m3)
            if small and big:
                p3 = (small, big)
            caps = sorted(set(s3["max_num_seqs"]) & set(m3["max_num_seqs"]))
            if len(caps) >= 2:
                cs, cm = cliff(s3, caps[0], caps[-1]), cliff(m3, caps[0], caps[-1])
                cliffs = (f"Part 3's floods on this rig put the 0.5B's cliff at {_n(cs)}x and the 4B's at {_n(cm)}x "
                          f"(best cap over cap {caps[0]:,.0f}, caps up to {caps[-1]:,.0f}): "
                          f"{cliff_comparison(cs, cm)}. ")
        words = (f"**The 0.5B's cliff against the 4B's (part 3).** {cliffs}In pure decode here each sequence added from "
                 f"{a} to {b} costs the dense 0.5B {_n(1000 * dd)} us a step and the hybrid 4B {_n(1000 * dh)} us")
        if p3:
            key = next((k for k in p3[0] if k.endswith("_ms") or "per" in k), None)
            if key:
                words += (f"; part 3's floods gave {_n(1000 * p3[0][key])} and {_n(1000 * p3[1][key])} us from the "
                          "median ITL between caps 64 and 256")
        lost = pts[(pts["variant"] == DENSE) & (pts["kind"] == "decode") & pts["step_ms"].isna()]
        api = api_words(view, name_untimed=False)
        if len(lost):
            words += (". The 0.5B's passes at " + ", ".join(str(int(x)) for x in lost["batch"]) + " never held their "
                      "batch long enough to time (at most " + ", ".join(
                          f"{int(r.running_max_pass)} of {int(r.batch)}" for r in lost.itertuples()) + " running)")
            if api is None:
                words += (": at its short steps the load the client and the API server keep in flight is a candidate "
                          "for what part 3's floods of the small model measured, to be tested with two clients and "
                          "--api-server-count (planned, not run)")
        if api is not None:
            words += (". " + api + ": one API server, not the GPU, held the small model's batch back and lengthened "
                      "its step" + ("" if clients_words(view) else " (two clients at once against one server were not run)"))
        try:
            one, more = client_pair(view)
            words += (f". Flooded at cap {int(one.cap):,} from one client, the server generated {_n(one.tok_s)} tok/s "
                      f"with {_n(one.running_mean)} requests running on average; from {int(more.clients)} clients at "
                      f"once, {_n(more.tok_s)} tok/s ({_n(more.tok_s / one.tok_s)}x) with {_n(more.running_mean)} "
                      "running (claim one-client below)")
        except Missing:
            pass
        m = view.get("models")
        d = m.set_index("variant").loc[DENSE] if m is not None and len(m) and DENSE in set(m["variant"]) else None
        if d is not None and known_number(d.idle_b256_pct):
            words += (f". At 256 sequences the GPU is idle for {_n(d.idle_b256_pct, 2)}% of the 0.5B's "
                      f"{_n(d.step_b256_ms)} ms step (its kernels take {_n(d.kernels_b256_ms)} ms): most of the "
                      "small model's step at that batch is not GPU work")
        sam = sampling_cost(pts, view["rig"], DENSE) if len(pts) else pd.DataFrame()
        if len(sam) and 256 in set(sam["batch"]):
            r = sam.set_index("batch").loc[256]
            if known_number(r["nofilter"]) and known_number(r["greedy"]):
                words += (f", and it is not steady from pass to pass: {_n(r['server'])} ms with the server's "
                          f"sampling defaults, {_n(r['nofilter'])} without the filter and {_n(r['greedy'])} greedy "
                          "(the two on a later start of the same server)")
        out.append(words + ".")
    out += nine_b_answers(view)
    if mixed is not None and len(mixed):
        from .mixed import mixed_words
        words = mixed_words(mixed, view["rig"]) if view["rig"] in set(mixed["rig"]) else []
        if words:
            out.append("**Why a step that carries a prefill chunk has a floor at small budgets (part 2).** "
                       + " ".join(words))
    missing_variants = [v for v in ("9b-fp16", "9b-int4") if v not in set(pts["variant"])]
    if missing_variants:
        out.append("**Still open.** Why the 9B's per-sequence cost comes out below the 4B's, and why int4's step at "
                   "batch 1 sits far above its weight floor (part 5): the 9B servers of this chapter's plan ("
                   + ", ".join(missing_variants) + ") have not run on this rig.")
    return out


PART = Part(NAME, DEFAULTS, without_data_dir(plan), tables=with_data_dir(page_tables), view=reading_data_dir(rig_view),
            findings=findings, claims=judged(CLAIMS), claim_ids=ids_of(CLAIMS), shows=measured_rigs,
            served_presets=served_presets,
            # part 2's sessions and part 3's floods beside its own, part 1's and 5's points against its step model,
            # and every part's server logs (pools.block_size: the page a hybrid model's start logged)
            reads=EVERY_PART)
