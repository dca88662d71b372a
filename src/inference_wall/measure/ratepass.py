"""What one pass at a fixed offered rate shows in vLLM's stats lines (one a second): generation throughput in the
intervals that also prefilled arriving prompts against those of decode alone, beside the generation rate the offered
load needs. Part 1 reads its rate sweep with it, part 2 its knee points and part 1's pass at the same rate."""
from __future__ import annotations

import math

MIXED_COLUMNS = ["rig", "point", "offered_rate_rps", "needed_gen_tok_s", "gen_with_prefill_tok_s",
                 "gen_decode_only_tok_s", "intervals_with_prefill_pct", "intervals", "decode_only_intervals",
                 "running_median", "max_num_seqs"]


def mixed_split(pt, rate: float) -> dict | None:
    """One rate pass, from vLLM's stats lines (one per second): generation throughput in intervals that also
    prefilled arriving prompts against intervals of decode alone, beside the generation rate the offered load needs
    (offered requests a second x output tokens). None when no interval had a running batch."""
    st = pt.stats_during()
    busy = st[st["running"] > 0] if len(st) else st
    if not len(busy):
        return None
    mixed, alone = busy[busy["prompt_tok_s"] > 0], busy[busy["prompt_tok_s"] == 0]
    return {"rig": pt.rig, "point": pt.name, "offered_rate_rps": rate,
            "needed_gen_tok_s": rate * pt.record.workload["output_len"],
            "gen_with_prefill_tok_s": mixed["gen_tok_s"].median() if len(mixed) else math.nan,
            "gen_decode_only_tok_s": alone["gen_tok_s"].median() if len(alone) else math.nan,
            "intervals_with_prefill_pct": 100 * len(mixed) / len(busy),
            "intervals": len(busy), "decode_only_intervals": len(alone),
            "running_median": busy["running"].median(),
            "max_num_seqs": pt.record.max_num_seqs}
