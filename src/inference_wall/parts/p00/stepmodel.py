"""The step model's pieces: a GPU's datasheet row (Gpu), one term of a step (Term) and a model's step on any GPU
(StepModel), with the constants the prediction is read at."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...measure.analysis import GIB
from ...model.kvcache import KVPool, ModelLayout
from ...model.pools import block_size
from .tables import datasheets, reference, reference_fact


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
    for r in datasheets(data_dir).itertuples():
        if r.fp16_tensor_dense_tflops == r.fp16_tensor_dense_tflops:
            tf, how = float(r.fp16_tensor_dense_tflops), "datasheet, dense"
        elif r.fp16_tensor_sparse_tflops == r.fp16_tensor_sparse_tflops:
            tf, how = float(r.fp16_tensor_sparse_tflops) / 2, "datasheet, half its with-sparsity figure"
        elif r.key == "a10g":
            tf, how = reference_fact(reference(1, data_dir), "a10g_fp16_peak"), "part 1's post (quoted spec)"
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
