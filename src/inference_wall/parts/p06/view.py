"""Part 6's view of one rig, pure over its tables: per configuration, part 5's measurements on each engine's
batch, the bytes each GPU reads, the logged weights and KV pool, the ceiling per GPU; and the page's summary,
decode and cost tables over the views."""
from __future__ import annotations

import pandas as pd

from .. import variants
from ...measure.analysis import Interval
from ...measure.claims import missing
from .plan import BUNCHED, CONFIGS, CONFIG_LABELS, DEFAULTS, ENGINES, GPUS, SHARDS, STEP


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
