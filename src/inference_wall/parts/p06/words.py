"""Part 6's sentences, pure over its views and tables: each rig's findings, the findings box, the closing
note and the line the page opens with until a two-GPU run exists."""
from __future__ import annotations

import pandas as pd

from .. import variants
from ...measure.analysis import Interval
from ...measure.claims import missing
from .plan import BASE, CONFIG_LABELS, GPUS, NAME, STEP, TWO_GPU_RIG
from .claims import num


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


def awaiting_note(views: dict[str, dict], tables: dict) -> str:
    """The page's first line where no shown rig has measured a two-GPU configuration: that it awaits a two-GPU
    run, and why; '' once one has."""
    if any(GPUS[c] == 2 for view in views.values() for c in view["variants"]):
        return ""
    planned = (f" Its rig, `{TWO_GPU_RIG}` (two H200s of one host), is set up, but that machine was not lent to "
               f"the sessions that made this book's runs." if tables.get("two_gpu_rig") else "")
    return ("**This part awaits a two-GPU run.** No rig shown has measured tensor parallelism or replicas yet, so "
            "this page gives the predictions from the model's shapes and the plan; the measured figures and claims "
            "fill in once a rig with two GPUs has run `make reproduce PART=6 RIG=<rig>`." + planned)


def key_findings(views: dict[str, dict], tables: dict) -> list[str]:
    """The findings box: 3-5 bullets from the rigs shown, or, where none has two GPUs, that the part awaits one and
    what its shapes predict (the tables' `predicted` and `heads`)."""
    sig = variants.sig
    by = tables["predicted"].set_index("config")
    h = tables["heads"]
    out = []
    waiting = awaiting_note(views, tables)
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
