"""Sweeps: points that share a server run on one `vllm serve` session, one pass after another.

Resumable point by point: complete points are skipped; a point that fails gets a `failed` manifest and
stops the sweep (rerun to redo it); an interrupted one gets an `interrupted` manifest. A time budget
stops the sweep cleanly before a point that would not fit, so that a long sweep can be split across
commands that each have a time limit.

Warm-up policy: the first measured point of every server session is preceded by a warm-up flood
(recorded as `warmup.json` in that point, never mixed with a measured pass); a point that measures
the cold server itself (`cold_start`) must run first on a fresh server and carries its own passes.
Seeds: every pass in a session uses its own seed (vLLM's prefix cache would otherwise serve a repeated
prompt set from cache); a measured point uses the same seed on every rig.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
import traceback
import uuid
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .. import __version__
from .bench import (BenchForkServer, PassSpec, Workload, bench_command, client_file, client_specs, run_clients,
                    run_pass)
from ..errors import UserError
from ..records.gpuclocks import artefact_name as gpu_artefact_name, sampling as gpu_sampling
from .lock import writer_lock
from ..model.modelkit import ModelSpec
from ..records.poller import artefact_name, polling
from ..records.record import new_manifest, read_manifest, read_record
from ..records.redact import (redact_argv, redact_record, redact_server_info, scrub_files, scrub_text,
                              secret_values)
from .rig import RigProfile
from .gpuenv import is_cpu_rig
from .server import (OtherRuns, ServerSpec, TerminateAsInterrupt, VllmServer, api_keys, check_shared_machine,
                     session_dir, stop_requested)
from ..records.store import (artefact_records, compress_large, fresh_point_dir, is_complete,
                    request_throughput, write_failed, write_json_atomic)

WARMUP_SEED = 10_000
# Before a sweep has timed anything: what a server start and a point are assumed to take (the budget's unit)
SERVER_START_ESTIMATE_S = 300.0
POINT_ESTIMATE_S = 60.0
WINDOW_MARGIN = 1.5  # a short warm-up flood underestimates the steady rate (ramp-up, prefill first)


@dataclass
class PassPlan:
    label: str  # file stem of the result: warmup, cold, bench, ...
    kind: str  # warmup | cold | measured
    spec: PassSpec
    # A task alongside the pass (part 2's injected long prompt): side(server_url, model, point_dir, label) is a
    # context manager entered before the pass and left after it; its `record` goes into the pass's record.
    side: "callable | None" = None


@dataclass
class PointPlan:
    name: str  # the point's folder name
    session: str  # points with the same key share one server, in plan order
    max_num_seqs: int
    passes: list[PassPlan]
    params: dict = field(default_factory=dict)  # what this point varies (for loaders and tables)
    preset: str | None = None  # model preset when not the rig's
    cold_start: bool = False  # measures a fresh server: no automatic warm-up before it
    # A flood's measured pass lasts at least this long: its prompt count is raised (up to max_prompts) from
    # the warm-up flood's throughput on the same server, so a fast GPU still gets a steady window.
    min_window_s: float | None = None
    max_prompts: int | None = None
    # Resolved just before the point runs (e.g. a rate relative to the rig's measured capacity).
    resolve: "callable | None" = None
    serve_args: list[str] = field(default_factory=list)  # the session's own `vllm serve` flags (after the rig's)
    serve_env: dict[str, str] = field(default_factory=dict)  # the session's own server environment (after the rig's)
    poll_metrics_s: float | None = None  # poll /metrics this often during measured passes (poller.polling)
    workload: Workload | None = None  # this point's lengths when not the part's (warm-ups keep the part's)


@dataclass
class SweepContext:
    part: str
    rig: RigProfile
    rig_dir: Path
    python: str
    models: dict[str, ModelSpec]  # preset -> prepared model
    workload: Workload
    rig_info: dict = field(default_factory=dict)
    warmup_prompts: int | None = None  # None: 2 x max_num_seqs, at least 16, at most 512
    budget_s: float | None = None  # stop before a point that would end past this many seconds
    server_start_estimate_s: float = SERVER_START_ESTIMATE_S
    startup_timeout_s: float = 900.0
    progress: bool = True
    serve_args: list[str] = field(default_factory=list)  # the part's `vllm serve` flags (e.g. --dtype float16)
    server_env: dict[str, str] = field(default_factory=dict)  # the part's server environment
    extra_manifest: dict = field(default_factory=dict)
    # A complete point made with other settings than the plan's is refused (one line naming the difference);
    # with redo_changed (--redo-changed) it is made again.
    redo_changed: bool = False
    # The note of the writer lock a caller took for the whole run (lock.writer_lock's): the sweep checks it and
    # takes no lock of its own. None: the sweep takes the lock.
    lock_holder: dict | None = None
    # Another run serving on this machine refuses a GPU rig's run unless this is set (--allow-shared); a point
    # measured beside another run records it either way (its manifest's `shared_with`).
    allow_shared: bool = False


@dataclass
class SweepReport:
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # not run because of the time budget
    failed: list[str] = field(default_factory=list)
    server_starts_s: list[float] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return not self.pending and not self.failed

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, record: dict) -> SweepReport:
        return cls(**record)

    def summary(self) -> list[str]:
        """What the sweep did, in a line, and a second one naming the points left for a later run."""
        starts = ", ".join(f"{s:.0f}" for s in self.server_starts_s)
        lines = [f"done {len(self.done)}, already complete {len(self.skipped)}, left for a later run "
                 f"{len(self.pending)}, failed {len(self.failed)}"
                 + (f"; server starts (s): {starts}" if starts else "")]
        if self.pending:
            lines.append("stopped at the time budget; rerun the same command to resume: " + ", ".join(self.pending))
        return lines


class SweepFailed(UserError):
    pass


def _progress(total: int, initial: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="point", disable=not enabled, file=sys.stderr,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} points [{elapsed}<{remaining}]{postfix}")


def _sessions(plans: list[PointPlan]) -> list[list[PointPlan]]:
    groups: list[list[PointPlan]] = []
    for p in plans:
        if groups and groups[-1][0].session == p.session:
            groups[-1].append(p)
        else:
            groups.append([p])
    return groups


def _warmup_pass(ctx: SweepContext, max_num_seqs: int, session_no: int) -> PassPlan:
    n = ctx.warmup_prompts or min(512, max(16, 2 * max_num_seqs))
    return PassPlan("warmup", "warmup", PassSpec(num_prompts=n, seed=WARMUP_SEED + session_no, detailed=False))


def run_sweep(plans: list[PointPlan], ctx: SweepContext) -> SweepReport:
    names = [p.name for p in plans]
    if len(set(names)) != len(names):
        raise ValueError("duplicate point names in plan")
    with writer_lock(ctx.rig_dir, f"part {ctx.part} on rig {ctx.rig.name}", handed_over=ctx.lock_holder):
        return _run_sweep_locked(plans, names, ctx)


def _run_sweep_locked(plans: list[PointPlan], names: list[str], ctx: SweepContext) -> SweepReport:
    report = SweepReport()
    changed = changed_points(plans, ctx.rig_dir, _plan_settings_source(ctx))
    if not ctx.redo_changed:
        refuse_changed(changed, ctx.rig_dir)
    todo = {p.name for p in plans if p.name in changed or not is_complete(ctx.rig_dir / p.name)}
    if todo:
        check_same_machine(ctx.rig.name, ctx.rig_dir.parent.parent, ctx.rig_info)
        check_budget(ctx.budget_s / 60 if ctx.budget_s is not None else None, ctx.server_start_estimate_s)
        # before the first server: two runs on one GPU disturb each other (a GPU rig's is refused unless allowed)
        shared = check_shared_machine(not is_cpu_rig(ctx.rig), ctx.allow_shared)
        if shared:
            print(shared, file=sys.stderr, flush=True)
    report.skipped = [n for n in names if n not in todo]
    t0 = time.monotonic()
    durations: list[float] = []
    bar = _progress(len(plans), len(plans) - len(todo), ctx.progress)

    def fits(extra_s: float) -> bool:
        if stop_requested():  # the command was signalled (see server.STOP_ENV): no further point or server
            raise KeyboardInterrupt("the command was asked to stop")
        if ctx.budget_s is None:
            return True
        estimate = max(durations) if durations else POINT_ESTIMATE_S
        return time.monotonic() - t0 + extra_s + estimate <= ctx.budget_s

    try:
        with TerminateAsInterrupt():
            for session_no, group in enumerate(_sessions(plans)):
                pending = [p for p in group if p.name in todo]
                if not pending:
                    continue
                start_estimate = max(report.server_starts_s) if report.server_starts_s else ctx.server_start_estimate_s
                if not fits(start_estimate):
                    report.pending += [p.name for p in pending]
                    continue
                _run_session(pending, ctx, session_no, report, durations, fits, bar)
                if report.failed:
                    break
    finally:
        bar.close()
    left = [n for n in names if n in todo and n not in report.done and n not in report.failed and n not in report.pending]
    report.pending += left
    return report


def session_server(first: PointPlan, ctx: SweepContext, model: ModelSpec) -> ServerSpec:
    """The server a session starts for its first point: later flags win (the part's defaults, then the rig's
    deviations, then the point's own)."""
    args = [*model_serve_args(model), "--max-num-seqs", str(first.max_num_seqs), *ctx.serve_args, *ctx.rig.serve_args,
            *first.serve_args]
    return ServerSpec(model=model.model, python=ctx.python, args=args,
                      env={**ctx.server_env, **ctx.rig.env, **first.serve_env}, startup_timeout_s=ctx.startup_timeout_s)


DRY_PORT = 8000  # plan --dry-run prints this port and URL; a run picks a free port


def dry_run_lines(plans: list[PointPlan], ctx: SweepContext) -> list[str]:
    """plan --dry-run: per session, the `vllm serve` command line its server starts with (its environment's own
    variables first), then per point each pass's `vllm bench serve` command line, in the order a run sends them (the
    session's warm-up flood before its first point). Nothing is started or written. A measured pass sized at run
    time from the warm-up's rate (a point's min_window_s) and a pass with a side process (profiler, injections) say
    so after their line."""
    import shlex

    url = f"http://127.0.0.1:{DRY_PORT}"
    out: list[str] = []
    for session_no, points in enumerate(_sessions(plans)):
        first = points[0]
        model = ctx.models[first.preset or ctx.rig.model_preset]
        spec = session_server(first, ctx, model)
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in spec.env.items())
        out.append(f"# session {session_no + 1}: {first.session} ({len(points)} point{'s' if len(points) > 1 else ''})")
        out.append((env + " " if env else "") + shlex.join(spec.command(DRY_PORT)))
        warmed = False
        for point in points:
            passes = list(point.passes)
            if not warmed and not point.cold_start:
                passes.insert(0, _warmup_pass(ctx, point.max_num_seqs, session_no))
            warmed = True
            out.append(f"  # {point.name}")
            for p in passes:
                workload = ctx.workload if p.kind == "warmup" else point.workload or ctx.workload
                for k, spec in enumerate(client_specs(p.spec), start=1):
                    result = client_file(ctx.rig_dir / point.name / f"{p.label}.json", k)
                    cmd = bench_command(ctx.python, url, model.model, model.tokenizer, workload, spec, result.parent,
                                        result.name)
                    out.append("  " + shlex.join(cmd))
                notes = []
                if p.spec.clients > 1:
                    notes.append(f"the {p.spec.clients} clients above run at once")
                if p.kind == "measured" and point.min_window_s:
                    notes.append("--num-prompts sized at run time from the warm-up's rate")
                if p.side:
                    notes.append("with a side process during the pass (profiler window or injected requests)")
                if p.kind == "measured" and point.poll_metrics_s:
                    notes.append(f"/metrics polled every {point.poll_metrics_s:g} s")
                if notes:
                    out.append("    # " + "; ".join(notes))
    return out


@dataclass
class _Session:
    """One server session while its points run: what each step reads (the started server, its client environment,
    the bench fork server) and what the points hand on (the log read so far, the session's warm-up and its rate)."""
    ctx: SweepContext
    session_no: int
    session_id: str
    model: ModelSpec
    server: VllmServer
    client: dict
    forks: BenchForkServer | None
    log_path: Path
    others: OtherRuns
    record: dict = field(default_factory=dict)  # the manifest's `session`
    server_info: str | None = None
    log_offset: int = 0
    warmed: bool = False
    warm_rps: float | None = None  # the session's warm-up flood rate: sizes every later measured pass to its window

    @property
    def runner(self) -> str:
        return "fork" if self.forks else "process"


def _run_session(points: list[PointPlan], ctx: SweepContext, session_no: int, report: SweepReport,
                 durations: list[float], fits, bar) -> None:
    first = points[0]
    preset = first.preset or ctx.rig.model_preset
    model = ctx.models[preset]
    session_id = uuid.uuid4().hex[:12]
    tmp = session_dir(session_id)  # removed in the `finally` below, or by the next command if this one is killed
    log_path = tmp / "server.log"
    spec = session_server(first, ctx, model)
    server = VllmServer(spec, log_path, run={"part": ctx.part, "rig": ctx.rig.name, "rig_dir": str(ctx.rig_dir)},
                        owners=run_owners(ctx), forget=[tmp])
    client = client_env(spec, ctx.rig.env)
    bar.set_postfix_str(f"starting server for {first.name}")
    forks = None
    others = OtherRuns().start()  # another run's servers seen during a point: its manifest says so
    try:
        # the bench client's imports (15-30 s) overlap the server's start, and are paid once per session
        forks = BenchForkServer(ctx.python, client, tmp / "bench-fork.log") if BenchForkServer.enabled() else None
        s = _Session(ctx, session_no, session_id, model, server, client, forks, log_path, others)
        _start_server(s, spec, first, report)
        for index, point in enumerate(points):
            if not fits(0):
                report.pending += [p.name for p in points[index:]]
                return
            if point.cold_start and index != 0:
                raise ValueError(f"{point.name} measures a cold server and must come first in its session")
            bar.set_postfix_str(point.name)
            _run_point(s, point, index, report, durations)
            bar.update(1)
    finally:
        others.stop()
        if forks is not None:
            forks.close()
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _start_server(s: _Session, spec: ServerSpec, first: PointPlan, report: SweepReport) -> None:
    """Start the session's server (a failed or interrupted start is the first point's record) and read its
    /server_info; the session's record for every manifest."""
    ctx, server = s.ctx, s.server
    t_start = time.monotonic()
    try:
        server.start()
    except KeyboardInterrupt as e:  # stopped while the server started: the point it was for says so
        _record_failure(ctx.rig_dir / first.name, first, ctx, s.model, s.log_path, 0, None, [], e, "interrupted",
                        s.session_id)
        raise
    except UserError as e:
        e = _names_kept_log(e, s.log_path, ctx.rig_dir / first.name)  # the session's folder goes at its end
        _record_failure(ctx.rig_dir / first.name, first, ctx, s.model, s.log_path, 0, None, [], e, "failed",
                        s.session_id)
        report.failed.append(first.name)
        raise SweepFailed(scrub_text(f"point {first.name}: {e}", _secrets(ctx))) from None  # a log tail may echo one
    report.server_starts_s.append(time.monotonic() - t_start)
    s.record = {"id": s.session_id, "server_command": spec.command(server.port), "server_env": spec.env,
                "server_started": server.started_at, "server_healthy": server.healthy_at,
                "start_to_healthy_s": server.healthy_at - server.started_at}
    try:
        # it collects the system's environment: slow on a busy host
        s.server_info = server.get("/server_info", timeout=60)
    except Exception:  # noqa: BLE001 - only a dev-mode endpoint; absence is recorded, not fatal
        s.server_info = None


def _run_point(s: _Session, point: PointPlan, index: int, report: SweepReport, durations: list[float]) -> None:
    """One point of the session: its passes (a failure or an interrupt recorded in its folder, then raised), then
    its slice of the server's log and its manifest."""
    ctx = s.ctx
    t_point, point_started = time.monotonic(), time.time()
    pdir = fresh_point_dir(ctx.rig_dir / point.name, replace_complete=ctx.redo_changed)
    records: list[dict] = []
    try:
        _run_passes(s, point, index, pdir, records)
    except KeyboardInterrupt as e:
        _record_failure(pdir, point, ctx, s.model, s.log_path, s.log_offset, s.record, records, e, "interrupted",
                        s.session_id)
        raise
    except Exception as e:  # noqa: BLE001 - any failure marks the point failed and stops the sweep
        e = s.server.exit_error(e)  # a dead server, not the requests it failed, is the cause
        e = unauthorized(s.server.url, s.client.get("OPENAI_API_KEY")) or e  # an HTTP 401, named as such
        e = _names_kept_log(e, s.log_path, pdir)
        _record_failure(pdir, point, ctx, s.model, s.log_path, s.log_offset, s.record, records, e, "failed",
                        s.session_id)
        report.failed.append(point.name)
        raise SweepFailed(scrub_text(f"point {point.name} failed: {e}; rerun the same command to redo it "
                                     f"(complete points are kept)", _secrets(ctx))) from None
    new_offset = _copy_log_slice(s.log_path, s.log_offset, pdir / "server.log")
    scrub_files(pdir, _secrets(ctx))
    compress_large(pdir)
    session = {**s.record, "index": index, "log_slice": [s.log_offset, new_offset], "has_startup": index == 0}
    manifest = _manifest(point, ctx, s.model, records, session, "complete", pdir, shared=s.others.since(point_started))
    write_json_atomic(pdir / "manifest.json", manifest)
    s.log_offset = new_offset
    durations.append(time.monotonic() - t_point)
    report.done.append(point.name)


def _run_passes(s: _Session, point: PointPlan, index: int, pdir: Path, records: list[dict]) -> None:
    """A point's passes, in order (the session's warm-up first where the session has not warmed), each pass's record
    appended to `records` as it ends; the server's counters before and after."""
    ctx, server = s.ctx, s.server
    if point.resolve is not None:
        point.resolve(point, ctx)
    passes = list(point.passes)
    session_warmup = None
    if not s.warmed and not point.cold_start:
        session_warmup = _warmup_pass(ctx, point.max_num_seqs, s.session_no)
        passes.insert(0, session_warmup)
    s.warmed = True  # a cold_start point warms the server with its own passes
    _snapshot(server, pdir / "metrics-before.prom")
    if index == 0 and s.server_info is not None:
        (pdir / "server_info.json").write_text(redact_server_info(s.server_info, _secrets(ctx)))
    for p in passes:
        records.append(_run_one_pass(s, point, p, pdir, p is session_warmup))
        if not server.alive():
            raise UserError("the server died during the pass")
        if p.kind == "warmup":
            s.warm_rps = _optional_rps(pdir, p.label)
            # the measured passes' counters (preemptions, steps) start after the warm-up
            _snapshot(server, pdir / "metrics-before.prom")
    _snapshot(server, pdir / "metrics-after.prom")


def _run_one_pass(s: _Session, point: PointPlan, p: PassPlan, pdir: Path, session_warmup: bool) -> dict:
    """One pass: its clients (one `vllm bench serve`, or several at once), its side process, /metrics polling and GPU
    sampling around it; its record for the manifest."""
    ctx, server, model, client = s.ctx, s.server, s.model, s.client
    spec = p.spec
    if p.kind == "measured" and point.min_window_s and s.warm_rps:
        spec = replace(spec, num_prompts=prompts_for_window(
            math.inf, s.warm_rps, WINDOW_MARGIN * point.min_window_s, spec.num_prompts,
            point.max_prompts or spec.num_prompts))
    side = p.side(server.url, model.model, pdir, p.label) if p.side else None
    # GPU clocks/power of every pass but the warm-up (gpuclocks: a slow session explained later)
    with side or nullcontext(), polling(server.url, pdir / artefact_name(p.label),
                 point.poll_metrics_s if p.kind == "measured" else None), \
            gpu_sampling(pdir / gpu_artefact_name(p.label), p.kind != "warmup"):
        # the session's warm-up floods with the part's lengths
        workload = ctx.workload if session_warmup else point.workload or ctx.workload
        clients = None
        if spec.clients > 1:
            started = time.time()
            clients = run_clients(ctx.python, server.url, model.model, model.tokenizer, workload, spec,
                                  pdir / f"{p.label}.json", pdir / "bench.log", env=client,
                                  fork_server=s.forks)
            cmd, ended = clients[0]["command"], max(c["ended"] for c in clients)
        else:
            cmd, started, ended = run_pass(ctx.python, server.url, model.model, model.tokenizer,
                                           workload, spec, pdir / f"{p.label}.json",
                                           pdir / "bench.log", env=client, fork_server=s.forks)
    return {"label": p.label, "kind": p.kind, "spec": spec.to_dict(), "command": cmd,
            "runner": s.runner,
            **({"clients": [{**c, "command": redact_argv(c["command"])} for c in clients]}
               if clients else {}),
            **({"workload": asdict(ctx.workload)} if session_warmup else {}),
            "started": started, "ended": ended, "result": f"{p.label}.json",
            **({"side": side.record} if side else {}),
            **({"planned_prompts": p.spec.num_prompts} if spec is not p.spec else {})}


def run_owners(ctx: SweepContext) -> list[tuple[int, float]]:
    """Besides the sweep's own process, the run's process whose end ends the servers: the holder of the writer lock
    when it handed the lock over (`reproduce`'s CLI, whose notebook kernel runs the sweep)."""
    holder = ctx.lock_holder or {}
    if holder.get("pid") in (None, os.getpid()) or holder.get("process_started") is None:
        return []
    return [(int(holder["pid"]), float(holder["process_started"]))]


def client_env(spec: ServerSpec, rig_env: dict[str, str]) -> dict[str, str]:
    """The benchmark client's environment: the rig's, and the server's API key where it requires one (vllm bench
    serve sends OPENAI_API_KEY as its bearer token); an empty key otherwise, so that a key of the caller's
    own environment is never sent to the measured server."""
    keys = api_keys(spec.args, spec.env)
    return {**rig_env, "OPENAI_API_KEY": keys[0] if keys else ""}


def unauthorized(url: str, key: str | None) -> UserError | None:
    """A UserError when the server answers the client's key with HTTP 401 (None otherwise, or unreachable)."""
    import requests

    try:
        r = requests.get(url + "/v1/models", headers={"Authorization": f"Bearer {key}"} if key else {}, timeout=10)
    except requests.RequestException:
        return None
    if r.status_code != 401:
        return None
    return UserError(f"the server answered the benchmark's requests with HTTP 401 Unauthorized: it requires an API "
                     f"key ({'the key the client sent is not one of them' if key else 'the client sent none'}); give "
                     f"the key as --api-key in the rig's serve_args or VLLM_API_KEY in its env, not only in the "
                     f"shell's environment")


def _optional_rps(point: Path, label: str) -> float | None:
    try:
        return request_throughput(point, label) or None
    except (OSError, KeyError, TypeError, ValueError):
        return None


def model_serve_args(model: ModelSpec) -> list[str]:
    """Dummy weights, and the synthetic tokenizer that lives beside the shapes (see modelkit)."""
    if model.load_format == "dummy":
        return ["--load-format", "dummy", "--tokenizer", model.tokenizer]
    return []


def _snapshot(server: VllmServer, path: Path) -> None:
    try:
        path.write_text(server.get("/metrics"))
    except Exception:  # noqa: BLE001 - a missing snapshot is visible by its absence
        pass


def _names_kept_log(error: BaseException, log_path: Path, pdir: Path) -> BaseException:
    """`error` with the session's server log (in its temporary folder, removed when the session ends) named as
    the copy that _record_failure keeps in the point's folder, `pdir`/server.log."""
    text = str(error)
    if str(log_path) not in text:
        return error
    text = text.replace(str(log_path), str(Path(pdir) / "server.log"))
    try:
        return type(error)(text)
    except TypeError:
        return UserError(text)


def _copy_log_slice(log_path: Path, start: int, dest: Path) -> int:
    try:
        with open(log_path, "rb") as f:
            f.seek(start)
            data = f.read()
    except OSError:
        data = b""
    try:
        dest.write_bytes(data)
    except OSError as e:  # a truncated copy would pass for the point's log: none is kept
        dest.unlink(missing_ok=True)
        raise write_failed(dest, e) from None
    return start + len(data)


def _secrets(ctx: SweepContext) -> set[str]:
    """Values of the secret-named variables and flags the server and client see: never written (see redact)."""
    return secret_values({**os.environ, **ctx.server_env, **ctx.rig.env}, [*ctx.serve_args, *ctx.rig.serve_args])


def _manifest(point: PointPlan, ctx: SweepContext, model: ModelSpec, records: list[dict], session: dict | None,
              status: str, pdir: Path, error: str | None = None, shared: list[dict] | None = None) -> dict:
    records = [{**r, "command": redact_argv(r["command"])} if "command" in r else r for r in records]
    if session and session.get("server_command"):
        session = {**session, "server_command": redact_argv(session["server_command"])}
    # new_manifest: the fields checked as a typed, versioned record.PointRecord (format included)
    fields = _manifest_fields(point, ctx, model, records, session, status, pdir, error)
    if shared:  # other runs' servers on this machine during the point: the pages flag it
        fields["shared_with"] = shared
    return redact_record(new_manifest(fields), _secrets(ctx))


def _manifest_fields(point: PointPlan, ctx: SweepContext, model: ModelSpec, records: list[dict],
                     session: dict | None, status: str, pdir: Path, error: str | None) -> dict:
    return {
        "status": status,
        "error": error,
        "part": ctx.part,
        "rig": ctx.rig.name,
        "point": point.name,
        "params": point.params,
        "max_num_seqs": point.max_num_seqs,
        "workload": asdict(point.workload or ctx.workload),
        "model": asdict(model),
        "passes": records,
        "session": session,
        "rig_profile": {"serve_args": ctx.rig.serve_args, "env": ctx.rig.env, "notes": ctx.rig.notes,
                        "has_profile": ctx.rig.has_profile},
        "rig_info": ctx.rig_info,
        "files": sorted(f.name for f in pdir.iterdir() if f.is_file() and f.name != "manifest.json"),
        "artefacts": artefact_records(pdir),  # size and sha256 of each file: loading checks them
        "written": time.time(),
        "inference_wall": __version__,
        **ctx.extra_manifest,
    }


def _record_failure(pdir: Path, point: PointPlan, ctx: SweepContext, model: ModelSpec, log_path: Path, offset: int,
                    session: dict | None, records: list[dict], exc: BaseException, status: str, session_id: str) -> None:
    if is_complete(pdir):
        return
    pdir.mkdir(parents=True, exist_ok=True)
    _copy_log_slice(log_path, offset, pdir / "server.log")
    message = " ".join(str(exc).split()) or type(exc).__name__
    (pdir / "error.txt").write_text("".join(traceback.format_exception(exc)))
    scrub_files(pdir, _secrets(ctx))
    write_json_atomic(pdir / "manifest.json",
                      _manifest(point, ctx, model, records, session or {"id": session_id}, status, pdir, message))


# ---------------------------------------------------------------------------------------------
# A point's identity: what made it. A resume keeps a complete point only when the plan would make it the same way.
# ---------------------------------------------------------------------------------------------

@dataclass
class SettingsSource:
    """What, besides the point itself, shapes how a point is made: the part's serve flags and server
    environment, the rig's profile, the part's workload (see point_settings)."""
    serve_args: list[str]
    server_env: dict[str, str]
    rig: RigProfile
    workload: Workload


def _plan_settings_source(ctx: SweepContext) -> SettingsSource:
    return SettingsSource(ctx.serve_args, ctx.server_env, ctx.rig, ctx.workload)


def _plain(x):
    """JSON-shaped (tuples as lists, numbers as JSON reads them), as a manifest holds it."""
    return json.loads(json.dumps(x, default=str))


def point_settings(point: PointPlan, src: SettingsSource) -> dict:
    """What makes a point, as the plan would make it: the model preset and source, the running batch cap, the
    workload, the server's flags and environment (secrets redacted as the manifest records them), the point's
    own parameters, and (for a point the plan fixes before it runs) each planned pass's spec."""
    flags = [*src.serve_args, *src.rig.serve_args, *point.serve_args]
    env = {**src.server_env, **src.rig.env, **point.serve_env}
    secrets = secret_values({**os.environ, **env}, flags)
    out = {"model": {"preset": point.preset or src.rig.model_preset, "source": src.rig.model_source},
           "max_num_seqs": point.max_num_seqs, "workload": asdict(point.workload or src.workload),
           "serve flags": redact_record(redact_argv(flags), secrets),
           "server env": redact_record(env, secrets), "params": point.params}
    if point.resolve is None:  # a resolved point's passes are set when it runs (e.g. a rate from the flood)
        out["passes"] = {p.label: p.spec.to_dict() for p in point.passes}
    return _plain(out)


def _recorded_flags(command: list[str]) -> list[str] | None:
    """The flags after the model's own and --max-num-seqs in a recorded `vllm serve` command (see _run_session)."""
    try:
        return command[command.index("--max-num-seqs") + 2:]
    except (ValueError, AttributeError):
        return None


def recorded_settings(manifest: dict) -> dict:
    """point_settings's keys as a point's manifest recorded them (a key it lacks is absent)."""
    session = manifest.get("session") or {}
    model = manifest.get("model") or {}
    out = {"model": {"preset": model.get("preset"), "source": model.get("source")},
           "max_num_seqs": manifest.get("max_num_seqs"), "workload": manifest.get("workload"),
           "serve flags": _recorded_flags(session.get("server_command")), "server env": session.get("server_env"),
           "params": manifest.get("params"),
           "passes": {r["label"]: {**r["spec"], **({"num_prompts": r["planned_prompts"]}
                                                   if "planned_prompts" in r else {})}
                      for r in manifest.get("passes") or [] if "spec" in r}}
    return {k: v for k, v in out.items() if v is not None}


_PASS_DEFAULTS = _plain(PassSpec(num_prompts=0).to_dict())


def _show(v) -> str:
    return " ".join(v) if isinstance(v, list) and all(isinstance(x, str) for x in v) else json.dumps(v)


def settings_differences(planned: dict, recorded: dict) -> list[str]:
    """Where a recorded point differs from the plan, in words ('workload input_len: made with 32, the plan
    has 64'). The point's parameters and workload are compared key by key (a resolved point records more
    parameters than its plan fixes); passes by label, the plan's only (the session's warm-up is not the
    point's)."""
    diffs = []
    for key, want in planned.items():
        if key not in recorded:
            continue
        have = recorded[key]
        if key in ("params", "workload", "model"):
            for k, v in want.items():
                if k in have and have[k] != v:
                    diffs.append(f"{key} {k}: made with {_show(have[k])}, the plan has {_show(v)}")
        elif key == "passes":
            for label, spec in want.items():
                if label not in have:
                    diffs.append(f"pass {label}: not in the record")
                    continue
                for k, v in spec.items():
                    # a field the record predates was made at its default (a field added to PassSpec later)
                    if have[label].get(k, _PASS_DEFAULTS.get(k)) != v:
                        diffs.append(f"pass {label} {k}: made with {_show(have[label].get(k))}, the plan has "
                                     f"{_show(v)}")
        elif have != want:
            diffs.append(f"{key}: made with {_show(have) or '(none)'}, the plan has {_show(want) or '(none)'}")
    return diffs


def changed_points(plans: list[PointPlan], rig_dir: Path, src: SettingsSource) -> dict[str, list[str]]:
    """{point name: differences} for the complete points of `rig_dir` that the plan would make otherwise."""
    out = {}
    for point in plans:
        m = read_manifest(Path(rig_dir) / point.name)  # recorded_settings reads the dict as written
        if m and m.get("status") == "complete":
            diffs = settings_differences(point_settings(point, src), recorded_settings(m))
            if diffs:
                out[point.name] = diffs
    return out


def rig_settings(src: SettingsSource) -> dict:
    """What every point of a part on a rig shares, as this plan would make it: the model's source, the rig profile's
    own flags and environment (secrets redacted as a manifest records them), and the part's workload."""
    secrets = secret_values({**os.environ, **src.rig.env}, src.rig.serve_args)
    return _plain({"model": {"source": src.rig.model_source}, "workload": asdict(src.workload),
                   "rig profile flags": redact_record(redact_argv(src.rig.serve_args), secrets),
                   "rig profile env": redact_record(src.rig.env, secrets)})


def recorded_rig_settings(manifest: dict) -> dict:
    """rig_settings's keys as a point's manifest recorded them; its workload only where it was the part's (a point
    with lengths of its own, part 0's decode points, records its own)."""
    part = manifest.get("parameters") or {}
    profile = manifest.get("rig_profile") or {}
    workload = manifest.get("workload") or {}
    out = {"model": {"source": (manifest.get("model") or {}).get("source")},
           "rig profile flags": profile.get("serve_args"), "rig profile env": profile.get("env")}
    if workload and all(workload.get(k) == part.get(k) for k in ("input_len", "output_len")):
        out["workload"] = workload
    return {k: v for k, v in out.items() if v is not None}


def changed_outside(plans: list[PointPlan], rig_dir: Path, src: SettingsSource) -> dict[str, list[str]]:
    """{point name: differences} for the complete points of `rig_dir` that are not in the plan but would sit beside
    its points made otherwise in what every point of the part and rig shares (rig_settings): a run of other caps at
    another input_len would leave the folder holding both."""
    names, want, out = {p.name for p in plans}, rig_settings(src), {}
    folder = Path(rig_dir)
    for point in sorted(folder.iterdir()) if folder.is_dir() else []:
        m = read_manifest(point) if point.is_dir() and point.name not in names else None
        if m and m.get("status") == "complete":
            diffs = settings_differences(want, recorded_rig_settings(m))
            if diffs:
                out[point.name] = diffs
    return out


def refuse_changed(changed: dict[str, list[str]], rig_dir: Path) -> None:
    """One line naming the first changed point and how it differs (see changed_points); nothing if none."""
    if not changed:
        return
    name, diffs = next(iter(changed.items()))
    more = f" (and {len(changed) - 1} more point(s): {', '.join(list(changed)[1:])})" if len(changed) > 1 else ""
    raise UserError(f"point {name} of {rig_dir} is complete but was made with other settings than this plan: "
                    f"{'; '.join(diffs)}{more}; rerun with --redo-changed to make the changed points again, or give "
                    f"this run a new rig name")


def machine_identity(rig_info: dict) -> dict:
    """The GPU (name; none on a CPU rig) and the vLLM version a rig capture names."""
    return {"GPU": (rig_info.get("gpu") or {}).get("name") or "none", "vLLM": rig_info.get("vllm")}


def check_same_machine(rig: str, runs: Path, rig_info: dict) -> None:
    """A run adds to a rig's data only on the machine its complete points were made on (the same GPU and vLLM
    version in every part's manifests of that rig); otherwise one line asks for a new rig name."""
    here = machine_identity(rig_info)
    if not here["vLLM"]:
        return  # the probe could not import vLLM: the server start reports that, by name
    seen: dict[tuple, str] = {}
    for part in sorted(Path(runs).glob(f"*/{rig}")):
        for point in sorted(part.iterdir()):
            rec = read_record(point) if point.is_dir() else None
            if rec and rec.complete:
                ident = machine_identity(rec.rig_info)
                seen.setdefault((ident["GPU"], ident["vLLM"]), f"{part.parent.name}/{point.name}")
    if seen and (here["GPU"], here["vLLM"]) not in seen:
        (gpu, vllm), where = next(iter(seen.items()))
        raise UserError(f"rig {rig}'s runs were made on GPU {gpu} with vLLM {vllm} (e.g. {where}); this machine "
                        f"has GPU {here['GPU']} with vLLM {here['vLLM']}: give it a new rig name (e.g. RIG={rig}-b, "
                        f"with a copy of data/rigs/{rig}.json if it has one)")


def rig_start_estimate(runs_dir: Path, rig: str) -> float:
    """What a server start is assumed to take before this sweep has timed one: the slowest start to healthy that the
    rig's complete points recorded in any part (`session.start_to_healthy_s`), else SERVER_START_ESTIMATE_S for a
    rig that has none. The slowest, not the median: a first start on a fresh host tunes kernels again."""
    starts = []
    for manifest in Path(runs_dir).glob(f"*/{rig}/*/manifest.json"):
        try:
            s = json.loads(manifest.read_text()).get("session", {}).get("start_to_healthy_s")
        except (OSError, ValueError):
            continue
        if isinstance(s, (int, float)) and math.isfinite(s) and s > 0:
            starts.append(float(s))
    return max(starts) if starts else SERVER_START_ESTIMATE_S


def _minutes(seconds: float) -> str:
    """Minutes as a reader types them: whole where whole (6), else to a tenth (3.9)."""
    m = round(seconds / 60, 1)
    return f"{m:.0f}" if m == int(m) else f"{m:.1f}"


def check_budget(budget_min: float | None, start_estimate_s: float = SERVER_START_ESTIMATE_S) -> None:
    """A budget too small for one server start and one point would run nothing: say so up front."""
    need_s = start_estimate_s + POINT_ESTIMATE_S
    if budget_min is not None and not math.isfinite(budget_min):
        raise UserError(f"--budget-min {budget_min:g} is not a number of minutes; give one (e.g. --budget-min 30), "
                        f"or leave it out for no time limit")
    if budget_min is not None and budget_min * 60 < need_s:
        raise UserError(f"--budget-min {budget_min:g} is below what one point needs (about {_minutes(need_s)} min: "
                        f"a server start, {_minutes(start_estimate_s)} min, and a point, "
                        f"{POINT_ESTIMATE_S / 60:.0f} min); give at least {_minutes(math.ceil(need_s / 6) * 6)}")


def point_status(rig_dir: Path, names: list[str]) -> dict[str, str]:
    out = {}
    for n in names:
        rec = read_record(rig_dir / n)
        out[n] = rec.status if rec else ("missing" if not (rig_dir / n).exists() else "incomplete")
    return out


def prompts_for_window(rate: float, capacity: float, target_s: float, lo: int, hi: int) -> int:
    """Prompts for a pass of about target_s seconds at min(rate, capacity) completions per second."""
    effective = capacity if math.isinf(rate) else min(rate, capacity)
    return int(max(lo, min(hi, math.ceil(effective * target_s))))
