"""What each part runs: its default parameters and its plan of points. `run_request` is what `make reproduce`'s
notebook (notebook_run) and the `sweep` command call."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..run.bench import Workload
from ..errors import UserError
from ..model.modelkit import model_spec, prepare_model
from ..run.rig import RigProfile, capture, check_gpu, load_profile
from .runrequest import RunRequest
from ..run.server import vllm_python
from ..records.store import DATA_DIR, REPO, check_run_rig, part_name, rig_dir, write_json_atomic
from ..run.sweep import (PointPlan, SettingsSource, SweepContext, SweepReport, changed_outside, changed_points,
                     dry_run_lines, refuse_changed, rig_start_estimate, run_sweep)
from . import p00, p01, p02, p03, p04, p05, p06
from .protocol import Answers, Part, answers_for, parameters_for, pools_for
from .protocol import page_rigs  # noqa: F401 (the parts' name for it: notebooks call parts.page_rigs)

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
    from .runrequest import parameter_errors

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


def planned(request: RunRequest, profile: RigProfile | None = None) -> PlannedRun:
    """The plan of `request` (its rig's `profile`, loaded here when not given)."""
    mod = module(request.part)
    profile = profile or load_profile(request.rig, request.data_dir)
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


def run(part, rig: str, data_dir: Path | None = None, model_source: str | None = None,
        points: list[str] | None = None, budget_min: float | None = None, python: str | None = None,
        overrides: dict | None = None, progress: bool = True, measure_bandwidth: bool = True) -> SweepReport:
    """Run (or resume) part `part` on rig `rig`: every point not yet complete, within the time budget."""
    request = RunRequest(part=part_name(part), rig=check_run_rig(rig), data_dir=Path(data_dir or DATA_DIR),
                         model_source=model_source, points=tuple(points) if points else None,
                         budget_min=budget_min, python=python, overrides=dict(overrides or {}))
    return run_request(request, progress=progress, measure_bandwidth=measure_bandwidth)


def run_request(request: RunRequest, progress: bool = True, measure_bandwidth: bool = True) -> SweepReport:
    """Run (or resume) what `request` asks for, planned once (the plan validating it built, where it has one)."""
    run_plan = request.planned or planned(request)
    profile, params, plans = run_plan.profile, run_plan.params, run_plan.plans
    if not request.redo_changed:  # the whole plan's points and the folder's others (a caller without the CLI's check)
        refuse_changed(changed(run_plan, request.rig_dir), request.rig_dir)
    python = vllm_python(request.python)
    presets = {p.preset or profile.model_preset for p in plans}
    models = {pre: prepare_model(pre, REPO / "_build" / "models" / f"{pre}-{profile.model_source}",
                                 source=profile.model_source, data_dir=request.data_dir) for pre in presets}
    rig_info = capture(python, bandwidth=measure_bandwidth, env=profile.env)
    check_gpu(profile, rig_info)
    rig_info["captured"] = time.time()
    ctx = SweepContext(part=request.part, rig=profile, rig_dir=request.rig_dir, python=python,
                       models=models, workload=Workload(params["input_len"], params["output_len"]),
                       rig_info=rig_info, budget_s=request.budget_min * 60 if request.budget_min else None,
                       serve_args=list(SERVE_ARGS), server_env=dict(SERVER_ENV), progress=progress,
                       extra_manifest={"parameters": params}, redo_changed=request.redo_changed,
                       lock_holder=request.lock_holder, allow_shared=request.allow_shared,
                       server_start_estimate_s=rig_start_estimate(request.data_dir / "runs", request.rig))
    return run_sweep(plans, ctx)


def dry_run(part, rig: str, data_dir: Path | None = None, overrides: dict | None = None,
            points: list[str] | None = None, python: str | None = None) -> list[str]:
    """plan --dry-run: every session's `vllm serve` and every pass's `vllm bench serve` command line that a run of
    part `part` on rig `rig` would send, for the points not yet complete (or `points`), without preparing a model,
    starting a process or writing a file. `python` is the interpreter named in the lines (default: the one a run
    would use where it can be found, else `python3`)."""
    from ..records.store import is_complete

    mod = module(part)
    profile = load_profile(rig, data_dir)
    params = _parameters(mod.PART, profile, overrides)
    plans = _plan(mod, params, profile, data_dir)
    folder = rig_dir(mod.NAME, rig, data_dir)
    plans = _asked(plans, points, mod.NAME) if points else [p for p in plans if not is_complete(folder / p.name)]
    if python is None:
        try:
            python = vllm_python(None)
        except UserError:
            python = "python3"
    presets = {p.preset or profile.model_preset for p in plans}
    models = {pre: model_spec(pre, REPO / "_build" / "models" / f"{pre}-{profile.model_source}",
                              source=profile.model_source, data_dir=data_dir) for pre in presets}
    ctx = SweepContext(part=mod.NAME, rig=profile, rig_dir=folder, python=python, models=models,
                       workload=Workload(params["input_len"], params["output_len"]),
                       serve_args=list(SERVE_ARGS), server_env=dict(SERVER_ENV), progress=False)
    return dry_run_lines(plans, ctx) if plans else [f"# every point of part {mod.NAME} on {rig} is complete"]


def answers(part, data_dir: Path | None = None, shown: list[str] | None = None) -> Answers:
    """What the other parts' runs say on part `part`'s page (protocol.answers_for over every part's PART): the
    paragraphs answering its open questions, and its measurements against their models on the rigs `shown`
    (its page's rigs where None)."""
    name = part_name(part)
    shown = list(shown) if shown is not None else page_rigs(name, data_dir)
    return answers_for(name, [m.PART for m in MODULES.values() if m.NAME != name], data_dir, shown)


def unfinished_note(part, data_dir: Path | None = None, rigs: list[str] | None = None) -> str | None:
    """A line for a part's page naming the points of the shown rigs that exist but did not complete (failed or
    interrupted runs keep a manifest saying so); the page leaves them out, `make reproduce` resumes them."""
    from ..schema import PARTS
    from ..records.store import iter_points, part_name

    left = [(rig, point.name, (m or {}).get("status", "incomplete"), " ".join(str((m or {}).get("error") or "").split()))
            for _, rig, point, m in iter_points(data_dir, part, complete_only=False)
            if (rigs is None or rig in rigs) and (m or {}).get("status") != "complete"]
    if not left:
        return None
    number = next(n for n, name in PARTS.items() if name == part_name(part))
    items = ", ".join(f"{rig} {name} ({status}{': ' + error[:80] if error else ''})" for rig, name, status, error in left)
    return (f"**Not shown:** points whose run did not complete: {items}. "
            f"`make reproduce PART={number} RIG=<rig>` resumes them; complete points are kept.")


def notebook_run(part, mode: str, request_params: dict | None) -> SweepReport | None:
    """The run-mode cell of a part's notebook: run (or resume) the sweep that `make reproduce` asked for (its
    RunRequest.to_params) and write its report where the request says; replay does nothing."""
    if mode == "replay":
        return None
    if mode != "run":
        raise UserError(f"unknown mode {mode!r}; valid: replay, run")
    if not request_params:
        raise UserError("mode='run' needs run_request (make reproduce builds it from its command line)")
    request = RunRequest.from_params(request_params)
    if request.part != module(part).NAME:
        raise UserError(f"the run request is for part {request.part}, this notebook is part {module(part).NAME}")
    report = run_request(request)
    print(f"{request.part} on {request.rig}: " + "\n".join(report.summary()))
    if request.report_path:
        write_json_atomic(Path(request.report_path), report.to_dict())
    return report
