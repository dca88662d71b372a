"""A chunk step alone: a long prompt on the idle server at a small budget, untraced and then inside a profiler window
(plan.chunk_points, trace.SoloTrace), split by part 0's kernel families (mixed.family_split). Part 2's chunk step
alone (its solo TTFT over the steps that carried it) sits far above its share of the unchunked prefill; this says
what the GPU ran in such a step with no decode beside it.

Definitions, per point (rig, model, budget B, a prompt of N tokens asking for one output token):

- `steps` = ceil(N / B): the steps that carried the prompt. Alone, each step takes B of its tokens, and the last one
  gives the only token asked for, so the window holds no decode step.
- `solo_ttft_ms`: the median TTFT of the untraced prompts after the first (the first warms the kernels);
  `solo_chunk_step_ms` = solo_ttft_ms / steps (part 2's definition, here on a server of its own).
- `traced_ttft_ms`; `profiler_ratio` = traced_ttft_ms / solo_ttft_ms: what the profiler added.
- `busy_per_step_ms`: every kernel of the window (their durations summed) over `steps`; per part 0 family
  `<key>_per_step_ms` (mixed.FAMILY_KEYS); `gdn_chunk_per_step_ms`: the chunked Gated DeltaNet algorithm's own
  kernels (mixed.GDN_CHUNK); `gdn_chunk_pct`: their share of the traced kernels.
- `untraced_left_ms` = solo_chunk_step_ms - busy_per_step_ms: what the untraced step holds beyond the traced kernels
  (negative where the profiler lengthened the kernels by more); host work between steps is a candidate, not measured.
"""
from __future__ import annotations

import math
import re
import statistics

import pandas as pd

from ..injections import ttft_ms
from .mixed import FAMILIES, FAMILY_KEYS, GDN_CHUNK, family_split, short_name
from .families import step_family
from .tables import chunk_alone_reads
from ...words import sig

COLUMNS = (["rig", "model", "point", "budget", "prompt_len", "steps", "untraced_prompts", "solo_ttft_ms",
            "solo_chunk_step_ms", "traced_ttft_ms", "profiler_ratio", "busy_per_step_ms"]
           + [f"{k}_per_step_ms" for k in FAMILY_KEYS.values()]
           + ["gdn_chunk_per_step_ms", "gdn_chunk_pct", "top_gdn_kernel", "top_gdn_ms_per_step", "untraced_left_ms",
              "split_from"])

PAGE_COLUMNS = ["model", "budget", "prompt_len", "steps", "solo_chunk_step_ms", "profiler_ratio", "busy_per_step_ms",
                "gdn_chunk_per_step_ms", "matmul_per_step_ms", "attention_per_step_ms", "memory_per_step_ms",
                "other_per_step_ms"]


def chunk_row(read: dict) -> dict:
    """One point's row of COLUMNS from what tables.chunk_alone_reads read of it."""
    pt, prompts = read["point"], read["prompts"]
    budget, n = int(pt.params["budget"]), int(pt.params["prompt_len"])
    steps = math.ceil(n / budget)
    untraced = [ttft_ms(r) for r in prompts.get("solo", [])[1:] if not r.get("error")]
    solo = statistics.median(untraced) if untraced else math.nan
    traced = ttft_ms(prompts.get("traced_solo"))
    split = family_split(read["summary"], read["kernels"])
    fam, busy = split["families"], float(read["summary"]["busy_ms"])
    chunk = {name: ms for name, ms in split["known"].items()
             if step_family(name) == "recurrent state (GDN)" and re.search(GDN_CHUNK, name.lower())}
    top = max(chunk.items(), key=lambda kv: kv[1]) if chunk else (None, math.nan)
    return {"rig": pt.rig, "model": pt.record.preset, "point": pt.name, "budget": budget, "prompt_len": n,
            "steps": steps, "untraced_prompts": len(untraced), "solo_ttft_ms": solo, "solo_chunk_step_ms": solo / steps,
            "traced_ttft_ms": traced, "profiler_ratio": traced / solo, "busy_per_step_ms": busy / steps,
            **{f"{FAMILY_KEYS[f]}_per_step_ms": fam[f] / steps for f in FAMILIES},
            "gdn_chunk_per_step_ms": sum(chunk.values()) / steps,
            "gdn_chunk_pct": 100 * sum(chunk.values()) / busy if busy else math.nan,
            "top_gdn_kernel": short_name(top[0]) if top[0] else None, "top_gdn_ms_per_step": top[1] / steps,
            "untraced_left_ms": solo / steps - busy / steps, "split_from": split["split_from"]}


def chunk_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """One row per traced prompt alone (see the module's docstring), by rig, model and budget."""
    rows = [chunk_row(r) for r in chunk_alone_reads(data_dir, rigs)]
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["rig", "model", "budget"]).reset_index(drop=True)


def chunk_words(table: pd.DataFrame, rig: str, model: str | None = None) -> str | None:
    """One sentence from the table alone: on `rig` (and `model`, default its first), at the smallest budget, the
    untraced chunk step alone and what its traced kernels were, the chunked Gated DeltaNet kernels named; None
    without a row."""
    t = table[(table["rig"] == rig) & ((table["model"] == model) if model else True)].dropna(
        subset=["solo_chunk_step_ms", "busy_per_step_ms"]) if len(table) else table
    if not len(t):
        return None
    r = t.sort_values("budget").iloc[0]
    said = (f"Traced alone on the idle server (the {int(r.prompt_len):,}-token prompt at budget {int(r.budget):,}, "
            f"{int(r.steps)} steps, no decode beside it), a chunk step took {sig(r.solo_chunk_step_ms)} ms untraced; "
            f"inside the profiler's window (which made the prompt {sig(r.profiler_ratio)}x as long) its kernels took "
            f"{sig(r.busy_per_step_ms)} ms a step: ")
    if r.gdn_per_step_ms > 0:  # a model with recurrent layers (the dense ones have none)
        said += (f"the chunked Gated DeltaNet prefill's own kernels {sig(r.gdn_chunk_per_step_ms)} ms "
                 f"({sig(r.gdn_chunk_pct)}% of the kernels"
                 + (f", the longest {r.top_gdn_kernel} with {sig(r.top_gdn_ms_per_step)} ms" if isinstance(
                     r.top_gdn_kernel, str) else "")
                 + f"), the rest of the recurrent-state family {sig(r.gdn_per_step_ms - r.gdn_chunk_per_step_ms)} ms, ")
    said += (f"the weight matmuls {sig(r.matmul_per_step_ms)} ms, attention {sig(r.attention_per_step_ms)} ms, "
             f"memory ops {sig(r.memory_per_step_ms)} ms and the rest {sig(r.other_per_step_ms + r.sampling_per_step_ms)} ms")
    return said + "."
