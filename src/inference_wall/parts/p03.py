"""Part 3, the batching cliff: one server per max_num_seqs cap, each flooded after a warm-up."""
from __future__ import annotations

import math

import pandas as pd

from .. import analysis
from ..bench import PassSpec
from ..claims import Claim, around
from ..reference import load_reference
from ..schema import PUBLISHED_RIG
from ..store import load_points, pass_summary
from ..sweep import PassPlan, PointPlan

NAME = "03-batching-cliff"
NOTEBOOK = "notebooks/03-batching-cliff.md"

SERIES_CAPS = [1, 4, 16, 64, 256]  # the series' caps

DEFAULTS = {
    "caps": None,  # None: the series' caps, extended by doublings up to the rig's KV admission limit (caps_for)
    "max_cap": 4096,  # the largest cap an automatic list may reach
    "input_len": 256,
    "output_len": 128,
    "waves": 4,  # prompts per pass = waves x cap, clamped: each slot turns over `waves` times, and raised so
    # that the pass lasts min_window_s at the warm-up flood's throughput (at most max_prompts)
    "min_prompts": 32,
    "max_prompts": 4096,
    "seed": 0,  # the same prompts for every cap and every rig
    "small_preset": None,  # e.g. "qwen2.5-0.5b": the same sweep on a small model, for the cliff's height
    "small_caps": None,  # caps for the small model (default: caps)
    "min_window_s": 10.0,  # a measured pass shorter than this is flagged as too short to trust
}


# The post's "most of the lift comes by cap 64": the middle cap its claims compare against.
MID_CAP = 64
PLATEAU_GAIN = 0.05  # the plateau: the first cap after which a doubling adds less than this fraction


def prompts_for_cap(cap: int, p: dict) -> int:
    return int(max(p["min_prompts"], min(p["max_prompts"], p["waves"] * cap)))


def point_name(cap: int, small: bool = False) -> str:
    return f"{'small-' if small else ''}mns-{cap:03d}"


def caps_for(p: dict, pool=None) -> list[int]:
    """The caps to run: `caps` if given; else the series' caps below the rig's admission limit (requests of
    input+output tokens its KV pool holds at once), doubling past the series' top cap while under it, and
    ending with the first cap at or over it (where the pool, not the cap, bounds the batch). Without a
    known pool (no server started on the rig yet), the series' caps."""
    if p["caps"]:
        return [int(c) for c in p["caps"]]
    if pool is None:
        return list(SERIES_CAPS)
    limit = pool.admission_limit(p["input_len"] + p["output_len"])
    caps = [c for c in SERIES_CAPS if c < limit]
    cap = SERIES_CAPS[-1]
    while caps[-1:] == [cap] and cap < limit and cap * 2 <= p["max_cap"]:
        cap *= 2
        caps.append(cap)
    over = next((c for c in [*SERIES_CAPS, cap] if c >= limit), None)
    if over is not None and over not in caps and over <= p["max_cap"]:
        caps.append(over)
    return caps


def plan(p: dict, profile, pools: dict | None = None) -> list[PointPlan]:
    """`pools`: the rig's KV pool per model preset where known (kvcache.rig_pool), for the automatic caps."""
    pools = pools or {}
    plans = []
    main_caps = caps_for(p, pools.get(profile.model_preset))
    small_caps = (p["small_caps"] or caps_for(p, pools.get(p["small_preset"]))) if p["small_preset"] else []
    for small, caps in ((False, main_caps), (True, small_caps)):
        for cap in caps:
            name = point_name(cap, small)
            spec = PassSpec(num_prompts=prompts_for_cap(cap, p), seed=p["seed"])
            plans.append(PointPlan(name=name, session=name, max_num_seqs=cap,
                                   passes=[PassPlan("bench", "measured", spec)],
                                   params={"max_num_seqs": cap, "model": "small" if small else "main"},
                                   preset=p["small_preset"] if small else None,
                                   min_window_s=p["min_window_s"], max_prompts=p["max_prompts"]))
    return plans


# ---------------------------------------------------------------------------------------------
# Replay: tables, per-rig views and claims
# ---------------------------------------------------------------------------------------------


def sweep_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Published rows (rig a10g-published) and measured rows, one per (rig, model, cap)."""
    ref = load_reference(3, data_dir)["mns_sweep"].assign(model="main", source="published")
    rows = []
    for pt in load_points(NAME, data_dir, rigs):
        row = pass_summary(pt)
        row.update(model=pt.params.get("model", "main"), source="measured",
                   window_s=row["duration_s"], min_window_s=pt.manifest.get("parameters", {}).get("min_window_s", 0))
        rows.append(row)
    measured = pd.DataFrame(rows)
    table = pd.concat([ref, measured], ignore_index=True) if len(measured) else ref
    if rigs is not None:
        table = table[table["rig"].isin(rigs)]
    return table.sort_values(["rig", "model", "max_num_seqs"]).reset_index(drop=True)


def short_windows(table: pd.DataFrame) -> pd.DataFrame:
    """Measured passes shorter than the part's min_window_s: too short to call steady."""
    if "window_s" not in table:
        return table.iloc[0:0]
    m = table[table["source"] == "measured"]
    return m[m["window_s"] < m["min_window_s"]]


def rig_view(table: pd.DataFrame, rig: str, facts: dict | None = None, part1: dict | None = None) -> dict:
    main = table[(table["rig"] == rig) & (table["model"] == "main")].sort_values("max_num_seqs")
    small = table[(table["rig"] == rig) & (table["model"] == "small")].sort_values("max_num_seqs")
    caps = list(main["max_num_seqs"])
    by_cap = main.set_index("max_num_seqs")
    view = {"rig": rig, "sweep": main, "small": small, "caps": caps}
    if len(main) >= 2:
        top = caps[-1]
        view.update(
            cliff_ratio=analysis.cliff_ratio(main),
            plateau_cap=analysis.plateau_cap(main, PLATEAU_GAIN),
            ceiling_rps=float(by_cap.loc[top, "completed_rps"]),
            ceiling_tok_s=float(by_cap.loc[top, "output_tok_s"]),
            per_seq_ms_top=analysis.per_sequence_ms(by_cap.loc[top, "output_tok_s"]),
            itl_p50_ratio=float(by_cap.loc[top, "itl_p50_ms"] / by_cap.loc[caps[0], "itl_p50_ms"]),
            ttft_p50_first_s=float(by_cap.loc[caps[0], "ttft_p50_ms"]) / 1000,
        )
        if 1 in caps and MID_CAP in caps:
            view["lift_1_to_64"] = float(by_cap.loc[MID_CAP, "output_tok_s"] / by_cap.loc[1, "output_tok_s"])
        if MID_CAP in caps and top > MID_CAP:
            view["gain_64_to_256_pct"] = 100 * analysis.gain_between(main, MID_CAP, top)
        if math.isfinite(view["plateau_cap"]):
            view["per_seq_ms_plateau"] = analysis.per_sequence_ms(by_cap.loc[view["plateau_cap"], "output_tok_s"])
        if "running_max" in by_cap and not math.isnan(by_cap.loc[top, "running_max"]):
            view["running_top"] = float(by_cap.loc[top, "running_max"])
    if len(small) >= 2:
        view["small_cliff_ratio"] = analysis.cliff_ratio(small)
    if rig == PUBLISHED_RIG and facts:
        view.setdefault("running_top", facts.get("running_batch_plateau"))
    if part1 and part1.get("ceiling_rps") and view.get("ceiling_rps"):
        view["ceiling_vs_part1"] = view["ceiling_rps"] / part1["ceiling_rps"]
    return view


def reference_view(data_dir=None) -> dict:
    """The published numbers claims compare with: part 3's facts, plus ratios computed from its table."""
    f3 = load_reference(3, data_dir)["facts"]
    facts = dict(zip(f3["key"], f3["value"]))
    p1 = load_reference(1, data_dir)["rate_sweep"]
    pub = sweep_table(data_dir, [PUBLISHED_RIG])
    v = rig_view(pub, PUBLISHED_RIG)
    facts["published_itl_p50_ratio"] = v["itl_p50_ratio"]
    flood = p1[~p1["offered_rate_rps"].apply(math.isfinite)]
    facts["published_ceiling_vs_part1"] = v["ceiling_rps"] / float(flood["completed_rps"].iloc[0])
    facts.update(mid_cap=MID_CAP, plateau_gain_pct=100 * PLATEAU_GAIN)
    return facts


CLAIMS = [
    Claim("cliff", "From one request at a time to a full batch, output throughput rises about {batching_lift:g}x.", "x",
          lambda v: v.get("cliff_ratio"), around("batching_lift"), 0.10,
          "the height of the cliff is single-stream speed against the batched ceiling: a faster weight stream "
          "(more HBM bandwidth) or a cheaper per-sequence step moves both ends differently"),
    Claim("lift-1-64", "Most of the lift comes by cap {mid_cap} (about {lift_cap1_to_cap64:g}x).", "x",
          lambda v: v.get("lift_1_to_64"), around("lift_cap1_to_cap64"), 0.10,
          "where the plateau starts depends on the ratio of the fixed weight stream to the per-sequence cost"),
    Claim("flat-64-256", "From cap {mid_cap} to the top cap throughput grows by under {gain_cap64_to_cap256_max:g}%.", "%",
          lambda v: v.get("gain_64_to_256_pct"), lambda r: (-r["gain_cap64_to_cap256_max"], r["gain_cap64_to_cap256_max"]), 0.0,
          "on a rig with a larger fixed cost per step relative to the per-sequence cost the batch keeps paying past 64"),
    Claim("plateau", "The plateau starts near a batch of {plateau_batch:g} (less than {plateau_gain_pct:g}% more per doubling "
          "of the cap after it).",
          "seqs", lambda v: v.get("plateau_cap"), around("plateau_batch"), 0.0,
          "the plateau is where per-sequence work overtakes the shared weight read, which moves with the rig"),
    Claim("per-seq", "At the plateau each sequence costs about {per_seq_ms_per_token:g} ms per token (step time over running "
          "batch).",
          "ms", lambda v: v.get("per_seq_ms_top"), around("per_seq_ms_per_token"), 0.10,
          "per-sequence cost scales with the rig's speed: a faster GPU spends less time per sequence"),
    Claim("smoothness", "A full batch makes each stream choppier: median ITL at the top cap is several times that at cap 1.",
          "x", lambda v: v.get("itl_p50_ratio"), around("published_itl_p50_ratio"), 0.5,
          "how much a stream slows in a full batch depends on how much of the step the batch adds"),
    Claim("consistency", "The flood ceiling here matches part 1's flood ceiling on the same rig.", "x",
          lambda v: v.get("ceiling_vs_part1"), around("published_ceiling_vs_part1"), 0.10,
          "the two parts ran on different server starts; a difference beyond 10% would mean one of them is not steady"),
    Claim("small-cliff", "A {small_model_params:g}B model's cliff is steeper, about {small_model_batching_lift:g}x.", "x",
          lambda v: v.get("small_cliff_ratio"), around("small_model_batching_lift"), 0.20,
          "the small model's cliff depends on how far its tiny weight stream can be amortised on this rig"),
]
