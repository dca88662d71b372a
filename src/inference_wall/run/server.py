"""One `vllm serve` process: its own process group, a kept log, /health, and a stop that always happens.

Pattern from vLLM's benchmarks/sweep/server.py (a server in its own session, killed as a group), but
the log is kept: it is half of our data. A registry of live groups (one small file per server) lets
the next start stop a server that a killed command left behind (on a GPU host such an orphan holds
the GPU memory and would answer the next client).
"""
from __future__ import annotations

import ctypes
import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import requests

from ..errors import UserError

VLLM_MAIN = "vllm.entrypoints.cli.main"  # `python -m` this: the CLI without its console script
REGISTRY = Path(os.environ.get("INFERENCE_WALL_STATE", Path.home() / ".cache" / "inference-wall")) / "servers"


class ServerStartError(UserError):
    pass


class ServerExited(UserError):
    """The server process ended while a point was using it: its status and log tail, not the bench's symptoms."""


# a port chosen by free_port() can be taken by another process before vLLM binds it: try again this often
PORT_ATTEMPTS = 3
_PORT_TAKEN = ("Address already in use", "[Errno 98]", "address already in use")


def _port_taken(log_path: Path, offset: int) -> bool:
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return False
    return any(k in text for k in _PORT_TAKEN)


@dataclass
class ServerSpec:
    model: str  # folder (dummy weights) or hub id
    python: str  # interpreter that imports vllm
    args: list[str] = field(default_factory=list)  # everything after `serve MODEL`, except --port
    env: dict[str, str] = field(default_factory=dict)
    port: int | None = None  # None: pick a free loopback port
    startup_timeout_s: float = 900.0

    def command(self, port: int) -> list[str]:
        return [self.python, "-m", VLLM_MAIN, "serve", self.model, "--host", "127.0.0.1",
                "--port", str(port), *self.args]


# Not inherited from the caller's environment: a VLLM_API_KEY there (set for some other server) would make the
# measured server refuse every request of the benchmark client, which never saw it. A rig or part that wants
# a key names it in its own env or flags (--api-key); the sweep then hands it to the client (sweep.client_env).
NOT_INHERITED = ("VLLM_API_KEY",)


def server_environment(spec_env: dict[str, str]) -> dict[str, str]:
    """The environment a `vllm serve` process starts with: the caller's (less NOT_INHERITED), then the spec's."""
    inherited = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    return {**inherited, **spec_env, "VLLM_SERVER_DEV_MODE": "1", "PYTHONUNBUFFERED": "1"}


def api_keys(args: list[str], env: dict[str, str]) -> list[str]:
    """The API keys a server started with these flags and this (spec) environment requires (vLLM: every
    --api-key value, else VLLM_API_KEY); empty when it requires none."""
    keys = []
    for i, arg in enumerate(args):
        if arg == "--api-key" and i + 1 < len(args):
            keys.append(args[i + 1])
        elif arg.startswith("--api-key="):
            keys.append(arg.split("=", 1)[1])
    return [k for k in keys if k] or ([env["VLLM_API_KEY"]] if env.get("VLLM_API_KEY") else [])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _die_with_parent() -> None:
    """In the child, before exec: a SIGKILL to us (the parent) also kills the server's main process."""
    os.setsid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


WATCHDOG = Path(__file__).with_name("_watchdog.py")


def start_watchdog(pgid: int, owners: list[tuple[int, float]], forget: list[Path] = ()) -> subprocess.Popen:
    """The server group's watchdog (_watchdog.py): a process in a session of its own that ends group `pgid` once
    one of `owners` (pid, start time as psutil's create_time) is gone, SIGKILL included, removing the files in
    `forget`; it ends by itself when the group does. An owner already gone (or whose pid another process has) ends
    the group at the watchdog's first look."""
    from ._watchdog import start_ticks

    def ticks(pid: int, start: float) -> int:  # the owner's start as the watchdog reads it; -1: gone already
        found = start_ticks(pid) if _owner_alive(pid, start) else None
        return -1 if found is None else found

    args = [str(pgid), *(f"{pid}:{ticks(pid, start)}" for pid, start in owners)]
    if forget:
        args += ["--forget", *map(str, forget)]
    return subprocess.Popen([sys.executable, "-I", "-S", str(WATCHDOG), *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            close_fds=True)


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies, which only wait to be reaped, do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def kill_group(pgid: int, grace_s: float = 20.0) -> None:
    """SIGTERM the group, wait, then SIGKILL whatever is left."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not group_alive(pgid):
            return
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def still_the_recorded_server(record: dict) -> bool:
    """Whether the group a registry record names is still the server it recorded: its leader has the recorded
    command line and start time (a reused pid has neither). With the leader gone, the group's survivors are the
    server's children only if none started before it (Linux never reuses a pid that is still a group's id)."""
    pgid, cmd, started = record.get("pgid"), record.get("cmd"), record.get("create_time")
    if not pgid or not cmd or started is None:
        return False  # a record without them (an older format) cannot be checked: never kill on it
    try:
        leader = psutil.Process(pgid)
        return leader.cmdline() == [str(c) for c in cmd] and abs(leader.create_time() - started) < 1.0
    except psutil.NoSuchProcess:
        pass
    except psutil.Error:
        return False
    members = []
    for proc in psutil.process_iter(["create_time"]):
        try:
            if os.getpgid(proc.pid) == pgid:
                members.append(proc.info["create_time"])
        except (ProcessLookupError, psutil.Error):
            continue
    return bool(members) and min(members) >= started - 1.0


def _owner_alive(pid: int | None, started: float | None) -> bool:
    """Whether the process that wrote a record still runs: its pid, and its start time where recorded (a
    reused pid has another)."""
    if not pid or not _pid_alive(pid):
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:  # killed, and not yet reaped by a parent that is gone too
            return False
        return started is None or abs(proc.create_time() - started) < 1.0
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def _this_process() -> dict:
    try:
        started = psutil.Process().create_time()
    except psutil.Error:
        started = None
    return {"pid": os.getpid(), "process_started": started}


def _reap_servers() -> list[dict]:
    stopped = []
    if not REGISTRY.is_dir():
        return stopped
    for entry in REGISTRY.glob("*.json"):
        try:
            record = json.loads(entry.read_text())
            pgid, owner = record["pgid"], record.get("owner_pid")
        except (ValueError, KeyError, OSError):
            entry.unlink(missing_ok=True)
            continue
        if owner and owner != os.getpid() and _owner_alive(owner, record.get("owner_started")):
            continue  # another live command's server: not an orphan
        if group_alive(pgid) and still_the_recorded_server(record):
            kill_group(pgid, grace_s=10)
            stopped.append(record)
        entry.unlink(missing_ok=True)
    return stopped


def other_runs_servers() -> list[dict]:
    """The registry's servers that another live run started on this machine (its owner still runs, and is not
    this process; the server's group still runs): they share the GPU (and the CPU) with this run's servers."""
    out = []
    if not REGISTRY.is_dir():
        return out
    for entry in sorted(REGISTRY.glob("*.json")):
        try:
            record = json.loads(entry.read_text())
            pgid, owner = record["pgid"], record.get("owner_pid")
        except (ValueError, KeyError, OSError):
            continue
        if not owner or owner == os.getpid() or not _owner_alive(owner, record.get("owner_started")):
            continue
        if group_alive(pgid):
            out.append(record)
    return out


def _named(records: list[dict]) -> str:
    named = []
    for r in records:
        run = r.get("run") or {}
        what = (f"part {run['part']} on rig {run['rig']}" if run.get("part") and run.get("rig") else "a run")
        where = f" ({run['rig_dir']})" if run.get("rig_dir") else ""
        named.append(f"{what}{where}, run pid {r.get('owner_pid', '?')}, server pid {r['pgid']} on port "
                     f"{r.get('port', '?')}")
    return "; ".join(named)


def shared_machine_warning(gpu: bool = True) -> str | None:
    """One line naming every other live run's server (see other_runs_servers), or None when there is none; `gpu`:
    whether this run's rig serves on the GPU (a CPU rig's runs share the machine's cores, and it may have no GPU)."""
    records = other_runs_servers()
    if not records:
        return None
    shared = "the GPU is shared" if gpu else "its CPU cores are shared"
    return (f"warning: another run is serving on this machine: {_named(records)}; {shared}, so both runs' "
            f"numbers may be disturbed (wait for it to end, or stop it, for clean measurements; the points measured "
            f"beside it are flagged on the pages)")


def check_shared_machine(gpu: bool, allow_shared: bool) -> str | None:
    """Before a run's first server: on a GPU rig, another live run's server refuses this run in one line unless it
    was asked to share (--allow-shared); otherwise the warning line (None when no other run serves)."""
    records = other_runs_servers()
    if records and gpu and not allow_shared:
        raise UserError(f"another run is serving on this machine's GPU: {_named(records)}; two runs on one GPU "
                        f"measure each other's load: wait for it to end or stop it, or pass --allow-shared "
                        f"(make reproduce ... ARGS=--allow-shared) to run beside it, its points flagged as shared")
    return shared_machine_warning(gpu) if records else None


def overlap_record(record: dict) -> dict:
    """What a point records of another run's server seen while it was measured (its manifest's `shared_with`)."""
    run = record.get("run") or {}
    return {"part": run.get("part"), "rig": run.get("rig"), "rig_dir": run.get("rig_dir"),
            "run_pid": record.get("owner_pid"), "server_pid": record.get("pgid"), "port": record.get("port")}


class OtherRuns:
    """The other live runs' servers seen on this machine while a server session lasts: a thread looks at the registry
    every `every_s` seconds; `since(t)` gives those seen at or after epoch `t` (a point's start), each once."""

    def __init__(self, every_s: float = 2.0):
        import threading

        self.every_s = every_s
        self._seen: dict[tuple, dict] = {}  # (run pid, server pid) -> overlap_record with "last_seen"
        self._lock = threading.Lock()  # the thread's looks and a point's since() both write _seen
        self._stop = threading.Event()
        self._thread = None

    def look(self) -> None:
        try:
            records = other_runs_servers()
        except Exception:  # noqa: BLE001 - a process or registry file gone mid-look: the next look reads it
            return
        now = time.time()
        with self._lock:
            for record in records:
                key = (record.get("owner_pid"), record.get("pgid"))
                self._seen[key] = {**self._seen.get(key, overlap_record(record)), "last_seen": now}

    def start(self) -> "OtherRuns":
        import threading

        self.look()
        self._thread = threading.Thread(target=self._run, name="other-runs", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.look()

    def since(self, t: float) -> list[dict]:
        self.look()
        with self._lock:
            return [{k: v for k, v in r.items() if k != "last_seen"} for r in self._seen.values()
                    if r["last_seen"] >= t]

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=self.every_s + 5)
            self._thread = None


def reap_orphans() -> list[int]:
    """Stop servers that an earlier, killed command left running (their groups are in the registry), after
    checking that each group is still the vLLM server recorded; entries that are not are only removed."""
    return [record["pgid"] for record in _reap_servers()]


# A server session's temporary folder (`iw-<session>-*` under the temp dir: the server's log while it runs,
# the bench fork server's log) carries a note of the process that made it; the session removes it on every
# exit it lives through, and the next command removes one whose maker is gone (killed with SIGKILL).
OWNER_NOTE = ".iw-owner.json"


def session_dir(session_id: str) -> Path:
    """A fresh temporary folder `iw-<session_id>-*` with a note naming this process as its owner."""
    tmp = Path(tempfile.mkdtemp(prefix=f"iw-{session_id}-"))
    (tmp / OWNER_NOTE).write_text(json.dumps(_this_process()))
    return tmp


def reap_session_dirs() -> list[Path]:
    """Remove the session folders whose owner no longer runs; folders without a note are never touched."""
    removed = []
    for note in sorted(Path(tempfile.gettempdir()).glob(f"iw-*/{OWNER_NOTE}")):
        try:
            owner = json.loads(note.read_text())
        except (OSError, ValueError):
            continue
        if not _owner_alive(owner.get("pid"), owner.get("process_started")):
            shutil.rmtree(note.parent, ignore_errors=True)
            removed.append(note.parent)
    return removed


def reap_left_behind() -> list[str]:
    """What the first thing every run-side command does (`plan`, `sweep`, `reproduce`, make's `check-args`):
    stop the servers and remove the session folders a killed run left behind; one sentence for each."""
    said = []
    for record in _reap_servers():
        cmd = [str(c) for c in record.get("cmd") or []]
        model = cmd[cmd.index("serve") + 1] if "serve" in cmd[:-1] else "?"
        since = dt.datetime.fromtimestamp(record.get("started") or record.get("create_time") or 0).strftime("%Y-%m-%d %H:%M:%S")
        said.append(f"stopped a vLLM server a killed run left running: process group {record['pgid']} "
                    f"(vllm serve {model} on port {record.get('port', '?')}, started {since}; its run, pid "
                    f"{record.get('owner_pid', '?')}, is gone)")
    for folder in reap_session_dirs():
        said.append(f"removed {folder}, the temporary folder of a server session whose run was killed")
    return said


# A stop the command asked for (a signal to `reproduce`, forwarded to the notebook's kernel): the kernel
# inherits the variable; the sweep checks the file between points and sessions, so a signal that reaches
# the kernel while it is between cells (and ignores SIGINT) still stops the run before another server starts.
STOP_ENV = "IW_STOP_FILE"


def stop_requested() -> bool:
    path = os.environ.get(STOP_ENV)
    return bool(path) and Path(path).exists()


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


class VllmServer:
    """Context manager: `with VllmServer(spec, log_path) as srv: srv.url ...`; stops the group always."""

    def __init__(self, spec: ServerSpec, log_path: Path, run: dict | None = None,
                 owners: list[tuple[int, float]] = (), forget: list[Path] = ()):
        self.spec, self.log_path = spec, Path(log_path)
        self.run = run or {}  # what started it (part, rig, rig_dir): named to another run on the same machine
        # The processes whose end, even by SIGKILL, ends the server (its watchdog's owners): this one, and the
        # run's others (`reproduce`'s CLI, which runs the sweep in a notebook's kernel); and what then goes with it.
        self.owners, self.forget = list(owners), list(forget)
        self._watchdog: subprocess.Popen | None = None
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.started_at: float | None = None
        self.healthy_at: float | None = None
        self._registry_file: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "VllmServer":
        """Start the server and wait until it is healthy. A port this class chose itself that another
        process takes between the choice and vLLM's bind ("Address already in use" in the log) is given up
        for a fresh one, up to PORT_ATTEMPTS times; a port the spec names is never changed."""
        reap_orphans()
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self.port = self.spec.port or free_port()
            if port_in_use(self.port):
                if self.spec.port is None and attempt < PORT_ATTEMPTS:
                    continue
                raise ServerStartError(f"port {self.port} is already in use on 127.0.0.1 (another server running?); "
                                       "stop it or pick another port")
            offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                self._launch()
                return self
            except ServerStartError:
                if self.spec.port is None and attempt < PORT_ATTEMPTS and _port_taken(self.log_path, offset):
                    with open(self.log_path, "a") as log:
                        log.write(f"[inference_wall] port {self.port} was taken before vLLM bound it; "
                                  f"starting again on another port\n")
                    continue
                raise
        raise AssertionError("unreachable")

    def _launch(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = server_environment(self.spec.env)
        cmd = self.spec.command(self.port)
        self.command = cmd
        with open(self.log_path, "ab") as log:
            self.started_at = time.time()
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, preexec_fn=_die_with_parent, close_fds=True)
        try:
            REGISTRY.mkdir(parents=True, exist_ok=True)
            self._registry_file = REGISTRY / f"{self.proc.pid}.json"
            me = _this_process()
            owners = [(me["pid"], me["process_started"]), *self.owners]
            self._watchdog = start_watchdog(self.proc.pid, [(p, t) for p, t in owners if p and t is not None],
                                            [self._registry_file, *self.forget])
            try:
                create_time = psutil.Process(self.proc.pid).create_time()
            except psutil.Error:
                create_time = None
            self._registry_file.write_text(json.dumps({
                "pgid": self.proc.pid, "port": self.port, "cmd": [str(c) for c in cmd], "create_time": create_time,
                "owner_pid": os.getpid(), "owner_started": _this_process()["process_started"],
                "started": self.started_at, **({"run": self.run} if self.run else {})}))
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def exit_error(self, error: BaseException) -> BaseException:
        """What to report for a failure met while this server was serving: when the server itself has exited
        (its requests then fail, and the bench reports "N requests failed"), a ServerExited naming its exit
        status and its log's tail; otherwise `error` unchanged."""
        code = self.proc.poll() if self.proc is not None else None
        if code is None:
            return error
        return ServerExited(f"the server exited (status {code}) while serving; log {self.log_path}, "
                            f"log tail: {' | '.join(tail(self.log_path, 6).splitlines())}")

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.spec.startup_timeout_s
        while True:
            code = self.proc.poll()
            if code is not None:
                raise ServerStartError(f"vllm serve exited with status {code} before it was healthy; "
                                       f"log {self.log_path}, last lines:\n{tail(self.log_path)}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    self.healthy_at = time.time()
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise ServerStartError(f"vllm serve was not healthy after {self.spec.startup_timeout_s:.0f} s; "
                                       f"log {self.log_path}, last lines:\n{tail(self.log_path)}")
            time.sleep(1.0)

    def stop(self) -> None:
        """Stop the group (SIGTERM, then SIGKILL after a grace) and remove its registry entry. A Ctrl-C while
        waiting out the grace kills the group at once, removes the entry too, and is then raised."""
        try:
            if self.proc is not None:
                try:
                    kill_group(self.proc.pid)
                except KeyboardInterrupt:
                    _killpg(self.proc.pid, signal.SIGKILL)
                    raise
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if self._registry_file is not None:
                self._registry_file.unlink(missing_ok=True)
                self._registry_file = None
            self._stop_watchdog()

    def _stop_watchdog(self) -> None:
        """The watchdog ends by itself once the group is gone; ended here at once, and reaped."""
        if self._watchdog is None:
            return
        if self._watchdog.poll() is None:
            self._watchdog.terminate()
        try:
            self._watchdog.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._watchdog.kill()
        self._watchdog = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> "VllmServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- what it says ----------------------------------------------------------------------------
    def get(self, path: str, timeout: float = 10) -> str:
        r = requests.get(self.url + path, timeout=timeout)
        r.raise_for_status()
        return r.text

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0


class TerminateAsInterrupt:
    """While active, SIGTERM (and SIGHUP) raise KeyboardInterrupt, so `finally`/`with` blocks stop servers."""

    def __enter__(self):
        self._old = {}
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._old[sig] = signal.signal(sig, self._raise)
            except ValueError:  # not the main thread
                pass
        return self

    @staticmethod
    def _raise(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


def vllm_python(explicit: str | None = None) -> str:
    """The interpreter that runs vLLM: --python / $VLLM_PYTHON, else .venv-vllm, else this one."""
    if explicit:
        return explicit
    if os.environ.get("VLLM_PYTHON"):
        return os.environ["VLLM_PYTHON"]
    from ..schema import REPO

    repo_venv = REPO / ".venv-vllm" / "bin" / "python"
    if repo_venv.exists():
        return str(repo_venv)
    return sys.executable
