"""Part 6's plan: its name, defaults and configurations (one GPU, tensor parallel, two replicas), and the
points each configuration's server runs."""
from __future__ import annotations

from .. import variants
from ...errors import UserError
from ...run.sweep import PointPlan


NAME = "06-past-one-gpu"


NOTEBOOK = "notebooks/06-past-one-gpu.md"


CONFIGS = ("tp1", "tp2", "dp2")


CONFIG_SERVE_ARGS = {"tp1": [], "tp2": ["--tensor-parallel-size", "2"], "dp2": ["--data-parallel-size", "2"]}


GPUS = {"tp1": 1, "tp2": 2, "dp2": 2}  # GPUs a configuration's server takes


ENGINES = {"tp1": 1, "tp2": 1, "dp2": 2}  # engines the client's requests spread over


SHARDS = {"tp1": 1, "tp2": 2, "dp2": 1}  # GPUs one engine's weights are split across


CONFIG_LABELS = {"tp1": "one GPU", "tp2": "tensor parallel, 2 GPUs", "dp2": "2 replicas (data parallel), 2 GPUs"}


BASE = "tp1"


# A step is read from the median time per output token after the first (TPOT): with two API servers a client can
# receive a stream's tokens in bunches (gaps of microseconds, then one long one), which pulls the median ITL far
# below the step while TPOT, (latency - TTFT) / (tokens - 1), still spans the stream's whole decode.
STEP = "tpot_p50_ms"


BUNCHED = 0.5  # a decode pass whose median ITL is under this share of its median TPOT received its tokens bunched


DEFAULTS = {
    "model": "qwen3.5-9b",  # part 5's model in 16 bits: the one whose weight stream a second GPU should split
    "configs": list(CONFIGS),  # run in this order (each its own server)
    "skip_configs": {},  # config -> why this rig cannot serve it: left out of the plan, named on the page
    "config_args": {},  # config -> extra `vllm serve` flags this rig needs for it (the CPU build's TP: mp executor)
    "config_env": {},  # config -> server environment this rig needs for it (the CPU build: one thread per worker)
    "max_num_seqs": 256,  # per engine: replicas admit twice as many sequences in all
    "input_len": 256,
    "output_len": 128,
    "single_prompts": 8,
    "decode_batches": [1, 8, 32, 64, 128, 256],  # the client's concurrency; replicas split it between them
    "decode_waves": 3,
    "fit_max_batch": 128,  # per engine, as part 5's fit
    "waves": 4,  # a flood's prompts = waves x cap x engines, within min/max
    "min_prompts": 32,
    "max_prompts": 4096,
    "min_window_s": 10.0,
    "seed": 0,
    "poll_s": 0.25,  # /metrics during the flood's measured pass (its steady window, steady.flood_steady)
}


BAND = variants.BAND


def run_configs(p: dict) -> list[str]:
    unknown = [c for c in [*p["configs"], *p["skip_configs"], *p["config_args"], *p["config_env"]] if c not in CONFIGS]
    if unknown:
        raise UserError(f"unknown configuration(s) {', '.join(map(repr, unknown))}; valid: {', '.join(CONFIGS)}")
    return [c for c in p["configs"] if c not in p["skip_configs"]]


def gpus_needed(p: dict) -> int:
    """The GPUs one server of this plan takes at the most (make reproduce refuses a machine with fewer)."""
    return max((GPUS[c] for c in run_configs(p)), default=1)


def served_presets(p: dict, profile) -> list[str]:
    return [p["model"]]


def serve_args(cfg: str, p: dict) -> list[str]:
    return [*CONFIG_SERVE_ARGS[cfg], *[str(a) for a in p["config_args"].get(cfg, [])]]


def plan(p: dict, profile, pools: dict | None = None) -> list[PointPlan]:
    """One server per configuration, in order: its single stream, decode at each concurrency (up to the cap
    of all its engines), and a flood at the cap."""
    mns = int(p["max_num_seqs"])
    plans: list[PointPlan] = []
    for cfg in run_configs(p):
        params = {"config": cfg, "model": p["model"], "gpus": GPUS[cfg], "engines": ENGINES[cfg]}
        mine = [*variants.stream_points(cfg, p, p["model"], serve_args(cfg, p), params, most=mns * ENGINES[cfg]),
                variants.flood_point(cfg, mns, f"{cfg}-main", p, p["model"], serve_args(cfg, p), engines=ENGINES[cfg],
                                params=params)]
        env = {str(k): str(v) for k, v in (p["config_env"].get(cfg) or {}).items()}
        for point in mine:
            point.serve_env = dict(env)
        plans += mine
    return plans


# ----------------------------------------------------------------------------------------- what the page says
TWO_GPU_RIG = "h200-x2"  # the rig this part was planned on (data/rigs): two H200s of one host
