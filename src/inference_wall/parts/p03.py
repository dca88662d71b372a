"""Part 3, the batching cliff: one server per max_num_seqs cap, each flooded after a warm-up."""
from __future__ import annotations

from ..bench import PassSpec
from ..sweep import PassPlan, PointPlan

NAME = "03-batching-cliff"
NOTEBOOK = "notebooks/03-batching-cliff.md"

DEFAULTS = {
    "caps": [1, 4, 16, 64, 256],
    "input_len": 256,
    "output_len": 128,
    "waves": 4,  # prompts per pass = waves x cap, clamped: each slot turns over `waves` times
    "min_prompts": 32,
    "max_prompts": 1024,
    "seed": 0,  # the same prompts for every cap and every rig
    "small_preset": None,  # e.g. "qwen2.5-0.5b": the same sweep on a small model, for the cliff's height
    "small_caps": None,  # caps for the small model (default: caps)
    "min_window_s": 10.0,  # a measured pass shorter than this is flagged as too short to trust
}


def prompts_for_cap(cap: int, p: dict) -> int:
    return int(max(p["min_prompts"], min(p["max_prompts"], p["waves"] * cap)))


def point_name(cap: int, small: bool = False) -> str:
    return f"{'small-' if small else ''}mns-{cap:03d}"


def plan(p: dict, profile) -> list[PointPlan]:
    plans = []
    for small, caps in ((False, p["caps"]), (True, p["small_caps"] or p["caps"] if p["small_preset"] else [])):
        for cap in caps:
            name = point_name(cap, small)
            spec = PassSpec(num_prompts=prompts_for_cap(cap, p), seed=p["seed"])
            plans.append(PointPlan(name=name, session=name, max_num_seqs=cap,
                                   passes=[PassPlan("bench", "measured", spec)],
                                   params={"max_num_seqs": cap, "model": "small" if small else "main"},
                                   preset=p["small_preset"] if small else None))
    return plans
