"""What the step model is built from: the h200's measured decode steps and traces (part 0's view), its starts'
memory, part 2's solo prefill; step_model builds one variant's StepModel from them."""
from __future__ import annotations

import math

import pandas as pd

from ...measure import analysis
from ...errors import UserError
from ...model.pools import block_size
from .stepmodel import (Gpu, H200_KEY, MODELS, OTHER_FAMILIES, RIG, STATE_FAMILIES, StepModel, TRACE_BATCHES, Term,
                        gpus)
from .tables import (PROFILE_FLAGS, _starts, part2_freezes, reference, reference_fact,  # noqa: F401 (PROFILE_FLAGS,
                     server_log, server_starts)  # _starts: predict's names, as before tables read the starts)


def _row(frame: pd.DataFrame, batch: int) -> pd.Series:
    c = frame[~frame["mixed"]].set_index("batch")
    return c.loc[batch]


def api_step(view: dict, variant: str, batch: int) -> tuple[float, str] | None:
    """The untraced step of `variant` at `batch` on the server of the same model with more API servers, where the
    chapter ran one (p00.api_servers): its one-API-server step there is held back by the front end (the chapter's
    "What the API server holds back"), so the step model reads the step of the server that was not. None where no
    such server ran that batch."""
    api = view.get("api")
    if api is None or not len(api):
        return None
    r = api[(api["variant"] == variant) & (api["batch"] == batch)]
    if not len(r) or not r["step_more_ms"].iloc[0] == r["step_more_ms"].iloc[0]:
        return None
    return float(r["step_more_ms"].iloc[0]), f"{r['api_servers'].iloc[0]} API servers"


def measured_steps(view: dict, variant: str) -> tuple[pd.Series, dict[int, str]]:
    """{batch: step ms} the step model of `variant` is checked against, and where each comes from: the decode
    curve of its own server, except where a server of the same model with more API servers ran the batch, or any
    larger one (a front end that holds back one batch holds back the larger ones too): there, that server's."""
    c = view["curve"][view["curve"]["variant"] == variant].set_index("batch")["step_ms"]
    api = view.get("api")
    more = (api[(api["variant"] == variant) & api["step_more_ms"].notna()].set_index("batch")["step_more_ms"]
            if api is not None and len(api) else pd.Series(dtype=float))
    lowest = min(more.index) if len(more) else math.inf
    steps = {int(b): float(v) for b, v in c.items() if b < lowest}
    where = {int(b): "its own server" for b in steps}
    for b, v in more.items():
        steps[int(b)] = float(v)
        where[int(b)] = f"the server with {api['api_servers'].iloc[0]} API servers"
    return pd.Series(steps, dtype=float).sort_index(), where


def latency_evidence(view: dict, variant: str) -> dict:
    """At batch 1 on the h200: what the recurrent-state and attention kernels take against what their bytes need
    at the measured bandwidth (ms): the case for not scaling them with the bandwidth."""
    comp = _row(view["variant_components"][variant], 1)
    f = view["floors"][variant]
    ctx = _trace_context(view, variant)
    need = (2 * f["state_bytes_per_seq"] + f["kv_bytes_per_token"] * ctx) / (f["bandwidth_gb_s"] * 1e9) * 1000
    return {"kernels_ms": float(sum(comp[n] for n in STATE_FAMILIES)), "bytes_ms": need}


def _trace_context(view: dict, variant: str) -> float:
    pts = view["points"]
    t = pts[(pts["variant"] == variant) & (pts["kind"] == "trace")]
    return float(t["context"].iloc[0])


def _h200_starts(data_dir=None, rig: str = RIG) -> list[dict]:
    """Every recorded server start on `rig` (any part): tables.server_starts."""
    return server_starts(data_dir, rig)


def _gib(text: str | None) -> float:
    """nvidia-smi's memory.total ("143771 MiB") in GiB."""
    if not text:
        return math.nan
    value, unit = str(text).split()[:2]
    return float(value) * {"MiB": 1 / 1024, "GiB": 1.0}[unit]


def start_memory(preset: str, max_num_seqs: int, data_dir=None, rig: str = RIG) -> dict:
    """The memory of the latest start on `rig` of `preset` with this max_num_seqs and no pool-sizing or
    profile-sizing flags (else the latest start of `preset` at all, named): its gpu_memory_utilization, the driver's
    total (GiB), the weights and the KV pool it logged, and the non-KV overhead util x total - weights - KV pool.
    Every value NaN (and the source says so) where no such start logged its memory."""
    from ...records.logs import parse_startup
    from ...records.serversetup import setup_from_log

    starts = [s for s in _h200_starts(data_dir, rig)
              if s["preset"] == preset and not s["pool_flags"] and not s["profile_flags"]]
    same = [s for s in starts if s["max_num_seqs"] == max_num_seqs]
    for s in sorted(same or starts, key=lambda s: s["started"], reverse=True):
        text = server_log(s["dir"])
        rep, setup = parse_startup(text), setup_from_log(text)
        util = setup.get("gpu_memory_utilization")
        if rep.kv_cache_gib and rep.weights_gib and util:
            total = _gib(s["memory_total"])
            over = util * total - rep.weights_gib - rep.kv_cache_gib
            where = f"{s['dir'].parent.parent.name}/{s['dir'].name}"
            note = "" if same else f" (no start at max_num_seqs {max_num_seqs}: this one ran {s['max_num_seqs']})"
            return {"overhead_gib": over, "weights_gib": float(rep.weights_gib), "utilization": float(util),
                    "total_gib": total, "kv_gib": float(rep.kv_cache_gib), "dir": s["dir"],
                    "max_num_seqs": s["max_num_seqs"],
                    "source": (f"measured on {rig}: {where}'s log, {util:g} x {total:.2f} GiB - "
                               f"{rep.weights_gib:g} GiB weights - {rep.kv_cache_gib:g} GiB KV" + note)}
    nan = math.nan
    return {"overhead_gib": nan, "weights_gib": nan, "utilization": nan, "total_gib": nan, "kv_gib": nan,
            "dir": None, "max_num_seqs": None, "source": f"no start of {preset} on {rig} logged its memory"}


def overhead(preset: str, max_num_seqs: int, data_dir=None, rig: str = RIG) -> tuple[float, float, str]:
    """(overhead GiB, weights GiB, source) of start_memory."""
    m = start_memory(preset, max_num_seqs, data_dir, rig)
    return m["overhead_gib"], m["weights_gib"], m["source"]


def memory_ratio(view: dict, gpus_: dict[str, Gpu], data_dir=None) -> float:
    """The h200 driver's memory total (GiB, nvidia-smi's in the starts' rig_info) over its datasheet GB: how many GiB
    a driver reports per datasheet GB."""
    totals = sorted({s["memory_total"] for s in _h200_starts(data_dir, view["rig"]) if s["memory_total"]})
    return _gib(totals[0]) / gpus_[H200_KEY].memory_gb if totals else math.nan


def prefill_rate(view: dict, h200: Gpu, data_dir=None) -> tuple[float, str]:
    """The fraction of the h200's dense peak that part 2's solo prefill reached (chunking off; the shortest prompt
    measured): 2 x the 4B's matmul parameters x tokens / peak over the measured TTFT."""
    from ...model.modelshape import ModelShape
    from .. import injections

    try:
        fr = part2_freezes(view["rig"], data_dir)
    except (UserError, FileNotFoundError, KeyError, ValueError) as exc:  # no part 2 data on this rig
        return math.nan, f"no part 2 prefill on {view['rig']} ({exc})"
    params = ModelShape.of("qwen3.5-4b", data_dir).matmul_params
    roof = injections.roofline_table(fr, {view["rig"]: {"peak_dense_tflops": h200.tflops, "peak_source": "datasheet"}},
                                     data_dir, params_by_rig={view["rig"]: params})
    roof = roof[roof["rig"] == view["rig"]].sort_values("prompt_len")
    if not len(roof):
        return math.nan, f"no part 2 prefill on {view['rig']}"
    r = roof.iloc[0]
    return float(r["floor_fraction"]), (f"measured on {view['rig']}: part 2's solo prefill of {int(r['prompt_len']):,} "
                                        f"tokens (chunking off) took {r['solo_ttft_ms']:.1f} ms, "
                                        f"{100 * r['floor_fraction']:.1f}% of the dense peak")


def step_model(view: dict, variant: str, gpus_: dict[str, Gpu], data_dir=None, max_num_seqs: int | None = None,
               prefill: tuple[float, str] | None = None, sync: bool = False) -> StepModel:
    """The step model of one variant from the h200's view (p00.rig_view). `max_num_seqs` picks the h200 start whose
    memory overhead the admission uses (default: the series', part 1's facts). `sync`: add the host work that the
    asynchronous scheduler hid on the h200 (the 4b-sync variant), for a server that schedules synchronously."""
    if max_num_seqs is None:
        max_num_seqs = int(reference_fact(reference(1, data_dir), "max_num_seqs"))
    from ...model.modelshape import ModelShape

    rig = view["rig"]
    comp = view["variant_components"][variant]
    lo, hi = TRACE_BATCHES
    c1, c2 = _row(comp, lo), _row(comp, hi)
    at_hi = f"{variant}'s untraced step at {hi} less its traced kernels"
    more = api_step(view, variant, hi)
    if more is not None:  # the one-API-server step at `hi` is held back by the front end: read the other server's
        c2 = c2.copy()
        c2["step_ms"], c2["GPU idle"] = more[0], more[0] - float(c2["kernels_ms"])
        at_hi = f"the untraced step at {hi} of {variant}'s server with {more[1]} less the traced kernels"
    f = view["floors"][variant]
    m = view["models"].set_index("variant").loc[variant]
    preset = f.get("preset") or view["points"][view["points"]["variant"] == variant]["preset"].iloc[0]
    bw = float(f["bandwidth_gb_s"])
    ctx = _trace_context(view, variant)
    h200 = gpus_[H200_KEY]
    span = hi - lo
    grow = {n: (float(c2[n]) - float(c1[n])) / span for n in
            ["weights (matmul)", "GPU idle", *OTHER_FAMILIES, *STATE_FAMILIES]}
    at = f"measured on {rig}: {variant}'s traces at {lo} and {hi}"
    state2, kv = 2 * f["state_bytes_per_seq"], f["kv_bytes_per_token"]
    one_seq_h200 = (state2 + kv * ctx) / (bw * 1e9) * 1000
    rate = float(m["matmul_pct_bw"]) / 100
    terms = [
        Term("weight matmuls", "step", "bytes", bytes=f["weights_bytes"], rate=rate,
             source=f"shapes ({f['weights_bytes'] / 1e9:.2f} GB, p00.shape_bytes) at the h200 matmuls' read rate at "
                    f"batch 1 ({100 * rate:.1f}% of {bw:.0f} GB/s, measured on {rig}: p00.model_table)"),
        Term("sampling, norms and copies at 1", "step", "none", h200_ms=float(sum(c1[n] for n in OTHER_FAMILIES)),
             source=f"measured on {rig}: {variant}'s trace at {lo}, not scaled (launch-bound)"),
        Term("state and attention kernels at 1, beyond their bytes", "step", "none",
             h200_ms=float(sum(c1[n] for n in STATE_FAMILIES)) - one_seq_h200,
             source=f"measured on {rig}: {variant}'s trace at {lo} less one sequence's state and KV bytes at "
                    f"{bw:.0f} GB/s, not scaled"),
        Term("one sequence's state", "step", "bytes", bytes=state2, source="shapes: 2 x the state bytes"),
        Term("one sequence's KV", "step", "bytes", bytes=kv, per_token=True,
             source="shapes: K and V bytes per token of context"),
        Term("GPU idle at 1", "step", "none", h200_ms=float(c1["GPU idle"]),
             source=f"measured on {rig}: {variant}'s untraced step at {lo} less its traced kernels, not scaled"),
        Term("recurrent state, read and written", "sequence", "bytes", bytes=state2,
             source=f"shapes: 2 x {f['state_bytes_per_seq'] / 1e6:.1f} MB per sequence"),
        Term("KV cache read", "sequence", "bytes", bytes=kv, per_token=True,
             source=f"shapes: {kv:,} bytes per token of context"),
        Term("sampling, norms and copies: growth", "sequence", "bandwidth",
             h200_ms=sum(grow[n] for n in OTHER_FAMILIES), source=f"{at}, scaled with the bandwidth"),
        Term("weight matmuls: growth", "sequence", "tflops", h200_ms=grow["weights (matmul)"],
             source=f"{at}, scaled with the dense tensor TFLOP/s"),
        Term("GPU idle: growth", "sequence", "none", h200_ms=grow["GPU idle"],
             source=f"{at} (at {hi}: {at_hi}), not scaled"),
    ]
    if sync:
        host = view["host"].set_index("batch")["hidden_ms"]
        if {lo, hi} <= set(host.index):
            terms += [Term("host work async scheduling hides, at 1", "step", "none", h200_ms=float(host[lo]),
                           source=f"measured on {rig}: 4b-sync against 4b at {lo}"),
                      Term("host work async scheduling hides: growth", "sequence", "none",
                           h200_ms=float(host[hi] - host[lo]) / span,
                           source=f"measured on {rig}: 4b-sync against 4b, {lo} to {hi}")]
    shape = ModelShape.of(preset, data_dir)
    layout, text = shape.layout, shape.text
    full, layers = shape.attention_layers, shape.layers
    per_group = min(layers - full, full) if layout.state_groups else full
    block = block_size(preset, data_dir=data_dir)
    over, weights, over_src = overhead(preset, max_num_seqs, data_dir, rig)
    params = shape.matmul_params
    pre_rate, pre_src = prefill if prefill is not None else prefill_rate(view, h200, data_dir)
    return StepModel(variant, preset, terms, bw, h200.tflops, bw / h200.bandwidth_gb_s, ctx, weights, over, over_src,
                     layout, block, per_group * block * analysis.kv_bytes_per_token_per_layer(text),
                     int(f["state_bytes_per_seq"]), int(kv), float(params), pre_rate, pre_src)


def step_models(view: dict, data_dir=None, gpus_: dict[str, Gpu] | None = None, max_num_seqs: int | None = None
                ) -> dict[str, StepModel]:
    """A step model per series model traced on the rig (MODELS), at the series' max_num_seqs (part 1's facts)."""
    gpus_ = gpus_ or gpus(data_dir)
    if max_num_seqs is None:
        max_num_seqs = int(reference_fact(reference(1, data_dir), "max_num_seqs"))
    pre = prefill_rate(view, gpus_[H200_KEY], data_dir)
    return {v: step_model(view, v, gpus_, data_dir, max_num_seqs, pre) for v in MODELS
            if v in view.get("variant_components", {}) and v in set(view["models"]["variant"])}
