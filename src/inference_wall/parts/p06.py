"""Part 6, past one GPU: one model on one GPU, split over two by tensor parallelism, and run twice as two
replicas (vLLM's data parallelism); what does the second GPU buy, and in which currency?

Part 5 cut the bytes a decode step reads by storing the weights in fewer bits. Tensor parallelism cuts the bytes
each GPU reads by splitting every weight matrix over two GPUs, at the price of two all-reduces per layer per
step; replicas cut nothing per step but run two engines, each with half the requests. A configuration is one
server session: a single stream, decode at fixed concurrency (the step fit), a flood at the cap. The predictions
come from the one-GPU server of the same rig: its fixed cost, its weight stream (bytes / measured bandwidth), its
per-sequence cost, its weights and KV pool from the log, and its ceiling.
"""
from __future__ import annotations

import pandas as pd

from ..measure.analysis import Interval, combine
from ..measure.claims import Claim, Judgement, Missing, missing, need
from ..errors import UserError
from ..run.sweep import PointPlan
from .protocol import Part, judged, one_paragraph, reading_data_dir, with_data_dir, without_data_dir
from . import variants

NAME = "06-past-one-gpu"
NOTEBOOK = "notebooks/06-past-one-gpu.md"

CONFIGS = ("tp1", "tp2", "dp2")
CONFIG_SERVE_ARGS = {"tp1": [], "tp2": ["--tensor-parallel-size", "2"], "dp2": ["--data-parallel-size", "2"]}
GPUS = {"tp1": 1, "tp2": 2, "dp2": 2}  # GPUs a configuration's server takes
ENGINES = {"tp1": 1, "tp2": 1, "dp2": 2}  # engines the client's requests spread over
SHARDS = {"tp1": 1, "tp2": 2, "dp2": 1}  # GPUs one engine's weights are split across
CONFIG_LABELS = {"tp1": "one GPU", "tp2": "tensor parallel, 2 GPUs", "dp2": "2 replicas (data parallel), 2 GPUs"}
BASE = "tp1"
# A step is read from the median time per output token after the first (TPOT): with two API servers a client can
# receive a stream's tokens in bunches (gaps of microseconds, then one long one), which pulls the median ITL far
# below the step while TPOT, (latency - TTFT) / (tokens - 1), still spans the stream's whole decode.
STEP = "tpot_p50_ms"
BUNCHED = 0.5  # a decode pass whose median ITL is under this share of its median TPOT received its tokens bunched

DEFAULTS = {
    "model": "qwen3.5-9b",  # part 5's model in 16 bits: the one whose weight stream a second GPU should split
    "configs": list(CONFIGS),  # run in this order (each its own server)
    "skip_configs": {},  # config -> why this rig cannot serve it: left out of the plan, named on the page
    "config_args": {},  # config -> extra `vllm serve` flags this rig needs for it (the CPU build's TP: mp executor)
    "config_env": {},  # config -> server environment this rig needs for it (the CPU build: one thread per worker)
    "max_num_seqs": 256,  # per engine: replicas admit twice as many sequences in all
    "input_len": 256,
    "output_len": 128,
    "single_prompts": 8,
    "decode_batches": [1, 8, 32, 64, 128, 256],  # the client's concurrency; replicas split it between them
    "decode_waves": 3,
    "fit_max_batch": 128,  # per engine, as part 5's fit
    "waves": 4,  # a flood's prompts = waves x cap x engines, within min/max
    "min_prompts": 32,
    "max_prompts": 4096,
    "min_window_s": 10.0,
    "seed": 0,
    "poll_s": 0.25,  # /metrics during the flood's measured pass (its steady window, steady.flood_steady)
}
BAND = variants.BAND


def run_configs(p: dict) -> list[str]:
    unknown = [c for c in [*p["configs"], *p["skip_configs"], *p["config_args"], *p["config_env"]] if c not in CONFIGS]
    if unknown:
        raise UserError(f"unknown configuration(s) {', '.join(map(repr, unknown))}; valid: {', '.join(CONFIGS)}")
    return [c for c in p["configs"] if c not in p["skip_configs"]]


def gpus_needed(p: dict) -> int:
    """The GPUs one server of this plan takes at the most (make reproduce refuses a machine with fewer)."""
    return max((GPUS[c] for c in run_configs(p)), default=1)


def served_presets(p: dict, profile) -> list[str]:
    return [p["model"]]


def serve_args(cfg: str, p: dict) -> list[str]:
    return [*CONFIG_SERVE_ARGS[cfg], *[str(a) for a in p["config_args"].get(cfg, [])]]


def plan(p: dict, profile, pools: dict | None = None) -> list[PointPlan]:
    """One server per configuration, in order: its single stream, decode at each concurrency (up to the cap
    of all its engines), and a flood at the cap."""
    mns = int(p["max_num_seqs"])
    plans: list[PointPlan] = []
    for cfg in run_configs(p):
        params = {"config": cfg, "model": p["model"], "gpus": GPUS[cfg], "engines": ENGINES[cfg]}
        mine = [*variants.stream_points(cfg, p, p["model"], serve_args(cfg, p), params, most=mns * ENGINES[cfg]),
                variants.flood_point(cfg, mns, f"{cfg}-main", p, p["model"], serve_args(cfg, p), engines=ENGINES[cfg],
                                params=params)]
        env = {str(k): str(v) for k, v in (p["config_env"].get(cfg) or {}).items()}
        for point in mine:
            point.serve_env = dict(env)
        plans += mine
    return plans


# ---------------------------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------------------------
def page_tables(data_dir=None, rigs: list[str] | None = None) -> dict:
    from ..records.reference import gpu_prices

    return {"points": variants.point_table(data_dir, rigs, part=NAME, key="config"),
            "starts": variants.startup_table(data_dir, rigs, part=NAME, key="config"), "prices": gpu_prices(data_dir)}


def predicted_bytes(model: str, data_dir=None) -> pd.DataFrame:
    """What each GPU streams per decode step in each configuration, from the shapes (no run needed): the whole
    16-bit model on one GPU or on each replica, half of it on each GPU of the tensor-parallel pair."""
    from ..model.modelshape import preset_decode_bytes

    gb = preset_decode_bytes(model, "fp16", data_dir).gb
    return pd.DataFrame([{"config": c, "label": CONFIG_LABELS[c], "gpus": GPUS[c], "engines": ENGINES[c],
                          "gb_per_gpu": gb / SHARDS[c]} for c in CONFIGS])


def engine_batch(batch: float, engines: int) -> float:
    """The sequences each engine runs when the client keeps `batch` in flight over `engines` engines that vLLM's
    balancer shares them between evenly (one request runs on one engine)."""
    return max(1.0, batch / engines)


def rig_view(rig: str, tables: dict, p: dict | None = None, data_dir=None) -> dict:
    """Per configuration of one rig: part 5's measurements (measure_variant) on each engine's batch, the floor
    of the bytes each GPU reads, the weights and KV pool per GPU from the log, and the ceiling per GPU."""
    pp = {**DEFAULTS, **(p or {})}
    pts = tables["points"]
    pts = pts[pts["rig"] == rig] if len(pts) else pts
    st = tables["starts"]
    st = st[st["rig"] == rig] if len(st) else st
    bandwidth = variants.rig_bandwidth(pts)
    view: dict = {"rig": rig, "bandwidth_gb_s": bandwidth, "variants": {}, "skipped": dict(pp["skip_configs"])}
    for cfg in CONFIGS:
        sub = pts[pts["config"] == cfg] if len(pts) else pts
        if not len(sub):
            continue
        sub = sub.assign(client_batch=sub["batch"],
                         batch=[b if missing(b) else engine_batch(float(b), ENGINES[cfg]) for b in sub["batch"]])
        v = variants.measure_variant(sub, sub["preset"].iloc[0], "fp16", bandwidth, data_dir,
                                fit_max_batch=pp["fit_max_batch"], step=STEP)
        bunched = sub[(sub["kind"] == "decode") & (sub["itl_p50_ms"] < BUNCHED * sub[STEP])]
        if len(bunched):
            v["bunched"] = bunched
        v.update(config=cfg, gpus=GPUS[cfg], engines=ENGINES[cfg], shards=SHARDS[cfg],
                 label=f"{sub['preset'].iloc[0]}, {CONFIG_LABELS[cfg]}")
        if "bytes" in v:
            v["gb_per_gpu"] = v["bytes"].gb / SHARDS[cfg]
        if "floor_ms" in v:
            v["floor_ms"] = v["floor_ms"].map(lambda f, k=SHARDS[cfg]: f / k)  # each GPU streams its shard at once
        if "ceiling_tok_s" in v:
            v["ceiling_per_gpu"] = v["ceiling_tok_s"].map(lambda c, g=GPUS[cfg]: c / g)
        mine = st[st["config"] == cfg] if len(st) else st
        variants.apply_start(v, mine)
        if len(mine):  # the row apply_start reads: the main server's start (the largest cap), tested and read alike
            top = mine.sort_values("max_num_seqs").iloc[-1]
            if not missing(top["kv_cache_tokens"]):
                v["kv_tokens"] = float(top["kv_cache_tokens"])
        view["variants"][cfg] = v
    if "prices" in tables and len(pts):
        view["price"] = variants.rig_price(tables["prices"], pts)
    return view


def summary(views: dict[str, dict]) -> pd.DataFrame:
    """One row per (rig, configuration): GPUs, bytes each GPU reads, weights and KV per GPU (the log), floor,
    single ITL, the fit, the bend, the ceiling in all and per GPU, the requests its pool admits."""
    rows = []
    for rig, view in views.items():
        for cfg, v in view["variants"].items():
            def val(k):
                x = v.get(k)
                return x.value if isinstance(x, Interval) else x
            rows.append({"rig": rig, "variant": v["label"], "config": cfg, "gpus": v["gpus"],
                         "gb_per_gpu": v.get("gb_per_gpu"), "weights_gib": v.get("weights_gib"),
                         "kv_cache_gib": v.get("kv_cache_gib"), "floor_ms": val("floor_ms"),
                         "single_itl_ms": val("single_itl_ms"), "fixed_ms": val("fixed"), "per_seq_ms": val("slope"),
                         "bend_ratio": v.get("bend_ratio"), "ceiling_tok_s": val("ceiling_tok_s"),
                         "ceiling_per_gpu": val("ceiling_per_gpu"), "top_cap": v.get("top_cap"),
                         "admission_limit": v.get("admission_limit")})
    return pd.DataFrame(rows, columns=["rig", "variant", "config", "gpus", "gb_per_gpu", "weights_gib", "kv_cache_gib",
                                       "floor_ms", "single_itl_ms", "fixed_ms", "per_seq_ms", "bend_ratio",
                                       "ceiling_tok_s", "ceiling_per_gpu", "top_cap", "admission_limit"])


def decode_rows(views: dict[str, dict]) -> pd.DataFrame:
    """Step time per configuration against the client's concurrency, measured and as its fit predicts."""
    return variants.decode_rows(views, key="config", x="client_batch")


def cost_table(views: dict[str, dict]) -> pd.DataFrame:
    """Each configuration's ceiling per GPU (a GPU-hour buys that many tokens an hour), with the cost per million
    tokens at the listed low, middle and high of the rig's GPU where the listing has it."""
    cols = ["rig", "variant", "format", "ceiling_tok_s", "gpus", "gpu", "usd_low", "usd_mid", "usd_high"]
    rows = []
    for rig, view in views.items():
        price = view.get("price") or {}
        for cfg, v in view["variants"].items():
            if "ceiling_per_gpu" not in v:
                continue
            per_gpu = v["ceiling_per_gpu"].value
            rows.append({"rig": rig, "variant": v["label"], "format": cfg, "ceiling_tok_s": per_gpu, "gpus": v["gpus"],
                         "gpu": price.get("gpu"), **{f"usd_{k}": variants.usd_per_million(price.get(k), per_gpu)
                                                     for k in ("low", "mid", "high")}})
    return pd.DataFrame(rows, columns=cols)


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


# ----------------------------------------------------------------------------------------- sentences
def findings(view: dict) -> str:
    """One paragraph per configuration of one rig, then which configuration gives the most tokens per GPU and
    which the shortest single-stream token time."""
    lines = []
    for cfg, v in view["variants"].items():
        parts = [f"**{v['label']}**"]
        if "gb_per_gpu" in v:
            parts.append(f"each GPU reads {num(v['gb_per_gpu'])} GB per decode step"
                         + (f" (floor {variants.interval_words(v.get('floor_ms'), 'ms')})" if "floor_ms" in v else ""))
        if not missing(v.get("weights_gib")):
            parts.append(f"the log reports {num(v['weights_gib'])} GiB of weights per GPU"
                         + (f" and {num(v['kv_cache_gib'])} GiB of KV cache" if not missing(v.get("kv_cache_gib")) else ""))
        parts.append(f"single-stream ITL {variants.interval_words(v.get('single_itl_ms'), 'ms')}")
        if "fixed" in v:
            parts.append(f"step at batch 1 {variants.interval_words(v['fixed'], 'ms')}")
        if "fit" in v:
            slope = v["slope"] if "slope" in v else Interval.exact(v["fit"].slope)
            parts.append(f"per-sequence cost {variants.interval_words(slope, 'ms')} per engine")
        if "ceiling_tok_s" in v:
            parts.append(f"flood at cap {v['top_cap']} per engine: {num(v['ceiling_tok_s'].value)} output tok/s, "
                         f"{num(v['ceiling_per_gpu'].value)} per GPU")
        if not missing(v.get("admission_limit")):
            parts.append(f"its KV pool admits {num(v['admission_limit'])} requests at once per engine")
        if "bunched" in v:
            b = v["bunched"].iloc[-1]
            parts.append(f"its tokens reached the client in bunches in {len(v['bunched'])} of its "
                         f"{len(v.get('decode', []))} decode passes (at {b['client_batch']:g} in flight, median ITL "
                         f"{num(b['itl_p50_ms'])} ms against a median TPOT of {num(b[STEP])} ms): the API servers, "
                         f"not the engine, paced the stream there")
        lines.append("- " + "; ".join(parts) + ".")
    for cfg, why in (view.get("skipped") or {}).items():
        lines.append(f"- **{CONFIG_LABELS.get(cfg, cfg)}** not run on this rig: {why}.")
    two = {c: v for c, v in view["variants"].items() if GPUS[c] == 2 and "ceiling_per_gpu" in v}
    if len(two) == 2:
        best = max(two, key=lambda c: two[c]["ceiling_per_gpu"].value)
        other = next(c for c in two if c != best)
        lines.append(f"\nOn two GPUs, **{CONFIG_LABELS[best]}** gives more tokens per GPU-hour: "
                     f"{num(two[best]['ceiling_per_gpu'].value)} against {num(two[other]['ceiling_per_gpu'].value)} "
                     f"tok/s per GPU at the flood.")
    fast = {c: v["single_itl_ms"].value for c, v in view["variants"].items() if "single_itl_ms" in v}
    if len(fast) >= 2:
        quick = min(fast, key=fast.get)
        lines.append(f"The shortest single-stream token time is **{CONFIG_LABELS[quick]}**'s, {num(fast[quick])} ms.")
    return "\n".join(lines)


def closing_note(views: dict[str, dict], device: pd.DataFrame | None = None) -> str:
    """Per rig: single ITL, the fit and the ceiling per configuration, and the device minutes used."""
    return variants.closing_note(views, device, NAME)


# ----------------------------------------------------------------------------------------- what the page says
TWO_GPU_RIG = "h200-x2"  # the rig this part was planned on (data/rigs): two H200s of one host


def sharded_heads(model: str, data_dir=None, ranks: int = 2) -> dict:
    """The heads tensor parallelism splits over `ranks` GPUs, from the model's config: attention's query and KV
    heads and the Gated DeltaNet's key and value heads (vLLM shards both kinds across the ranks, so each GPU holds
    that share of every sequence's KV cache and recurrent state)."""
    from ..model.modelshape import ModelShape

    t = ModelShape.of(model, data_dir).text
    heads = {"attention_heads": t.get("num_attention_heads"), "kv_heads": t.get("num_key_value_heads"),
             "gdn_key_heads": t.get("linear_num_key_heads"), "gdn_value_heads": t.get("linear_num_value_heads")}
    return {**heads, **{f"{k}_per_gpu": (v / ranks if v else None) for k, v in heads.items()}, "ranks": ranks}


def awaiting_note(views: dict[str, dict], data_dir=None) -> str:
    """The page's first line where no shown rig has measured a two-GPU configuration: that it awaits a two-GPU
    run, and why; '' once one has."""
    if any(GPUS[c] == 2 for view in views.values() for c in view["variants"]):
        return ""
    from ..run.rig import load_profile

    try:
        load_profile(TWO_GPU_RIG, data_dir)
        planned = (f" Its rig, `{TWO_GPU_RIG}` (two H200s of one host), is set up, but that machine was not lent to "
                   f"the sessions that made this book's runs.")
    except Exception:  # no such profile on this checkout: say only what is known
        planned = ""
    return ("**This part awaits a two-GPU run.** No rig shown has measured tensor parallelism or replicas yet, so "
            "this page gives the predictions from the model's shapes and the plan; the measured figures and claims "
            "fill in once a rig with two GPUs has run `make reproduce PART=6 RIG=<rig>`." + planned)


def key_findings(views: dict[str, dict], predicted: pd.DataFrame, model: str, data_dir=None) -> list[str]:
    """The findings box: 3-5 bullets from the rigs shown, or, where none has two GPUs, that the part awaits one and
    what its shapes predict."""
    sig = variants.sig
    by = predicted.set_index("config")
    h = sharded_heads(model, data_dir)
    out = []
    waiting = awaiting_note(views, data_dir)
    if waiting:
        out.append("**Awaits a two-GPU run:** no rig shown has measured two GPUs yet"
                   + (f"; the two-H200 machine of rig `{TWO_GPU_RIG}` was not lent." if TWO_GPU_RIG in waiting else "."))
    out.append(f"**What a GPU streams per decode step (from the shapes):** {sig(by.loc['tp1', 'gb_per_gpu'])} GB on "
               f"one GPU and on each replica; {sig(by.loc['tp2', 'gb_per_gpu'])} GB on each GPU of a tensor-parallel "
               f"pair.")
    if h["kv_heads"] and h["gdn_value_heads"]:
        out.append(f"**Tensor parallelism splits the state too:** vLLM shards the {sig(h['kv_heads'])} KV heads and the "
                   f"{sig(h['gdn_value_heads'])} Gated DeltaNet value heads over the ranks ({sig(h['kv_heads_per_gpu'])}"
                   f" and {sig(h['gdn_value_heads_per_gpu'])} per GPU), so each GPU holds half of every sequence's KV "
                   f"cache and recurrent state; kernel launches and sampling are not split, and every layer adds all-reduces.")
    for rig, view in views.items():
        two = {c: v for c, v in view["variants"].items() if GPUS[c] == 2 and "ceiling_per_gpu" in v}
        base = view["variants"].get(BASE)
        if len(two) == 2:
            best = max(two, key=lambda c: two[c]["ceiling_per_gpu"].value)
            other = next(c for c in two if c != best)
            out.append(f"**{rig}: {CONFIG_LABELS[best]} gives the most tokens per GPU:** "
                       f"{sig(two[best]['ceiling_per_gpu'].value)} against {sig(two[other]['ceiling_per_gpu'].value)} "
                       f"tok/s per GPU at the flood" + (f", {sig(base['ceiling_per_gpu'].value)} on one GPU"
                                                        if base and "ceiling_per_gpu" in base else "") + ".")
        if base and "tp2" in view["variants"] and "fixed" in base and "fixed" in view["variants"]["tp2"]:
            f1, f2 = base["fixed"].value, view["variants"]["tp2"]["fixed"].value
            out.append(f"**{rig}: tensor parallelism's batch-1 step is {sig(f2 / f1)} of one GPU's** ({sig(f2)} against "
                       f"{sig(f1)} ms), where halving would give 0.5.")
        break
    return out[:5]


PART = Part(NAME, DEFAULTS, without_data_dir(plan), tables=with_data_dir(page_tables), view=reading_data_dir(rig_view),
            findings=one_paragraph(findings), claims=judged(CLAIMS), closing=closing_note,
            served_presets=served_presets, gpus_needed=gpus_needed)
