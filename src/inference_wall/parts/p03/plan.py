"""Part 3's plan: its name and defaults, the max_num_seqs caps it sweeps (the series' and the rig's own),
and the flood each cap's server runs."""
from __future__ import annotations

from ...run.bench import PassSpec
from ...run.sweep import PassPlan, PointPlan


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
    "poll_s": 0.25,  # /metrics during every flood's measured pass (its steady window, steady.flood_steady)
}


# A flood's steady window (steady.flood_steady): the running batch within 10% of the cap. Past cap 256 on h200 the
# batch holds at 92-100% of its cap while the refill admits about 30 prompts a step (polls of the cap-512 and
# cap-1,024 floods), under the 95% of the steady module's default.
STEADY_SHARE = 0.9


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
    """`pools`: the rig's KV pool per model preset where known (pools.rig_pool), for the automatic caps."""
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
                                   min_window_s=p["min_window_s"], max_prompts=p["max_prompts"],
                                   poll_metrics_s=float(p["poll_s"])))
    return plans
