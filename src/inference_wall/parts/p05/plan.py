"""Part 5's plan: its name, defaults and formats (the 9B in fp16, fp8 and 4-bit GPTQ, and the rig's own
16-bit model as the reference), and the points each format's server runs."""
from __future__ import annotations

from ...errors import UserError
from ...model.weightbytes import FORMATS
from ...run.sweep import PointPlan
from ..variants import flood_point, point_name, stream_points


NAME = "05-four-bits"


NOTEBOOK = "notebooks/05-four-bits.md"


DEFAULTS = {
    "model": "qwen3.5-9b",  # the 16-bit preset; the 4-bit one is "<model>-gptq-int4" (a quantization_config)
    "formats": ["fp16", "int4", "fp8"],  # run in this order (each its own server)
    "skip_formats": {},  # format -> why this rig cannot serve it: left out of the plan, named on the page
    "max_num_seqs": 256,  # each format's main server: single stream, decode batches, and the top flood
    "caps": [64],  # further caps of part 3's sweep, each its own server per format (after every main server)
    "input_len": 256,
    "output_len": 128,
    "single_prompts": 8,  # one request at a time (--max-concurrency 1)
    "decode_batches": [1, 8, 32, 64, 128, 256],  # fixed concurrency: pure decode between waves
    "decode_waves": 3,
    "fit_max_batch": 128,  # the per-sequence cost: the step fit's slope over decode batches up to this one (where the
    # step still grows by a fixed cost per sequence; past it the 4B's H200 steps bend upward as the arithmetic binds)
    "reference_session": True,  # one more server in this part's run: the rig's own model (its profile's preset) in
    # 16 bits, single stream and decode batches, so the reference shares the run's session (not parts 1/3's)
    "waves": 4,  # a flood's prompts = waves x cap, within min/max, raised to last min_window_s (as part 3)
    "min_prompts": 32,
    "max_prompts": 4096,
    "min_window_s": 10.0,
    "seed": 0,  # a flood's prompts: the same for every cap, format and rig (and part 3's)
    "poll_s": 0.25,  # /metrics during every flood's measured pass (its steady window, steady.flood_steady)
}


FORMAT_SERVE_ARGS = {"fp16": [], "int4": [], "fp8": ["--quantization", "fp8"]}


FORMAT_LABELS = {"fp16": "16-bit", "fp8": "fp8 (online, W8A8)", "int4": "4-bit GPTQ"}  # int4: + its group (rig_view)


REFERENCE = "ref"  # the rig's own model in 16 bits: this part's reference server, else parts 1/3


def variant_preset(model: str, fmt: str) -> str:
    if fmt not in FORMATS:
        raise UserError(f"unknown weight format {fmt!r}; valid: {', '.join(FORMATS)}")
    return f"{model}-gptq-int4" if fmt == "int4" else model


def run_formats(p: dict) -> list[str]:
    for fmt in [*p["formats"], *p["skip_formats"]]:
        variant_preset(p["model"], fmt)  # validates the name
    return [f for f in p["formats"] if f not in p["skip_formats"]]


def served_presets(p: dict, profile) -> list[str]:
    """The presets this part's servers load: each format's variant, and the rig's own model for the reference
    server (not the rig's model alone, as in the other parts)."""
    out = [variant_preset(p["model"], fmt) for fmt in run_formats(p)]
    ref = getattr(profile, "model_preset", None)
    if p.get("reference_session") and ref and ref != p["model"]:
        out.append(ref)
    return list(dict.fromkeys(out))


def plan(p: dict, profile, pools: dict | None = None) -> list[PointPlan]:
    """Every format's main server first (single, decode batches, the top-cap flood), then the other caps."""
    mns = int(p["max_num_seqs"])
    fmts = run_formats(p)
    plans: list[PointPlan] = []

    def flood(fmt: str, cap: int, session: str) -> PointPlan:
        return flood_point(fmt, cap, session, p, variant_preset(p["model"], fmt), FORMAT_SERVE_ARGS[fmt],
                           params={"format": fmt, "model": p["model"]})

    for fmt in fmts:  # the flood keeps p["seed"], the same for every cap, format and rig
        plans += stream_points(fmt, p, variant_preset(p["model"], fmt), FORMAT_SERVE_ARGS[fmt],
                               {"format": fmt, "model": p["model"]})
        plans.append(flood(fmt, mns, f"{fmt}-main"))
    ref_preset = getattr(profile, "model_preset", None)
    if p.get("reference_session") and ref_preset and ref_preset != p["model"]:
        plans += stream_points(REFERENCE, p, ref_preset, [], {"format": REFERENCE, "model": ref_preset})
    for fmt in fmts:
        for cap in sorted(int(c) for c in p["caps"]):
            if cap != mns:
                plans.append(flood(fmt, cap, point_name(fmt, f"mns-{cap:03d}")))
    return plans
