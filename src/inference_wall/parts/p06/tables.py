"""Part 6's tables: the only file of the part that reads the disk (its points and server starts, the GPU
prices, the model's shapes, whether the two-GPU rig is set up)."""
from __future__ import annotations

import pandas as pd

from .. import variants
from .plan import CONFIGS, CONFIG_LABELS, DEFAULTS, ENGINES, GPUS, NAME, SHARDS, TWO_GPU_RIG


# ---------------------------------------------------------------------------------------------
# Replay
# ---------------------------------------------------------------------------------------------
def page_tables(data_dir=None, rigs: list[str] | None = None) -> dict:
    """The rigs' points and server starts, the GPU prices, what the model's shapes predict per configuration
    (`predicted`, `heads`) and whether the two-GPU rig this part was planned on is set up here (`two_gpu_rig`)."""
    from ...records.reference import gpu_prices

    model = DEFAULTS["model"]
    return {"points": variants.point_table(data_dir, rigs, part=NAME, key="config"),
            "starts": variants.startup_table(data_dir, rigs, part=NAME, key="config"), "prices": gpu_prices(data_dir),
            "predicted": predicted_bytes(model, data_dir), "heads": sharded_heads(model, data_dir),
            "two_gpu_rig": two_gpu_rig_known(data_dir)}


def two_gpu_rig_known(data_dir=None) -> bool:
    """Whether this checkout has the profile of the two-GPU rig this part was planned on (TWO_GPU_RIG)."""
    from ...run.rig import load_profile

    try:
        load_profile(TWO_GPU_RIG, data_dir)
        return True
    except Exception:  # no such profile on this checkout: say only what is known
        return False


def predicted_bytes(model: str, data_dir=None) -> pd.DataFrame:
    """What each GPU streams per decode step in each configuration, from the shapes (no run needed): the whole
    16-bit model on one GPU or on each replica, half of it on each GPU of the tensor-parallel pair."""
    from ...model.modelshape import preset_decode_bytes

    gb = preset_decode_bytes(model, "fp16", data_dir).gb
    return pd.DataFrame([{"config": c, "label": CONFIG_LABELS[c], "gpus": GPUS[c], "engines": ENGINES[c],
                          "gb_per_gpu": gb / SHARDS[c]} for c in CONFIGS])


def sharded_heads(model: str, data_dir=None, ranks: int = 2) -> dict:
    """The heads tensor parallelism splits over `ranks` GPUs, from the model's config: attention's query and KV
    heads and the Gated DeltaNet's key and value heads (vLLM shards both kinds across the ranks, so each GPU holds
    that share of every sequence's KV cache and recurrent state)."""
    from ...model.modelshape import ModelShape

    t = ModelShape.of(model, data_dir).text
    heads = {"attention_heads": t.get("num_attention_heads"), "kv_heads": t.get("num_key_value_heads"),
             "gdn_key_heads": t.get("linear_num_key_heads"), "gdn_value_heads": t.get("linear_num_value_heads")}
    return {**heads, **{f"{k}_per_gpu": (v / ranks if v else None) for k, v in heads.items()}, "ranks": ranks}
