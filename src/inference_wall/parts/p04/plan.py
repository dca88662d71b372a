"""Part 4's plan: its name and defaults, the page arithmetic of a pool (pages per request, the requests it
admits), and the pools, workloads and points it runs."""
from __future__ import annotations

import math

from ...errors import UserError
from ...model.kvcache import ModelLayout, NULL_BLOCKS
from ...model.modelshape import ModelShape
from ...run.bench import PassSpec, Workload
from ...run.sweep import PassPlan, PointPlan


NAME = "04-kv-starvation"


NOTEBOOK = "notebooks/04-kv-starvation.md"


DEFAULTS = {
    "max_num_seqs": 256,  # the series' cap: large pools are bounded by it, small ones by their pages
    "input_len": 256,
    "output_len": 128,  # the short workload (the series' 256 in / 128 out)
    "long_output_len": 1024,  # the long workload: 256 in / 1,024 out
    # The pools, in pages: sized so that this many short requests fit at once (admission limit), plus `pools`.
    "pool_limits": [512, 256, 64, 16],
    "pools": None,  # extra pools given in pages (e.g. the A10G's 586)
    "max_model_len": 4096,  # per pool: the smaller of this, the model's own limit, and what the pool holds
    "block_size": None,  # --block-size for every server (None: vLLM's choice; a dense model's default is 16)
    "waves": 4,  # short prompts per pass = waves x the running batch the pool admits (clamped)
    "long_waves": 2,  # the same for the long workload
    "min_prompts": 32,
    "max_prompts": 2048,
    "seed": 0,
    "small_preset": None,  # a dense model beside the hybrid one (its requests grow with every token)
    "small_pool_limits": None,  # its pools (default: pool_limits)
    "small_pools": None,  # extra pools for it, in pages
    "poll_interval_s": 0.5,  # /metrics polled this often during every measured pass
    # Fixed-rate passes of the short workload on every pool, beside the floods (None: floods only): requests a
    # second, each pass about rate_window_s long.
    "rates_rps": None,
    "rate_window_s": 20.0,
}


def pages(layout: ModelLayout, tokens: int, block: int) -> int:
    return layout.pages_per_request(tokens, block)


def admitted(pool: int, cap: int, layout: ModelLayout, block: int, prompt: int) -> int:
    """Requests a flood runs at once: the cap, or what the pool admits at their prompt's pages."""
    return min(cap, (pool - NULL_BLOCKS) // pages(layout, prompt, block))


def full_limit(pool: int, layout: ModelLayout, block: int, tokens: int) -> int:
    """Requests that fit at once at their full length (prompt + output)."""
    return (pool - NULL_BLOCKS) // pages(layout, tokens, block)


def fits(pool: int, cap: int, layout: ModelLayout, block: int, prompt: int, output: int) -> bool:
    """Whether every request the pool admits can grow to its full length without evicting another."""
    return admitted(pool, cap, layout, block, prompt) * pages(layout, prompt + output, block) <= pool - NULL_BLOCKS


def pool_for_limit(limit: int, layout: ModelLayout, block: int, tokens: int) -> int:
    """The smallest pool (pages) that holds `limit` requests of `tokens` at once."""
    return limit * pages(layout, tokens, block) + NULL_BLOCKS


def longest_request(pool: int, layout: ModelLayout, block: int) -> int:
    """The longest request (tokens) one pool can hold: vLLM refuses to start with a max_model_len above it
    (0.32 counts the null block, 0.22 does not: the smaller of the two is safe on both)."""
    per_attention = (pool - NULL_BLOCKS - layout.state_groups) // max(1, layout.attention_groups)
    return max(0, per_attention * block)


def block_size_for(preset: str, p: dict, data_dir=None) -> int:
    """The attention page size the pools are counted in: the parameter, else pools.block_size (a dense
    model's default; for a hybrid model, whose page vLLM derives from the state size, what a start of it
    logged, else the same derivation from its config)."""
    from ...model.pools import block_size

    if p["block_size"]:
        return int(p["block_size"])
    return block_size(preset, data_dir=data_dir)


def model_max_len(preset: str, data_dir=None) -> int:
    from ...model.modelshape import ModelShape

    return int(ModelShape.of(preset, data_dir).text.get("max_position_embeddings", 1 << 30))


def pool_max_model_len(pool: int, layout: ModelLayout, block: int, p: dict, model_limit: int, preset: str) -> int:
    """The max_model_len a pool's server gets; an error naming the pool when it cannot hold a long request."""
    need = p["input_len"] + max(p["output_len"], p["long_output_len"])
    holds = longest_request(pool, layout, block)
    length = min(int(p["max_model_len"]), model_limit, holds)
    if length < need:
        want = pages(layout, need, block) + NULL_BLOCKS
        raise UserError(f"a pool of {pool} pages holds requests of at most {holds:,} tokens ({preset}, {block}-token "
                        f"pages), but the long workload needs {need:,} (max_model_len >= {need:,}, which needs at "
                        f"least {want} pages); drop that pool or shorten long_output_len")
    return length


def point_name(pool: int, workload: str, small: bool = False) -> str:
    return f"{'small-' if small else ''}pool-{pool:05d}-{workload}"


def pools_for(p: dict, layout: ModelLayout, block: int, limits, extra) -> list[int]:
    """Pool sizes in pages, largest first: one per admission limit for the short workload, plus extras."""
    tokens = p["input_len"] + p["output_len"]
    sizes = {pool_for_limit(int(n), layout, block, tokens) for n in (limits or [])} | {int(n) for n in (extra or [])}
    if any(s <= NULL_BLOCKS for s in sizes):
        raise UserError(f"pool sizes must exceed {NULL_BLOCKS} page: {sorted(sizes)}")
    return sorted(sizes, reverse=True)


def prompts(p: dict, running: int, waves: int) -> int:
    return int(max(p["min_prompts"], min(p["max_prompts"], waves * running)))


def state_cap(cap: int, pool: int, layout: ModelLayout) -> int:
    """The max_num_seqs a pool's server gets. vLLM 0.22.1 refuses to start a model with recurrent (Mamba-style)
    layers whose decode runs in full CUDA graphs when max_num_seqs exceeds the pool's pages, since each decoding
    sequence holds a state page (config/compilation.py, "exceeds available Mamba cache blocks"): such a pool's
    server gets the pool as its cap. Every request holds two pages or more there, so the pool admits fewer than
    that anyway and the running batch is the same."""
    return min(cap, pool) if layout.state_groups else cap


def plan(p: dict, profile, pools: dict | None = None, data_dir=None) -> list[PointPlan]:
    for key in ("input_len", "output_len", "long_output_len", "max_num_seqs"):
        if int(p[key]) < 1:
            raise UserError(f"{key} must be at least 1, got {p[key]}")
    plans = []
    models = [(False, profile.model_preset, p["pool_limits"], p["pools"])]
    if p["small_preset"]:
        models.append((True, p["small_preset"], p["small_pool_limits"] or p["pool_limits"], p["small_pools"]))
    cap = int(p["max_num_seqs"])
    for small, preset, limits, extra in models:
        layout = ModelShape.of(preset, data_dir).layout
        block = block_size_for(preset, p, data_dir)
        model_limit = model_max_len(preset, data_dir)
        for pool in pools_for(p, layout, block, limits, extra):
            length = pool_max_model_len(pool, layout, block, p, model_limit, preset)
            mns = state_cap(cap, pool, layout)
            args = ["--num-gpu-blocks-override", str(pool), "--max-model-len", str(length)]
            if p["block_size"]:
                args += ["--block-size", str(int(p["block_size"]))]
            session = point_name(pool, "session", small)
            for workload, out, waves in (("short", p["output_len"], p["waves"]), ("long", p["long_output_len"], p["long_waves"])):
                running = admitted(pool, mns, layout, block, p["input_len"])
                spec = PassSpec(num_prompts=prompts(p, running, waves), seed=p["seed"])
                plans.append(PointPlan(
                    name=point_name(pool, workload, small), session=session, max_num_seqs=mns,
                    passes=[PassPlan("bench", "measured", spec)],
                    params={"pool_pages": pool, "workload": workload, "model": "small" if small else "main",
                            "block_size": block, "max_model_len": length, "input_len": p["input_len"],
                            "output_len": out},
                    preset=preset if small else None, serve_args=args, poll_metrics_s=p["poll_interval_s"],
                    workload=Workload(p["input_len"], out)))
            for rate in p["rates_rps"] or []:
                n = int(max(p["min_prompts"], min(p["max_prompts"], math.ceil(float(rate) * p["rate_window_s"]))))
                plans.append(PointPlan(
                    name=point_name(pool, f"short-r{float(rate):g}", small), session=session, max_num_seqs=mns,
                    passes=[PassPlan("bench", "measured", PassSpec(num_prompts=n, request_rate=float(rate),
                                                                   seed=p["seed"] + 1))],
                    params={"pool_pages": pool, "workload": "short", "model": "small" if small else "main",
                            "block_size": block, "max_model_len": length, "input_len": p["input_len"],
                            "output_len": p["output_len"], "offered_rate_rps": float(rate)},
                    preset=preset if small else None, serve_args=args, poll_metrics_s=p["poll_interval_s"],
                    workload=Workload(p["input_len"], p["output_len"])))
    return plans
