"""What each part runs: its default parameters and its plan of points. `run_request` is what `make reproduce`'s
notebook (notebook_run) and the `sweep` command call."""
from __future__ import annotations

import time
from pathlib import Path

from ..run.bench import Workload
from ..errors import UserError
from ..model.modelkit import model_spec, prepare_model
from ..run.rig import capture, check_gpu, load_profile
from .runrequest import RunRequest
from ..run.server import vllm_python
from ..records.store import DATA_DIR, REPO, check_run_rig, part_name, rig_dir, write_json_atomic
from ..run.sweep import SweepContext, SweepReport, dry_run_lines, refuse_changed, rig_start_estimate, run_sweep
from .protocol import Answers, answers_for
from .protocol import page_rigs  # noqa: F401 (the parts' name for it: notebooks call parts.page_rigs)
from .registry import (  # noqa: F401 (the registry's names, as parts' before it had a module of its own)
    MODEL_SOURCES, MODULES, PlannedRun, SERVE_ARGS, SERVER_ENV, _asked, _parameters, _plan, changed,
    check_profile_overrides, module, parameters, plan, planned, protocol_of, rig_pools, settings_source)


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
                       server_start_estimate_s=(request.start_estimate_s if request.start_estimate_s is not None
                                                else rig_start_estimate(request.data_dir / "runs", request.rig)))
    return run_sweep(plans, ctx)


def dry_run(part, rig: str, data_dir: Path | None = None, overrides: dict | None = None,
            points: list[str] | None = None, python: str | None = None) -> list[str]:
    """plan --dry-run: every session's `vllm serve` and every pass's `vllm bench serve` command line that a run of
    part `part` on rig `rig` would send, for the points not yet complete (or `points`), without preparing a model,
    starting a process or writing a file. `python` is the interpreter named in the lines (default: the one a run
    would use where it can be found, else `python3`)."""
    from ..records.store import is_complete

    mod = module(part)
    profile = load_profile(rig, data_dir).for_run(mod.NAME)
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
    RunRequest.to_params) and write its report where the request says; replay does nothing, and so does
    `reproduced` (a page rendered after a run for the run's rig, showing what the run's page shows: make reproduce's
    evidence page)."""
    if mode in ("replay", "reproduced"):
        return None
    if mode != "run":
        raise UserError(f"unknown mode {mode!r}; valid: replay, run, reproduced")
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
