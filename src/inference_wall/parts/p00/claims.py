"""Part 0's claims: each judges one measurement of a rig's step against the sum of its parts, measured apart."""
from __future__ import annotations

from ...measure.analysis import Interval
from ...measure.claims import Claim, Judgement, Missing, missing
from .families import BAND
from .view import _component, _step_interval, _traced_pair, client_pair


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
