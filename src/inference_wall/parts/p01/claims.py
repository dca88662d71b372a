"""Part 1's claims: each predicts one measurement of a rig from other measurements of the same rig (the
roofline from the weights and the bandwidth, the ceiling from the step fit, the running batch from the KV pool)."""
from __future__ import annotations

import math

from ...measure import analysis
from ...measure.admission import running_limit
from ...measure.analysis import GIB, Interval, combine
from ...measure.claims import Claim, Judgement, Missing, need
from .view import fit_at, fmt


# ---------------------------------------------------------------------------------------------
# Claims: each predicts one measurement of a rig from other measurements of the same rig
# ---------------------------------------------------------------------------------------------
def _roofline(v: dict) -> Judgement:
    w, bw, itl = need(v, "weights_gib"), need(v, "bandwidth_gb_s"), need(v, "single_itl_ms")
    tower = v.get("vision_gib", 0.0)
    lm = Interval(w.value - tower, w.low - tower, w.high - tower)
    pred = combine(lambda g, b: g * GIB / (b * 1e9) * 1000, lm, bw)
    how = (f"({fmt(w.value)} GiB logged - {fmt(tower)} GiB vision tower) / {fmt(bw.value)} GB/s = {fmt(pred.value)} ms"
           + (f" (all {fmt(w.value)} GiB: {fmt(v['floor_all_weights_ms'])} ms)" if tower else ""))
    return Judgement(pred, itl, how)


def _step_linear(v: dict) -> Judgement:
    dec = v.get("decode")
    if dec is None or len(dec) < 4:
        raise Missing("decode at four or more fixed batches (the post gives only its fit)")
    rest, top = dec.iloc[:-1], dec.iloc[-1]
    fit = analysis.linear_fit(rest["batch"], rest["step_ms"])
    pred = fit.step_ms(float(top["batch"]))
    how = (f"fit to batches {', '.join(f'{b:g}' for b in rest['batch'])}: {fmt(fit.intercept)} + {fmt(fit.slope)} x "
           f"{top['batch']:g} = {fmt(pred.value)} ms")
    return Judgement(pred, Interval.exact(top["step_ms"]), how)


def _ceiling(v: dict) -> Judgement:
    fit, batch, flood = need(v, "fit"), need(v, "flood_running"), need(v, "flood_tok_s")
    share = Interval.printed(v["post"]["prefill_gpu_share"]).map(lambda s: s / 100)
    decode = fit_at(fit, analysis.step_model_tok_s, batch)
    pred = combine(lambda d, s: d * (1 - s), decode, share)
    how = (f"(1 - {share.value:.0%} prefill) x {fmt(batch.value)} / ({fmt(fit.intercept)} + {fmt(fit.slope)} x "
           f"{fmt(batch.value)}) ms = {fmt(pred.value)} tok/s; the flood made {flood.value / decode.value:.0%} of pure "
           f"decode at that batch over the client's whole pass")
    steady = v.get("flood_steady_tok_s")
    if steady is not None:  # judged on the whole pass, as the post measured; the polled steady window beside it
        how += f", {steady / decode.value:.0%} in the engine's steady window ({fmt(steady)} tok/s)"
    return Judgement(pred, flood, how)


def _running_flood(v: dict) -> Judgement:
    pred, how = running_limit(v)
    return Judgement(pred, need(v, "flood_running"), how)


def _knee(v: dict) -> Judgement:
    ceiling = need(v, "flood_rps")
    kept, knee = v.get("last_kept_up_rps"), v.get("knee_rps")
    if knee is None or math.isnan(knee):
        raise Missing("rate the server fell behind at")
    low = kept if kept is not None and not math.isnan(kept) else 0.0
    measured = Interval((low + knee) / 2, low, knee)
    how = (f"kept up at {fmt(low)} req/s, fell behind at {fmt(knee)}: the knee is {low / ceiling.value:.0%} to "
           f"{knee / ceiling.value:.0%} of the flood's {fmt(ceiling.value)} req/s")
    return Judgement(ceiling, measured, how)


def _littles_law(v: dict) -> Judgement:
    lam, w, running = need(v, "low_rate_rps"), need(v, "low_time_in_system_ms"), need(v, "low_running")
    pred = combine(lambda r, t: r * t / 1000, lam, w)
    how = f"{fmt(lam.value)} req/s x {fmt(w.value / 1000)} s ({v['low_time_source']}) = {fmt(pred.value)} in flight"
    return Judgement(pred, running, how)


def _cold(stat: str):
    def judge(v: dict) -> Judgement:
        warm, cold = need(v, f"warm_{stat}_ms"), need(v, f"cold_{stat}_ms")
        return Judgement(warm, cold, f"cold {fmt(cold.value)} ms against warm {fmt(warm.value)} ms: "
                                     f"{cold.value / warm.value:.1f}x")
    return judge


CLAIMS = [
    Claim("roofline", "One request alone pays about the time to stream the weights once per token: on the A10G "
          "{single_request_ms_per_token:g} ms against {weight_bytes_per_stream:g} GB at {hbm_bandwidth_measured:g} "
          "GB/s, ~{weight_stream_time:g} ms.",
          "single-stream ITL = bytes one decode step reads (the language model's weights: the log's figure less any "
          "vision tower) / the rig's measured HBM bandwidth; agreement: the weight stream is at least 80% of the token",
          "ms", _roofline, (0.95, 1.25),
          "a fast weight stream leaves the fixed per-step costs that are not weight traffic (kernel launches, the "
          "scheduler and sampler on the CPU, the recurrent layers' state) a large share of a one-request step"),
    Claim("step-linear", "Steady decode is a fixed part plus a part per sequence, and the line 'holds almost exactly' "
          "up to the largest batch (on the A10G, step = {fit_a:g} ms + {fit_b:g} ms x batch).",
          "step time at the largest fixed batch measured = the line fitted to the smaller batches", "ms",
          _step_linear, (0.85, 1.15),
          "the per-sequence cost grows faster than linearly at large batches (attention over more KV, a step "
          "outside the captured CUDA graphs, or memory traffic that no longer overlaps)"),
    Claim("ceiling", "Flooded, the server sustains pure decode's rate at its running batch less the share arriving "
          "prompts' prefill takes: on the A10G roughly {prefill_gpu_share:g}% of the GPU, leaving about "
          "{serving_ceiling_tok_s:,.0f} tok/s, about half.",
          "flood output throughput = (1 - the post's prefill share) x batch / step time, the step fit taken at the "
          "running batch the flood reached", "tok/s", _ceiling, (0.8, 1.25),
          "the share of the GPU that prefill takes under a flood depends on how fast the rig prefills against how "
          "fast it decodes, and on how vLLM mixes the two in one step"),
    Claim("running-flood", "Flooded, the running batch is set by the KV pool where max_num_seqs is above the pool's "
          "limit, else by the cap: on the A10G the pool's, about {running_batch_flood:g}, under the cap of "
          "{max_num_seqs:g}.",
          "running batch under a flood = min(max_num_seqs, the KV pool's admission limit for a "
          "{workload_input_tokens:g}+{workload_output_tokens:g}-token request), the pool from the server's startup log",
          "seqs", _running_flood, (0.95, 1.05),
          "a flood that ends before the batch fills, or a pool read wrongly from the log"),
    Claim("knee", "The server keeps up until the offered rate reaches its flood ceiling: on the A10G the knee came "
          "around rate {knee_offered_rate_low:g} to {knee_offered_rate_high:g}, where completed throughput flattened "
          "at {knee_completed_rate_low:g} to {knee_completed_rate_high:g} req/s.",
          "the knee (between the last rate kept up with and the first missed, at 90% completed) = the flood's "
          "completed req/s", "req/s", _knee, (0.85, 1.15),
          "a steady stream of arrivals makes steps that mix prefill with decode; where those are slow the queue "
          "starts well below the flood's ceiling (see Inside the knee)"),
    Claim("littles-law", "At the lowest rate the running batch follows the load, rate x time in the server: on the "
          "A10G at rate 1, about {running_batch_rate1:g} request.",
          "mean running batch at the lowest rate = completed req/s x time each request spends in the server "
          "(Little's law)", "seqs", _littles_law, (0.8, 1.25),
          "the stats line samples the running count once per interval; a figure read off a few lines is not a mean"),
    Claim("cold-median", "On a cold server the median TTFT of the first pass is as low as warm "
          "(the cost of compiling lands in the tail).",
          "cold-pass TTFT p50 = the same pass's TTFT p50 once warm", "ms", _cold("p50"), (0.67, 1.5),
          "when the first requests wait for compilation or graph capture all at once, the median pays too"),
    Claim("cold-tail", "The cold pass's p99 TTFT is at least 3x the warm one: the tail pays (on the A10G about "
          "{cold_over_warm_ttft_p99:g}x).",
          "cold-pass TTFT p99 at least 3x the warm pass's", "ms", _cold("p99"), (3.0, math.inf),
          "caches from an earlier start (compiled kernels, autotuning) shrink the one-time cost"),
]
