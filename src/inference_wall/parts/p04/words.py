"""Part 4's sentences, pure over its views and tables: each rig's findings, the findings box, and the
texts beside the figures."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ... import words
from ...measure.claims import missing
from ...measure.steady import MIN_FLOOD_STEPS
from .plan import DEFAULTS
from .view import SHORT_PASS_S, floods, pool_cost, short_passes
from .claims import one_stall_each, sig, stall_doubt


def steady_words(table: pd.DataFrame) -> str | None:
    """Per rig: each flood's steady window beside its whole pass (client), and the floods whose batch never held the
    cap long enough for one: a whole pass of a synchronised flood holds its ramp and drain too."""
    f = table[np.isinf(table["offered_rate_rps"].astype(float))] if len(table) else table
    if not len(f):
        return None
    out = []
    for rig, g in f.groupby("rig", sort=True):
        held = g.dropna(subset=["steady_output_tok_s"])
        lost = g[g["steady_output_tok_s"].isna()]
        words = []
        if len(held):
            words.append("output in the steady window against the whole pass, for the floods that held their batch "
                         "(the cap, or what the pool admits where that is fewer): "
                         + ", ".join(f"{r.model}/{r.workload} at {int(r.pool_pages):,} pages {r.steady_output_tok_s:,.0f}"
                                     f" against {r.output_tok_s:,.0f} tok/s" for r in held.itertuples()))
        if len(lost):
            words.append(f"{len(lost)} of {len(g)} floods never kept that batch for {MIN_FLOOD_STEPS} steps, so their "
                         "whole-pass figures are all there is")
        out.append(f"On {rig}, " + "; ".join(words) + ".")
    return " ".join(out)


def short_pass_note(table: pd.DataFrame, poll_s: float = DEFAULTS["poll_interval_s"]) -> str:
    """One warning line naming every short pass (short_passes) with its length and the polls it holds; '' if none."""
    short = short_passes(table)
    if not len(short):
        return ""
    items = [f"{r.rig} {'dense model ' if r.model == 'small' else ''}{r.workload} at {int(r.pool_pages):,} pages "
             f"({sig(r.duration_s)} s, about {int(r.duration_s // poll_s)} polls)" for r in short.itertuples()]
    return (f"**Short window:** {len(short)} of {len(table)} passes lasted under {sig(SHORT_PASS_S)} s: "
            + "; ".join(items) + ". Their peaks, medians and throughput rest on few samples and include the first "
            "wave's prefill; read them as indications, not steady rates.")


def pool_cost_text(c: dict | None) -> str:
    """The sentence the latency and throughput figures need: throughput and TTFT, both, with why TTFT moves the way
    it does (each flood is sized to its pool)."""
    if not c:
        return ""
    ttft = ("fell" if c["ttft_ratio"] < 1 else "rose") + f" from {sig(c['big_ttft_s'])} to {sig(c['small_ttft_s'])} s"
    text = (f"{c['rig']}{' (dense model)' if c['model'] == 'small' else ''}, short requests, from "
            f"{sig(c['big_pool'])} to {sig(c['small_pool'])} pages: output throughput fell {sig(c['tok_fall'])}x "
            f"({sig(c['big_tok_s'])} to {sig(c['small_tok_s'])} tok/s) and median TTFT {ttft}.")
    if c["ttft_ratio"] < 1:
        same = abs(c["big_waves"] - c["small_waves"]) < 0.5
        text += (f" TTFT fell because each flood is sized to its pool ({sig(c['big_prompts'])} and "
                 f"{sig(c['small_prompts'])} requests, "
                 + (f"{sig(c['big_waves'])} waves of the batch each pool admits" if same else
                    f"{sig(c['big_waves'])} and {sig(c['small_waves'])} waves of the batches the pools admit")
                 + "): a request waits behind as many waves on either pool, and a smaller batch's waves are shorter. "
                 "Starvation shows in throughput here, not in time to first token.")
    return text


def _n(x: float) -> str:
    return words.number(x, whole=True)


def findings(view: dict) -> str:
    """What one rig's points show, in sentences whose numbers come from its table."""
    t = floods(view["points"])
    if not len(t):
        return f"{view['rig']}: no complete points."
    out = []
    for model, g in t.groupby("model", sort=True):
        who = f"{view['rig']}" + (" (dense model)" if model == "small" else "")
        short, long_ = g[g["workload"] == "short"], g[g["workload"] == "long"]
        if len(short) >= 2:
            big, small = short.sort_values("pool_pages").iloc[-1], short.sort_values("pool_pages").iloc[0]
            c = pool_cost({**view, "points": t}, model)
            out.append(
                f"**{who}, short requests.** From {_n(big.pool_pages)} to {_n(small.pool_pages)} pages the running batch "
                f"peaks at {_n(big.running_peak)} and {_n(small.running_peak)} (predicted {_n(big.admitted)} and "
                f"{_n(small.admitted)}), preemptions total {_n(short.preemptions.sum())}; output throughput fell "
                f"{sig(c['tok_fall'])}x ({sig(big.output_tok_s)} to {sig(small.output_tok_s)} tok/s) while median TTFT "
                f"went from {sig(big.ttft_p50_ms / 1000)} to {sig(small.ttft_p50_ms / 1000)} s (each flood sized to its "
                f"pool).")
        if len(long_):
            pre = long_[long_["preemptions"] > 0]
            calm = long_[long_["preemptions"] == 0]
            text = f"**{who}, long requests.** "
            if len(pre):
                worst = pre.sort_values("pool_pages").iloc[0]
                text += (f"{len(pre)} of {len(long_)} pools preempt (at {_n(worst.pool_pages)} pages: "
                         f"{_n(worst.preemptions)} preemptions for {_n(worst.num_prompts)} requests, p99 ITL "
                         f"{worst.itl_p99_ms:,.0f} ms")
                if len(calm):
                    ref = calm.sort_values("pool_pages").iloc[-1]
                    text += f" against {ref.itl_p99_ms:,.0f} ms at {_n(ref.pool_pages)} pages, where none was preempted"
                text += ")."
                text += _stall_text(worst)
                for r in pre.sort_values("pool_pages").iloc[1:].itertuples():
                    doubt = stall_doubt(r._asdict())
                    if doubt:
                        text += f" At {_n(r.pool_pages)} pages its {_n(r.stalls)} stalls are {doubt}."
                text += _faster_text(pre, calm)
            else:
                text += f"no pool preempted ({len(long_)} pools)."
            out.append(text)
    return "\n\n".join(out)


def _stall_text(r) -> str:
    """Where a preempting pass's cost lands: the stalls in its streams (see stalls_over)."""
    stalls = getattr(r, "stalls", math.nan)
    if missing(stalls) or missing(r.ref_max_gap_ms):
        return ""
    text = (f" Its streams show {_n(stalls)} gaps longer than any at the calm pool's "
            f"{sig(r.ref_max_gap_ms)} ms")
    doubt = stall_doubt(r._asdict() if hasattr(r, "_asdict") else dict(r))
    if doubt:
        return text + f", but that count is {doubt}."
    if stalls > 0:
        pre = float(r.preemptions)
        text += f", {sig(r.stall_median_s)} s each at the median"
        text += (": that is where a preemption's cost lands" if one_stall_each(pre, stalls) else
                 f", for {sig(pre)} preemptions (not one stall each: see claim `preemption-stall`)")
    return text + "."


def _faster_text(pre: pd.DataFrame, calm: pd.DataFrame) -> str:
    """A preempting pool that outran the calm one, with what the engine's own counters say it did per step."""
    if not len(calm):
        return ""
    ref = calm.sort_values("pool_pages").iloc[-1]
    fast = pre[pre["output_tok_s"] > ref["output_tok_s"]]
    if not len(fast):
        return ""
    f = fast.sort_values("output_tok_s").iloc[-1]
    return (f" At {_n(f.pool_pages)} pages, although it preempted, the flood ran {sig(f.output_tok_s)} tok/s against "
            f"{sig(ref.output_tok_s)} at {_n(ref.pool_pages)} pages: the engine's own counters give "
            f"{sig(f.server_tok_per_step)} output tokens a step at {sig(f.server_step_ms)} ms a step there, against "
            f"{sig(ref.server_tok_per_step)} at {sig(ref.server_step_ms)} ms, so a step of the full batch cost "
            f"{sig(ref.server_step_ms / f.server_step_ms, 2)}x one of the preempted batch for "
            f"{sig(ref.server_tok_per_step / f.server_tok_per_step, 2)}x the tokens.")


def key_findings(views: dict[str, dict], tables: dict) -> list[str]:
    """The page's findings box: 3-5 bullets (Markdown) from the data of the rigs shown, the post's correction first
    (the tables' `arithmetic` and `published`: arithmetic(), published_running()). One bullet a finding, each with
    every shown rig's numbers; a bullet's verdict in bold only where every rig's rows bear it out."""
    a, published = tables["arithmetic"], tables["published"]
    out = [f"**The series' flooded batch was the KV pool's admission limit:** the A10G's pool of {sig(a['a10g_pool'])} "
           f"pages admits {sig(a['a10g_admitted'])} requests of {sig(a['input_len'])} + {sig(a['short_out'])} tokens at "
           f"once ({sig(a['pages_prompt'])} pages each); the posts reported about {sig(published['part1_flood'])} "
           f"(part 1) and {sig(published['part3_cap256'])} (part 3)."]
    costs = [(rig, c) for rig, view in views.items() if (c := pool_cost(view, "main"))]
    if costs:
        queue = all(c["preemptions"] == 0 for _, c in costs)
        out.append(("**Memory ran out as a queue, not as preemptions** (the post planned to make the server evict): "
                    "short requests on the hybrid model, " if queue else
                    "**Short requests on the hybrid model met preemptions:** ") + words.per_rig([(
                       rig, f"{sig(c['preemptions'])} preemptions on {c['pools']} pools from {sig(c['big_pool'])} to "
                            f"{sig(c['small_pool'])} pages; the pool set the running batch ({sig(c['big_running'])} "
                            f"to {sig(c['small_running'])}) and up to {sig(c['waiting_max'])} requests waited")
                       for rig, c in costs]) + ".")
        cheap = all(c["tok_fall"] > 1 and c["ttft_ratio"] < 1 for _, c in costs)
        waves = {sig(c["small_waves"]) for _, c in costs}
        out.append(("**Starving the pool cost throughput, not time to first token:** " if cheap else
                    "**What starving the pool cost:** ") + words.per_rig([(
                        rig, f"output fell {sig(c['tok_fall'])}x ({sig(c['big_tok_s'])} to {sig(c['small_tok_s'])} "
                             f"tok/s) and median TTFT went from {sig(c['big_ttft_s'])} to {sig(c['small_ttft_s'])} s")
                        for rig, c in costs])
                   + (f". Each flood was sized to its pool ({waves.pop()} waves of the admitted batch)."
                      if len(waves) == 1 else ". Each flood was sized to its pool."))
    longs, dense = [], []
    for rig, view in views.items():
        t = floods(view["points"])
        long_ = t[(t["workload"] == "long") & (t["model"] == "main")]
        pre = long_[long_["preemptions"] > 0]
        if len(pre):
            stalls = pre["stall_median_s"].dropna()
            longs.append((rig, pre, f"{len(pre)} of {len(long_)} pools preempted, {sig(pre['preemptions'].sum())} times "
                               f"for {sig(pre['num_prompts'].sum())} requests" + (
                                   f" (a stall's median {sig(stalls.min())} to {sig(stalls.max())} s per pool)"
                                   if len(stalls) else "")))
        d = t[(t["model"] == "small") & (t["workload"] == "short") & (t["preemptions"] > 0)]
        if len(d):
            r = d.sort_values("pool_pages").iloc[0]
            dense.append((rig, r, f"at {sig(r['pool_pages'])} pages, {sig(r['preemptions'])} preemptions for "
                                  f"{sig(r['num_prompts'])} requests"))
    if longs:
        one_each = all(one_stall_each(r.preemptions, r.stalls) for _, pre, _ in longs for r in pre.itertuples())
        out.append(f"**Long requests ({sig(a['long_out'])} tokens out) outgrow the pool:** "
                   + words.per_rig([(rig, text) for rig, _, text in longs])
                   + (". Each preemption left one stall in its victim's stream." if one_each else "."))
    if dense:
        out.append(f"**A dense model preempts even short requests:** its pages hold {sig(dense[0][1]['block_size'])} "
                   "tokens, so a request grows while it runs; "
                   + words.per_rig([(rig, text) for rig, _, text in dense]) + ".")
    return out[:5]
