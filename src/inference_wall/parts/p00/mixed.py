"""Mixed steps: what the GPU ran while engine steps carried a long prompt's prefill chunks beside the background's
decodes, from part 2's profiler windows (data/runs/02-prefill-freeze/<rig>/<config>-trace/), split into the kernel
families of part 0's decode steps (p00.step_family), beside the same configuration's untraced injections.

One row per traced configuration (chunking off, budgets 512, 2,048, 8,192 on the h200): the injection window (the
torch profiler on from just before the long prompt is sent to its last token, trace.TracedInjection), its span (first
kernel to last), its GPU busy time (the kernels', copies' and sets' durations summed) and busy share, the split by
family, the engine steps the window held, and time per step.

The family split. A point keeps, per window, trace.py's own family sums (trace.FAMILIES), its 12 longest kernels by
name, and the raw trace only when small. Where the raw trace is kept, every kernel is placed by p00.step_family
(`split_from` "every kernel"). Elsewhere the 12 longest kernels are placed by p00.step_family and the rest of each of
trace.py's families goes to the family of part 0 that TRACE_TO_STEP maps it to (`split_from` "families + top 12";
`mapped_ms`: the time placed by that map, not by a kernel's name). The maps differ where trace.py calls a kernel
"other" that part 0 files as recurrent state (merge_16x16_to_64x64_inverse, solve_tril, recompute_w_u): where a row
has both, `map_misplaced_ms` is the time the mapped split puts in another family than the kernel-by-kernel one, the
measure of that approximation.

Named kernels. `kernels_known`: whether every kernel of the window is known by name ("all") or only its 12
longest ("top 12"); `gdn_chunk_kernels_ms`: the recurrent-state kernels of the chunked algorithm (GDN_CHUNK) among
them (with only the top 12 known, a lower bound); `top_gdn_kernel` / `top_memory_kernel`: the longest named kernel
of the recurrent-state and of the memory family, with its time.

Steps. `chunk_steps`: the steps that carried the prompt, counted in the traced point's iteration log
(injections.point_injections; it counts steps even where, under asynchronous scheduling, it does not time them), else
ceil(prompt_len / budget) (`chunk_steps_from` says which; `chunk_steps_formula` is the ceiling beside it);
`output_steps`: the long request's completion tokens after the first (the last chunk's step gives the first);
`steps` = the two added. Per-step values (`busy_per_step_ms`, `<family>_per_step_ms`) divide the window's kernel time
by `steps`, and `busy_per_chunk_step_ms` by `chunk_steps` alone: both are upper bounds, on the mean step's and on
a chunk step's GPU time, because every kernel of the window is counted, the decodes riding along in the same steps
included, and the window also holds steps of the background alone (before the prompt's first chunk is scheduled
and after its last token) that these counts leave out.

Beside it, from part 2's untraced measured injections of the same prompt length and budget (injections.injection_table,
injections.chunk_step_table): `chunk_step_ms`, the mean step that carried the prompt (its TTFT in the stream over those
steps; with chunking off the one step), `prefill_ms`, the prompt's unchunked prefill (its TTFT alone on the idle
server with chunking off), and `prefill_share_ms` = prefill_ms over the steps that carried the prompt
(injections.chunk_step_table's `share_ms`; the whole of it with chunking off): what a chunk would cost if it cost only
its share of the prefill; `step_over_share` = chunk_step_ms / prefill_share_ms (the prompt's TTFT in the stream over
its unchunked prefill); `non_kernel_ms_min` = chunk_step_ms - busy_per_chunk_step_ms, or 0 where that is negative
(the bound then says nothing): the least of the untraced step that is not kernel time, if its kernels ran no longer untraced than
traced (not measured). The profiler lengthens what it records:
`profiler_ratio` = the traced prompt's TTFT / the median untraced TTFT (`untraced_ttft_ms`) at the same length and
budget. `solo_chunk_step_ms`: the same point's chunk step alone (injections.chunk_step_table: the prompt alone on the idle
server at the same budget, its TTFT over the steps the log shows carrying it; with chunking off the unchunked prefill)
and `solo_share_ms`, the unchunked prefill over those same solo steps (chunk_step_table's `solo_share_ms`), what it
is set against;
`riding_ms` = chunk_step_ms - solo_chunk_step_ms (what the decodes riding along added);
`sum_ms` = solo_chunk_step_ms + decode_itl_ms (a chunk step alone and one decode step of the same background) and
`step_over_sum` = chunk_step_ms / sum_ms: what carrying both in one step costs against doing each alone.
"""
from __future__ import annotations

import math
import re

import pandas as pd

from ...run import trace
from .. import injections
from ..injections import OFF
from .families import STEP_FAMILIES, step_family
from .tables import PART0, PART2, mixed_inputs
from ... import words

# part 0's families (p00.STEP_FAMILIES, each once, in its order) and the table's short key for each
FAMILY_KEYS = {"recurrent state (GDN)": "gdn", "attention": "attention", "sampling": "sampling",
               "weights (matmul)": "matmul", "memory copies": "memory", "norms, activations, other": "other"}
FAMILIES = list(dict.fromkeys(name for name, _ in STEP_FAMILIES))

# trace.py's families (trace.FAMILIES and its fallback "other") onto part 0's
TRACE_TO_STEP = {"attention": "attention", "linear attention (GDN)": "recurrent state (GDN)",
                 "matmul": "weights (matmul)", "norm": "norms, activations, other",
                 "activation": "norms, activations, other", "rotary": "norms, activations, other",
                 "sampling": "sampling", "memory": "memory copies", "elementwise": "norms, activations, other",
                 "other": "norms, activations, other"}

# the chunked (prefill) algorithm's kernels among the recurrent-state ones (not the decode's fused_recurrent, not
# the convolution)
GDN_CHUNK = r"chunk_|merge_16x16|solve_tril|recompute_w_u"

COLUMNS = (["rig", "model", "source", "config", "budget", "prompt_len", "span_ms", "busy_ms", "busy_pct", "events"]
           + [f"{k}_ms" for k in FAMILY_KEYS.values()]
           + ["split_from", "mapped_ms", "map_misplaced_ms", "gdn_chunk_kernels_ms", "kernels_known",
              "top_gdn_kernel", "top_gdn_ms", "top_memory_kernel", "top_memory_ms",
              "chunk_steps", "chunk_steps_from", "chunk_steps_formula", "output_steps", "steps",
              "busy_per_step_ms", "busy_per_chunk_step_ms"]
           + [f"{k}_per_step_ms" for k in FAMILY_KEYS.values()]
           + ["traced_ttft_ms", "untraced_ttft_ms", "profiler_ratio", "chunk_step_ms", "prefill_ms",
              "prefill_share_ms", "step_over_share", "non_kernel_ms_min", "solo_chunk_step_ms", "solo_share_ms", "riding_ms",
              "decode_itl_ms", "sum_ms", "step_over_sum"])

# what the page shows (the lead picks): the window, the split per step, the untraced step against its share
PAGE_COLUMNS = ["model", "config", "span_ms", "busy_ms", "busy_pct", "steps", "busy_per_step_ms", "busy_per_chunk_step_ms",
                "matmul_per_step_ms", "gdn_per_step_ms", "attention_per_step_ms", "memory_per_step_ms",
                "sampling_per_step_ms", "other_per_step_ms", "chunk_step_ms", "prefill_share_ms", "solo_chunk_step_ms",
                "decode_itl_ms",
                "step_over_sum", "profiler_ratio"]


def short_name(kernel: str) -> str:
    """A kernel's function name without 'void', its namespaces and its template or argument lists."""
    name = re.sub(r"^void\s+", "", kernel.strip())
    name = re.split(r"[<(]", name, maxsplit=1)[0]
    return name.split("::")[-1] or kernel


def family_split(summary: dict, kernels: dict | None = None) -> dict:
    """Part 0's family split of one trace window's GPU time. `summary`: one entry of a window's `summaries`
    (trace.summarise: families_ms, top_ms, busy_ms); `kernels`: name -> [count, ms] of every kernel
    (trace.kernel_table of the raw trace), when kept. Returns ms per family of part 0 (every family, 0 where none),
    `split_from`, `mapped_ms` (time placed by TRACE_TO_STEP rather than by kernel name) and `known`: the kernels
    named in it (name -> ms; all of them, or the top 12)."""
    out = dict.fromkeys(FAMILIES, 0.0)
    if kernels is not None:
        known = {name: float(ms) for name, (_, ms) in kernels.items()}
        for name, ms in known.items():
            out[step_family(name)] += ms
        return {"families": out, "split_from": "every kernel", "mapped_ms": 0.0, "known": known}
    known = {}
    for name, ms in summary.get("top_ms", []):
        known[name] = known.get(name, 0.0) + float(ms)
    rest = {fam: float(ms) for fam, ms in summary["families_ms"].items()}
    for name, ms in known.items():
        out[step_family(name)] += ms
        fam = trace.family(name)
        rest[fam] = rest.get(fam, 0.0) - ms
    mapped = 0.0
    for fam, ms in rest.items():
        ms = max(ms, 0.0)  # a family whose top kernels hold all of it (a float's rounding below zero)
        out[TRACE_TO_STEP[fam]] += ms
        mapped += ms
    return {"families": out, "split_from": "families + top 12", "mapped_ms": mapped, "known": known}


def misplaced_ms(a: dict, b: dict) -> float:
    """The time two splits of the same window place in different families (half the summed differences)."""
    return sum(abs(a.get(f, 0.0) - b.get(f, 0.0)) for f in FAMILIES) / 2


def _top(known: dict, family: str, pattern: str | None = None) -> tuple[str | None, float]:
    hits = [(ms, name) for name, ms in known.items()
            if step_family(name) == family and (pattern is None or re.search(pattern, name.lower()))]
    if not hits:
        return None, math.nan
    ms, name = max(hits)
    return short_name(name), ms


def _untraced(inj: pd.DataFrame, steps: pd.DataFrame, rig: str, budget: int, n: int) -> dict:
    """The untraced injections' TTFT, mean step that carried the prompt, unchunked prefill and its share, and the
    background's decode-only gap between tokens (the median of the injections' baselines: a decode step of the same
    background, on the same server)."""
    same = inj[(inj["rig"] == rig) & (inj["budget"] == budget) & (inj["prompt_len"] == n)]
    off = inj[(inj["rig"] == rig) & (inj["budget"] == OFF) & (inj["prompt_len"] == n)]
    prefill = float(off["solo_ttft_ms"].median()) if len(off) else math.nan
    if budget == OFF:  # the one step that carried the whole prompt: chunk_step_table's definition
        carried = same[same["prefill_steps"] > 0]
        step = float((carried["ttft_ms"] / carried["prefill_steps"]).median()) if len(carried) else math.nan
        solo = share = solo_share = prefill  # alone, the whole prompt in one step
    else:  # each share over the steps of the step it is set against (chunk_step_table's)
        at = steps[(steps["rig"] == rig) & (steps["budget"] == budget) & (steps["prompt_len"] == n)]
        step, solo, share, solo_share = (float(at[c].iloc[0]) if len(at) else math.nan for c in
                                         ("mean_step_ms", "solo_chunk_step_ms", "share_ms", "solo_share_ms"))
    return {"untraced_ttft_ms": float(same["ttft_ms"].median()) if len(same) else math.nan, "chunk_step_ms": step,
            "prefill_ms": prefill, "solo_chunk_step_ms": solo, "prefill_share_ms": share, "solo_share_ms": solo_share,
            "decode_itl_ms": float(same["baseline_itl_ms"].median()) if len(same) else math.nan}


def mixed_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """One row per traced configuration of part 2, and of part 0's sessions of the same kind on its other models
    (see the module's docstring for every column; `model`: the preset served, `source`: whose sessions), from what
    tables.mixed_inputs read of them."""
    rows, steps = [], {}
    for source, pt, read, inj in mixed_inputs(data_dir, rigs):
        if id(inj) not in steps:  # one table of chunk steps per group of untraced injections
            steps[id(inj)] = injections.chunk_step_table(inj)
        row = _row(pt, read, inj, steps[id(inj)])
        if row is not None:
            rows.append({**row, "model": pt.record.preset, "source": source})
    out = pd.DataFrame(rows, columns=COLUMNS)
    order = out["budget"].where(out["budget"] != OFF, 10**9)
    rank = out["source"].map({PART2: 0, PART0: 1})
    return (out.assign(_o=order, _s=rank).sort_values(["rig", "_s", "model", "_o"], ascending=[True, True, True, False])
            .drop(columns=["_o", "_s"]).reset_index(drop=True))


def _row(pt, read: dict | None, inj: pd.DataFrame, steps: pd.DataFrame) -> dict | None:
    """One traced configuration's row (see the module's docstring) from what tables.traced_window read of it, None
    where its injection window holds no trace."""
    if read is None:
        return None
    sm, kernels, rec, ours = read["summary"], read["kernels"], read["record"], read["injections"]
    budget, n = int(pt.params["budget"]), int(pt.params["prompt_len"])
    split = family_split(sm, kernels)
    check = misplaced_ms(family_split(sm)["families"], split["families"]) if kernels is not None else math.nan
    logged = int(ours["prefill_steps"].iloc[0]) if len(ours) else 0
    formula = 1 if budget == OFF else math.ceil(n / budget)
    chunk_steps = logged or formula
    output_steps = max(int(rec.get("completion_tokens") or 0) - 1, 0)
    total = chunk_steps + output_steps
    fam = split["families"]
    busy = float(sm["busy_ms"])
    gdn_name, gdn_ms = _top(split["known"], "recurrent state (GDN)")
    mem_name, mem_ms = _top(split["known"], "memory copies")
    chunk_known = [ms for name, ms in split["known"].items()
                   if step_family(name) == "recurrent state (GDN)" and re.search(GDN_CHUNK, name.lower())]
    traced_ttft = float(ours["ttft_ms"].iloc[0]) if len(ours) else math.nan
    row = {"rig": pt.rig, "config": injections.config_label(budget), "budget": budget, "prompt_len": n,
           "span_ms": float(sm["span_ms"]), "busy_ms": busy,
           "busy_pct": 100 * busy / sm["span_ms"] if sm["span_ms"] else math.nan, "events": int(sm["events"]),
           **{f"{FAMILY_KEYS[f]}_ms": fam[f] for f in FAMILIES},
           "split_from": split["split_from"], "mapped_ms": split["mapped_ms"], "map_misplaced_ms": check,
           "gdn_chunk_kernels_ms": float(sum(chunk_known)),
           "kernels_known": "all" if kernels is not None else "top 12",
           "top_gdn_kernel": gdn_name, "top_gdn_ms": gdn_ms, "top_memory_kernel": mem_name,
           "top_memory_ms": mem_ms,
           "chunk_steps": chunk_steps, "chunk_steps_from": "iteration log" if logged else "ceil(prompt / budget)",
           "chunk_steps_formula": formula, "output_steps": output_steps, "steps": total,
           "busy_per_step_ms": busy / total, "busy_per_chunk_step_ms": busy / chunk_steps,
           **{f"{FAMILY_KEYS[f]}_per_step_ms": fam[f] / total for f in FAMILIES},
           "traced_ttft_ms": traced_ttft, **_untraced(inj, steps, pt.rig, budget, n)}
    row["profiler_ratio"] = traced_ttft / row["untraced_ttft_ms"]
    row["step_over_share"] = row["chunk_step_ms"] / row["prefill_share_ms"]
    row["non_kernel_ms_min"] = max(row["chunk_step_ms"] - row["busy_per_chunk_step_ms"], 0.0)
    row["riding_ms"] = row["chunk_step_ms"] - row["solo_chunk_step_ms"]
    row["sum_ms"] = row["solo_chunk_step_ms"] + row["decode_itl_ms"]
    row["step_over_sum"] = row["chunk_step_ms"] / row["sum_ms"]
    return row


sig = words.sig  # at most three significant figures


def _named(kernel) -> bool:
    """A kernel's name is in the cell (a table's missing name reads back as NaN, which is truthy)."""
    return isinstance(kernel, str) and bool(kernel)


def mixed_words(table: pd.DataFrame, rig: str | None = None, model: str | None = None,
                alone: str | None = None) -> list[str]:
    """1-3 sentences for the page from the table alone (every number a cell of it, at most 3 significant figures):
    on `rig` (default: the first in the table by name) and `model` (default: the rig's first, part 2's where it
    has one; another model is named), the smallest traced budget against
    chunking off (or, without it, the largest budget): the window's GPU busy share and the profiler's lengthening;
    the recurrent-state (GDN) chunk kernels and the memory ops; the untraced chunk step against its share of the
    prefill, with the traced kernel time per chunk step, and `alone` (chunkalone.chunk_words: the chunk step traced
    alone) after it where given. Causes not measured are named as candidates."""
    if table is None or not len(table):
        return []
    out = []
    rig = rig or sorted(set(table["rig"]))[0]
    t = table[table["rig"] == rig]
    if not len(t):
        return []
    first = model is None or model == t["model"].iloc[0]
    model = model or t["model"].iloc[0]
    t = t[t["model"] == model]
    chunked = t[t["budget"] != OFF].sort_values("budget")
    if not len(chunked):
        return []
    small = chunked.iloc[0]
    ref = t[t["budget"] == OFF]
    ref = ref.iloc[0] if len(ref) else (chunked.iloc[-1] if len(chunked) > 1 else None)
    b = f"budget {int(small.budget):,}"
    against = None if ref is None else ("with chunking off" if ref.budget == OFF else f"at budget {int(ref.budget):,}")
    s = (f"On {rig}{'' if first else f', the {model}'}, in the profiler's window of the long prompt at {b} the GPU ran kernels for "
         f"{sig(small.busy_ms)} of {sig(small.span_ms)} ms ({sig(small.busy_pct)}%)")
    if ref is not None:
        s += f", against {sig(ref.busy_ms)} of {sig(ref.span_ms)} ms ({sig(ref.busy_pct)}%) {against}"
    ratios = [r.profiler_ratio for r in (small, ref) if r is not None and math.isfinite(r.profiler_ratio)]
    if math.isfinite(small.profiler_ratio):
        verb = (", so the profiler lengthened what it recorded" if min(ratios) > 1 else
                ", so the profiler shortened none of it" if min(ratios) >= 1 else "")
        s += (f"; the traced prompt's TTFT was {sig(small.profiler_ratio)}x the untraced one at {b}"
              + (f" and {sig(ref.profiler_ratio)}x {against}" if ref is not None and math.isfinite(ref.profiler_ratio)
                 else "") + verb)
    out.append(s + ".")
    if ref is not None:
        s = (f"The recurrent-state (GDN) kernels took {sig(small.gdn_ms)} ms of the window at {b} against "
             f"{sig(ref.gdn_ms)} ms {against}")
        if _named(small.top_gdn_kernel):
            s += (f", the longest of them {small.top_gdn_kernel} with {sig(small.top_gdn_ms)} ms in the "
                  f"{int(small.chunk_steps)} steps that carried the prompt")
            if ref.top_gdn_kernel == small.top_gdn_kernel:
                s += f" against {sig(ref.top_gdn_ms)} ms in {int(ref.chunk_steps)}"
        if small.gdn_ms or ref.gdn_ms:
            s += f"; the memory ops took {sig(small.memory_ms)} ms against {sig(ref.memory_ms)} ms"
        else:  # a model without recurrent layers (the dense 0.5B) has no such kernels to speak of
            s = f"The memory ops took {sig(small.memory_ms)} ms of the window at {b} against {sig(ref.memory_ms)} ms {against}"
        if _named(small.top_memory_kernel):
            s += f" (the longest {small.top_memory_kernel}, {sig(small.top_memory_ms)} ms)"
        out.append(s + ".")
    if math.isfinite(small.chunk_step_ms) and math.isfinite(small.prefill_share_ms):
        s = (f"Untraced, a step that carried a chunk at {b} took {sig(small.chunk_step_ms)} ms, "
             f"{sig(small.step_over_share)}x its {sig(small.prefill_share_ms)} ms share of the "
             f"unchunked prefill, while the traced window holds at most {sig(small.busy_per_chunk_step_ms)} ms of "
             f"kernels per chunk step")
        gap = small.non_kernel_ms_min
        if gap > 0:
            s += (f": if its kernels ran no longer untraced than traced (not measured), at least {sig(gap)} ms of the "
                  "untraced step is not kernel time, for which host work between the kernels is a candidate")
        solo = small.solo_chunk_step_ms
        if math.isfinite(solo) and math.isfinite(small.decode_itl_ms):
            riding = small.riding_ms
            s += (f". Alone on the idle server at the same budget (no decodes beside it) a chunk step took {sig(solo)} ms"
                  + (f": {injections.FLOOR_IS_CHUNKED_PREFILL}" if injections.floor_is_chunked_prefill(
                      solo, small.solo_share_ms, small.decode_itl_ms) else "")
                  + f", and the decodes riding along {'added' if riding >= 0 else 'took away'} {sig(abs(riding))} ms "
                  f"against one decode step of {sig(small.decode_itl_ms)} ms")
        out.append(s + "." + (f" {alone}" if alone else ""))
    return out[:3]


def models_of(table: pd.DataFrame, rig: str) -> list[str]:
    """The models a rig's rows cover, in the table's order (part 2's first)."""
    return list(dict.fromkeys(table[table["rig"] == rig]["model"])) if len(table) else []


def sum_words(table: pd.DataFrame, rig: str, alone: str | None = None) -> str | None:
    """Per model of `rig`, at its smallest traced budget: the untraced step that carried a chunk against the sum of the
    same budget's chunk step alone on the idle server (solo_chunk_step_ms) and a decode-only step of the same
    background (the background's gap between tokens on the same server), with the chunk step alone against its share
    of the unchunked prefill (where the floor sits); None where no model has all three. `alone`: what a trace of the
    chunk step alone measured (chunkalone.chunk_words), else it is named as the run that would."""
    parts, floors = [], []
    for model in models_of(table, rig):
        t = table[(table["rig"] == rig) & (table["model"] == model)].dropna(subset=["chunk_step_ms", "sum_ms"])
        t = t[t["budget"] != OFF].sort_values("budget")
        if not len(t):
            continue
        r = t.iloc[0]
        parts.append(f"on the {model} at budget {int(r.budget):,}, {sig(r.chunk_step_ms)} ms against "
                     f"{sig(r.solo_chunk_step_ms)} + {sig(r.decode_itl_ms)} = {sig(r.sum_ms)} ms ({sig(r.step_over_sum)}x)"
                     f", the step alone {sig(r.solo_chunk_step_ms / r.solo_share_ms)}x its "
                     f"{sig(r.solo_share_ms)} ms share of the unchunked prefill")
        floors.append(injections.floor_is_chunked_prefill(r.solo_chunk_step_ms, r.solo_share_ms, r.decode_itl_ms))
    if not parts:
        return None
    said = (f"On {rig}, a step that carried a chunk beside the background's decodes against the sum of the same "
            "budget's chunk step alone on the idle server (the prompt's solo TTFT over the steps that carried it) and a "
            "decode-only step of the same background (its gap between tokens): " + "; ".join(parts) + ".")
    if all(floors):
        said += (" The chunk step alone already sits above its share by more than a decode step: "
                 f"{injections.FLOOR_IS_CHUNKED_PREFILL}, not to carrying decodes. "
                 + (alone or "What part of it the prefill kernels take is a candidate that needs a trace of a chunk "
                    "alone (a device run): every profiler window here holds the background's decodes beside the chunks."))
    return said
