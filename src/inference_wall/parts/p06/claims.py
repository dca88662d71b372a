"""Part 6's claims: each predicts a two-GPU server's measurement from the one-GPU server of the same rig."""
from __future__ import annotations

from .. import variants
from ...measure.analysis import Interval, combine
from ...measure.claims import Claim, Judgement, Missing, need
from .plan import BAND, BASE


# ----------------------------------------------------------------------------------------- claims
def _pair(v: dict, cfg: str) -> tuple[dict, dict]:
    variants = need(v, "variants")
    for key in (cfg, BASE):
        if key not in variants:
            raise Missing(f"{key} configuration")
    return variants[cfg], variants[BASE]


num = variants.num


def _halved(key: str, unit: str, what: str = ""):
    """The tensor-parallel server's `key` is half the one GPU's."""
    def judge(v: dict) -> Judgement:
        x, b = _pair(v, "tp2")
        a0, a1 = need(b, key), need(x, key)
        return Judgement(variants.positive_prediction(a0.map(lambda a: a / 2)), a1,
                         f"{num(a0.value)} {unit} ({what or 'one GPU'}) / 2 = {num(a0.value / 2)} {unit}")
    return judge


def _tp_halves_stream(v: dict) -> Judgement:
    x, b = _pair(v, "tp2")
    a0, a1, bw, by = need(b, "fixed"), need(x, "fixed"), need(v, "bandwidth_gb_s"), need(b, "bytes")
    f0 = need(b, "floor_ms")
    pred = combine(lambda a, w: a - by.floor_ms(w) / 2, a0, bw)
    return Judgement(variants.positive_prediction(pred), a1, f"{num(a0.value)} ms - {num(f0.value)} ms / 2 (half the one "
                     f"GPU's weight stream, {num(by.gb)} GB / {num(bw.value)} GB/s) = {num(pred.value)} ms")


def _tp_pool(v: dict) -> Judgement:
    x, b = _pair(v, "tp2")
    k0, w0, k1 = need(b, "kv_logged"), need(b, "weights_logged"), need(x, "kv_logged")
    pred = combine(lambda k, w: k + w / 2, k0, w0)
    return Judgement(variants.positive_prediction(pred), k1, f"{num(k0.value)} GiB KV + {num(w0.value)} / 2 GiB of weights no longer "
                                              f"held = {num(pred.value)} GiB per GPU")


def _tp_tokens(v: dict) -> Judgement:
    """Each tensor-parallel GPU holds half of every token's KV (half the KV heads), so the pool holds twice the
    tokens per byte of KV cache a GPU has."""
    x, b = _pair(v, "tp2")
    n0, n1 = need(b, "kv_tokens"), need(x, "kv_tokens")
    k0, k1 = need(b, "kv_logged"), need(x, "kv_logged")
    pred = variants.positive_prediction(combine(lambda p, q: 2 * n0 * q / p, k0, k1))
    return Judgement(pred, Interval.exact(n1), f"2 x {num(n0)} tokens x {num(k1.value)} / {num(k0.value)} GiB of KV "
                                               f"cache per GPU = {num(pred.value)} tokens")


def _dp_single(v: dict) -> Judgement:
    x, b = _pair(v, "dp2")
    i0, i1 = need(b, "single_itl_ms"), need(x, "single_itl_ms")
    return Judgement(variants.positive_prediction(i0), i1, f"the one GPU's {num(i0.value)} ms")


def _dp_split(v: dict) -> Judgement:
    """The replicas' step at their largest concurrency within the fit's range, from the one GPU's fit at each
    engine's share of it."""
    x, b = _pair(v, "dp2")
    fit, dec = need(b, "fit"), need(x, "decode")
    if fit.dof <= 0:
        raise Missing("a one-GPU step fit with a range")
    within = dec[dec["batch"] <= need(b, "fit_max_batch")]
    if not len(within) or within["client_batch"].max() < 2:
        raise Missing("a replicas' decode point of two sequences or more")
    r = within.iloc[-1]
    pred = fit.interval(lambda a, s, n=float(r["batch"]): a + s * n)
    return Judgement(variants.positive_prediction(pred), Interval.exact(float(r["step_ms"])),
                     f"{num(fit.intercept)} + {num(fit.slope)} x {r['batch']:g} sequences per engine "
                     f"({r['client_batch']:g} in flight over 2) = {num(pred.value)} ms")


def _dp_ceiling(v: dict) -> Judgement:
    x, b = _pair(v, "dp2")
    c0, c1 = need(b, "ceiling_tok_s"), need(x, "ceiling_tok_s")
    if b.get("top_cap") != x.get("top_cap"):
        raise Missing("floods at the same cap per engine")
    return Judgement(variants.positive_prediction(c0.map(lambda c: 2 * c)), c1, f"2 x {num(c0.value)} tok/s = {num(2 * c0.value)} tok/s")


WHY_TP = ("every layer ends in all-reduces across the two GPUs, whose latency does not shrink with the shard, and part "
          "of the step's non-weight work (kernel launches, sampling) is not split; the recurrent state is: vLLM shards "
          "the Gated DeltaNet heads over the ranks as it shards the attention heads")


WHY_POOL = ("each GPU also holds the all-reduce buffers and its own activation peak and CUDA graphs; a rig that fixes "
            "the pool in bytes per worker (the CPU rig) gives every configuration the same pool per worker")


WHY_DP = ("two engines share the host's CPU (the API servers, tokenisation, scheduling) and vLLM's balancer; on a host "
          "whose CPU is the bottleneck, or whose engines share cores (the CPU rig), a replica does not run as fast as "
          "the server alone did")


CLAIMS = [
    Claim("tp-halves-step", "The folk rule: two GPUs halve the step.",
          "one GPU's batch-1 step / 2 predicts the tensor-parallel batch-1 step", "ms", _halved("fixed", "ms"), BAND, WHY_TP),
    Claim("tp-halves-stream", "Tensor parallelism splits the weight stream and nothing else.",
          "one GPU's batch-1 step - half its weight stream (bytes / measured bandwidth) predicts the tensor-parallel "
          "batch-1 step", "ms", _tp_halves_stream, BAND, WHY_TP),
    Claim("tp-halves-slope", "Each GPU does half of every sequence's arithmetic.",
          "one GPU's per-sequence cost / 2 predicts the tensor-parallel per-sequence cost", "ms/seq",
          _halved("slope", "ms", "one GPU's per-sequence cost"),
          BAND, WHY_TP),
    Claim("tp-weights", "Each GPU holds half the weights.",
          "one GPU's logged weights / 2 predicts each tensor-parallel GPU's", "GiB",
          _halved("weights_logged", "GiB", "one GPU's weights"), (0.9, 1.1),
          "vLLM replicates what it does not shard (norms, small vectors, and on some models the embedding)"),
    Claim("tp-pool", "The memory half the weights free goes to the KV cache.",
          "one GPU's KV cache + half its weights (the logs) predicts each tensor-parallel GPU's KV cache", "GiB",
          _tp_pool, (0.95, 1.05), WHY_POOL),
    Claim("tp-kv-tokens", "Splitting the KV heads doubles the tokens a byte of KV cache holds.",
          "2 x one GPU's KV tokens x (KV GiB per tensor-parallel GPU / one GPU's KV GiB), the logs, predicts the "
          "tensor-parallel pool's tokens", "tokens", _tp_tokens, (0.95, 1.05),
          "a model with fewer KV heads than GPUs replicates them; on a hybrid model the page holds a sequence's recurrent "
          "state too (its Gated DeltaNet heads are split over the ranks as well), and vLLM sizes the attention page from "
          "that state, so a change in either moves the tokens a page holds"),
    Claim("dp-single", "A replica serves one stream as the lone server does.",
          "one GPU's single-stream ITL predicts the replicas'", "ms", _dp_single, BAND, WHY_DP),
    Claim("dp-split", "Replicas split the batch: each runs half the sequences in flight.",
          "one GPU's step fit at half the concurrency predicts the replicas' step", "ms", _dp_split, BAND, WHY_DP),
    Claim("dp-ceiling", "Two replicas give twice the flood ceiling.",
          "2 x the one GPU's flood ceiling at the same cap per engine predicts the replicas' ceiling", "tok/s",
          _dp_ceiling, BAND, WHY_DP),
]
