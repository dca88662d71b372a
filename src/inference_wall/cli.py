"""`python -m inference_wall ...`: reproduce a part on a rig (papermill, run mode), or run its sweep directly.

Every user error is one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
from contextlib import contextmanager
import json
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

from .errors import UserError
from .parts.runrequest import RunRequest, parse_overrides, parts_help
from .schema import DATA_DIR, REPO


class _Parser(argparse.ArgumentParser):
    """argparse's errors as one line (its own print the usage first), as every user error is."""

    def error(self, message: str):
        raise UserError(f"{self.prog}: {message} (see {self.prog} --help)")


def _reproduce_only_args(p: argparse.ArgumentParser) -> None:
    """reproduce's options beyond the run request's (RunRequest.add_cli_args)."""
    p.add_argument("--output", type=Path, default=None, help="where to write the executed notebook")
    p.add_argument("--no-evidence", action="store_true",
                   help="do not render the part's evidence page after the run (on a GPU whose time is counted: "
                        "`make book` renders it later from the same data)")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m inference_wall",
                 description="Run The Inference Wall's vLLM experiments and keep their raw artefacts.")
    sub = ap.add_subparsers(dest="command", required=True)

    rep = sub.add_parser("reproduce", help="run a part's notebook in run mode with papermill (what `make reproduce` does)",
                         description="Run part N's notebook with papermill in mode=run for rig NAME: the notebook "
                                     "runs the part's sweep (resuming: complete points are kept), then renders its "
                                     "tables and figures from the data. The executed notebook is written to "
                                     "_build/reproduce/.")
    RunRequest.add_cli_args(rep)
    _reproduce_only_args(rep)

    sw = sub.add_parser("sweep", help="run a part's sweep directly, without the notebook")
    RunRequest.add_cli_args(sw)
    sw.add_argument("--no-progress", action="store_true", help="no progress bar")

    pl = sub.add_parser("plan", help="list a part's points and parameters for a rig, and which are complete")
    pl.add_argument("--part", required=True, help=f"the part: {parts_help()}")
    pl.add_argument("--rig", required=True, help="rig name")
    pl.add_argument("--data-dir", type=Path, default=DATA_DIR)
    pl.add_argument("--set", action="append", default=[], metavar="KEY=JSON")
    pl.add_argument("--dry-run", action="store_true",
                    help="print each session's `vllm serve` and each pass's `vllm bench serve` command line that a run "
                         "would send (the points not yet complete, or --points), starting and writing nothing")
    pl.add_argument("--points", nargs="+", default=None, metavar="POINT", help="with --dry-run: only these points")

    ck = sub.add_parser("check-args", help="validate PART and RIG and this machine for the rig (used by make), print "
                                           "the part's notebook and, on a GPU host without vLLM, 'needs: make vllm-gpu'")
    # reproduce's own arguments (make passes ARGS to both): the rig's profile is read from --data-dir's rigs/, as the
    # run reads it, so a rig whose profile lives only in another data folder is judged by that profile
    RunRequest.add_cli_args(ck)
    _reproduce_only_args(ck)  # make passes reproduce's whole ARGS to check-args: it accepts all that reproduce accepts

    mg = sub.add_parser("migrate-records", help="bring format-1 manifests to the current format once (their artefacts' "
                                                "sizes and hashes recorded, so every point is checked on read)",
                        description="Write each format-1 manifest under DATA_DIR/runs once in the current format: "
                                    "the size and sha256 of each of its point's files (hashes it already records "
                                    "are checked against the files, never replaced) and its format. A point whose "
                                    "files do not match its manifest is named and left as it is.")
    mg.add_argument("--data-dir", type=Path, default=DATA_DIR, help="data folder (default: the repo's data/)")
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
        words = list(lex)
    except ValueError as e:
        raise UserError(f"ARGS {text!r}: {e} (quote with single quotes: ARGS=\"--set 'caps=[1, 4]'\")") from None
    split = next((w for w in words if w.count('"') % 2), None)
    if split is not None:  # a double-quoted value with a space, cut in two: "my data" gave '"my' and 'data"'
        raise UserError(f"ARGS {text!r}: double quotes do not group words in ARGS (they stay as text, for JSON); "
                        f"quote a value with spaces in single quotes: ARGS=\"--data-dir 'my data'\"")
    return words


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if ARGS_FROM_ENV in argv:
            argv.remove(ARGS_FROM_ENV)
            argv += split_args(os.environ.get(ARGS_ENV, ""))
        return _dispatch(build_parser().parse_args(argv))
    except UserError as e:
        print(shown_line(f"error: {e}"), file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted: complete points are kept; rerun the same command to resume", file=sys.stderr)
        return 130


def shown_line(line: str, secrets=()) -> str:
    """A line fit to print: the one redaction (redact.scrub_text) with `secrets` and this environment's secret values."""
    from .records.redact import scrub_text, secret_values

    return scrub_text(line, set(secrets) | secret_values(os.environ))


def _dispatch(args) -> int:
    from .run.server import reap_left_behind
    from .records.store import check_run_rig, part_name

    for said in reap_left_behind():  # a killed run's servers and session folders, stopped before anything else
        print(f"note: {said}", file=sys.stderr)

    if args.command == "check-args":
        from .run import gpuenv
        from .parts.runrequest import data_folder
        from .run.rig import load_profile

        name = part_name(args.part)
        check_run_rig(args.rig)
        profile = load_profile(args.rig, data_folder(args.data_dir))
        info = gpuenv.check_machine(profile, part=args.part)  # no GPU and not a CPU rig: one line, before anything starts
        print(f"notebooks/{name}.md")
        if gpuenv.needs_gpu_venv(profile, sys.executable, info):
            print("needs: make vllm-gpu")
        return 0
    if args.command == "migrate-records":
        return _migrate_records(args)
    if args.command == "plan":
        return _plan(args)
    if args.command == "sweep":
        request = RunRequest.from_cli_args(args)
        with _writer(request) as holder:
            from . import parts

            request = _check_machine(replace(request, lock_holder=holder))
            return _report(parts.run_request(request, progress=not args.no_progress))
    if args.command == "reproduce":
        request = RunRequest.from_cli_args(args)
        with _writer(request) as holder:
            return _reproduce(_check_machine(replace(request, lock_holder=holder)), args.output,
                              evidence=not args.no_evidence)
    raise AssertionError(args.command)


def _migrate_records(args) -> int:
    """migrate-records: 0 when no format-1 manifest is left, 1 otherwise (each left one named, with why)."""
    from .run.lock import writer_lock
    from .records.store import format_1_points, migrate_record, migration_problems, runs_dir

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


def _plan(args) -> int:
    """plan: the part's points for the rig (their status, and what a run would send with --dry-run)."""
    from . import parts
    from .records.redact import record_secret_values, redact_record
    from .records.store import part_name
    from .run.rig import profile_secrets
    from .run.sweep import point_status

    if args.points and not args.dry_run:
        raise UserError("plan --points lists points only with --dry-run (plan without it lists every point)")
    overrides = parse_overrides(args.set)
    # the checks a run makes before it starts anything (RunRequest.validated): plan prints nothing a run would refuse
    request = RunRequest(part_name(args.part), args.rig, args.data_dir, overrides=overrides).validated()
    run = request.planned
    secrets = profile_secrets(run.profile) | record_secret_values(run.params)
    if args.dry_run:
        for line in parts.dry_run(args.part, args.rig, args.data_dir, overrides, args.points):
            print(shown_line(line, secrets))
        return 0
    status = point_status(request.rig_dir, [p.name for p in run.plans])
    for name, diffs in parts.changed(run, request.rig_dir).items():
        status[name] = f"complete, made otherwise ({diffs[0]}{'; ...' if len(diffs) > 1 else ''})"
    lines = [*_plan_header(request, run), json.dumps(redact_record(run.params, secrets), indent=1)]
    lines += [f"{p.name:20s} session={p.session:16s} max_num_seqs={p.max_num_seqs:<4d} {status[p.name]}"
              for p in run.plans]
    for line in lines:
        print(shown_line(line, secrets))
    return 0


def _writer(request: RunRequest):
    """The part and rig's writer lock, taken once for the whole run (which also proves the rig folder can be
    written): a second writer exits at once, naming the first."""
    from .run.lock import writer_lock

    return writer_lock(request.rig_dir, f"part {request.part} on rig {request.rig}")


def _check_machine(request: RunRequest) -> RunRequest:
    """After the cheap checks and the lock, before any server: the rig's model preset exists, this machine can
    run the rig (a GPU rig needs an NVIDIA GPU, and no other run serving on it unless --allow-shared); a GPU rig's
    vLLM defaults to .venv-vllm-gpu once built."""
    from .run import gpuenv
    from . import parts
    from .model.modelkit import preset_dir
    from .records.store import part_number
    from .run.server import check_shared_machine

    profile, params = request.planned.profile, request.planned.params
    preset_dir(profile.model_preset, request.data_dir)
    gpuenv.check_machine(profile, part=part_number(request.part),  # named as make's PART= in its advice
                         gpus_needed=parts.protocol_of(request.part).gpus_needed(params))
    check_shared_machine(not gpuenv.is_cpu_rig(profile), request.allow_shared)  # the sweep warns, once
    return request if request.python else replace(request, python=gpuenv.gpu_vllm_python(profile))


def _plan_header(request: RunRequest, run) -> list[str]:
    """What `plan` prints before the parameters: the profile, the model(s) and, where known, the KV pool and
    its admission limit for the part's requests."""
    from . import parts
    from .model.modelkit import read_preset
    from .run.rig import shown

    real, params, plans = run.profile, run.params, run.plans
    profile = shown(real)  # no secret of the profile is printed
    name = request.part
    lines = [f"part {name} on rig {request.rig}"]
    if profile.has_profile:
        path = (Path(request.data_dir) / "rigs" / f"{request.rig}.json").resolve()
        lines.append(f"profile: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}"
                     + (f": {profile.description}" if profile.description else ""))
        if profile.serve_args:
            lines.append(f"  extra vllm serve flags: {' '.join(profile.serve_args)}")
    else:
        lines.append(f"profile: none (a stock vLLM server; data/rigs/{request.rig}.json would hold the rig's deviations)")
    presets = list(dict.fromkeys(p.preset or profile.model_preset for p in plans)) or [profile.model_preset]
    for preset in presets:
        hub = read_preset(preset, request.data_dir).get("hub_id")
        weights = "dummy weights of its shapes" if profile.model_source == "dummy" else f"weights from the hub ({hub})"
        lines.append(f"model: preset {preset} (data/models/{preset}; {hub or 'no hub checkpoint'}), {weights}")
    tokens = (params.get("input_len") or 0) + (params.get("output_len") or 0)
    for preset, pool in parts.rig_pools(name, real, params, request.data_dir).items():
        if pool is None:
            lines.append(f"KV pool ({preset}): not known yet (read from the log of the rig's first server start)")
            continue
        limit = f"; admission limit {pool.admission_limit(tokens):,} requests of {tokens:,} tokens" if tokens else ""
        lines.append(f"KV pool ({preset}): {pool.num_blocks:,} pages of {pool.block_size} tokens, from {pool.source}"
                     + limit)
    return lines


def _report(report) -> int:
    """The sweep's summary; its exit status: 3 when points were left for a later run (time budget)."""
    for line in report.summary():
        print(line)
    return 3 if report.pending else 0


def _notebook_parameters(request: RunRequest) -> dict:
    """The papermill parameters of a part's notebook in run mode: the request whole, and the page's own (the rig it
    shows and the data it reads), from the same request."""
    return {"mode": "run", "rigs": [request.rig], "run_rig": request.rig, "data_dir": str(request.data_dir),
            "run_request": request.to_params()}


def _reproduce(request: RunRequest, output: Path | None, evidence: bool = True) -> int:
    from .run.sweep import SweepReport

    notebook = REPO / "notebooks" / f"{request.part}.md"
    out = output or REPO / "_build" / "reproduce" / f"{request.part}-{request.rig}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    report_path = out.with_name(out.name + ".report.json")  # the kernel writes the sweep's report here
    report_path.unlink(missing_ok=True)
    params = _notebook_parameters(replace(request, report_path=str(report_path)))
    received = _execute(notebook, out, params, request.data_dir, f"notebook {notebook.name} failed in run mode",
                        log_output=True)
    if received is not None:
        name = signal.Signals(received).name
        print(f"interrupted by {name}: the servers are stopped, the point in flight is recorded as interrupted and "
              f"complete points are kept; rerun the same command to resume", file=sys.stderr)
        return 128 + received
    print(f"executed notebook: {out}")
    try:
        report = SweepReport.from_dict(json.loads(report_path.read_text()))
    except (OSError, ValueError, TypeError) as e:
        raise UserError(f"notebook {notebook.name} ran but its sweep report {report_path} cannot be read ({e}); "
                        f"`plan --part {request.part} --rig {request.rig}` shows which points are complete") from None
    received = _render_evidence(request, out.parent) if evidence else None
    return 128 + received if received is not None else _report(report)


def _render_evidence(request: RunRequest, folder: Path) -> int | None:
    """The part's evidence page (notebooks/<part>-evidence.md, where it has one) rendered from the same data for the
    run's rig, after the run: the tables and figures the part page links to, so that a re-run shows them too. Replay
    mode `reproduced`: it runs nothing and shows the rigs the run's page shows (the run's, and the published rig
    where the part has one). The signal that stopped it, if one did (the points are already kept)."""
    notebook = REPO / "notebooks" / f"{request.part}-evidence.md"
    if not notebook.exists():
        return None
    out = folder / f"{request.part}-evidence-{request.rig}.ipynb"
    params = {"mode": "reproduced", "run_rig": request.rig, "data_dir": str(request.data_dir)}
    received = _execute(notebook, out, params, request.data_dir,
                        f"the points are kept, but the evidence page {notebook.name} failed")
    if received is None:
        print(f"executed notebook: {out}")
    return received


def _execute(notebook: Path, out: Path, params: dict, data_dir: Path, failed: str, log_output: bool = False) -> int | None:
    """A notebook executed by papermill under _KernelSignals, the page's files beside its data: the signal that
    stopped it (None where none did); a cell's error other than that stop is a UserError opening with `failed`."""
    import papermill

    with _page_files_beside(data_dir), _KernelSignals() as signals:
        try:
            signals.run(lambda: papermill.execute_notebook(
                _load_notebook(notebook), str(out), parameters=params, cwd=str(notebook.parent), kernel_name="python3",
                progress_bar=False, log_output=log_output,
                **({"stdout_file": sys.stdout, "stderr_file": sys.stderr} if log_output else {})))
        except papermill.PapermillExecutionError as e:
            if signals.received is None or e.ename != "KeyboardInterrupt":
                raise UserError(f"{failed}: {e.ename}: {e.evalue.splitlines()[0] if e.evalue else ''} "
                                f"(executed notebook: {out})")
    return signals.received


@contextmanager
def _page_files_beside(data_dir: Path):
    """A run into a data dir other than the repository's renders its page from that data: its figures and CSVs go
    to a _static/ beside that data dir (the kernel, started inside, inherits the setting), never over the book's
    own. The setting lasts for the run alone: a caller that runs `main` in its own process (the tests) keeps no
    trace of it, so a later run of another data dir is not sent to this one's _static/."""
    from .schema import STATIC_DIR_ENV

    data_dir = Path(data_dir).resolve()
    before = os.environ.get(STATIC_DIR_ENV)
    if data_dir != DATA_DIR.resolve() and before is None:
        os.environ[STATIC_DIR_ENV] = str(data_dir.parent / "_static")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(STATIC_DIR_ENV, None)


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

        from .run.server import STOP_ENV

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
        from .run.server import STOP_ENV

        for sig, old in self._old.items():
            signal.signal(sig, old)
        if self._env_before is None:
            os.environ.pop(STOP_ENV, None)
        else:
            os.environ[STOP_ENV] = self._env_before
        self._stop.unlink(missing_ok=True)


def _load_notebook(path: Path):
    import jupytext

    return jupytext.read(path)
