"""Part 0's tables: the only file of the part's page that reads the data dir (the points, the traces, the
clients' floods, the shapes a step reads, the mixed steps' traced windows and untraced injections)."""
from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import pandas as pd

from ...measure.steady import window_rates  # noqa: F401 (the clients' table's; the part's name)
from ...measure.tracewindow import chosen_window
from ...model.kvcache import pool_flags
from ...records.record import read_record
from ...records.reference import gpu_datasheets, load_reference, reference_fact  # noqa: F401 (the step model's)
from ...records.store import (DATA_DIR, load_points, log_startup, open_artefact, pass_summary, read_artefact,
                              rigs_with_data, runs_dir)
from ...run import trace
from ...schema import PARTS
from ...run.sweep import PointPlan
from .. import injections
from .families import COMPONENTS, FILTER_KERNELS, LINEAR_KERNEL, quant_matmul_ms, step_family, trace_steps
from .plan import DEFAULTS, MIXED_KINDS, NAME, plan, served_presets


def _fmt(preset: str) -> str:
    return "int4" if "int4" in preset else "fp16"


def shape_bytes(preset: str, data_dir=None) -> dict:
    """What one decode step must move, from the shapes: the language model's weights (weightbytes), each
    sequence's recurrent state read and written (Gated DeltaNet layers), each token of context's K and V read."""
    from ...model.modelshape import ModelShape, preset_decode_bytes

    shape = ModelShape.of(preset, data_dir)
    b = preset_decode_bytes(preset, _fmt(preset), data_dir)
    return {"weights_bytes": b.total, "quantized_bytes": b.quantized, "gemm16_bytes": b.unquantized_linear + b.head,
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
        if p.get("kind") in (*MIXED_KINDS, "chunk"):  # part 2's passes on this part's models: mixed.py and
            continue  # chunkalone.py read them
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


def linear_kernel(pt) -> str | None:
    """The matmul kernel vLLM chose for a quantized model's linear layers, as its start logged it
    ("Using MacheteLinearKernel for AutoGPTQLinearMethod"); None where the start logged none (fp16)."""
    try:
        m = LINEAR_KERNEL.search(pt.server_log())
    except FileNotFoundError:
        return None
    return m.group(1) if m else None


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
        for w in [chosen_window(summary)] if summary.get("windows") else []:
            for sm in w.get("summaries", []):
                kernels = sm.get("kernels") or {}
                steps = trace_steps(kernels, shape)
                mixed = any("chunk_gated_delta_rule_fwd" in n.lower() for n in kernels)
                fams: dict[str, float] = {}
                for n, (_, ms) in kernels.items():
                    fams[step_family(n)] = fams.get(step_family(n), 0.0) + ms
                topk = sum(t for n, (_, t) in kernels.items() if re.search(FILTER_KERNELS, n.lower()))
                quant = quant_matmul_ms(kernels)
                for fam in COMPONENTS[:-1]:
                    rows.append({"rig": pt.rig, "point": pt.name, "variant": pt.params["variant"],
                                 "batch": int(pt.params["batch"]), "device": sm.get("device"), "family": fam,
                                 "ms_per_step": fams.get(fam, 0.0) / steps if steps else math.nan,
                                 "steps": steps, "mixed": mixed, "busy_ms_per_step": sm["busy_ms"] / steps if steps else math.nan,
                                 "span_ms_per_step": sm["span_ms"] / steps if steps else math.nan,
                                 "filter_ms_per_step": topk / steps if steps else math.nan,
                                 "quant_mm_ms_per_step": quant / steps if steps else math.nan})
    return pd.DataFrame(rows, columns=["rig", "point", "variant", "batch", "device", "family", "ms_per_step", "steps",
                                       "mixed", "busy_ms_per_step", "span_ms_per_step", "filter_ms_per_step",
                                       "quant_mm_ms_per_step"])


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


PART2, PART0 = "part 2", "part 0"  # `source` of a mixed step's row: whose sessions its window comes from


def mixed_sources(data_dir=None, rigs: list[str] | None = None) -> list[tuple[str, list, list]]:
    """(source, traced points, untraced points): part 2's sessions on the rig's model, and part 0's (p00.mixed_points:
    the same sessions on part 0's other models)."""
    part0 = [pt for pt in load_points(NAME, data_dir, rigs) if pt.params.get("kind") in MIXED_KINDS]
    return [(PART2, [pt for pt in load_points(injections.NAME, data_dir, rigs) if pt.params.get("kind") == "trace"],
             injections.measured_points(data_dir, rigs)),
            (PART0, [pt for pt in part0 if pt.params["kind"] == "mixed-trace"],
             [pt for pt in part0 if pt.params["kind"] == "mixed"])]


def _raw_kernels(pt, window: dict, summary: dict) -> dict | None:
    """A window's whole kernel table: the summary's own (trace.take_trace), else its raw trace's where the point kept
    it (points made before summaries held it), else None."""
    if summary.get("kernels"):
        return summary["kernels"]
    if summary.get("file") not in (window.get("kept") or []):
        return None
    try:
        path = open_artefact(pt.path, f"trace-{window['window']}-{summary['file']}")
    except FileNotFoundError:
        return None
    return trace.kernel_table(trace.read_trace(path))


def traced_window(pt) -> dict | None:
    """What a mixed step's row reads of one traced point (mixed._row): its injection window's `summary` (the first of
    trace.summarise's), the raw trace's `kernels` where kept (else None), the long prompt's bench-inject `record` and
    its `injections` (injections.point_injections); None where the injection window holds no trace."""
    summary = json.loads(read_artefact(pt.path, "trace-summary.json"))
    window = next((w for w in summary.get("windows", []) if w["window"] == "injection" and w.get("summaries")), None)
    if window is None:
        return None
    sm = window["summaries"][0]
    return {"summary": sm, "kernels": _raw_kernels(pt, window, sm),
            "record": json.loads(read_artefact(pt.path, "bench-inject.json"))["injections"][0],
            "injections": injections.point_injections(pt)}


def chunk_alone_reads(data_dir=None, rigs: list[str] | None = None) -> list[dict]:
    """Per point of kind "chunk" (a long prompt alone, plan.chunk_points): the point, its solo window's trace summary
    and kernel table (the raw trace's where kept, else the summary's), and its prompts (`solo` untraced,
    `traced_solo`); a point whose solo window holds no trace is left out (chunkalone.py reads these)."""
    out = []
    for pt in [p for p in load_points(NAME, data_dir, rigs) if p.params.get("kind") == "chunk"]:
        window = next((w for w in json.loads(read_artefact(pt.path, "trace-summary.json")).get("windows", [])
                       if w["window"] == "solo" and w.get("summaries")), None)
        if window is not None:
            sm = window["summaries"][0]
            out.append({"point": pt, "summary": sm, "kernels": _raw_kernels(pt, window, sm),
                        "prompts": json.loads(read_artefact(pt.path, "bench-inject.json"))})
    return out


def mixed_inputs(data_dir=None, rigs: list[str] | None = None) -> list[tuple[str, object, dict | None, pd.DataFrame]]:
    """Per traced point of mixed_sources, in their order: (source, the point, traced_window's read of it, the
    untraced injections of the same rig and model: injections.injections_of, one frame per rig and model)."""
    out = []
    for source, traced, untraced in mixed_sources(data_dir, rigs):
        groups: dict[tuple, pd.DataFrame] = {}
        for pt in traced:
            key = (pt.rig, pt.record.preset)
            if key not in groups:
                groups[key] = injections.injections_of([u for u in untraced if (u.rig, u.record.preset) == key])
            out.append((source, pt, traced_window(pt), groups[key]))
    return out


def page_tables(data_dir=None, rigs: list[str] | None = None) -> dict:
    clients, client_rows = clients_table(data_dir, rigs)
    return {"points": point_table(data_dir, rigs), "trace": trace_table(data_dir, rigs), "clients": clients,
            "client_runs": client_rows}


def unmeasured(rig: str, data_dir=None) -> list[PointPlan]:
    """The points of the rig's plan that have no complete point yet."""
    done = {pt.name for pt in load_points(NAME, data_dir, [rig])}
    return [pt for pt in rig_plan(rig, data_dir) if pt.name not in done]


def rig_plan(rig: str, data_dir=None) -> list[PointPlan]:
    """The rig's plan of this part (parts.plan's, from the part's own pieces: no registry of parts): its parameters
    on the rig, the KV pool of each model it serves."""
    from ...run.rig import load_profile
    from ..protocol import pools_for

    profile = load_profile(rig, data_dir)
    params = rig_parameters(rig, data_dir, profile)
    return plan(params, profile, pools_for(NAME, served_presets(params, profile), profile, data_dir))


def rig_parameters(rig: str, data_dir=None, profile=None) -> dict:
    """This part's parameters on a rig: its defaults, then the rig profile's overrides (`profile`: the rig's, read
    here where not given)."""
    from ...run.rig import load_profile
    from ..protocol import parameters_for

    return parameters_for(NAME, DEFAULTS, profile if profile is not None else load_profile(rig, data_dir))


def rigs_measured(data_dir=None) -> list[str]:
    """The rigs with this part's points in the data dir."""
    return list(rigs_with_data(0, data_dir))


def reference(part: int, data_dir=None) -> dict:
    """The published reference of part `part` (data/reference/, records.reference.load_reference: its facts and
    tables), for the step model and its checks: the part's one reader of the reference."""
    return load_reference(part, data_dir)


def datasheets(data_dir=None) -> pd.DataFrame:
    """The GPUs' datasheet rows (data/reference/, records.reference.gpu_datasheets)."""
    return gpu_datasheets(data_dir)


def rig_datasheet(rig: str, data_dir=None) -> str | None:
    """The datasheet row a rig's profile names (None where it names none)."""
    from ...run.rig import load_profile

    return load_profile(rig, data_dir).datasheet


# Flags that change the activations vLLM's profile run reserves before it sizes the KV pool (part 2's servers set
# both): a start with them has another overhead than a default server of the same preset and cap.
PROFILE_FLAGS = frozenset({"--max-num-batched-tokens", "--max-model-len"})


def server_starts(data_dir=None, rig: str = "h200") -> list[dict]:
    """Every recorded server start on `rig` (any part): preset, max_num_seqs, pool-sizing flags, when, where."""
    return _starts(str(runs_dir(data_dir)), rig)


@functools.lru_cache(maxsize=8)
def _starts(runs: str, rig: str) -> list[dict]:
    seen, out = set(), []
    for man in sorted(Path(runs).glob(f"*/{rig}/*/manifest.json")):
        rec = read_record(man.parent)
        if not rec or not rec.complete or not (rec.session and rec.session.has_startup):
            continue
        sid = rec.session.id
        if sid in seen:
            continue
        seen.add(sid)
        cmd = [str(a) for a in (rec.session.server_command or [])]
        mns = int(cmd[cmd.index("--max-num-seqs") + 1]) if "--max-num-seqs" in cmd else None
        out.append({"preset": rec.model.get("preset"), "max_num_seqs": mns, "pool_flags": pool_flags(cmd),
                    "profile_flags": sorted(set(cmd) & PROFILE_FLAGS),
                    "started": rec.session.server_started or 0, "dir": man.parent,
                    "memory_total": (rec.rig_info.get("gpu") or {}).get("memory.total"),
                    "vllm": rec.rig_info.get("vllm")})
    return out


def server_log(point_dir) -> str:
    """A start's server log, plain or gzipped (compress_large gzips the long ones)."""
    return read_artefact(point_dir, "server.log")


def part2_freezes(rig: str, data_dir=None) -> pd.DataFrame:
    """Part 2's freezes on a rig (injections.freeze_table of its injection_table): the step model's solo prefill."""
    return injections.freeze_table(injections.injection_table(data_dir, [rig]))


def frozen_name(gpu_key: str, model: str | None = None) -> str:
    """A frozen prediction's path under the data dir: predict.py's `predictions/<gpu>.csv`, refit.py's `<gpu>-refit`."""
    return f"predictions/{gpu_key}{'-' + model if model else ''}.csv"


def frozen_predictions(gpu_key: str, data_dir=None, model: str | None = None) -> pd.DataFrame | None:
    """The frozen prediction of datasheet row `gpu_key`: predict.py's, refit.py's with `model="refit"`; else None."""
    path = Path(data_dir or DATA_DIR) / frozen_name(gpu_key, model)
    return pd.read_csv(path, dtype={"model_commit": str}) if path.exists() else None


def single_pass(rig: str, data_dir=None) -> dict | None:
    """Part 1's pass of one request at a time on a rig (its `single` point's pass_summary), None where not run."""
    return next((pass_summary(pt) for pt in load_points(PARTS[1], data_dir, [rig]) if pt.name == "single"), None)


def start_report(point_dir):
    """The startup report (logs.parse_startup, cached) of a start's server log."""
    return log_startup(open_artefact(point_dir, "server.log"))
