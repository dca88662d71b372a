"""The part protocol: what every part module offers the runner, one signature per job. Each module ends with
`PART = Part(...)` built from its own functions; parts/__init__.py and the CLI call these fields and probe nothing.

Only the jobs every part does with one signature are here: planning (what to run), the presets its servers load,
and the GPUs one of its servers takes. A page's tables, view, claims, findings and closing words differ from part
to part in their arguments and their kind (a part's notebook calls its own), so they are not fields."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..sweep import PointPlan


def rig_presets(params: dict, profile) -> list[str]:
    """The presets a part's servers load unless it says otherwise: the rig's model, and the part's small model
    (`small_preset`) where it has one."""
    return [pre for pre in dict.fromkeys([profile.model_preset, params.get("small_preset")]) if pre is not None]


def one_gpu(params: dict) -> int:
    """The GPUs one server takes unless the part says otherwise."""
    return 1


def without_data_dir(plan: Callable[..., list[PointPlan]]) -> Callable[..., list[PointPlan]]:
    """The protocol's plan for a part whose plan reads no earlier runs (it takes no data dir)."""
    def planned(params: dict, profile, pools: dict | None, data_dir: Path | None) -> list[PointPlan]:
        return plan(params, profile, pools=pools)
    return planned


@dataclass(frozen=True)
class Part:
    """One part, as the runner sees it.

    name: the part's folder name (the module's NAME).
    defaults: its default parameters (the module's DEFAULTS, the same dict).
    plan(params, profile, pools, data_dir) -> the points to run, in order.
    served_presets(params, profile) -> the model presets its servers load (the rig's KV pool is read for each).
    gpus_needed(params) -> the GPUs one of its servers takes at the most (make reproduce refuses fewer)."""
    name: str
    defaults: dict
    plan: Callable[[dict, object, dict | None, Path | None], list[PointPlan]]
    served_presets: Callable[[dict, object], list[str]] = rig_presets
    gpus_needed: Callable[[dict], int] = one_gpu
