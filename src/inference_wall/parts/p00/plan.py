"""Part 0's plan: its name, default parameters (the variants: one server each) and the points each variant runs."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ...run.bench import PassSpec, Workload
from ...errors import UserError
from ...run.sweep import PassPlan, PointPlan
from ...run.trace import decode_window_trace


NAME = "00-inside-a-step"


NOTEBOOK = "notebooks/00-inside-a-step.md"


# A variant: one server. preset None is the rig's own model; `serve_args` come after the rig's; `measure` names the
# point kinds this server runs (decode always first). `base` names the variant this one differs from by its flags.
DEFAULT_VARIANTS = {
    "4b": {"preset": None, "serve_args": [], "measure": ["decode", "sampling", "context", "trace"]},
    "4b-sync": {"preset": None, "serve_args": ["--no-async-scheduling"], "measure": ["decode"], "base": "4b"},
    "0.5b": {"preset": "qwen2.5-0.5b", "serve_args": [],
             "measure": ["decode", "sampling", "context", "clients", "trace", "mixed"], "sampling_batches": [1, 256, 1024]},
    # added_decode_batches: part 5 asks about the 9B over the batches it fits there (up to 128), where the 4B has
    # points (their seeds are their own, so the points made before them keep theirs)
    "9b-fp16": {"preset": "qwen3.5-9b", "serve_args": [], "measure": ["decode", "trace"],
                "decode_batches": [1, 8, 64, 256, 1024], "added_decode_batches": [16, 32, 128],
                "trace_batches": [1, 256]},
    "9b-int4": {"preset": "qwen3.5-9b-gptq-int4", "serve_args": [], "measure": ["decode", "trace"],
                "decode_batches": [1, 8, 64, 256, 1024], "trace_batches": [1, 256]},
    # the API server's share (component 6): the dense 0.5B, whose passes at 64, 512 and 1,024 never held their batch
    # with one API server, again with two (the engine the same)
    "0.5b-api2": {"preset": "qwen2.5-0.5b", "serve_args": ["--api-server-count", "2"], "measure": ["decode"],
                  "base": "0.5b", "decode_batches": [64, 256, 512, 1024]},
    # part 2's chunk step alone: the rig's model on part 2's server at each of chunk_budgets, a long prompt on the
    # idle server traced (no decode points)
    "4b-chunk": {"preset": None, "serve_args": [], "measure": ["chunk"], "decode_batches": []},
}


ADDED_SEED = 50_000  # an added decode batch's pass seed is this plus its batch (no collision with the counted seeds)


# A variant may set its own batches (these keys), else the part's; a variant with a `base` uses sync_batches.
VARIANT_KEYS = ("decode_batches", "sampling_batches", "trace_batches")


MEASURES = ("decode", "sampling", "context", "clients", "trace", "mixed", "chunk")


TRACED_KINDS = ("trace", "mixed-trace")  # points with a profiler window: last in their server session


MIXED_KINDS = ("mixed", "mixed-trace")


DEFAULTS = {
    "variants": DEFAULT_VARIANTS,
    "order": ["4b", "4b-sync", "0.5b", "9b-fp16", "9b-int4", "0.5b-api2", "4b-chunk"],  # servers in this order (the budget cuts the tail)
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
    # a variant that measures "chunk": per budget, part 2's server (its flags at that budget, its traced prompt
    # length) with a long prompt alone on the idle server, chunk_solo times untraced (the first warms its kernels),
    # then once inside a profiler window (trace.SoloTrace); the prompts' seeds from chunk_seed on
    "chunk_budgets": [512],
    "chunk_solo": 3,
    "chunk_seed": 40_000,
}


def _variants(p: dict) -> dict:
    variants = p["variants"]
    if not isinstance(variants, dict):
        raise UserError(f"part {NAME}: parameter variants must map a name to its server, got {type(variants).__name__}")
    for name in p["order"]:
        if name not in variants:
            raise UserError(f"part {NAME}: order names variant {name!r}, not among {', '.join(variants)}")
        extra = set(variants[name]) - {"preset", "serve_args", "measure", "base", "added_decode_batches", *VARIANT_KEYS}
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

        def point(kind, batch, workload, sampling=(), side=None, extra=None, seed=None):
            spec = PassSpec(num_prompts=max(int(p["min_prompts"]), int(p["decode_waves"]) * batch),
                            max_concurrency=batch, seed=next(seeds) if seed is None else seed,
                            sampling=tuple(tuple(x) for x in sampling),
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
        decode = [point("decode", b, decode_load, extra={"sampling": "server"}) for b in sorted(batches)]
        # batches added after a variant's first points: a seed of their own (ADDED_SEED + batch), smallest first among
        # the others, so that adding them changes no made point's plan
        decode += [point("decode", int(b), decode_load, extra={"sampling": "server"}, seed=ADDED_SEED + int(b))
                   for b in v.get("added_decode_batches", []) if int(b) <= mns and int(b) not in batches]
        plans += sorted(decode, key=lambda pt: pt.params["batch"])
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
        if "chunk" in measure:
            plans += chunk_points(p, name, preset, profile)
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


def part2_parameters(profile) -> dict:
    """Part 2's parameters on this rig: its defaults and the rig's part-2 overrides."""
    from ..p02 import PART as PART2

    return {**PART2.defaults, **{k: v for k, v in profile.for_part(PART2.name).items() if v is not None}}


def mixed_parameters(p: dict, profile) -> dict:
    """Part 2's parameters on this rig (its defaults and the rig's part-2 overrides) for part 0's mixed sessions: one
    prompt length (mixed_prompt_len, else the one part 2 traces), traced, part 0's budgets if set, no knee points."""
    q = part2_parameters(profile)
    # part 2's traced length (p02's trace_length): its trace_prompt_len, else its middle prompt length
    length = int(p["mixed_prompt_len"] or q["trace_prompt_len"] or sorted(q["prompt_lens"])[len(q["prompt_lens"]) // 2])
    budgets = p["mixed_budgets"] if p["mixed_budgets"] is not None else q["budgets"]
    return {**q, "prompt_lens": [length], "trace": True, "trace_prompt_len": length, "knee_budgets": [],
            "budgets": [int(b) for b in budgets]}


def mixed_points(p: dict, variant: str, preset: str, profile) -> list[PointPlan]:
    """Part 2's sessions (p02.plan: a background at a fixed rate with one long prompt injected, solo prefills, and
    each session's profiler window last) on `variant`'s model, named `<variant>-mixed-<part 2's name>`: its points are
    kind "mixed" and its traced ones "mixed-trace"; /metrics polled. The profile part 2 plans on carries the model
    and a trace folder of this part's own."""
    from dataclasses import replace

    from ..p02 import PART as PART2

    shim = replace(profile, model_preset=preset, name=f"{profile.name}/{NAME}/{variant}")
    q = mixed_parameters(p, profile)
    out = []
    for pt in PART2.plan(q, shim, None, None):
        kind = "mixed-trace" if pt.params.get("kind") == "trace" else "mixed"
        out.append(replace(pt, name=f"{variant}-mixed-{pt.name}", session=f"{variant}-mixed-{pt.session}",
                           preset=preset, poll_metrics_s=float(p["poll_s"]),
                           workload=Workload(int(q["input_len"]), int(q["output_len"])),
                           params={**pt.params, "variant": variant, "preset": preset, "kind": kind}))
    return out


def chunk_points(p: dict, variant: str, preset: str, profile) -> list[PointPlan]:
    """A long prompt alone on the idle server, traced (see DEFAULTS' chunk_*): one session per budget, on part 2's
    server at that budget (its flags, max_model_len and a profiler folder of this part's, from part 2's trace point), named
    `<variant>-b<budget>-p<length>`, kind "chunk". Its measured pass is a short burst of part 2's background after the
    prompts (the sweep's pass; what the point is read for happens before it)."""
    from dataclasses import replace

    from ...run.inject import InjectSpec
    from ...run.trace import solo_trace
    from .. import injections
    from ..p02 import PART as PART2

    # part 2's server at each budget (its max_model_len from all its prompt lengths), its traced length
    q = {**mixed_parameters(p, profile), "budgets": [int(b) for b in p["chunk_budgets"]],
         "prompt_lens": part2_parameters(profile)["prompt_lens"]}
    shim = replace(profile, model_preset=preset, name=f"{profile.name}/{NAME}/{variant}")
    low, high = injections.token_range(preset)
    out = []
    for i, pt in enumerate(t for t in PART2.plan(q, shim, None, None) if t.params.get("kind") == "trace"):
        config = json.loads(pt.serve_args[pt.serve_args.index("--profiler-config") + 1])
        budget, length = int(pt.params["budget"]), int(pt.params["prompt_len"])
        spec = InjectSpec(prompt_len=length, output_len=1, count=0, solo=int(p["chunk_solo"]),
                          seed=int(p["chunk_seed"]) + i, token_low=low, token_high=high)
        burst = PassSpec(num_prompts=4, request_rate=float(q["background_rate_rps"]), seed=int(p["chunk_seed"]) + i,
                         detailed=False)
        out.append(PointPlan(name=f"{variant}-{pt.session}-p{length:05d}", session=f"{variant}-{pt.session}",
                             max_num_seqs=pt.max_num_seqs, serve_args=list(pt.serve_args), preset=preset,
                             passes=[PassPlan("bench", "measured", burst,
                                              side=solo_trace(spec, Path(config["torch_profiler_dir"])))],
                             params={"variant": variant, "preset": preset, "kind": "chunk", "budget": budget,
                                     "prompt_len": length, "solo": spec.solo, "max_model_len": pt.params["max_model_len"]},
                             poll_metrics_s=float(p["poll_s"]),
                             workload=Workload(int(q["input_len"]), int(q["output_len"]))))
    return out


MAIN = "4b"  # the hybrid model every part uses: the variant the decomposition is read on


LABELS = {"4b": "4B", "4b-sync": "4B without async scheduling", "0.5b": "0.5B", "9b-fp16": "9B (fp16)",
          "9b-int4": "9B (4-bit)", "0.5b-api2": "0.5B, two API servers"}


SYNC_FLAG, API_FLAG = "--no-async-scheduling", "--api-server-count"


def label(variant: str) -> str:
    return LABELS.get(variant, variant)


DENSE = "0.5b"
