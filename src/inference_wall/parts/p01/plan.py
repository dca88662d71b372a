"""Part 1's plan: its name and defaults, and the rate sweep it runs (a flood, then rates relative to the
flood's capacity or absolute), with the decode points at fixed batch and the cold and warm passes."""
from __future__ import annotations

import math

from ...errors import UserError
from ...records.store import request_throughput
from ...run.bench import PassSpec
from ...run.sweep import PassPlan, PointPlan, prompts_for_window
from ...schema import PUBLISHED_PRESET  # noqa: F401 (the posts' model, whose shapes data/models holds)


NAME = "01-hit-the-wall"


NOTEBOOK = "notebooks/01-hit-the-wall.md"


DEFAULTS = {
    "max_num_seqs": 256,
    "input_len": 256,
    "output_len": 128,
    "cold_rate_rps": 1.0,  # the series' cold vs warm comparison was at rate 1
    "cold_prompts": 24,
    "single_prompts": 8,  # one request at a time (--max-concurrency 1)
    "flood_prompts": 1024,
    "poll_s": 0.25,  # /metrics during the flood's measured pass (its steady window, steady.flood_steady)
    # Offered rates as fractions of the flood's completed req/s, so every rig gets the three regimes.
    "rate_fractions": [0.125, 0.25, 0.5, 0.75, 0.9, 1.1, 1.5, 2.0, 4.0],
    "rates_rps": None,  # absolute rates instead (e.g. the series' [1, 2, 4, 6, 8, 10, 16, 32])
    "target_window_s": 30.0,
    "min_prompts": 16,
    "max_prompts": 4096,
    "decode_batches": [1, 8, 16, 32, 64, 128, 256],  # fixed concurrency: pure decode between waves
    "decode_waves": 3,
}



def rate_point_name(rate: float, relative: bool) -> str:
    return f"rate-x{rate:.3f}" if relative else f"rate-{rate:g}rps"


def flood_capacity_rps(rig_dir) -> float:
    """Completed requests per second of the rig's flood point: what relative rates are fractions of."""
    try:
        return request_throughput(rig_dir / "flood")
    except (FileNotFoundError, KeyError, ValueError) as e:
        raise UserError(f"relative rates need the flood point first ({rig_dir / 'flood'}): {e}")


def plan(p: dict, profile, pools: dict | None = None) -> list[PointPlan]:
    mns = p["max_num_seqs"]
    session = f"main-mns-{mns}"

    def point(name, passes, params, **kw):
        return PointPlan(name=name, session=session, max_num_seqs=mns, passes=passes, params=params, **kw)

    seed = iter(range(1, 10_000))  # a fresh seed per measured pass on this server (prefix cache)
    cold = PassSpec(num_prompts=p["cold_prompts"], request_rate=p["cold_rate_rps"], seed=next(seed))
    plans = [
        point("cold-warm",
              [PassPlan("cold", "cold", cold),
               PassPlan("warmup", "warmup", PassSpec(num_prompts=min(512, 2 * mns), seed=9_000, detailed=False)),
               PassPlan("bench", "measured", PassSpec(num_prompts=p["cold_prompts"], request_rate=p["cold_rate_rps"],
                                                      seed=next(seed)))],
              {"kind": "cold-warm", "offered_rate_rps": p["cold_rate_rps"]}, cold_start=True),
        point("single", [PassPlan("bench", "measured", PassSpec(num_prompts=p["single_prompts"], max_concurrency=1,
                                                                 seed=next(seed)))],
              {"kind": "single", "max_concurrency": 1}),
        point("flood", [PassPlan("bench", "measured", PassSpec(num_prompts=p["flood_prompts"], seed=next(seed)))],
              {"kind": "rate", "offered_rate_rps": math.inf}, poll_metrics_s=float(p["poll_s"])),
    ]
    relative = not p["rates_rps"]
    for rate in (p["rate_fractions"] if relative else p["rates_rps"]):
        spec_seed = next(seed)

        def resolve(pt, ctx, rate=rate, spec_seed=spec_seed):
            capacity = flood_capacity_rps(ctx.rig_dir)
            absolute = rate * capacity if relative else rate
            n = prompts_for_window(absolute, capacity, p["target_window_s"], p["min_prompts"], p["max_prompts"])
            pt.passes = [PassPlan("bench", "measured", PassSpec(num_prompts=n, request_rate=absolute, seed=spec_seed))]
            pt.params.update({"offered_rate_rps": absolute, "capacity_rps": capacity})

        params = {"kind": "rate", "rate_fraction": rate if relative else None}
        plans.append(point(rate_point_name(rate, relative), [], params, resolve=resolve))
    for b in p["decode_batches"]:
        if b > mns:
            continue
        n = max(2 * b, p["decode_waves"] * b)
        plans.append(point(f"decode-b{b:03d}",
                           [PassPlan("bench", "measured", PassSpec(num_prompts=n, max_concurrency=b, seed=next(seed)))],
                           {"kind": "decode", "batch": b}))
    return plans
