"""Predict the A10G, then any GPU: a decode step rebuilt from what "Inside a step" measured on the h200.

Part 0 takes an h200 step apart per model (p00.rig_view): the weight matmuls and the rate at which they read the
weights, every other kernel family, the GPU's idle time (the untraced step less the traced kernels), at batches 1
and 256. This module puts the parts back together for another GPU, each part scaled by what should set it there:

    step(B, context) = at batch 1:  weights_bytes / (f x BW)                  f: the h200 matmuls' read rate at 1
                                    + sampling, norms and copies at 1           h200, not scaled
                                    + state and attention kernels at 1 beyond
                                      their bytes                               h200, not scaled
                                    + one sequence's state and KV bytes / BW    shapes
                                    + GPU idle at 1                             h200, not scaled
                       + (B - 1) x [ 2 x state bytes / BW + KV bytes x context / BW          shapes
                                     + sampling, norms and copies' growth x BW_h200 / BW   h200, scaled with BW
                                     + matmuls' growth x TFLOP/s_h200 / TFLOP/s            h200, scaled with compute
                                     + GPU idle's growth ]                                 h200, not scaled

BW is the target's datasheet bandwidth times the fraction of its datasheet figure the h200's copy reached (per model:
the copy bandwidth its own h200 servers measured, over the h200's datasheet figure): every bytes term reads at that
effective bandwidth, so on the h200 itself the step at batch 1 is the measured one. Which
parts scale how is a modelling choice, stated here and in every coefficient's `scale`:

- the weight matmuls at batch 1 read W bytes at the rate the h200's did (a fraction of the bandwidth); what the
  matmuls add per sequence is taken as arithmetic (each sequence is another row of every matmul) and scaled with
  the dense FP16 tensor TFLOP/s;
- the other kernels at batch 1 (sampling, norms, activations, copies; the recurrent-state and attention kernels
  beyond the bytes they move) are taken as launch- and latency-bound: at batch 1 they take far longer than their
  bytes need at the bandwidth (`latency_evidence`), so they are not scaled; what sampling, norms and copies add per
  sequence is taken as memory traffic and scaled with the bandwidth;
- the recurrent state (read and written once a step) and the KV cache (read once a step per token of context) are
  their bytes (p00.shape_bytes) over the bandwidth, in place of the state and attention kernels' measured growth;
- the GPU's idle time and its growth per sequence are the h200's host work as measured (another host's CPU and
  another vLLM version are not modelled).

A flood (every request `input` prompt tokens, `output` generated) adds each request's prefill: 2 x the language
model's matmul parameters x prompt tokens over the target's tensor TFLOP/s times the fraction of the h200's peak that
part 2's solo prefill reached (p02.roofline_table, its shortest prompt). Its throughput at a cap is
output / (output x step(B) / B + prefill), B = min(cap, the KV admission limit), and the prefill is added to the
decode (not overlapped with it): a model choice.

The KV admission limit counts vLLM's pages as kvcache.KVPool does: the pool is the target's memory (its datasheet
GB, times the h200's driver-reported total over its datasheet GB) x gpu_memory_utilization, less the weights and the
non-KV overhead an h200 start of the same model and max_num_seqs logged (util x total - weights - KV pool), in pages
of the model's block size (8 layers x 528 tokens x 4 KiB for Qwen3.5), each request holding its attention pages and
its state pages.

The GPUs' table gives, per GPU and model, the single stream (step at 1), the decode ceiling at the running batch a
flood reaches (min(max_num_seqs, the admission limit)), the admission limit, and the batch where an added sequence
stops paying: where the step's growth per added sequence reaches STOP_PAYING_X of the step per sequence (step / B).
`step_model(..., sync=True)` adds the host work that asynchronous scheduling hid on the h200 (4b-sync against 4b).

Every coefficient keeps its source ("measured on h200 ...", "datasheet ...", "shapes ..."): coefficient_table.
Published numbers are read through inference_wall.records.reference, never typed: a10g_table.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import pandas as pd

from ...measure import analysis
from ...measure.analysis import GIB
from ...errors import UserError
from ...model.kvcache import KVPool, ModelLayout, pool_flags
from ...model.pools import block_size
from ...records.reference import gpu_datasheets, load_reference, reference_fact
from ... import words
from ...words import join_and  # noqa: F401 (predict's name for it stays: notebooks and tests use it)

RIG = "h200"
H200_KEY = "h200-sxm"  # the datasheet row of the GPU the coefficients were measured on
TRACE_BATCHES = (1, 256)  # the traced batches the per-sequence growth is read between
VALIDATION_BATCHES = (1, 64, 256, 1024)
# The batch where an added sequence stops paying: where the step's growth per added sequence reaches X of the step's
# cost per sequence (step / B). There, the added sequence adds 1 - X of an average sequence's tokens per second
# (d(B/step)/dB = (step - B x slope) / step^2 = (1 - X) x (1 / step)). A definition, not a measurement.
STOP_PAYING_X = 0.9
FIT_BAND_PCT = 20.0  # the test of the step fit's prediction: each term within this many percent
MODELS = ["4b", "0.5b", "9b-fp16", "9b-int4"]  # p00's variants: the series' models
MODEL_LABELS = {"4b": "4B", "0.5b": "0.5B", "9b-fp16": "9B fp16", "9b-int4": "9B int4"}
OTHER_FAMILIES = ["sampling", "norms, activations, other", "memory copies"]
STATE_FAMILIES = ["recurrent state (GDN)", "attention"]


# ---------------------------------------------------------------------------------------------
# GPUs: the datasheet table
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Gpu:
    key: str
    name: str
    memory_gb: float  # as the datasheet prints it
    bandwidth_gb_s: float  # datasheet
    tflops: float  # dense FP16/BF16 tensor
    tflops_source: str
    source: str


def gpus(data_dir=None) -> dict[str, Gpu]:
    """The datasheet GPUs, keyed as the table keys them. Dense tensor TFLOP/s: the datasheet's dense figure, else half
    its with-sparsity figure (NVIDIA's 2:4 structured sparsity figures are twice the dense ones); the A10G, which has
    no NVIDIA datasheet, takes the figure part 1's post quotes (reference fact a10g_fp16_peak)."""
    out = {}
    for r in gpu_datasheets(data_dir).itertuples():
        if r.fp16_tensor_dense_tflops == r.fp16_tensor_dense_tflops:
            tf, how = float(r.fp16_tensor_dense_tflops), "datasheet, dense"
        elif r.fp16_tensor_sparse_tflops == r.fp16_tensor_sparse_tflops:
            tf, how = float(r.fp16_tensor_sparse_tflops) / 2, "datasheet, half its with-sparsity figure"
        elif r.key == "a10g":
            tf, how = reference_fact(load_reference(1, data_dir), "a10g_fp16_peak"), "part 1's post (quoted spec)"
        else:
            tf, how = math.nan, "none"
        out[r.key] = Gpu(r.key, r.gpu, float(r.memory_gb), float(r.memory_bandwidth_gb_s), tf, how, r.source)
    return out


# ---------------------------------------------------------------------------------------------
# The step model
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Term:
    """One part of a step. `per`: "step" (a part of the step at batch 1) or "sequence" (what each sequence past the
    first adds). `scale`: "bytes" (bytes / (rate x the target's bandwidth)), "bandwidth" (the h200's ms x its
    bandwidth / the target's), "tflops" (the h200's ms x its TFLOP/s / the target's) or "none" (the h200's ms)."""

    name: str
    per: str
    scale: str
    h200_ms: float = math.nan  # the h200's value (ms per step at batch 1, or ms per added sequence)
    bytes: float = 0.0  # "bytes" terms: per step, per sequence, or per token of context (per_token)
    per_token: bool = False
    rate: float = 1.0  # "bytes" terms: the fraction of the bandwidth they read at
    source: str = ""


@dataclass
class StepModel:
    variant: str
    preset: str
    terms: list[Term]
    h200_bw_gb_s: float  # the copy bandwidth this model's h200 servers measured
    h200_tflops: float
    copy_fraction: float  # h200 measured / h200 datasheet bandwidth
    trace_context: float
    weights_gib: float  # what the h200's start logged loading
    overhead_gib: float  # util x total - weights - KV pool, an h200 start's log
    overhead_source: str
    layout: ModelLayout
    block_size: int
    block_bytes: int  # one page across the layers that share it
    state_bytes: int
    kv_bytes_per_token: int
    prefill_params: float  # the matmul parameters a prefill multiplies each prompt token by
    prefill_rate: float  # the fraction of the dense peak the h200's solo prefill reached
    prefill_source: str
    notes: list[str] = field(default_factory=list)

    def bandwidth(self, gpu: Gpu) -> float:
        """The bandwidth every bytes term reads at on `gpu` (GB/s): its datasheet figure x the h200's copy fraction."""
        return gpu.bandwidth_gb_s * self.copy_fraction

    def term_ms(self, t: Term, gpu: Gpu, context: float) -> float:
        if t.scale == "bytes":
            b = t.bytes * (context if t.per_token else 1.0)
            return b / (t.rate * self.bandwidth(gpu) * 1e9) * 1000
        if t.scale == "bandwidth":
            return t.h200_ms * self.h200_bw_gb_s / self.bandwidth(gpu)
        if t.scale == "tflops":
            return t.h200_ms * self.h200_tflops / gpu.tflops
        return t.h200_ms

    def parts(self, gpu: Gpu, context: float, batch: float = 1) -> dict[str, float]:
        """Each term's ms in the step at `batch` (a sequence term counts batch - 1 times)."""
        return {t.name: self.term_ms(t, gpu, context) * (1 if t.per == "step" else batch - 1) for t in self.terms}

    def at1(self, gpu: Gpu, context: float) -> float:
        return sum(self.term_ms(t, gpu, context) for t in self.terms if t.per == "step")

    def per_seq(self, gpu: Gpu, context: float) -> float:
        return sum(self.term_ms(t, gpu, context) for t in self.terms if t.per == "sequence")

    def step(self, gpu: Gpu, batch: float, context: float) -> float:
        return self.at1(gpu, context) + (batch - 1) * self.per_seq(gpu, context)

    def fit(self, gpu: Gpu, context: float) -> tuple[float, float]:
        """(intercept, slope) of the line step = intercept + slope x B."""
        s = self.per_seq(gpu, context)
        return self.at1(gpu, context) - s, s

    def stop_paying_batch(self, gpu: Gpu, context: float, x: float = STOP_PAYING_X) -> float:
        """The batch where slope reaches x of step / B: B = x / (1 - x) x intercept / slope."""
        a, b = self.fit(gpu, context)
        return x / (1 - x) * a / b if a > 0 and b > 0 else math.nan

    # -- memory ------------------------------------------------------------------------------
    def usable_gib(self, gpu: Gpu, h200_ratio: float) -> float:
        return gpu.memory_gb * h200_ratio

    def pool(self, memory_gib: float, utilization: float) -> KVPool | None:
        """The KV pool the memory leaves: memory x utilization - weights - overhead, in pages; None if none fits."""
        free = (memory_gib * utilization - self.weights_gib - self.overhead_gib) * GIB
        blocks = int(free // self.block_bytes) if free > 0 else 0
        if blocks <= 1:
            return None
        return KVPool(blocks, self.block_size, self.layout, blocks, blocks,
                      f"({memory_gib:.2f} GiB x {utilization:g} - {self.weights_gib:g} GiB weights - "
                      f"{self.overhead_gib:.2f} GiB overhead) / {self.block_bytes:,} bytes per page")

    def admission(self, memory_gib: float, utilization: float, tokens: int) -> int:
        pool = self.pool(memory_gib, utilization)
        return pool.admission_limit(tokens) if pool is not None else 0

    def pages_bytes(self, tokens: int) -> int:
        return self.layout.pages_per_request(tokens, self.block_size) * self.block_bytes

    # -- floods -----------------------------------------------------------------------------
    def prefill_ms(self, gpu: Gpu, prompt_tokens: int) -> float:
        return 2 * self.prefill_params * prompt_tokens / (gpu.tflops * 1e12 * self.prefill_rate) * 1000

    def flood(self, gpu: Gpu, batch: float, input_len: int, output_len: int) -> dict:
        """A flood's steady output at a running batch: each request's `output_len` decode steps (its share of the
        batch's step) plus its prefill, added."""
        context = input_len + output_len / 2
        decode = output_len * self.step(gpu, batch, context) / batch
        pre = self.prefill_ms(gpu, input_len)
        return {"tok_s": output_len / (decode + pre) * 1000, "prefill_share": pre / (decode + pre),
                "decode_ms_per_request": decode, "prefill_ms_per_request": pre}


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


# Flags that change the activations vLLM's profile run reserves before it sizes the KV pool (part 2's servers set
# both): a start with them has another overhead than a default server of the same preset and cap.
PROFILE_FLAGS = frozenset({"--max-num-batched-tokens", "--max-model-len"})


def _h200_starts(data_dir=None, rig: str = RIG) -> list[dict]:
    """Every recorded server start on `rig` (any part): preset, max_num_seqs, pool-sizing flags, when, where."""
    from ...records.store import runs_dir

    return _starts(str(runs_dir(data_dir)), rig)


@functools.lru_cache(maxsize=8)
def _starts(runs: str, rig: str) -> list[dict]:
    from pathlib import Path

    from ...records.record import read_record

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
    from ...records.store import read_artefact

    starts = [s for s in _h200_starts(data_dir, rig)
              if s["preset"] == preset and not s["pool_flags"] and not s["profile_flags"]]
    same = [s for s in starts if s["max_num_seqs"] == max_num_seqs]
    for s in sorted(same or starts, key=lambda s: s["started"], reverse=True):
        text = read_artefact(s["dir"], "server.log")  # plain or gzipped (compress_large gzips the long ones)
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
    from .. import p02

    try:
        inj = p02.injection_table(data_dir, [view["rig"]])
        fr = p02.freeze_table(inj)
    except (UserError, FileNotFoundError, KeyError, ValueError) as exc:  # no part 2 data on this rig
        return math.nan, f"no part 2 prefill on {view['rig']} ({exc})"
    params = ModelShape.of("qwen3.5-4b", data_dir).matmul_params
    roof = p02.roofline_table(fr, data_dir, params_by_rig={view["rig"]: params},
                              peaks={view["rig"]: {"peak_dense_tflops": h200.tflops, "peak_source": "datasheet"}})
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
        max_num_seqs = int(reference_fact(load_reference(1, data_dir), "max_num_seqs"))
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
        max_num_seqs = int(reference_fact(load_reference(1, data_dir), "max_num_seqs"))
    pre = prefill_rate(view, gpus_[H200_KEY], data_dir)
    return {v: step_model(view, v, gpus_, data_dir, max_num_seqs, pre) for v in MODELS
            if v in view.get("variant_components", {}) and v in set(view["models"]["variant"])}


def coefficient_table(models: dict[str, StepModel]) -> pd.DataFrame:
    """Every coefficient of every model with its value on the h200, how it scales and where it comes from."""
    rows = []
    for v, m in models.items():
        h = Gpu(H200_KEY, "h200", 0, m.h200_bw_gb_s / m.copy_fraction, m.h200_tflops, "", "")
        for t in m.terms:
            rows.append({"model": MODEL_LABELS.get(v, v), "term": t.name, "per": t.per, "scale": t.scale,
                         "h200_ms": m.term_ms(t, h, m.trace_context),
                         "at_context": m.trace_context if t.per_token else math.nan, "source": t.source})
        rows += [{"model": MODEL_LABELS.get(v, v), "term": "non-KV memory overhead (GiB)", "per": "start",
                  "scale": "none", "h200_ms": m.overhead_gib, "at_context": math.nan, "source": m.overhead_source},
                 {"model": MODEL_LABELS.get(v, v), "term": "prefill's fraction of the dense peak", "per": "request",
                  "scale": "tflops", "h200_ms": m.prefill_rate, "at_context": math.nan, "source": m.prefill_source},
                 {"model": MODEL_LABELS.get(v, v), "term": "copy bandwidth's fraction of the datasheet's",
                  "per": "all bytes terms", "scale": "none", "h200_ms": m.copy_fraction, "at_context": math.nan,
                  "source": f"measured on h200: {m.h200_bw_gb_s:.0f} GB/s copy over the datasheet's"}]
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------------------------

def _carried(parts: dict[str, float], top: int = 3) -> str:
    """The largest parts of a predicted value, each as its share of the value (their sum)."""
    total = sum(parts.values())
    ranked = sorted(((k, v) for k, v in parts.items() if v > 0), key=lambda kv: -kv[1])[:top]
    return "; ".join(f"{k} {100 * v / total:.0f}%" for k, v in ranked) if total > 0 else ""


def _top_term(parts: dict[str, float]) -> tuple[str, float]:
    total = sum(parts.values())
    k, v = max(parts.items(), key=lambda kv: kv[1])
    return k, (100 * v / total if total > 0 else math.nan)


def _flood_parts(m: StepModel, gpu: Gpu, batch: float, input_len: int, output_len: int) -> dict[str, float]:
    """Each term's ms in one request's share of a flood (its decode steps' share of the batch, and its prefill)."""
    ctx = input_len + output_len / 2
    parts = {k: output_len * v / batch for k, v in m.parts(gpu, ctx, batch).items()}
    parts["prefill"] = m.prefill_ms(gpu, input_len)
    return parts


def _workload(data_dir=None) -> dict:
    f1 = load_reference(1, data_dir)
    return {"input_len": int(reference_fact(f1, "workload_input_tokens")),
            "output_len": int(reference_fact(f1, "workload_output_tokens")),
            "max_num_seqs": int(reference_fact(f1, "max_num_seqs")),
            "utilization": reference_fact(f1, "gpu_memory_utilization")}


def a10g_table(models: dict[str, StepModel], gpus_: dict[str, Gpu], ratio: float, data_dir=None) -> pd.DataFrame:
    """The posts' published A10G figures (read through inference_wall.records.reference) beside what the h200's model
    predicts for the A10G's datasheet: quantity, predicted, published, error %, the terms that carry it."""
    from ..p01 import published_pool

    g = gpus_["a10g"]
    m, small = models["4b"], models.get("0.5b")
    w = _workload(data_dir)
    ref1, ref3 = load_reference(1, data_dir), load_reference(3, data_dir)
    fit = ref1["step_time_fit"].iloc[0]
    mns = ref3["mns_sweep"].sort_values("max_num_seqs")
    n_in, n_out, cap_top = w["input_len"], w["output_len"], w["max_num_seqs"]
    ctx, tokens = n_in + n_out / 2, n_in + n_out
    memory = m.usable_gib(g, ratio)
    adm = m.admission(memory, w["utilization"], tokens)
    usable = reference_fact(ref1, "gpu_memory_usable")
    adm_usable = m.admission(usable, w["utilization"], tokens)
    a, b = m.fit(g, ctx)
    per = {t.name: m.term_ms(t, g, ctx) for t in m.terms if t.per == "sequence"}
    fixed = {t.name: m.term_ms(t, g, ctx) for t in m.terms if t.per == "step"}
    fixed.update({k: fixed.get(k, 0.0) - v for k, v in per.items()})  # intercept = at 1 less one added sequence
    run = min(cap_top, adm) if adm else cap_top
    rows = []

    def add(quantity, predicted, published, carried, key):
        top, share = _top_term(carried) if isinstance(carried, dict) else ("", math.nan)
        rows.append({"quantity": quantity, "predicted": predicted, "published": published,
                     "error_pct": 100 * (predicted - published) / published,
                     "carried_by": _carried(carried) if isinstance(carried, dict) else carried,
                     "top_term": top, "top_share_pct": share, "reference": key})

    add("copy bandwidth (GB/s)", m.bandwidth(g), reference_fact(ref1, "hbm_bandwidth_measured"),
        f"datasheet {g.bandwidth_gb_s:g} GB/s x the h200's copy fraction {m.copy_fraction:.3f}",
        "01 facts hbm_bandwidth_measured")
    add("single stream (ms per token)", m.step(g, 1, ctx), reference_fact(ref1, "single_request_ms_per_token"),
        m.parts(g, ctx, 1), "01 facts single_request_ms_per_token")
    add("step fit: fixed term (ms)", a, float(fit["intercept_ms"]), fixed, "01 step_time_fit intercept_ms")
    add("step fit: per sequence (ms)", b, float(fit["slope_ms_per_seq"]), per, "01 step_time_fit slope_ms_per_seq")
    add("crossover batch (fixed = per sequence)", a / b, float(fit["crossover_batch_seqs"]),
        "the fixed term over the per-sequence term", "01 step_time_fit crossover_batch_seqs")
    add(f"pure-decode ceiling at {run} sequences (tok/s)", run / m.step(g, run, ctx) * 1000,
        reference_fact(ref1, "pure_decode_ceiling_tok_s"), m.parts(g, ctx, run),
        "01 facts pure_decode_ceiling_tok_s")
    fl = m.flood(g, run, n_in, n_out)
    add(f"serving ceiling, flood at cap {cap_top} (tok/s)", fl["tok_s"], reference_fact(ref1, "serving_ceiling_tok_s"),
        _flood_parts(m, g, run, n_in, n_out), "01 facts serving_ceiling_tok_s")
    add("prefill's share of the GPU under a flood (%)", 100 * fl["prefill_share"],
        reference_fact(ref1, "prefill_gpu_share"),
        f"prefill {fl['prefill_ms_per_request']:.1f} ms against decode {fl['decode_ms_per_request']:.1f} ms a request",
        "01 facts prefill_gpu_share")
    for r in mns.itertuples():
        bb = min(int(r.max_num_seqs), adm) if adm else int(r.max_num_seqs)
        add(f"flood output at cap {int(r.max_num_seqs)} (tok/s)", m.flood(g, bb, n_in, n_out)["tok_s"],
            float(r.output_tok_s), _flood_parts(m, g, bb, n_in, n_out),
            f"03 mns_sweep output_tok_s at {int(r.max_num_seqs)}")
    lo_cap, hi_cap = int(mns["max_num_seqs"].iloc[0]), int(mns["max_num_seqs"].iloc[-1])
    hi_b = min(hi_cap, adm) if adm else hi_cap
    add(f"cliff ratio, cap {hi_cap} over cap {lo_cap} (x)",
        m.flood(g, hi_b, n_in, n_out)["tok_s"] / m.flood(g, lo_cap, n_in, n_out)["tok_s"],
        analysis.cliff_ratio(mns), _flood_parts(m, g, hi_b, n_in, n_out),
        "03 mns_sweep (analysis.cliff_ratio)")
    if small is not None:
        sadm = small.admission(small.usable_gib(g, ratio), w["utilization"], tokens)
        sb = min(hi_cap, sadm) if sadm else hi_cap
        add(f"0.5B cliff ratio, cap {hi_cap} over cap {lo_cap} (x)",
            small.flood(g, sb, n_in, n_out)["tok_s"] / small.flood(g, lo_cap, n_in, n_out)["tok_s"],
            reference_fact(ref3, "small_model_batching_lift"), _flood_parts(small, g, sb, n_in, n_out),
            "03 facts small_model_batching_lift")
    # The post prints no admission limit: its memory report's pool (83.7x of 2,048 tokens) counted in this model's
    # pages is the book's count, and the post's own figure is the running batch it saw under a flood ("~145").
    published_adm = published_pool(data_dir).admission_limit(tokens)
    add(f"KV admission, {n_in}+{n_out} tokens (seqs; the 'published' figure is the book's count of the post's "
        "memory report)", adm, published_adm,
        f"datasheet memory {memory:.2f} GiB x {w['utilization']:g} - weights {m.weights_gib:g} GiB - overhead "
        f"{m.overhead_gib:.2f} GiB (h200 log), pages of {m.pages_bytes(tokens) / 1e6:.1f} MB a sequence",
        "01 memory_report via p01.published_pool")
    add(f"KV admission, {n_in}+{n_out} tokens, from the post's usable memory (seqs; the book's count of the post's "
        "memory report)", adm_usable, published_adm,
        f"the post's usable {usable:g} GB read as GiB, x {w['utilization']:g}, the same weights, overhead and pages",
        "01 facts gpu_memory_usable; memory_report via p01.published_pool")
    add(f"running batch under a flood at cap {cap_top} (seqs; the post's own figure)", run,
        reference_fact(ref1, "running_batch_flood"),
        f"min(max_num_seqs {cap_top}, the predicted admission {adm})", "01 facts running_batch_flood")
    return pd.DataFrame(rows)


def prefill_sensitivity(models: dict[str, StepModel], gpus_: dict[str, Gpu], ratio: float, data_dir=None,
                        change: float = 0.10, key: str = "a10g") -> dict:
    """How the 4B's predicted floods on `key` move when its tensor TFLOP/s is `change` lower or higher: the
    prefill term (and the matmuls' per-sequence growth) rest on that one figure, which for the A10G is the post's
    quoted spec, not a datasheet's. {"tflops", "source", "rows": [{cap, at, lower, higher, lower_pct, higher_pct}]}."""
    from dataclasses import replace

    m, g = models["4b"], gpus_[key]
    w = _workload(data_dir)
    tokens = w["input_len"] + w["output_len"]
    adm = m.admission(m.usable_gib(g, ratio), w["utilization"], tokens)
    caps = load_reference(3, data_dir)["mns_sweep"]["max_num_seqs"].astype(int).tolist()
    rows = []
    for cap in caps:
        b = min(cap, adm) if adm else cap
        at = m.flood(g, b, w["input_len"], w["output_len"])["tok_s"]
        lo, hi = (m.flood(replace(g, tflops=g.tflops * f), b, w["input_len"], w["output_len"])["tok_s"]
                  for f in (1 - change, 1 + change))
        rows.append({"cap": cap, "at": at, "lower": lo, "higher": hi, "lower_pct": 100 * (lo - at) / at,
                     "higher_pct": 100 * (hi - at) / at})
    return {"tflops": g.tflops, "source": g.tflops_source, "change_pct": 100 * change, "rows": rows}


def prefill_sensitivity_words(sens: dict) -> str:
    """One sentence: where the A10G's tensor figure comes from and how far the floods move with it."""
    rows = sens["rows"]
    lo = min(r["lower_pct"] for r in rows), max(r["lower_pct"] for r in rows)
    hi = min(r["higher_pct"] for r in rows), max(r["higher_pct"] for r in rows)
    caps = join_and([f"{r['cap']:,}" for r in rows])
    return (f"Every A10G prediction's prefill term rests on the {sens['tflops']:g} TFLOP/s that part 1's post "
            f"quotes, not on a datasheet figure (NVIDIA publishes none for the A10G): were it {sens['change_pct']:g}% "
            f"lower, the predicted floods at caps {caps} would fall by {_n(-lo[1])}% to {_n(-lo[0])}%; "
            f"{sens['change_pct']:g}% higher, they would rise by {_n(hi[0])}% to {_n(hi[1])}%.")


def gpu_table(models: dict[str, StepModel], gpus_: dict[str, Gpu], ratio: float, data_dir=None) -> pd.DataFrame:
    """Per datasheet GPU and series model whose weights fit: the predicted single-stream ITL, the decode ceiling at
    the running batch a flood reaches (min(max_num_seqs, the KV admission limit)), the admission limit for requests
    of the series' lengths, and the batch where an added sequence stops paying (STOP_PAYING_X)."""
    w = _workload(data_dir)
    ctx, tokens = w["input_len"] + w["output_len"] / 2, w["input_len"] + w["output_len"]
    rows = []
    for g in gpus_.values():
        for v, m in models.items():
            adm = m.admission(m.usable_gib(g, ratio), w["utilization"], tokens)
            if adm < 1:
                continue
            run = min(w["max_num_seqs"], adm)
            rows.append({"gpu": g.name, "model": MODEL_LABELS.get(v, v), "itl_ms": m.step(g, 1, ctx),
                         "ceiling_batch": run, "decode_ceiling_tok_s": run / m.step(g, run, ctx) * 1000,
                         "kv_admission": adm, "stop_paying_batch": m.stop_paying_batch(g, ctx)})
    return pd.DataFrame(rows)


def unfit(models: dict[str, StepModel], gpus_: dict[str, Gpu], ratio: float, data_dir=None) -> list[str]:
    w = _workload(data_dir)
    tokens = w["input_len"] + w["output_len"]
    return [f"{MODEL_LABELS.get(v, v)} on the {g.name}" for g in gpus_.values() for v, m in models.items()
            if m.admission(m.usable_gib(g, ratio), w["utilization"], tokens) < 1]


def h200_table(models: dict[str, StepModel], view: dict, gpus_: dict[str, Gpu]) -> pd.DataFrame:
    """The model's prediction of the h200's own measured decode steps (p00.step_curve, at the decode points'
    context), with `in_sample` where the batch is one the coefficients were read at (TRACE_BATCHES), and each
    model's stated error: the largest |error| over its other measured batches (all of the curve, not only
    VALIDATION_BATCHES)."""
    g = gpus_[H200_KEY]
    curve, pts = view["curve"], view["points"]
    rows = []
    for v, m in models.items():
        c, where = measured_steps(view, v)
        d = pts[(pts["variant"] == v) & (pts["kind"] == "decode")]
        ctx = float(d["context"].iloc[0])
        errs = {int(b): 100 * (m.step(g, b, ctx) - s) / s for b, s in c.items()}
        out_of = [abs(e) for b, e in errs.items() if b not in TRACE_BATCHES]
        stated = max(out_of) if out_of else math.nan
        for b in VALIDATION_BATCHES:
            rows.append({"model": MODEL_LABELS.get(v, v), "batch": b, "measured_ms": float(c[b]) if b in c.index
                         else math.nan, "predicted_ms": m.step(g, b, ctx), "error_pct": errs.get(b, math.nan),
                         "in_sample": b in TRACE_BATCHES, "stated_error_pct": stated,
                         "measured_on": where.get(b, "")})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# The page
# ---------------------------------------------------------------------------------------------

_n = words.sig  # three significant figures


def _pct(x: float) -> str:
    """A signed error in percent: 3 significant figures, "0%" under a hundredth of a percent."""
    if x == x and abs(x) < 0.01:
        return "0%"
    return words.percent(x, signed=True, whole=False, points=True)


def _pub(x: float) -> str:
    """A published figure as the post printed it (its own digits); a ratio derived from its table at 3 significant
    figures."""
    text = f"{x:g}"
    return f"{x:,g}" if len(text.replace(".", "").replace("-", "").lstrip("0")) <= 4 else _n(x)


def sentences(a10g: pd.DataFrame, table: pd.DataFrame, h200: pd.DataFrame) -> list[str]:
    """2-4 sentences for the page, each number from the tables (3 significant figures; a published figure as the
    post printed it), each with "predicted"; the second names the largest term of the largest A10G error."""
    out = []
    t = a10g.set_index("quantity")
    single = t.loc["single stream (ms per token)"]
    serving = a10g[a10g["quantity"].str.startswith("serving ceiling")].iloc[0]
    out.append(f"Built from the h200's measured step, the predicted A10G single stream takes {_n(single.predicted)} "
               f"ms a token against the post's {_pub(single.published)} ms ({_pct(single.error_pct)}), and the "
               f"predicted serving ceiling is {_n(serving.predicted)} tok/s against the post's "
               f"{_pub(serving.published)} ({_pct(serving.error_pct)}).")
    worst = a10g.loc[a10g["error_pct"].abs().idxmax()]
    name = worst.quantity.split(" (")[0]
    carried = (f"its largest predicted term is the {worst.top_term} ({_n(worst.top_share_pct)}% of the predicted "
               "value)") if worst.top_term else f"it is carried by {worst.carried_by}"
    out.append(f"The largest predicted A10G error is the {name}: {_n(worst.predicted)} against the post's "
               f"{_pub(worst.published)} ({_pct(worst.error_pct)}); {carried}.")
    fit = a10g[a10g["quantity"].str.startswith("step fit")]
    if len(fit) == 2:
        miss = fit[fit["error_pct"].abs() > FIT_BAND_PCT]
        said = " and ".join(f"{r.quantity.split(': ')[1].split(' (')[0]} {_n(r.predicted)} ms against the "
                            f"post's {_pub(r.published)} ({_pct(r.error_pct)})" for r in fit.itertuples())
        verdict = (f"both within {FIT_BAND_PCT:g}%" if not len(miss) else
                   " ".join(f"the {r.quantity.split(': ')[1].split(' (')[0]} term misses the {FIT_BAND_PCT:g}% band "
                            f"at {_pct(r.error_pct)} (its largest share: {r.carried_by.split(';')[0]}); the bandwidth "
                            "the model gives the A10G and its H200-measured idle growth are the candidates, not "
                            "measured on an A10G" for r in miss.itertuples()))
        out.append(f"The predicted step fit on the A10G: {said}; {verdict}.")
    main = h200[(h200["model"] == MODEL_LABELS["4b"])].dropna(subset=["error_pct"])
    if len(main):
        stated = h200.groupby("model")["stated_error_pct"].first().dropna()
        out.append(f"In sample, on the h200 whose traces it was built from, the predicted 4B steps at batches "
                   + join_and([f"{int(b):,}" for b in main["batch"]])
                   + f" lie within {_n(main['error_pct'].abs().max())}% of the measured; over every measured batch "
                   "outside the two the coefficients come from, the largest predicted error is "
                   + join_and([f"{_n(v)}% on the {k}" for k, v in stated.items()])
                   + ". Its out-of-sample errors are those of the GPUs measured after its prediction for them was "
                     "frozen (above).")
    four = table[table["model"] == MODEL_LABELS["4b"]]
    if len(four) >= 2:
        fast, slow = four.loc[four["itl_ms"].idxmin()], four.loc[four["itl_ms"].idxmax()]
        out.append(f"Across the datasheet GPUs the predicted 4B single stream ranges from {_n(fast.itl_ms)} ms a "
                   f"token on the {fast.gpu} to {_n(slow.itl_ms)} ms on the {slow.gpu}, and its predicted decode "
                   f"ceiling from {_n(four['decode_ceiling_tok_s'].min())} to "
                   f"{_n(four['decode_ceiling_tok_s'].max())} tok/s.")
    return out[:5]


def validation(a10g: pd.DataFrame, h200: pd.DataFrame) -> dict:
    """The errors the GPUs' table carries: the A10G's (the 4B's single stream, decode ceiling and admission against
    the posts) and the h200's stated error per model."""
    t = a10g.set_index("quantity")
    pick = lambda prefix: float(a10g[a10g["quantity"].str.startswith(prefix)]["error_pct"].iloc[0])
    return {"a10g_itl_error_pct": float(t.loc["single stream (ms per token)", "error_pct"]),
            "a10g_decode_ceiling_error_pct": pick("pure-decode ceiling"),
            "a10g_admission_error_pct": pick("KV admission, "),
            "h200_stated_error_pct": h200.groupby("model")["stated_error_pct"].first().to_dict()}


A10G_HEADERS = {"quantity": "quantity", "predicted": "predicted", "published": "published", "error_pct": "error %",
                "carried_by": "terms that carry it (share of the predicted value)"}
GPU_HEADERS = {"gpu": "GPU", "model": "model", "itl_ms": "single-stream ITL (ms)",
               "ceiling_batch": "running batch (min of max_num_seqs, admission)",
               "decode_ceiling_tok_s": "decode ceiling (tok/s)", "kv_admission": "KV admission (sequences)",
               "stop_paying_batch": "added sequence stops paying at batch"}
H200_HEADERS = {"model": "model", "batch": "batch", "measured_ms": "measured step (ms)", "measured_on": "measured on",
                "predicted_ms": "predicted step (ms)", "error_pct": "error %", "in_sample": "coefficients read here",
                "stated_error_pct": "stated error %"}


def shown(table: pd.DataFrame, headers: dict[str, str]) -> pd.DataFrame:
    """A table as a reader reads it: its columns renamed, numbers at 3 significant figures (an error with its sign,
    a published figure as printed), a dash for a missing value."""
    out = pd.DataFrame(index=table.index)
    for col, head in headers.items():
        v = table[col]
        if col == "published":
            out[head] = [_pub(x) if x == x else words.MISSING for x in v]
        elif col == "stated_error_pct":
            out[head] = [_n(x) + "%" if x == x else words.MISSING for x in v]
        elif col.endswith("error_pct"):
            out[head] = [_pct(x) if x == x else words.MISSING for x in v]
        elif v.dtype == bool:
            out[head] = ["yes" if x else "" for x in v]
        elif pd.api.types.is_integer_dtype(v):
            out[head] = [f"{int(x):,}" for x in v]
        elif pd.api.types.is_numeric_dtype(v):
            out[head] = [_n(float(x)) for x in v]
        else:
            out[head] = v
    return out.reset_index(drop=True)


def notes(view: dict, models: dict[str, StepModel], data_dir=None) -> list[str]:
    """What the model leaves out, each named as a candidate, with the numbers the h200 data give."""
    out = []
    if "4b" in models:
        e = latency_evidence(view, "4b")
        out.append(f"At batch 1 the 4B's recurrent-state and attention kernels take {_n(e['kernels_ms'])} ms on the "
                   f"h200 where their bytes need {_n(e['bytes_ms'])} ms at its measured bandwidth: the model does not "
                   "scale that part with the bandwidth.")
    m = view["models"].set_index("variant")
    if "9b-int4" in m.index and m.loc["9b-int4", "linear_kernel"]:
        out.append(f"The 4-bit layers ran vLLM's {m.loc['9b-int4', 'linear_kernel']} on the h200 (its start's log); "
                   "another GPU may run another kernel, whose read rate is not measured here (a candidate error of "
                   "the 9B int4 rows).")
    c = view.get("context")
    if c and known(c.get("slope_ms_per_k")) and known(c.get("kv_predicted_ms_per_k")):
        out.append(f"On the h200 the 4B's step at batch {c['batch']} grows {_n(c['slope_ms_per_k'])} ms per 1,000 "
                   f"tokens of context where the KV bytes predict {_n(c['kv_predicted_ms_per_k'])} ms: the KV term "
                   "is the bytes, not that slope.")
    setup = load_reference(1, data_dir)["server_setup"].set_index("setting")["stated"]
    ours = sorted({s["vllm"] for s in _h200_starts(data_dir, view["rig"])
                   if s["vllm"] and s["dir"].parent.parent.name == "00-inside-a-step"})
    if ours and "vllm_version" in setup.index:
        out.append(f"The GPU's idle time is the {view['rig']} host's under vLLM {', '.join(ours)}; the A10G's post ran "
                   f"vLLM {setup['vllm_version']} on another host: both are candidates for the idle terms' error, "
                   "not measured.")
    return out


def known(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(float(x))


def page(view: dict, data_dir=None) -> dict:
    """Everything the page shows: the A10G against the posts, the GPUs' table, the h200 check, the sentences, the
    coefficients, and the models that do not fit where. None when the rig has no fitted step of the 4B (the
    series' model, which every prediction of the posts' figures starts from): a run that measured other variants
    only, as a partial `make reproduce --points` does."""
    gpus_ = gpus(data_dir)
    models = step_models(view, data_dir, gpus_)
    if "4b" not in models:
        return None
    ratio = memory_ratio(view, gpus_, data_dir)
    a10g = a10g_table(models, gpus_, ratio, data_dir)
    table = gpu_table(models, gpus_, ratio, data_dir)
    h200 = h200_table(models, view, gpus_)
    sens = prefill_sensitivity(models, gpus_, ratio, data_dir)
    return {"a10g": a10g, "gpus": table, "h200": h200, "sentences": sentences(a10g, table, h200),
            "prefill_sensitivity": sens, "prefill_words": prefill_sensitivity_words(sens),
            "validation": validation(a10g, h200),
            "coefficients": coefficient_table(models), "unfit": unfit(models, gpus_, ratio, data_dir),
            "models": models, "memory_ratio": ratio, "stop_paying_x": STOP_PAYING_X, "notes": notes(view, models, data_dir)}


def build(data_dir=None, rig: str = RIG) -> dict:
    """page() from the stored runs of part 0 on `rig`."""
    from .. import p00

    tables = p00.page_tables(data_dir, [rig])
    return page(p00.rig_view(rig, tables, None, data_dir), data_dir)


# ---------------------------------------------------------------------------------------------
# A prediction frozen before a GPU is measured (data/predictions/<gpu>.csv)
# ---------------------------------------------------------------------------------------------

FROZEN_BATCHES = (1, 8, 64, 256, 1024)  # the decode steps a frozen prediction states (part 0's decode points)
FROZEN_CAPS = (1, 4, 16, 64, 256)  # the floods it states (part 3's series caps)
FROZEN_COLUMNS = ["gpu", "model", "quantity", "batch", "cap", "context_tokens", "utilization", "predicted", "unit",
                  "how"]


def prediction_rows(gpu_key: str, data_dir=None, rig: str = RIG) -> pd.DataFrame:
    """Everything the step model says today about the datasheet GPU `gpu_key`, one row per quantity and series
    model whose weights fit: the your-GPU table's row (single stream, decode ceiling at the batch a flood reaches,
    KV admission at the series' gpu_memory_utilization, the batch where an added sequence stops paying); the KV
    admission at the utilization the rig's own starts logged (what a start of the same stack on that GPU will use);
    the decode step at FROZEN_BATCHES at part 0's decode context (its decode points' mean context), with and without
    asynchronous scheduling (the 4B); the flood's output at FROZEN_CAPS at the series' lengths and its
    pure-decode ceiling. `how` says which function of this module gave the number. Nothing here is measured on the
    target: the model reads the h200's runs and the target's datasheet row only."""
    from .. import p00

    gpus_ = gpus(data_dir)
    if gpu_key not in gpus_:
        raise UserError(f"no datasheet row {gpu_key!r} in data/reference/gpus/datasheets.csv; rows: "
                        f"{', '.join(gpus_)}")
    g = gpus_[gpu_key]
    view = p00.rig_view(rig, p00.page_tables(data_dir, [rig]), None, data_dir)
    models = step_models(view, data_dir, gpus_)
    ratio = memory_ratio(view, gpus_, data_dir)
    w = _workload(data_dir)
    n_in, n_out = w["input_len"], w["output_len"]
    ctx, tokens = n_in + n_out / 2, n_in + n_out
    pts = view["points"]
    rows: list[dict] = []

    def add(v, quantity, predicted, unit, how, batch=None, cap=None, context=None, util=None):
        rows.append({"gpu": g.key, "model": MODEL_LABELS.get(v, v), "quantity": quantity, "batch": batch, "cap": cap,
                     "context_tokens": context, "utilization": util, "predicted": float(predicted), "unit": unit,
                     "how": how})

    table = gpu_table(models, {g.key: g}, ratio, data_dir).set_index("model")
    for v, m in models.items():
        label = MODEL_LABELS.get(v, v)
        if label not in table.index:
            add(v, "fits (1 = yes)", 0, "", "gpu_table: no KV page left after the weights and overhead")
            continue
        r = table.loc[label]
        add(v, "single stream", r.itl_ms, "ms per token", "gpu_table itl_ms", batch=1, context=ctx)
        add(v, "decode ceiling", r.decode_ceiling_tok_s, "tok/s", "gpu_table decode_ceiling_tok_s",
            batch=int(r.ceiling_batch), context=ctx)
        add(v, "KV admission", r.kv_admission, "sequences", f"gpu_table kv_admission ({n_in}+{n_out} tokens)",
            util=w["utilization"])
        add(v, "added sequence stops paying", r.stop_paying_batch, "batch", "gpu_table stop_paying_batch",
            context=ctx)
        start = start_memory(m.preset, w["max_num_seqs"], data_dir, rig)
        if start["utilization"] == start["utilization"]:
            add(v, "KV admission", m.admission(m.usable_gib(g, ratio), start["utilization"], tokens), "sequences",
                f"StepModel.admission ({n_in}+{n_out} tokens) at the utilization {rig}'s start logged",
                util=start["utilization"])
        dctx = float(pts[(pts["variant"] == v) & (pts["kind"] == "decode")]["context"].iloc[0])
        sync = step_model(view, v, gpus_, data_dir, w["max_num_seqs"], (m.prefill_rate, m.prefill_source),
                          sync=True) if v == "4b" else None
        for b in FROZEN_BATCHES:
            add(v, "decode step", m.step(g, b, dctx), "ms", "StepModel.step", batch=b, context=dctx)
            if sync is not None:
                add(v, "decode step, async scheduling off", sync.step(g, b, dctx), "ms", "StepModel.step (sync=True)",
                    batch=b, context=dctx)
        adm = int(r.kv_admission)
        for cap in FROZEN_CAPS:
            bb = min(cap, adm)
            add(v, "flood output", m.flood(g, bb, n_in, n_out)["tok_s"], "tok/s",
                f"StepModel.flood at min(cap, KV admission) = {bb}", batch=bb, cap=cap, context=ctx)
    return pd.DataFrame(rows, columns=FROZEN_COLUMNS)
