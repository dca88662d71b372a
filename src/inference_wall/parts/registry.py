"""The registry of parts: every part's module by name (MODULES) and what the runner asks of a part through it, its
PART (parts/protocol.py): its parameters on a rig, its plan with the rig's KV pools, a run request's plan and the
complete points it would make otherwise. It imports every part and is imported by none of them."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ..run.bench import Workload
from ..errors import UserError
from ..run.rig import RigProfile, load_profile
from ..records.store import DATA_DIR, part_name
from ..run.sweep import PointPlan, SettingsSource, changed_outside, changed_points
from . import p00, p01, p02, p03, p04, p05, p06
from .protocol import Part, parameters_for, pools_for


MODULES = {p00.NAME: p00, p01.NAME: p01, p02.NAME: p02, p03.NAME: p03, p04.NAME: p04, p05.NAME: p05, p06.NAME: p06}


SERVE_ARGS = ["--dtype", "float16"]  # the series served fp16; a rig profile may override (later flags win)


# Logging only: a stats line every second (default 10 s), so a 30 s pass shows its running batch over time.
SERVER_ENV = {"VLLM_LOG_STATS_INTERVAL": "1"}


MODEL_SOURCES = ("dummy", "hub")


def module(part) -> object:
    return MODULES[part_name(part)]


def protocol_of(part) -> Part:
    """What the runner calls on a part (parts/protocol.py): its module's PART."""
    return module(part).PART


def _parameters(spec: Part, profile, overrides: dict | None = None) -> dict:
    """The part's defaults, then the rig profile's overrides, then the caller's; unknown keys are errors."""
    return parameters_for(spec.name, spec.defaults, profile, overrides)


def parameters(part, rig: str, data_dir: Path | None = None, overrides: dict | None = None) -> dict:
    """The part's defaults, then the rig profile's overrides, then the caller's; unknown keys are errors."""
    return _parameters(protocol_of(part), load_profile(rig, data_dir), overrides)


def check_profile_overrides(profile, data_dir: Path | None = None) -> None:
    """A rig profile's overrides name only known parameters, of every part it overrides (not only the one run), each
    of its default's kind (runrequest.parameter_errors: the rule --set follows); a problem names the file."""
    from .parameterkinds import parameter_errors

    for part in profile.overrides:
        spec = protocol_of(part)
        _parameters(spec, profile)
        errors = parameter_errors(spec.defaults, profile.for_part(spec.name))
        if errors:
            path = Path(data_dir or DATA_DIR) / "rigs" / f"{profile.name}.json"
            raise UserError(f"{path}: overrides of part {spec.name}: {'; '.join(errors)}")


def rig_pools(part, profile, params: dict, data_dir: Path | None = None) -> dict:
    """The rig's KV pool per model preset the part serves, where known (see pools.rig_pool)."""
    spec = protocol_of(part)
    # in the part's order (part 5's 9B: not the rig's model)
    return pools_for(spec.name, spec.served_presets(params, profile), profile, data_dir)


def _plan(mod, params: dict, profile, data_dir: Path | None = None):
    # every part's plan takes the data dir (part 2's knee points read part 1's knee; most ignore it)
    return mod.PART.plan(params, profile, rig_pools(mod.NAME, profile, params, data_dir), data_dir)


def plan(part, rig: str, data_dir: Path | None = None, overrides: dict | None = None):
    mod = module(part)
    profile = load_profile(rig, data_dir)
    return _plan(mod, _parameters(mod.PART, profile, overrides), profile, data_dir)


def _asked(plans: list[PointPlan], points, part: str) -> list[PointPlan]:
    """The plan's points that `points` names, in the asked order; every point without `points`."""
    if not points:
        return plans
    valid = [p.name for p in plans]
    unknown = [p for p in points if p not in valid]
    if unknown:
        raise UserError(f"unknown point(s) {', '.join(unknown)} for part {part}; valid: {', '.join(valid)}")
    return sorted((p for p in plans if p.name in points), key=lambda p: list(points).index(p.name))


@dataclass(frozen=True)
class PlannedRun:
    """A run request's plan: the rig's profile (with the request's model source), the part's parameters, and the
    points asked for, in the asked order; `every_point`, the whole plan (--points picks from it)."""
    profile: RigProfile
    params: dict
    plans: list[PointPlan]
    every_point: list[PointPlan]


def planned(request: "RunRequest", profile: RigProfile | None = None) -> PlannedRun:
    """The plan of `request` (its rig's `profile`, loaded here when not given)."""
    mod = module(request.part)
    profile = (profile or load_profile(request.rig, request.data_dir)).for_run(mod.NAME)
    if request.model_source:
        if request.model_source not in MODEL_SOURCES:
            raise UserError(f"unknown model source {request.model_source!r}; valid: {', '.join(MODEL_SOURCES)}")
        profile = replace(profile, model_source=request.model_source)
    params = _parameters(mod.PART, profile, request.overrides)
    every_point = _plan(mod, params, profile, request.data_dir)
    return PlannedRun(profile, params, _asked(every_point, request.points, mod.NAME), every_point)


def settings_source(profile, params: dict) -> SettingsSource:
    """What, besides a point, shapes how the part's points are made (sweep.SettingsSource)."""
    return SettingsSource(list(SERVE_ARGS), dict(SERVER_ENV), profile,
                          Workload(params["input_len"], params["output_len"]))


def changed(run: PlannedRun, folder: Path) -> dict[str, list[str]]:
    """The complete points in `folder` that the whole plan (not only the points asked for) would make otherwise
    (sweep.changed_points), and those outside it made otherwise in what all the part's points share
    (sweep.changed_outside): a partial run cannot leave the folder holding two settings."""
    src = settings_source(run.profile, run.params)
    return {**changed_points(run.every_point, folder, src), **changed_outside(run.every_point, folder, src)}
