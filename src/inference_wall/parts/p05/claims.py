"""Part 5's claims: each predicts a quantized server's measurement from the 16-bit server of the same rig
and the bytes its format reads."""
from __future__ import annotations

from .. import variants
from ...measure.analysis import combine
from ...measure.claims import Claim, Judgement, Missing, need
from ..variants import BAND, num, positive_prediction
from .plan import REFERENCE


def _pair(v: dict, fmt: str, base: str) -> tuple[dict, dict]:
    variants = need(v, "variants")
    if fmt not in variants:
        raise Missing(f"{fmt} variant")
    if base not in variants:
        raise Missing(f"{base} variant")
    return variants[fmt], variants[base]


def _fixed_scales_with_bytes(fmt: str, base: str):
    """The series' prediction: the fixed cost is the weight stream, so it scales with the bytes a step reads."""
    def judge(v: dict) -> Judgement:
        x, b = _pair(v, fmt, base)
        a0, a1 = need(b, "fixed"), need(x, "fixed")
        r = need(x, "bytes").total / need(b, "bytes").total
        pred = a0.map(lambda a: a * r)
        how = (f"{num(a0.value)} ms ({b['label']}) x {num(x['bytes'].gb)} / {num(b['bytes'].gb)} GB read per step "
               f"= {num(pred.value)} ms")
        return Judgement(positive_prediction(pred), a1, how)
    return judge


def _fixed_is_floor_plus_overhead(fmt: str):
    """Refined: the fixed cost is this format's weight stream plus the reference's non-weight fixed cost."""
    def judge(v: dict) -> Judgement:
        x, b = _pair(v, fmt, REFERENCE)
        a0, a1 = need(b, "fixed"), need(x, "fixed")
        f0, f1, bw = need(b, "floor_ms"), need(x, "floor_ms"), need(v, "bandwidth_gb_s")
        b0, b1 = need(b, "bytes"), need(x, "bytes")
        # both floors come from the one bandwidth: vary it once, not each floor on its own
        pred = combine(lambda a, w: max(a - b0.floor_ms(w), 0.0) + b1.floor_ms(w), a0, bw)
        how = (f"{num(f1.value)} ms floor ({num(x['bytes'].gb)} GB / {num(v['bandwidth_gb_s'].value)} GB/s) + "
               f"({num(a0.value)} - {num(f0.value)}) ms the reference's fixed cost beyond its floor = {num(pred.value)} ms")
        return Judgement(positive_prediction(pred), a1, how)
    return judge


def _per_seq(fmt: str, follows: str):
    """Per-sequence cost against the same model in 16 bits: scaled by bytes, or unchanged (it follows the
    parameter count, i.e. the arithmetic and the KV reads, which quantizing the weights does not shrink)."""
    def judge(v: dict) -> Judgement:
        x, b = _pair(v, fmt, "fp16")
        s0, s1 = need(b, "slope"), need(x, "slope")
        if follows == "bytes":
            r = need(x, "bytes").total / need(b, "bytes").total
            pred = s0.map(lambda s: s * r)
            how = f"{num(s0.value)} ms x {num(x['bytes'].gb)} / {num(b['bytes'].gb)} GB = {num(pred.value)} ms"
        else:
            r = x["bytes"].params / b["bytes"].params
            pred = s0.map(lambda s: s * r)
            how = f"{num(s0.value)} ms x {num(x['bytes'].params / 1e9)} / {num(b['bytes'].params / 1e9)} B parameters = {num(pred.value)} ms"
        return Judgement(positive_prediction(pred), s1, how)
    return judge


def _per_seq_model(v: dict) -> Judgement:
    """Across models in 16 bits (the reference and this part's fp16): the per-sequence cost scales with bytes
    (for 16-bit weights, the same ratio as parameters)."""
    x, b = _pair(v, "fp16", REFERENCE)
    s0, s1 = need(b, "slope"), need(x, "slope")
    r = need(x, "bytes").total / need(b, "bytes").total
    pred = s0.map(lambda s: s * r)
    return Judgement(positive_prediction(pred), s1, f"{num(s0.value)} ms ({b['label']}) x {num(x['bytes'].gb)} / {num(b['bytes'].gb)} GB "
                               f"= {num(pred.value)} ms")


def _single_floor(fmt_key: str):
    """A single stream's token time is the weight stream of this format (part 1's roofline)."""
    def judge(v: dict) -> Judgement:
        variants = need(v, "variants")
        if fmt_key not in variants:
            raise Missing(f"{fmt_key} variant")
        x = variants[fmt_key]
        floor, itl = need(x, "floor_ms"), need(x, "single_itl_ms")
        return Judgement(positive_prediction(floor), itl, f"{num(x['bytes'].gb)} GB / {num(v['bandwidth_gb_s'].value)} GB/s = "
                                     f"{num(floor.value)} ms")
    return judge


def _pool_grows(fmt: str):
    """With the same memory fraction, the KV pool takes what the weights leave: a format's pool is the 16-bit
    variant's pool plus the weight memory it frees (both read from each server's startup log)."""
    def judge(v: dict) -> Judgement:
        x, b = _pair(v, fmt, "fp16")
        k0, w0, w1, k1 = need(b, "kv_logged"), need(b, "weights_logged"), need(x, "weights_logged"), need(x, "kv_logged")
        pred = combine(lambda k, a, c: k + a - c, k0, w0, w1)
        return Judgement(positive_prediction(pred), k1, f"{num(k0.value)} GiB KV (16-bit) + {num(w0.value)} - {num(w1.value)} "
                                              f"GiB of weights = {num(pred.value)} GiB")
    return judge


WHY_POOL = ("the profiling run that sizes the pool also measures the peak activation memory, which a quantized kernel's "
            "workspace can change; a rig that fixes the pool in bytes (the CPU rig) gives every format the same pool")


WHY_FIXED = ("a 4-bit step also unpacks and rescales every weight, and the step's non-weight work (kernel launches, "
             "sampling, the Gated DeltaNet's state) does not shrink with the weights; where the ratio is above the band "
             "the format saves less time than it saves bytes")


WHY_MODEL = ("the two models differ in more than bytes: the larger one has wider layers (more work per launched "
             "kernel) and the same number of layers, launches and recurrent state per step, so its non-weight costs "
             "do not grow with its weights")


WHY_SLOPE = ("per-sequence work is the arithmetic of each sequence's row against every weight plus its own KV and "
             "state reads; dequantizing 4-bit weights for more rows, or fp8 activations' quantization, add to it")


CLAIMS = [
    Claim("fixed-bytes-fp16", "The series: a decode step's fixed cost is the weight stream, so it scales with the bytes "
          "the weights take (here: from the smaller model to the larger, both 16-bit).",
          "reference's fixed cost (its step at batch 1) x bytes ratio predicts the fp16 variant's batch-1 step", "ms",
          _fixed_scales_with_bytes("fp16", REFERENCE), BAND, WHY_MODEL),
    Claim("fixed-bytes-fp8", "Quantizing to fp8 halves the bytes, so it halves the fixed cost.",
          "16-bit batch-1 step x bytes ratio predicts the fp8 batch-1 step", "ms",
          _fixed_scales_with_bytes("fp8", "fp16"), BAND, WHY_FIXED),
    Claim("fixed-bytes-int4", "Quantizing to four bits cuts the fixed cost as much as it cuts the bytes.",
          "16-bit batch-1 step x bytes ratio predicts the 4-bit batch-1 step", "ms",
          _fixed_scales_with_bytes("int4", "fp16"), BAND, WHY_FIXED),
    Claim("fixed-floor-fp16", "The larger model's fixed cost is its own weight stream plus the non-weight cost every "
          "step pays.", "fp16 floor (bytes / measured bandwidth) + (reference batch-1 step - reference floor) "
          "predicts the fp16 variant's batch-1 step", "ms", _fixed_is_floor_plus_overhead("fp16"), BAND, WHY_MODEL),
    Claim("fixed-floor-int4", "The 4-bit fixed cost is its own weight stream plus the non-weight cost every step pays.",
          "4-bit floor (bytes / measured bandwidth) + (reference batch-1 step - reference floor) predicts the "
          "4-bit batch-1 step", "ms", _fixed_is_floor_plus_overhead("int4"), BAND, WHY_FIXED),
    Claim("fixed-floor-fp8", "The fp8 fixed cost is its own weight stream plus the non-weight cost every step pays.",
          "fp8 floor + (reference batch-1 step - reference floor) predicts the fp8 batch-1 step", "ms",
          _fixed_is_floor_plus_overhead("fp8"), BAND, WHY_FIXED),
    Claim("single-floor-int4", "One 4-bit stream runs near its weight-stream floor.",
          "4-bit floor predicts the single-stream ITL (at least the floor, within 20% of it to hold)", "ms",
          _single_floor("int4"), (1.0, 1.2), WHY_FIXED),
    Claim("pool-int4", "Four-bit weights leave their freed memory to the KV cache.",
          "16-bit KV pool + 16-bit weights - 4-bit weights (the logs) predicts the 4-bit KV pool", "GiB",
          _pool_grows("int4"), (0.95, 1.05), WHY_POOL),
    Claim("pool-fp8", "fp8 weights leave their freed memory to the KV cache.",
          "16-bit KV pool + 16-bit weights - fp8 weights (the logs) predicts the fp8 KV pool", "GiB",
          _pool_grows("fp8"), (0.95, 1.05), WHY_POOL),
    Claim("per-seq-model", "The series (part 3): the larger model's per-sequence cost tracks its weight bytes.",
          "reference slope x bytes ratio predicts the fp16 variant's slope", "ms/seq",
          _per_seq_model, BAND, WHY_MODEL),
    Claim("per-seq-bytes-int4", "The series (part 3): per-sequence cost tracks weight bytes, so four bits cut it too.",
          "16-bit slope x bytes ratio predicts the 4-bit slope", "ms/seq", _per_seq("int4", "bytes"), BAND, WHY_SLOPE),
    Claim("per-seq-params-int4", "The alternative: per-sequence cost tracks the parameters (arithmetic), unchanged by "
          "the weights' width.", "16-bit slope predicts the 4-bit slope", "ms/seq",
          _per_seq("int4", "params"), BAND, WHY_SLOPE),
    Claim("per-seq-bytes-fp8", "Per-sequence cost tracks weight bytes, so fp8 halves it.",
          "16-bit slope x bytes ratio predicts the fp8 slope", "ms/seq", _per_seq("fp8", "bytes"), BAND, WHY_SLOPE),
    Claim("per-seq-params-fp8", "Per-sequence cost tracks the parameters, unchanged by fp8.",
          "16-bit slope predicts the fp8 slope", "ms/seq", _per_seq("fp8", "params"), BAND, WHY_SLOPE),
]


LESSONS = [
    ("Fewer bytes per weight shrink a step's fixed cost only down to what every step pays besides the weight stream.",
     ["fixed-bytes-fp16", "fixed-bytes-fp8", "fixed-bytes-int4", "fixed-floor-fp16", "fixed-floor-fp8",
      "fixed-floor-int4", "single-floor-int4"]),
    ("Quantized weights leave the memory they free to the KV cache.", ["pool-int4", "pool-fp8"]),
    ("Per-sequence cost follows either the weights' bytes or the parameters: at most one can hold for a format.",
     ["per-seq-model", "per-seq-bytes-int4", "per-seq-params-int4", "per-seq-bytes-fp8", "per-seq-params-fp8"]),
]  # the part's take-aways: what it tested, and the claims whose rows say what the data show
