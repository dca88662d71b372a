"""One run request: what `reproduce` and `sweep` are asked to run, built once from the command line and validated
once (as vLLM's benchmarks/sweep does with its Args dataclass: add_cli_args / from_cli_args), then handed whole
to the notebook's kernel as one papermill parameter (to_params / from_params, which trusts it)."""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from ..errors import UserError
from ..schema import PARTS
from ..records.store import DATA_DIR, check_run_rig, part_name, rig_dir
from .parameterkinds import UNSET_DEFAULT_LIKE, parameter_errors  # noqa: F401 (runrequest's names for them)


def parts_help() -> str:
    return ", ".join(f"{n} ({name})" for n, name in PARTS.items())


def parse_overrides(items: list[str]) -> dict:
    """--set KEY=JSON items as {key: value}."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set needs KEY=JSON, got {item!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            raise UserError(f"--set {key}: value {value!r} is not JSON (quote strings: {key}='\"x\"')") from None
    return out


def data_folder(path: Path) -> Path:
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"--data-dir {path}: a file, not a folder (give the data folder that holds runs/, rigs/ and "
                        f"models/, e.g. the repository's data/)")
    if not path.exists():  # before: judged as a rig with no profile ("unknown model preset", "not a CPU rig")
        raise UserError(f"--data-dir {path}: no such folder (give the data folder that holds runs/, rigs/ and "
                        f"models/, e.g. the repository's data/ or a copy of it)")
    return path.resolve()


def check_python(python: str | None) -> None:
    """--python names an interpreter that exists and finds vllm (without importing it: a second at most)."""
    import shutil

    from ..run.gpuenv import has_vllm

    if python is None:
        return
    exe = shutil.which(python)
    if exe is None:
        raise UserError(f"--python {python}: no such executable (give the interpreter of a venv with vLLM, e.g. "
                        f".venv-vllm/bin/python)")
    if not has_vllm(exe):
        raise UserError(f"--python {python}: this interpreter cannot import vllm (make vllm-cpu builds "
                        f".venv-vllm/bin/python; make vllm-gpu builds .venv-vllm-gpu/bin/python)")


def check_every_profile(data_dir: Path) -> None:
    """Every rig profile in `data_dir`/rigs, as the pages will read them after a run (a part's page reads the
    profiles of the rigs it shows, the rigs page all of them): against its schema, and its overrides' names and
    kinds; the first problem is one line naming the file."""
    from . import registry as parts
    from ..run.rig import known_profiles, load_profile

    for name in known_profiles(data_dir):
        parts.check_profile_overrides(load_profile(name, data_dir), data_dir)


def _planned_with_overrides(request: RunRequest, profile):
    """parts.planned, where a --set value of the right kind that the part's plan still cannot use (a list of
    strings for a list of numbers) is one line naming the values, not a traceback."""
    from . import registry as parts

    try:
        planned = parts.planned(request, profile)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
        if not request.overrides:
            raise
        raise UserError(f"--set {json.dumps(request.overrides)}: part {request.part} cannot plan with these values "
                        f"({type(e).__name__}: {e})") from None
    if not planned.plans:
        raise UserError(f"part {request.part} on rig {request.rig} plans no point with these parameters (see "
                        f"`plan --part {request.part} --rig {request.rig}`)")
    return planned


@dataclass(frozen=True)
class RunRequest:
    part: str  # the part's folder name (store.part_name)
    rig: str
    data_dir: Path = DATA_DIR
    model_source: str | None = None  # None: the rig profile's
    points: tuple[str, ...] | None = None  # None: every point of the plan
    budget_min: float | None = None
    python: str | None = None  # the interpreter that imports vllm; None: server.vllm_python's default
    overrides: dict = field(default_factory=dict)  # --set, parsed
    redo_changed: bool = False
    allow_shared: bool = False  # run on a GPU another run is serving on (--allow-shared)
    # Set by `reproduce` for its notebook's kernel: the note of the writer lock it holds for the whole run (the
    # kernel's sweep checks it and takes no lock of its own), and the file the kernel writes the sweep's report to.
    lock_holder: dict | None = None
    report_path: str | None = None
    # The plan that validating the request built (parts.PlannedRun), for a sweep in the same process; never handed over.
    planned: object = field(default=None, compare=False, repr=False)
    # Set by from_cli_args: what a server start is assumed to take before the run times one (sweep.rig_start_estimate
    # over the rig's manifests, read once; None: the run reads them itself).
    start_estimate_s: float | None = field(default=None, compare=False)

    @property
    def rig_dir(self) -> Path:
        return rig_dir(self.part, self.rig, self.data_dir)

    @staticmethod
    def add_cli_args(p: argparse.ArgumentParser) -> None:
        from ..schema import DATA_DIR

        p.add_argument("--part", required=True, help=f"the part to run: {parts_help()}")
        p.add_argument("--rig", required=True,
                       help="rig name: 1-40 lowercase letters, digits, '-' (e.g. my-a10g); a profile in "
                            "data/rigs/NAME.json is optional and holds the rig's deviations from a stock server")
        p.add_argument("--model-source", choices=["dummy", "hub"], default=None,
                       help="dummy: the preset's shapes with random weights (--load-format dummy, same bytes per "
                            "step); hub: real weights from the Hugging Face hub (needs network). Default: the rig "
                            "profile's, else dummy")
        p.add_argument("--points", nargs="+", default=None, metavar="POINT",
                       help="run only these points (folder names; see `plan`); default: every point not yet complete")
        p.add_argument("--budget-min", type=float, default=None,
                       help="stop cleanly before a point that would end later than this many minutes after the "
                            "start; rerun the same command to resume")
        p.add_argument("--python", default=None,
                       help="interpreter that imports vllm (default: $VLLM_PYTHON, else .venv-vllm/bin/python, else "
                            "this one)")
        p.add_argument("--data-dir", type=Path, default=DATA_DIR, help="data folder (default: the repo's data/)")
        p.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                       help="override a part parameter, e.g. --set 'caps=[1,4]' (see `plan --part N --rig R`)")
        p.add_argument("--redo-changed", action="store_true",
                       help="make again the complete points whose recorded settings (workload, flags, model, passes) "
                            "differ from this plan's; without it such a point is refused, naming the difference")
        p.add_argument("--allow-shared", action="store_true",
                       help="run a GPU rig although another run is serving on this machine (refused without it: the "
                            "two measure each other's load); its points record the other run either way")

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> RunRequest:
        """The request the options ask for, validated before anything slow: the part, the rig's name and profile
        (its overrides of every part), the time budget, --set's keys and kinds, the points, the complete points
        this plan would make otherwise, and --python. Each problem is one UserError line."""
        from . import registry as parts
        from ..run.sweep import check_budget, refuse_changed, rig_start_estimate

        request = cls(part=part_name(args.part), rig=check_run_rig(args.rig), data_dir=data_folder(args.data_dir),
                      model_source=args.model_source, points=tuple(args.points) if args.points else None,
                      budget_min=args.budget_min, python=args.python, overrides=parse_overrides(args.set),
                      redo_changed=args.redo_changed, allow_shared=args.allow_shared)
        request = replace(request, start_estimate_s=rig_start_estimate(request.data_dir / "runs", request.rig))
        check_budget(request.budget_min, request.start_estimate_s)
        request = request.validated()
        if not request.redo_changed:  # before any model is prepared or server started
            refuse_changed(parts.changed(request.planned, request.rig_dir), request.rig_dir)
        check_python(request.python)
        return request

    def validated(self) -> RunRequest:
        """This request with its plan (`planned`), checked as `plan` and a run both check it, before any lock, model
        or server: the rig's profile and every other profile the pages read (each against its schema, its overrides'
        names and kinds), --set's names and kinds (the same rule), and the plan they make. Each problem is one
        UserError line."""
        from . import registry as parts
        from ..run.rig import load_profile

        profile = load_profile(self.rig, self.data_dir)
        check_every_profile(self.data_dir)
        kinds = parameter_errors(parts.protocol_of(self.part).defaults, self.overrides)
        if kinds:
            raise UserError(f"--set: {'; '.join(kinds)} (see `plan --part {self.part} --rig {self.rig}`)")
        return replace(self, planned=_planned_with_overrides(self, profile))

    def to_params(self) -> dict:
        """The request as JSON-shaped values (a papermill parameter), without the plan."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "planned"}
        return {**out, "data_dir": str(self.data_dir), "points": list(self.points) if self.points else None}

    @classmethod
    def from_params(cls, params: dict) -> RunRequest:
        """The request to_params wrote, as it was validated (nothing is checked or parsed again)."""
        return cls(**{**params, "data_dir": Path(params["data_dir"]),
                      "points": tuple(params["points"]) if params.get("points") else None})
