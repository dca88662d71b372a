"""The server registry: orphans are killed only if still the recorded vLLM server; Ctrl-C leaves no entry."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

import fake_vllm

ROOT = Path(__file__).resolve().parents[1]


def _record(proc: subprocess.Popen, **over) -> dict:
    p = psutil.Process(proc.pid)
    return {"pgid": proc.pid, "cmd": p.cmdline(), "create_time": p.create_time(), **over}


def test_orphans_are_reaped_only_when_still_the_recorded_server(tmp_path, monkeypatch):
    from inference_wall.run import server

    monkeypatch.setattr(server, "REGISTRY", tmp_path)
    owner = subprocess.Popen(["sleep", "60"])
    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()
    procs = {name: subprocess.Popen(["sleep", "60"], start_new_session=True)
             for name in ("orphan", "guarded", "reused", "restarted", "old-format")}
    try:
        records = {
            "orphan": _record(procs["orphan"], owner_pid=dead_owner.pid),
            "guarded": _record(procs["guarded"], owner_pid=owner.pid),  # its owner still runs
            # the recorded pid now belongs to another program, or to a later process with the same command
            "reused": _record(procs["reused"], owner_pid=dead_owner.pid, cmd=[sys.executable, "-m", "vllm", "serve"]),
            "restarted": _record(procs["restarted"], owner_pid=dead_owner.pid,
                                 create_time=psutil.Process(procs["restarted"].pid).create_time() - 3600),
            "old-format": {"pgid": procs["old-format"].pid, "owner_pid": dead_owner.pid},
        }
        for name, rec in records.items():
            (tmp_path / f"{name}.json").write_text(json.dumps(rec))
        assert server.reap_orphans() == [procs["orphan"].pid]
        assert procs["orphan"].wait(10) is not None
        for name in ("guarded", "reused", "restarted", "old-format"):
            assert procs[name].poll() is None, name
        assert sorted(p.stem for p in tmp_path.glob("*.json")) == ["guarded"]
    finally:
        for p in (owner, *procs.values()):
            p.kill()
            p.wait()


def test_ctrl_c_stops_the_server_and_removes_its_registry_entry(tmp_path):
    """Two Ctrl-Cs: the first stops the server (which ignores SIGTERM here), the second cuts the grace short."""
    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{fake_vllm.install(tmp_path / 'fake')}",
           "INFERENCE_WALL_STATE": str(state), "FAKE_VLLM_IGNORE_TERM": "1"}
    code = textwrap.dedent(f"""
        import sys, time
        from inference_wall.run.server import ServerSpec, VllmServer
        with VllmServer(ServerSpec(model="m", python=sys.executable, startup_timeout_s=60), {str(tmp_path / 'log')!r}) as s:
            print(s.proc.pid, flush=True)
            time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    pgid = int(proc.stdout.readline())
    assert len(list((state / "servers").glob("*.json"))) == 1
    proc.send_signal(signal.SIGINT)
    time.sleep(2)
    assert proc.poll() is None  # waiting out the grace of a server that ignores SIGTERM
    proc.send_signal(signal.SIGINT)
    assert proc.wait(10) != 0
    deadline = time.monotonic() + 5
    from inference_wall.run.server import group_alive
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_alive(pgid)
    assert list((state / "servers").glob("*.json")) == []


def _fake_server_env(tmp_path, monkeypatch):
    from inference_wall.run import server

    monkeypatch.setenv("PYTHONPATH", fake_vllm.install(tmp_path / "fake"))
    monkeypatch.setattr(server, "REGISTRY", tmp_path / "registry")
    return server


def test_a_port_taken_between_choice_and_bind_is_retried(tmp_path, monkeypatch):
    import socket

    server = _fake_server_env(tmp_path, monkeypatch)
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    ports = iter([taken])
    real_free, real_in_use = server.free_port, server.port_in_use
    monkeypatch.setattr(server, "free_port", lambda: next(ports, None) or real_free())
    # the race: the port looked free when chosen and checked, and was taken before vLLM bound it
    monkeypatch.setattr(server, "port_in_use", lambda port: False if port == taken else real_in_use(port))
    try:
        with server.VllmServer(server.ServerSpec(model="m", python=sys.executable, startup_timeout_s=60),
                               tmp_path / "server.log") as s:
            assert s.port != taken and s.get("/health") is not None
        assert f"port {taken} was taken" in (tmp_path / "server.log").read_text()
    finally:
        holder.close()


def test_a_server_that_exits_while_serving_is_reported_as_exited(tmp_path, monkeypatch):
    from inference_wall.run.bench import BenchError

    server = _fake_server_env(tmp_path, monkeypatch)
    s = server.VllmServer(server.ServerSpec(model="m", python=sys.executable, startup_timeout_s=60), tmp_path / "server.log")
    with s:
        symptom = BenchError("4 of 4 requests failed (0 completed)")
        assert s.exit_error(symptom) is symptom  # still serving: the error stands
        os.killpg(s.proc.pid, signal.SIGKILL)
        s.proc.wait(10)
        err = s.exit_error(symptom)
    assert isinstance(err, server.ServerExited)
    assert str(err).startswith("the server exited (status -9)") and "log tail:" in str(err) and "\n" not in str(err)


def test_a_vllm_api_key_of_the_callers_environment_never_reaches_the_server(monkeypatch):
    """With VLLM_API_KEY in the shell, every request of the benchmark client (which never saw it) failed."""
    from inference_wall.run.server import api_keys, server_environment

    monkeypatch.setenv("VLLM_API_KEY", "shell-key-0123456789")
    assert "VLLM_API_KEY" not in server_environment({"OMP_NUM_THREADS": "1"})
    assert server_environment({"VLLM_API_KEY": "rig-key-0123456789"})["VLLM_API_KEY"] == "rig-key-0123456789"
    assert api_keys(["--api-key", "a-key", "--api-key=b-key"], {"VLLM_API_KEY": "c"}) == ["a-key", "b-key"]
    assert api_keys(["--enforce-eager"], {"VLLM_API_KEY": "c-key"}) == ["c-key"]
    assert api_keys([], {}) == []


def _killed_run(tmp_path: Path, kill_watchdog: bool):
    """A run (this interpreter with a fake vLLM) whose server's interpreter starts a child in the server's group (as
    vLLM's EngineCore is), SIGKILLed once the server is up, with its watchdog first where `kill_watchdog`:
    (the run, the server's group, the session folder, env)."""
    state, tmp = tmp_path / "state", tmp_path / "tmp"
    tmp.mkdir()
    engine_core = tmp_path / "python-with-an-engine-core"  # the server's interpreter: starts a child in its group
    engine_core.write_text(f"#!/bin/bash\nsleep 300 &\nexec {sys.executable} \"$@\"\n")
    engine_core.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{fake_vllm.install(tmp_path / 'fake')}",
           "INFERENCE_WALL_STATE": str(state), "TMPDIR": str(tmp)}
    code = textwrap.dedent(f"""
        import time
        from inference_wall.run.server import ServerSpec, VllmServer, session_dir
        folder = session_dir("0123456789ab")
        server = VllmServer(ServerSpec(model="m", python={str(engine_core)!r}, startup_timeout_s=60),
                            folder / "server.log", forget=[folder]).start()
        print(server.proc.pid, folder, server._watchdog.pid, flush=True)
        time.sleep(300)
    """)
    run = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    pgid, folder, watchdog = run.stdout.readline().split()
    if kill_watchdog:
        os.kill(int(watchdog), signal.SIGKILL)
    run.send_signal(signal.SIGKILL)
    run.wait(10)
    return run, int(pgid), Path(folder), env


def test_a_killed_runs_server_group_is_ended_by_its_watchdog(tmp_path):
    """SIGKILL of a run: the server's main process dies with it (PR_SET_PDEATHSIG), but a child in its group (as
    vLLM's EngineCore is) lived on until the next command. The server's watchdog (its own session: a signal to the
    run's group never reaches it) ends the group within seconds, removes the registry entry and the session folder
    it was given, and ends itself."""
    from inference_wall.run.server import group_alive

    run, pgid, folder, env = _killed_run(tmp_path, kill_watchdog=False)
    try:
        deadline = time.monotonic() + 15
        while (group_alive(pgid) or folder.exists()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not group_alive(pgid) and not folder.exists()
        assert list((Path(env["INFERENCE_WALL_STATE"]) / "servers").glob("*.json")) == []
        watchdogs = [p for p in psutil.process_iter(["cmdline"]) if "_watchdog.py" in " ".join(p.info["cmdline"] or [])
                     and str(pgid) in (p.info["cmdline"] or [])]
        assert all(p.status() == psutil.STATUS_ZOMBIE for p in watchdogs if p.is_running())
    finally:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_stopped_server_takes_its_watchdog_with_it(fake_vllm_env):
    """A server stopped as usual ends its watchdog too: nothing of it outlives the server."""
    from inference_wall.run.server import ServerSpec, VllmServer

    server = VllmServer(ServerSpec(model="m", python=sys.executable, startup_timeout_s=60),
                        fake_vllm_env / "log").start()
    watchdog = server._watchdog
    try:
        assert watchdog.poll() is None
        server.stop()
        assert watchdog.poll() is not None
    finally:
        server.stop()


def test_a_killed_runs_server_group_and_session_folder_are_reaped_by_the_next_plan(tmp_path):
    """SIGKILL of a run and of its server's watchdog (what a watchdog cannot end): the server's main process dies
    with the run (PR_SET_PDEATHSIG), but a child in its group (as vLLM's EngineCore is) keeps running, and the
    session's temporary folder stays. The next command (`plan` here) stops the group and removes the folder at
    once, saying what it stopped. Before, only the next server start reaped, and no command removed the folder."""
    from inference_wall.run.server import OWNER_NOTE, group_alive

    run, pgid, folder, env = _killed_run(tmp_path, kill_watchdog=True)
    state, tmp = Path(env["INFERENCE_WALL_STATE"]), Path(env["TMPDIR"])
    live = tmp / "iw-live-session"  # a live command's session folder: never touched
    live.mkdir()
    (live / OWNER_NOTE).write_text(json.dumps({"pid": os.getpid(), "process_started": psutil.Process().create_time()}))
    try:
        assert folder.name.startswith("iw-0123456789ab-") and folder.is_dir()
        assert group_alive(pgid), "the server's child outlived the killed run (what the reaper is for)"
        res = subprocess.run([sys.executable, "-m", "inference_wall", "plan", "--part", "3", "--rig", "cpu-tiny"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        notes = [line for line in res.stderr.splitlines() if line.startswith("note: ")]
        assert len(notes) == 2, res.stderr
        assert f"stopped a vLLM server a killed run left running: process group {pgid} " in notes[0]
        assert "(vllm serve m on port " in notes[0] and f"pid {run.pid}, is gone" in notes[0]
        assert notes[1] == f"note: removed {folder}, the temporary folder of a server session whose run was killed"
        assert not group_alive(pgid) and not folder.exists() and live.is_dir()
        assert list((state / "servers").glob("*.json")) == []
        again = subprocess.run([sys.executable, "-m", "inference_wall", "plan", "--part", "3", "--rig", "cpu-tiny"],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert "note: " not in again.stderr  # nothing left to say
    finally:
        run.kill()
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _other_runs_entry(registry: Path, owner: int, **over) -> Path:
    """A registry entry as another live run writes it: the owner is `owner` (a live process, not this one) and the
    server's group is this test's own (alive; the fake cmd is never the leader's, so no reaper would stop it)."""
    registry.mkdir(parents=True, exist_ok=True)
    entry = registry / "other.json"
    entry.write_text(json.dumps({
        "pgid": os.getpgid(0), "port": 8123, "cmd": ["not", "this", "group's", "leader"], "create_time": 0.0,
        "owner_pid": owner, "owner_started": psutil.Process(owner).create_time(), "started": time.time(),
        "run": {"part": "03-batching-cliff", "rig": "h200", "rig_dir": "/elsewhere/data/runs/03-batching-cliff/h200"},
        **over}))
    return entry


def test_another_live_runs_server_is_named_in_one_warning_line(tmp_path, monkeypatch):
    """Before, a second run on the machine started its servers silently beside the first's (the GPU is shared)."""
    from inference_wall.run import server

    monkeypatch.setattr(server, "REGISTRY", tmp_path)
    assert server.shared_machine_warning() is None
    entry = _other_runs_entry(tmp_path, os.getppid())
    line = server.shared_machine_warning()
    assert line and "\n" not in line and line.startswith("warning: another run is serving on this machine")
    assert "part 03-batching-cliff on rig h200" in line and f"server pid {os.getpgid(0)} on port 8123" in line
    assert f"run pid {os.getppid()}" in line and "/elsewhere/data/runs/03-batching-cliff/h200" in line
    assert "the GPU is shared" in line
    # a CPU rig's run (cpu-tiny, on a machine that may have no GPU): before, it too was told "the GPU is shared"
    cpu_line = server.shared_machine_warning(gpu=False)
    assert "its CPU cores are shared" in cpu_line and "GPU" not in cpu_line
    assert server.reap_left_behind() == [] and entry.exists()  # a live run's server: named, never stopped
    # this process's own servers, and a run that has ended (its owner's start time no longer matches), are not named
    _other_runs_entry(tmp_path, os.getpid())
    assert server.shared_machine_warning() is None
    _other_runs_entry(tmp_path, os.getppid(), owner_started=1.0)
    assert server.shared_machine_warning() is None


def test_a_watchdog_whose_owner_is_already_gone_or_another_process_ends_the_group_at_once():
    """An owner gone before its watchdog started (a kill between the server's start and the watchdog's), or a pid
    that names a later process (its start differs): the group ends at the watchdog's first look. A live owner keeps
    it; the watchdog ends with its group."""
    from inference_wall.run.server import group_alive, start_watchdog

    dead = subprocess.Popen(["true"])
    dead.wait()
    me = (os.getpid(), psutil.Process().create_time())
    cases = {"gone": [me, (dead.pid, time.time())], "reused": [(me[0], me[1] - 3600)], "alive": [me]}
    groups = {name: subprocess.Popen(["sleep", "60"], start_new_session=True) for name in cases}
    dogs = {name: start_watchdog(groups[name].pid, owners) for name, owners in cases.items()}
    try:
        for name in ("gone", "reused"):
            assert groups[name].wait(10) is not None, name
            assert dogs[name].wait(10) == 0, name
        assert groups["alive"].poll() is None and dogs["alive"].poll() is None
        groups["alive"].kill()
        groups["alive"].wait()
        assert dogs["alive"].wait(10) == 0 and not group_alive(groups["alive"].pid)
    finally:
        for p in (*groups.values(), *dogs.values()):
            p.kill()
            p.wait()
