"""`python -m inference_wall ...`: reproduce a part on a rig (papermill, run mode), or run its sweep directly.

Every user error is one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from .errors import UserError
from .schema import PARTS

REPO = Path(__file__).resolve().parents[2]


def _parts_help() -> str:
    return ", ".join(f"{n} ({name})" for n, name in PARTS.items())


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--part", required=True, help=f"the part to run: {_parts_help()}")
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
    p.add_argument("--data-dir", type=Path, default=REPO / "data", help="data folder (default: the repo's data/)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="override a part parameter, e.g. --set 'caps=[1,4]' (see `plan --part N --rig R`)")
    p.add_argument("--redo-changed", action="store_true",
                   help="make again the complete points whose recorded settings (workload, flags, model, passes) "
                        "differ from this plan's; without it such a point is refused, naming the difference")


def _overrides(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set needs KEY=JSON, got {item!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            raise UserError(f"--set {key}: value {value!r} is not JSON (quote strings: {key}='\"x\"')")
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m inference_wall",
                                 description="Run The Inference Wall's vLLM experiments and keep their raw artefacts.")
    sub = ap.add_subparsers(dest="command", required=True)

    rep = sub.add_parser("reproduce", help="run a part's notebook in run mode with papermill (what `make reproduce` does)",
                         description="Run part N's notebook with papermill in mode=run for rig NAME: the notebook "
                                     "runs the part's sweep (resuming: complete points are kept), then renders its "
                                     "tables and figures from the data. The executed notebook is written to "
                                     "_build/reproduce/.")
    _add_run_options(rep)
    rep.add_argument("--output", type=Path, default=None, help="where to write the executed notebook")

    sw = sub.add_parser("sweep", help="run a part's sweep directly, without the notebook")
    _add_run_options(sw)
    sw.add_argument("--no-progress", action="store_true", help="no progress bar")

    pl = sub.add_parser("plan", help="list a part's points and parameters for a rig, and which are complete")
    pl.add_argument("--part", required=True, help=f"the part: {_parts_help()}")
    pl.add_argument("--rig", required=True, help="rig name")
    pl.add_argument("--data-dir", type=Path, default=REPO / "data")
    pl.add_argument("--set", action="append", default=[], metavar="KEY=JSON")
    pl.add_argument("--dry-run", action="store_true",
                    help="print each session's `vllm serve` and each pass's `vllm bench serve` command line that a run "
                         "would send (the points not yet complete, or --points), starting and writing nothing")
    pl.add_argument("--points", nargs="+", default=None, metavar="POINT", help="with --dry-run: only these points")

    ck = sub.add_parser("check-args", help="validate PART and RIG and this machine for the rig (used by make), print "
                                           "the part's notebook and, on a GPU host without vLLM, 'needs: make vllm-gpu'")
    ck.add_argument("--part", required=True)
    ck.add_argument("--rig", required=True)

    mg = sub.add_parser("migrate-records", help="bring format-1 manifests to the current format once (their artefacts' "
                                                "sizes and hashes recorded, so every point is checked on read)",
                        description="Write each format-1 manifest under DATA_DIR/runs once in the current format: "
                                    "the size and sha256 of each of its point's files (hashes it already records "
                                    "are checked against the files, never replaced) and its format. A point whose "
                                    "files do not match its manifest is named and left as it is.")
    mg.add_argument("--data-dir", type=Path, default=REPO / "data", help="data folder (default: the repo's data/)")
    mg.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 while any format-1 manifest is left, naming them")
    return ap


ARGS_ENV = "IW_ARGS"
ARGS_FROM_ENV = "--args-from-env"  # make reproduce: the rest of the arguments are $IW_ARGS, split by split_args


def split_args(text: str) -> list[str]:
    """make's ARGS as arguments, never as shell code: split at whitespace, single quotes group words (their
    quotes removed), double quotes are kept as text (JSON's own: ARGS='--set configs=["tp1"]'); nothing is
    evaluated (no $(...), no ';')."""
    import shlex

    lex = shlex.shlex(text, posix=True)
    lex.whitespace_split, lex.quotes, lex.commenters = True, "'", ""
    try:
        return list(lex)
    except ValueError as e:
        raise UserError(f"ARGS {text!r}: {e} (quote with single quotes: ARGS=\"--set 'caps=[1, 4]'\")") from None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if ARGS_FROM_ENV in argv:
            argv.remove(ARGS_FROM_ENV)
            argv += split_args(os.environ.get(ARGS_ENV, ""))
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted: complete points are kept; rerun the same command to resume", file=sys.stderr)
        return 130


def _dispatch(args) -> int:
    from .server import reap_left_behind
    from .store import check_run_rig, part_name

    for said in reap_left_behind():  # a killed run's servers and session folders, stopped before anything else
        print(f"note: {said}", file=sys.stderr)

    if args.command == "check-args":
        from . import gpuenv
        from .rig import load_profile

        name = part_name(args.part)
        check_run_rig(args.rig)
        profile = load_profile(args.rig)
        info = gpuenv.check_machine(profile, part=args.part)  # no GPU and not a CPU rig: one line, before anything starts
        print(f"notebooks/{name}.md")
        if gpuenv.needs_gpu_venv(profile, sys.executable, info):
            print("needs: make vllm-gpu")
        return 0
    if args.command == "migrate-records":
        return _migrate_records(args)
    if args.command == "plan":
        from . import parts
        from .store import rig_dir
        from .sweep import point_status

        if args.points and not args.dry_run:
            raise UserError("plan --points lists points only with --dry-run (plan without it lists every point)")
        if args.dry_run:
            for line in parts.dry_run(args.part, args.rig, args.data_dir, _overrides(args.set), args.points):
                print(line)
            return 0
        params = parts.parameters(args.part, args.rig, args.data_dir, _overrides(args.set))
        plans = parts.plan(args.part, args.rig, args.data_dir, _overrides(args.set))
        status = point_status(rig_dir(args.part, args.rig, args.data_dir), [p.name for p in plans])
        for name, diffs in _changed(args, plans, params).items():
            status[name] = f"complete, made otherwise ({diffs[0]}{'; ...' if len(diffs) > 1 else ''})"
        for line in _plan_header(args, params, plans):
            print(line)
        print(json.dumps(_shown_params(args, params), indent=1))
        for p in plans:
            print(f"{p.name:20s} session={p.session:16s} max_num_seqs={p.max_num_seqs:<4d} {status[p.name]}")
        return 0
    if getattr(args, "redo_changed", False):
        from .sweep import REDO_CHANGED_ENV

        os.environ[REDO_CHANGED_ENV] = "1"  # the sweep reads it, in this process or in the notebook's kernel
    if args.command == "sweep":
        with _writer(args):
            from . import parts

            _check_machine(args)
            report = parts.run(args.part, args.rig, args.data_dir, args.model_source, args.points, args.budget_min,
                               args.python, _overrides(args.set), progress=not args.no_progress)
        return _report(report)
    if args.command == "reproduce":
        with _writer(args):
            _check_machine(args)
            return _reproduce(args)
    raise AssertionError(args.command)


def _migrate_records(args) -> int:
    """migrate-records: 0 when no format-1 manifest is left, 1 otherwise (each left one named, with why)."""
    from .lock import writer_lock
    from .store import format_1_points, migrate_record, migration_problems, runs_dir

    if not runs_dir(args.data_dir).is_dir():
        raise UserError(f"--data-dir {args.data_dir}: no runs/ folder in it (give the data folder that holds runs/)")
    points = format_1_points(args.data_dir)
    left = 0
    for point in points:
        where = point.relative_to(runs_dir(args.data_dir))
        if args.check:
            problems = migration_problems(point)
            print(f"format 1: {where}" + (f" (cannot migrate: {'; '.join(problems)})" if problems else ""))
            left += 1
            continue
        with writer_lock(point.parent, f"rig folder {point.parent.relative_to(runs_dir(args.data_dir))}"):
            problems = migrate_record(point)
        if problems:
            print(f"left at format 1: {where}: {'; '.join(problems)}")
            left += 1
    if args.check:
        print(f"{left} format-1 manifest(s) left" + ("; migrate them: python -m inference_wall migrate-records"
                                                       if left else ""))
    else:
        print(f"migrated {len(points) - left} format-1 manifest(s); left {left}")
    return 1 if left else 0


def _writer(args):
    """Validate everything a run needs before anything slow, then take the part and rig's writer lock (which
    also proves the rig folder can be written): a second writer exits at once, naming the first."""
    from .lock import writer_lock
    from .rig import load_profile
    from .store import check_run_rig, part_name, rig_dir
    from .sweep import check_budget

    name = part_name(args.part)
    check_run_rig(args.rig)
    overrides = _overrides(args.set)
    profile = load_profile(args.rig, args.data_dir)  # checked against its schema (and its overrides' part names)
    check_budget(args.budget_min)
    from . import parts
    from .sweep import refuse_changed

    for part in profile.overrides:  # a misspelled parameter of any part in the profile, not only this one's
        parts.parameters(part, args.rig, args.data_dir)
    params = parts.parameters(args.part, args.rig, args.data_dir, overrides)  # unknown --set keys
    plans = parts.plan(args.part, args.rig, args.data_dir, overrides)
    if args.points:
        valid = [p.name for p in plans]
        unknown = [p for p in args.points if p not in valid]
        if unknown:
            raise UserError(f"unknown point(s) {', '.join(unknown)} for part {name}; valid: {', '.join(valid)}")
        plans = [p for p in plans if p.name in args.points]
    if not args.redo_changed:  # before any model is prepared or server started
        refuse_changed(_changed(args, plans, params), rig_dir(args.part, args.rig, args.data_dir))
    _check_python(args.python)
    return writer_lock(rig_dir(args.part, args.rig, args.data_dir), f"part {name} on rig {args.rig}")


def _check_python(python: str | None) -> None:
    """--python names an interpreter that exists and finds vllm (without importing it: a second at most)."""
    import shutil

    from .gpuenv import has_vllm

    if python is None:
        return
    exe = shutil.which(python)
    if exe is None:
        raise UserError(f"--python {python}: no such executable (give the interpreter of a venv with vLLM, e.g. "
                        f".venv-vllm/bin/python)")
    if not has_vllm(exe):
        raise UserError(f"--python {python}: this interpreter cannot import vllm (make vllm-cpu builds "
                        f".venv-vllm/bin/python; make vllm-gpu builds .venv-vllm-gpu/bin/python)")


def _changed(args, plans, params: dict) -> dict[str, list[str]]:
    """The complete points of the part and rig that this plan would make otherwise (sweep.changed_points)."""
    from . import parts
    from .bench import Workload
    from .rig import load_profile
    from .store import rig_dir
    from .sweep import SettingsSource, changed_points

    profile = load_profile(args.rig, args.data_dir)
    if getattr(args, "model_source", None):
        profile.model_source = args.model_source
    src = SettingsSource(list(parts.SERVE_ARGS), dict(parts.SERVER_ENV), profile,
                         Workload(params["input_len"], params["output_len"]))
    return changed_points(plans, rig_dir(args.part, args.rig, args.data_dir), src)


def _check_machine(args) -> None:
    """After the cheap checks and the lock, before any server: the rig's model preset exists, this machine can
    run the rig (a GPU rig needs an NVIDIA GPU), and a GPU rig's vLLM defaults to .venv-vllm-gpu once built."""
    from . import gpuenv
    from .modelkit import preset_dir
    from .rig import load_profile

    from . import parts

    profile = load_profile(args.rig, args.data_dir)
    preset_dir(profile.model_preset, args.data_dir)
    params = parts.parameters(args.part, args.rig, args.data_dir, _overrides(args.set))
    gpuenv.check_machine(profile, part=args.part, gpus_needed=parts.protocol_of(args.part).gpus_needed(params))
    if args.python is None:
        args.python = gpuenv.gpu_vllm_python(profile)


def _shown_params(args, params: dict) -> dict:
    """The part's parameters with the profile's secret values scrubbed (an override could echo one)."""
    from .redact import redact_record, secret_values
    from .rig import load_profile

    profile = load_profile(args.rig, args.data_dir)
    return redact_record(params, secret_values(profile.env, profile.serve_args))


def _plan_header(args, params: dict, plans) -> list[str]:
    """What `plan` prints before the parameters: the profile, the model(s) and, where known, the KV pool and
    its admission limit for the part's requests."""
    from . import parts
    from .modelkit import read_preset
    from .rig import load_profile

    from .rig import shown

    real = load_profile(args.rig, args.data_dir)
    profile = shown(real)  # no secret of the profile is printed
    name = parts.module(args.part).NAME
    lines = [f"part {name} on rig {args.rig}"]
    if profile.has_profile:
        path = (Path(args.data_dir) / "rigs" / f"{args.rig}.json").resolve()
        lines.append(f"profile: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}"
                     + (f": {profile.description}" if profile.description else ""))
        if profile.serve_args:
            lines.append(f"  extra vllm serve flags: {' '.join(profile.serve_args)}")
    else:
        lines.append(f"profile: none (a stock vLLM server; data/rigs/{args.rig}.json would hold the rig's deviations)")
    presets = list(dict.fromkeys(p.preset or profile.model_preset for p in plans)) or [profile.model_preset]
    for preset in presets:
        hub = read_preset(preset, args.data_dir).get("hub_id")
        weights = "dummy weights of its shapes" if profile.model_source == "dummy" else f"weights from the hub ({hub})"
        lines.append(f"model: preset {preset} (data/models/{preset}; {hub or 'no hub checkpoint'}), {weights}")
    tokens = (params.get("input_len") or 0) + (params.get("output_len") or 0)
    for preset, pool in parts.rig_pools(name, real, params, args.data_dir).items():
        if pool is None:
            lines.append(f"KV pool ({preset}): not known yet (read from the log of the rig's first server start)")
            continue
        limit = f"; admission limit {pool.admission_limit(tokens):,} requests of {tokens:,} tokens" if tokens else ""
        lines.append(f"KV pool ({preset}): {pool.num_blocks:,} pages of {pool.block_size} tokens, from {pool.source}"
                     + limit)
    return lines


def _report(report) -> int:
    print(f"done {len(report.done)}, already complete {len(report.skipped)}, left for a later run "
          f"{len(report.pending)}, failed {len(report.failed)}"
          + (f"; server starts (s): {', '.join(f'{s:.0f}' for s in report.server_starts_s)}" if report.server_starts_s else ""))
    if report.pending:
        print("stopped at the time budget; rerun the same command to resume: " + ", ".join(report.pending))
        return 3
    return 0


def _reproduce(args) -> int:
    import papermill

    from .store import part_name

    name = part_name(args.part)
    notebook = REPO / "notebooks" / f"{name}.md"
    out = args.output or REPO / "_build" / "reproduce" / f"{name}-{args.rig}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    params = {"mode": "run", "rigs": [args.rig], "run_rig": args.rig, "data_dir": str(args.data_dir.resolve()),
              "model_source": args.model_source, "points": args.points, "budget_min": args.budget_min,
              "vllm_python": args.python, "overrides": _overrides(args.set)}
    nb = _load_notebook(notebook)
    _page_files_beside(args.data_dir)
    with _KernelSignals() as signals:
        try:
            signals.run(lambda: papermill.execute_notebook(
                nb, str(out), parameters=params, cwd=str(notebook.parent), kernel_name="python3", progress_bar=False,
                log_output=True, stdout_file=sys.stdout, stderr_file=sys.stderr))
        except papermill.PapermillExecutionError as e:
            if signals.received is None or e.ename != "KeyboardInterrupt":
                raise UserError(f"notebook {notebook.name} failed in run mode: {e.ename}: "
                                f"{e.evalue.splitlines()[0] if e.evalue else ''} (executed notebook: {out})")
    if signals.received is not None:
        name = signal.Signals(signals.received).name
        print(f"interrupted by {name}: the servers are stopped, the point in flight is recorded as interrupted and "
              f"complete points are kept; rerun the same command to resume", file=sys.stderr)
        return 128 + signals.received
    print(f"executed notebook: {out}")
    return _left_over(args)


def _page_files_beside(data_dir: Path) -> None:
    """A run into a data dir other than the repository's renders its page from that data: its figures and CSVs go
    to a _static/ beside that data dir (the kernel inherits the setting), never over the book's own."""
    from .schema import STATIC_DIR_ENV

    data_dir = Path(data_dir).resolve()
    if data_dir != (REPO / "data").resolve():
        os.environ.setdefault(STATIC_DIR_ENV, str(data_dir.parent / "_static"))


class _KernelSignals:
    """SIGINT, SIGTERM and SIGHUP of `reproduce`, passed on to the notebook's kernel as the interrupt it
    understands. The kernel runs in a session of its own (jupyter's launcher), so a signal to this command,
    or to its process group, never reaches it; and nbclient's own handler, which shuts the kernel down with a
    SIGKILL after 5 s, would cut the sweep's cleanup short. So papermill runs in a worker thread (where
    nbclient sets no handler), and this thread, on a signal, writes the stop file the kernel's sweep checks
    (server.STOP_ENV) and sends the kernel SIGINT: the sweep records the point in flight as interrupted and
    stops its servers' process groups, the cell fails with KeyboardInterrupt, papermill stops. A second
    signal is passed on too (the sweep then kills its servers at once)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self):
        import tempfile

        from .server import STOP_ENV

        self.received: int | None = None
        self._stop = Path(tempfile.gettempdir()) / f"inference-wall-stop-{os.getpid()}"
        self._stop.unlink(missing_ok=True)
        self._env_before = os.environ.get(STOP_ENV)
        os.environ[STOP_ENV] = str(self._stop)  # the kernel, started later, inherits it
        self._old = {sig: signal.signal(sig, self._on_signal) for sig in self.SIGNALS}
        return self

    def _on_signal(self, signum, frame):
        if self.received is None:
            self.received = signum
        self._stop.touch()
        self._interrupt_kernels()

    @staticmethod
    def _interrupt_kernels() -> None:
        import psutil

        for child in psutil.Process().children():
            try:
                if any("ipykernel" in part for part in child.cmdline()):
                    child.send_signal(signal.SIGINT)
            except psutil.Error:
                continue

    def run(self, work):
        import threading

        outcome: dict = {}

        def target():
            try:
                outcome["value"] = work()
            except BaseException as e:  # noqa: BLE001 - handed to the main thread below
                outcome["error"] = e

        worker = threading.Thread(target=target, name="papermill", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.5)  # wakes for signals, whose handler runs in this thread
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    def __exit__(self, *exc):
        from .server import STOP_ENV

        for sig, old in self._old.items():
            signal.signal(sig, old)
        if self._env_before is None:
            os.environ.pop(STOP_ENV, None)
        else:
            os.environ[STOP_ENV] = self._env_before
        self._stop.unlink(missing_ok=True)


def _left_over(args) -> int:
    """The sweep's exit status after a notebook run: 3 when points were left for a later run (time budget)."""
    from . import parts
    from .store import rig_dir
    from .sweep import point_status

    plans = parts.plan(args.part, args.rig, args.data_dir, _overrides(args.set))
    names = [p.name for p in plans if not args.points or p.name in args.points]
    left = [n for n, s in point_status(rig_dir(args.part, args.rig, args.data_dir), names).items() if s != "complete"]
    if left:
        print("stopped at the time budget; rerun the same command to resume: " + ", ".join(left))
        return 3
    return 0


def _load_notebook(path: Path):
    import jupytext

    return jupytext.read(path)
