"""The CLI and `make reproduce` validate before anything slow starts, and pass the sweep's outcome on."""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import time
import sys
from pathlib import Path

import pytest

from inference_wall import cli, parts
from inference_wall.errors import UserError
from inference_wall.records import store

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def run_cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "inference_wall", *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout, cwd=ROOT)


def _one_error_line(res) -> str:
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["reproduce", "sweep", "check-args"])
def test_the_published_rig_name_is_refused(command, tmp_path):
    extra = [] if command == "check-args" else ["--data-dir", str(tmp_path)]
    line = _one_error_line(run_cli(command, "--part", "3", "--rig", "a10g-published", *extra))
    assert "reserved" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", ["reproduce", "sweep"])
def test_a_budget_below_one_point_says_so_and_exits_non_zero(command, tmp_path):
    line = _one_error_line(run_cli(command, "--part", "3", "--rig", "my-rig", "--budget-min", "2",
                                   "--data-dir", str(tmp_path)))
    assert "--budget-min 2 is below what one point needs" in line


def _manifest(data_dir, part, rig, point, start_s):
    folder = data_dir / "runs" / part / rig / point
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"status": "complete", "session": {"start_to_healthy_s": start_s}}))


def test_the_budget_floor_is_the_rigs_slowest_recorded_start_and_a_point(tmp_path):
    from inference_wall.run.sweep import SERVER_START_ESTIMATE_S, rig_start_estimate

    assert rig_start_estimate(tmp_path / "runs", "my-rig") == SERVER_START_ESTIMATE_S  # no start recorded
    _manifest(tmp_path, "00-inside-a-step", "my-rig", "a", 74.0)
    _manifest(tmp_path, "03-batching-cliff", "my-rig", "b", 175.0)
    _manifest(tmp_path, "03-batching-cliff", "other", "b", 900.0)  # another rig's start is not this rig's
    assert rig_start_estimate(tmp_path / "runs", "my-rig") == 175.0
    # 175 s + a 60-s point = 3.9 min: 3.8 is refused naming the rig's start, 4 runs on (to the next check)
    line = _one_error_line(run_cli("sweep", "--part", "3", "--rig", "my-rig", "--budget-min", "3.8",
                                   "--data-dir", str(tmp_path)))
    assert "--budget-min 3.8 is below what one point needs" in line and "a server start, 2.9 min" in line, line
    assert "give at least 4" in line, line


def test_an_invalid_rig_profile_fails_before_anything_starts(tmp_path):
    (tmp_path / "rigs").mkdir()
    (tmp_path / "rigs" / "my-rig.json").write_text('{"serve_args": "--enforce-eager"}')
    line = _one_error_line(run_cli("sweep", "--part", "3", "--rig", "my-rig", "--data-dir", str(tmp_path)))
    assert "my-rig.json" in line and "serve_args" in line and "not of type 'array'" in line


def test_a_rig_folder_that_cannot_be_written_fails_before_a_server_starts(tmp_path):
    (tmp_path / "runs").write_text("a file where the runs folder should be")
    line = _one_error_line(run_cli("reproduce", "--part", "3", "--rig", "my-rig", "--data-dir", str(tmp_path)))
    assert "cannot be written" in line and "my-rig" in line


def test_make_passes_part_and_rig_without_evaluating_them(tmp_path):
    marker = tmp_path / "evaluated"
    res = subprocess.run(["make", "-s", "reproduce", f'PART=1"; touch {marker}; echo "',
                          f"RIG=x$(shell touch {marker})", f"PYTHON={sys.executable}"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode != 0
    assert not marker.exists()
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"touch {marker}" in errors[0], res.stderr  # the value, verbatim


def _reproduce_with_a_fake_kernel(monkeypatch, report, argv) -> tuple[int, list]:
    """cli.main(["reproduce", *argv]) with papermill's kernel played in this process: it gets the notebook's parameters
    as JSON (what papermill writes into the notebook) and runs the notebook's run cell (parts.notebook_run), whose
    sweep returns `report`. Returns the exit status and the run requests the "kernel" was handed."""
    import papermill

    from inference_wall import parts

    handed, rendered = [], []
    monkeypatch.setattr(_reproduce_with_a_fake_kernel, "rendered", rendered, raising=False)

    def kernel(nb, out, parameters, **kw):
        params = json.loads(json.dumps(parameters))  # JSON-shaped, whole
        if params["mode"] != "run":  # the evidence page, rendered after the run from the same data
            rendered.append((Path(out).name, params))
            return
        parts.notebook_run(params["run_request"]["part"], params["mode"], params["run_request"])

    def sweep(request, **kw):
        handed.append(request)
        return report

    monkeypatch.setattr(papermill, "execute_notebook", kernel)
    monkeypatch.setattr(parts, "run_request", sweep)
    return cli.main(["reproduce", *argv]), handed


def test_reproduce_exits_3_when_points_are_left_for_a_later_run(linked_data, tmp_path, monkeypatch, capsys):
    """The sweep's report comes back from the notebook's kernel (a file beside the executed notebook): the CLI's
    summary and exit status are the sweep's own, not a plan made again from disk."""
    from inference_wall.parts import registry
    from inference_wall.run.sweep import SweepReport

    built = []
    plan = registry._plan
    monkeypatch.setattr(registry, "_plan", lambda *a, **k: built.append(1) or plan(*a, **k))
    argv = ["--part", "3", "--rig", "cpu-tiny", "--data-dir", str(linked_data), "--set", "caps=[1,4]",
            "--output", str(tmp_path / "out.ipynb")]
    rc, handed = _reproduce_with_a_fake_kernel(monkeypatch, SweepReport(done=["mns-001"], pending=["mns-004"]), argv)
    out = capsys.readouterr().out
    assert rc == 3, out
    assert "stopped at the time budget; rerun the same command to resume: mns-004" in out
    assert "done 1, already complete 0, left for a later run 1, failed 0" in out
    assert len(built) == 1  # validating the request planned it; the summary read the sweep's report
    (request,) = handed
    assert request.overrides == {"caps": [1, 4]} and request.rig == "cpu-tiny" and request.points is None
    assert request.lock_holder["pid"] == os.getpid()  # the lock the CLI took, handed over to the kernel
    # then the part's evidence page, from the same data, for the run's rig (mode reproduced: it runs nothing)
    assert _reproduce_with_a_fake_kernel.rendered == [("03-batching-cliff-evidence-cpu-tiny.ipynb", {
        "mode": "reproduced", "run_rig": "cpu-tiny", "data_dir": str(linked_data)})]
    assert "03-batching-cliff-evidence-cpu-tiny.ipynb" in out
    _reproduce_with_a_fake_kernel.rendered.clear()
    _reproduce_with_a_fake_kernel(monkeypatch, SweepReport(done=["mns-004"]), [*argv, "--no-evidence"])
    assert _reproduce_with_a_fake_kernel.rendered == []  # a device whose time is counted renders it later
    rc, _ = _reproduce_with_a_fake_kernel(monkeypatch, SweepReport(done=["mns-004"], skipped=["mns-001"]), argv)
    assert rc == 0
    assert "done 1, already complete 1, left for a later run 0" in capsys.readouterr().out


def test_the_run_request_crosses_the_papermill_hop_whole():
    from inference_wall.parts.runrequest import RunRequest

    request = RunRequest("03-batching-cliff", "my-rig", Path("/data"), "hub", ("mns-001", "mns-004"), 30.0, "/py",
                         {"caps": [1, 4]}, True, {"pid": 1, "host": "h"}, "/out.report.json", planned=object())
    params = json.loads(json.dumps(request.to_params()))
    assert "planned" not in params
    assert RunRequest.from_params(params) == request


# ---------------------------------------------------------------------------------------------
# The newcomer's path: which machine runs a rig, and what `plan` says will be used
# ---------------------------------------------------------------------------------------------
SMI = ROOT / "tests" / "fixtures" / "nvidia-smi"


def _path_without_nvidia_smi(extra: Path | None = None) -> str:
    kept = [p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nvidia-smi").exists()]
    return os.pathsep.join(([str(extra)] if extra else []) + kept)


def _gpu_host(tmp_path: Path, header: str, driver: str | None = None) -> Path:
    """A folder with an `nvidia-smi` printing a captured header and GPU list (no GPU is reachable here);
    with `driver`, the header's driver version replaced by that one (a driver no capture here has)."""
    folder = tmp_path / f"smi-{driver or header}"
    folder.mkdir()
    shown = SMI / header
    if driver is not None:
        text = shown.read_text()
        old = re.search(r"Driver Version:\s*(\S+)", text)[1]
        shown = folder / "header.txt"
        shown.write_text(text.replace(old, driver))
    exe = folder / "nvidia-smi"
    exe.write_text(f'#!/bin/sh\nif [ "$1" = -L ]; then cat {SMI / "list-a10g.txt"}; else cat {shown}; fi\n')
    exe.chmod(0o755)
    return folder


def _broken_pythons(tmp_path: Path) -> Path:
    """A folder whose python3.10-3.13 fail as pyenv's shims do for a version pyenv has not enabled: first on
    PATH, they leave scripts/setup-vllm-gpu.sh no interpreter to build a venv with, so nothing is installed."""
    folder = tmp_path / "shims"
    folder.mkdir()
    for v in ("3.10", "3.11", "3.12", "3.13"):
        exe = folder / f"python{v}"
        exe.write_text(f"#!/bin/sh\necho 'pyenv: python{v}: command not found' >&2\nexit 127\n")
        exe.chmod(0o755)
    return folder


def _data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    for name in ("models", "rigs", "reference"):
        (data / name).symlink_to(ROOT / "data" / name)
    return data


def test_make_reproduce_of_a_gpu_rig_without_a_gpu_says_so_in_one_line_before_anything_starts(tmp_path):
    res = subprocess.run(["make", "-s", "reproduce", "PART=3", "RIG=h200", f"PYTHON={sys.executable}",
                          f"ARGS=--data-dir {tmp_path}"], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PATH": _path_without_nvidia_smi()})
    assert res.returncode != 0 and res.stdout == ""
    ours = [line for line in res.stderr.splitlines() if not line.startswith("make")]  # make's own "*** Error 2"
    assert len(ours) == 1, res.stderr
    assert ours[0].startswith("error: this machine has no NVIDIA GPU") and "rig h200 is not a CPU rig" in ours[0]
    assert "data/rigs/cpu-tiny.json" in ours[0] and "make vllm-cpu" in ours[0]
    assert not (tmp_path / "runs").exists()


def test_make_reproduce_judges_a_rig_by_its_profile_in_the_data_dir(tmp_path):
    """A rig whose profile lives only in --data-dir's rigs/ (here a copy of cpu-tiny's under a new name) was judged
    by make's machine check from the repository's data/rigs, where it has none: `make reproduce` refused it on a CPU
    machine as "not a CPU rig" although `plan` and `sweep` with the same --data-dir took it. The check reads ARGS
    as the run does, so the run goes on to the CLI's own checks (here the budget's, before anything starts)."""
    data = tmp_path / "data"
    (data / "rigs").mkdir(parents=True)
    for name in ("models", "reference"):
        (data / name).symlink_to(ROOT / "data" / name)
    (data / "rigs" / "scratch-tiny.json").write_text((ROOT / "data" / "rigs" / "cpu-tiny.json").read_text())
    env = {**ENV, "PATH": _path_without_nvidia_smi(), "IW_ARGS": f"--data-dir {data}"}
    check = subprocess.run([sys.executable, "-m", "inference_wall", "check-args", "--part", "3", "--rig",
                            "scratch-tiny", "--args-from-env"], capture_output=True, text=True, cwd=ROOT, timeout=60,
                           env=env)
    assert check.returncode == 0 and check.stdout.splitlines() == ["notebooks/03-batching-cliff.md"], check.stderr
    res = subprocess.run(["make", "-s", "reproduce", "PART=3", "RIG=scratch-tiny", f"PYTHON={sys.executable}",
                          f"ARGS=--data-dir {data} --budget-min 1"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, env={**os.environ, "PATH": _path_without_nvidia_smi()})
    ours = [line for line in res.stderr.splitlines() if not line.startswith("make")]  # make's own "*** Error 2"
    assert res.returncode != 0 and len(ours) == 1, res.stderr
    assert ours[0].startswith("error: --budget-min 1 is below what one point needs"), ours[0]
    assert not (data / "runs").exists()


@pytest.mark.parametrize("command", ["reproduce", "sweep"])
def test_the_cli_refuses_a_gpu_rig_without_a_gpu_before_any_server(command, tmp_path):
    data = _data_dir(tmp_path)
    res = subprocess.run([sys.executable, "-m", "inference_wall", command, "--part", "1", "--rig", "my-a10g",
                          "--data-dir", str(data)], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**ENV, "PATH": _path_without_nvidia_smi()})
    line = _one_error_line(res)
    assert "no NVIDIA GPU" in line and "rig my-a10g is not a CPU rig" in line and "PART=1 RIG=cpu-tiny" in line
    assert not list((data / "runs").rglob("server.log"))


def test_a_cpu_rig_passes_the_machine_check_without_a_gpu():
    res = subprocess.run([sys.executable, "-m", "inference_wall", "check-args", "--part", "3", "--rig", "cpu-tiny"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**ENV, "PATH": _path_without_nvidia_smi()})
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["notebooks/03-batching-cliff.md"]


def test_on_a_gpu_host_without_vllm_make_reproduce_sets_up_the_gpu_venv_first(tmp_path):
    """check-args asks for .venv-vllm-gpu and make runs `make vllm-gpu` before the CLI. On the captured R550
    host the decision picks vLLM 0.18.0 (the CUDA 12 build) and the script goes on to the build, stopped here
    in one line of its own at finding an interpreter (stand-ins that do not run hide the real ones), so
    nothing is installed; on a driver below R525 the decision refuses in one line; with --python in ARGS
    the setup is skipped."""
    def env_for(smi: Path, *first: Path) -> dict:
        env = {**os.environ, "PATH": os.pathsep.join([*map(str, first), _path_without_nvidia_smi(smi)]),
               "VLLM_GPU_VENV": str(tmp_path / "venv"), "TMPDIR": str(tmp_path)}
        for name in ("VLLM_PYTHON", "VLLM"):
            env.pop(name, None)
        return env

    r550 = env_for(_gpu_host(tmp_path, "550-cuda12.4.txt"), _broken_pythons(tmp_path))
    check = subprocess.run([sys.executable, "-m", "inference_wall", "check-args", "--part", "3", "--rig", "my-a10g"],
                           capture_output=True, text=True, cwd=ROOT, timeout=60, env={**r550, **ENV, "PATH": r550["PATH"]})
    assert check.returncode == 0 and check.stdout.splitlines()[-1] == "needs: make vllm-gpu", check.stderr
    make = ["make", "-s", "reproduce", "PART=3", "RIG=my-a10g", f"PYTHON={sys.executable}"]
    res = subprocess.run(make + [f"ARGS=--data-dir {tmp_path}"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, env=r550)
    assert res.returncode != 0
    assert "setup-vllm-gpu: driver 550.54.15 (R550) on NVIDIA A10G: vLLM 0.18.0" in res.stdout, res.stdout
    ours = [line for line in res.stderr.splitlines() if not line.startswith("make")]
    assert len(ours) == 1 and ours[0].startswith("setup-vllm-gpu: no python3.12, 3.11, 3.13 or 3.10"), res.stderr
    assert not (tmp_path / "venv").exists() and not (tmp_path / "runs").exists()

    old = env_for(_gpu_host(tmp_path, "550-cuda12.4.txt", driver="520.61.05"))
    res = subprocess.run(make + [f"ARGS=--data-dir {tmp_path}"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, env=old)
    assert res.returncode != 0 and "setup-vllm-gpu" not in res.stdout
    ours = [line for line in res.stderr.splitlines() if not line.startswith("make")]
    assert len(ours) == 1 and "520.61.05 (R520)" in ours[0] and "below R525" in ours[0], res.stderr
    assert not (tmp_path / "venv").exists() and not (tmp_path / "runs").exists()

    skipped = subprocess.run(make + [f"ARGS=--data-dir {tmp_path} --python /opt/own-vllm/bin/python --budget-min 2"],
                             capture_output=True, text=True, cwd=ROOT, timeout=120, env=r550)
    assert "--budget-min 2 is below what one point needs" in skipped.stderr, skipped.stderr
    assert "setup-vllm-gpu" not in skipped.stdout + skipped.stderr


def test_plan_shows_the_profile_the_model_and_the_kv_pool_with_its_admission_limit():
    from inference_wall import parts
    from inference_wall.run.rig import load_profile

    res = run_cli("plan", "--part", "3", "--rig", "h200-a10g-kv")
    assert res.returncode == 0, res.stderr
    head = res.stdout.split("{")[0].splitlines()
    assert head[0] == "part 03-batching-cliff on rig h200-a10g-kv"
    assert head[1].startswith("profile: data/rigs/h200-a10g-kv.json: ")
    assert "--num-gpu-blocks-override" in head[2]
    profile = load_profile("h200-a10g-kv")
    assert f"model: preset {profile.model_preset} (data/models/{profile.model_preset};" in res.stdout
    params = parts.parameters(3, "h200-a10g-kv")
    pool = parts.rig_pools(3, profile, params)[profile.model_preset]
    tokens = params["input_len"] + params["output_len"]
    assert (f"KV pool ({profile.model_preset}): {pool.num_blocks:,} pages of {pool.block_size} tokens, from "
            f"{pool.source}; admission limit {pool.admission_limit(tokens):,} requests of {tokens:,} tokens") in head


def test_plan_of_a_rig_without_a_profile_says_it_is_a_stock_server_and_the_pool_is_not_known(tmp_path):
    res = run_cli("plan", "--part", "1", "--rig", "my-a10g", "--data-dir", str(_data_dir(tmp_path)))
    assert res.returncode == 0, res.stderr
    assert "profile: none (a stock vLLM server" in res.stdout
    assert "model: preset qwen3.5-4b" in res.stdout and "KV pool (qwen3.5-4b): not known yet" in res.stdout


def test_part_5s_plan_names_the_pools_of_the_presets_it_serves(tmp_path):
    """Part 5 serves the 9B in its formats and the rig's own model as the reference: the header gives a pool
    line for each of those presets (not the rig's model alone, as the other parts)."""
    from inference_wall.parts import p05

    data = str(_data_dir(tmp_path))
    res = run_cli("plan", "--part", "5", "--rig", "my-a10g", "--data-dir", data)
    assert res.returncode == 0, res.stderr
    pools = [line for line in res.stdout.split("{")[0].splitlines() if line.startswith("KV pool (")]
    served = [p05.variant_preset(p05.DEFAULTS["model"], f) for f in p05.DEFAULTS["formats"]] + ["qwen3.5-4b"]
    assert sorted(line.split("(")[1].split(")")[0] for line in pools) == sorted(set(served))
    no_ref = run_cli("plan", "--part", "5", "--rig", "my-a10g", "--data-dir", data,
                     "--set", "reference_session=false")
    assert no_ref.returncode == 0, no_ref.stderr
    assert "KV pool (qwen3.5-4b)" not in no_ref.stdout and "KV pool (qwen3.5-9b)" in no_ref.stdout


def test_a_sweep_with_settings_other_than_the_complete_points_is_refused_up_front(linked_data, monkeypatch, capsys):
    import shutil

    from inference_wall import parts

    shutil.copytree(ROOT / "data" / "runs" / "01-hit-the-wall" / "cpu-tiny",
                    linked_data / "runs" / "01-hit-the-wall" / "cpu-tiny")
    monkeypatch.setattr(parts, "run", lambda *a, **k: pytest.fail("the sweep started"))
    rc = cli.main(["sweep", "--part", "1", "--rig", "cpu-tiny", "--data-dir", str(linked_data), "--set", "input_len=64"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "workload input_len: made with 32, the plan has 64" in err[0] and "--redo-changed" in err[0]
    assert cli.main(["plan", "--part", "1", "--rig", "cpu-tiny", "--data-dir", str(linked_data),
                     "--set", "input_len=64"]) == 0
    flood = [line for line in capsys.readouterr().out.splitlines() if line.startswith("flood ")]
    assert flood and flood[0].endswith("complete, made otherwise (workload input_len: made with 32, the plan has 64)")


@pytest.mark.parametrize("command", ["sweep", "reproduce"])
@pytest.mark.parametrize("part, removed, extra, named", [
    # --points picks points of a plan whose other complete points were made at 32: before, compared were the picked
    # points only (none complete), and the run went ahead, leaving the folder with both
    ("01-hit-the-wall", ["flood"], ["--points", "flood", "--set", "input_len=64"], "point cold-warm of "),
    # the plan holds cap 4 alone; cap 1 outside it was made at 32, and would sit beside cap 4 at 64
    ("03-batching-cliff", ["mns-004"], ["--set", "caps=[4]", "--set", "input_len=64"], "point mns-001 of "),
])
def test_a_partial_rerun_that_would_mix_settings_is_refused(command, part, removed, extra, named, linked_data,
                                                            monkeypatch, capsys):
    import shutil

    number = part[:2].lstrip("0")
    folder = linked_data / "runs" / part / "cpu-tiny"
    shutil.copytree(ROOT / "data" / "runs" / part / "cpu-tiny", folder)
    for name in removed:
        shutil.rmtree(folder / name)
    line = _refused_up_front(monkeypatch, capsys, [command, "--part", number, "--rig", "cpu-tiny", "--data-dir",
                                                   str(linked_data), *extra])
    assert named in line and "workload input_len: made with 32, the plan has 64" in line and "--redo-changed" in line
    # with the settings the folder was made with, or --redo-changed, the run goes on to the machine check
    at = extra.index("input_len=64")
    same = extra[:at - 1] + extra[at + 1:]
    for argv in (same, [*extra, "--redo-changed"]):
        monkeypatch.setattr(cli, "_check_machine", lambda request: (_ for _ in ()).throw(UserError("reached")))
        assert cli.main([command, "--part", number, "--rig", "cpu-tiny", "--data-dir", str(linked_data), *argv]) == 2
        assert capsys.readouterr().err.strip() == "error: reached"


@pytest.mark.parametrize("command", ["sweep", "reproduce"])
def test_a_gpu_run_beside_another_run_is_refused_before_its_kernel_unless_asked(command, tmp_path, monkeypatch, capsys):
    """Before, a second run on one GPU was warned about and then measured under the first's load."""
    import psutil

    from inference_wall.run import gpuenv, server

    monkeypatch.setattr(server, "REGISTRY", tmp_path / "registry")
    monkeypatch.setattr(gpuenv, "check_machine", lambda *a, **k: None)  # a GPU host, as far as this test goes
    monkeypatch.setattr(cli, "_reproduce", lambda *a, **k: pytest.fail("the notebook started"))
    monkeypatch.setattr(parts, "run_request", lambda *a, **k: pytest.fail("the sweep started"))
    server.REGISTRY.mkdir()
    (server.REGISTRY / "other.json").write_text(json.dumps({
        "pgid": os.getpgid(0), "port": 8123, "cmd": ["x"], "create_time": 0.0, "owner_pid": os.getppid(),
        "owner_started": psutil.Process(os.getppid()).create_time(), "run": {"part": "01-hit-the-wall", "rig": "h200"}}))
    argv = [command, "--part", "3", "--rig", "my-gpu", "--data-dir", str(tmp_path), "--python", sys.executable]
    monkeypatch.setattr("inference_wall.parts.runrequest.check_python", lambda python: None)
    (tmp_path / "models").symlink_to(ROOT / "data" / "models")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: another run is serving on this machine's GPU: part "
                                               "01-hit-the-wall on rig h200") and "--allow-shared" in err[0], err
    monkeypatch.setattr(cli, "_reproduce", lambda *a, **k: 0)
    from inference_wall.run.sweep import SweepReport

    monkeypatch.setattr(parts, "run_request", lambda *a, **k: SweepReport())
    assert cli.main([*argv, "--allow-shared"]) == 0


def _refused_up_front(monkeypatch, capsys, argv) -> str:
    """cli.main(argv) exits 2 with one line before the machine check (and so before any model or server)."""
    monkeypatch.setattr(cli, "_check_machine", lambda args: pytest.fail("got past the up-front checks"))
    rc = cli.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("command", ["sweep", "reproduce"])
@pytest.mark.parametrize("extra, named", [
    (["--budget-min", "nan"], "--budget-min nan is not a number of minutes"),
    (["--budget-min", "inf"], "--budget-min inf is not a number of minutes"),
    (["--points", "flood", "flod"], "unknown point(s) flod for part 01-hit-the-wall"),
    (["--set", "input_lem=64"], "unknown parameter(s) ['input_lem']"),
    (["--python", "/nonexistent/bin/python"], "--python /nonexistent/bin/python: no such executable"),
    (["--python", sys.executable], "cannot import vllm"),
    # argparse's own errors, one line as every user error (they printed the usage first)
    (["--budget-min", "abc"], "argument --budget-min: invalid float value: 'abc'"),
    (["--points"], "argument --points: expected at least one argument"),
    (["--model-source", "s3"], "argument --model-source: invalid choice: 's3'"),
    (["--budget-min", "-5"], "--budget-min -5 is below what one point needs"),
    (["--budget-min", "0"], "--budget-min 0 is below what one point needs"),
    (["--part", "7"], "unknown part '7'; valid parts: 0 (00-inside-a-step)"),
    (["--rig", "My_Rig"], "bad rig name 'My_Rig'"),
    (["--set", "input_len=[64"], "--set input_len: value '[64' is not JSON"),
    (["--set", "input_len"], "--set needs KEY=JSON, got 'input_len'"),
    (["--set", 'input_len="64"'], '--set: input_len must be a whole number, not "64"'),
    (["--set", "input_len=64.5"], "--set: input_len must be a whole number, not 64.5"),
    (["--set", "target_window_s=NaN"], "--set: target_window_s must be a number, not NaN"),
    (["--set", 'decode_batches=["x"]'], '--set: decode_batches must be a list of whole numbers, not ["x"]'),
    (["--set", 'rates_rps=[1, "4"]'], '--set: rates_rps must be a list of numbers, not [1, "4"]'),
    # a value of the right kind that the plan cannot use: a traceback before
    (["--part", "2", "--set", "prompt_lens=[]"], "part 02-prefill-freeze cannot plan with these values (ValueError:"),
    # a plan of no point ran nothing and said "done 0"
    (["--part", "6", "--set", "configs=[]"], "part 06-past-one-gpu on rig my-rig plans no point"),
    (["--data-dir", __file__], f"--data-dir {__file__}: a file, not a folder"),
])
def test_bad_run_options_are_refused_before_anything_starts(command, extra, named, tmp_path, monkeypatch, capsys):
    line = _refused_up_front(monkeypatch, capsys, [command, "--part", "1", "--rig", "my-rig", "--data-dir",
                                                   str(tmp_path), *extra])
    assert named in line


@pytest.mark.parametrize("command", ["sweep", "reproduce"])
def test_a_data_dir_that_does_not_exist_is_refused_by_name(command, tmp_path, monkeypatch, capsys):
    """Before: read as a folder holding no profile and no model ("unknown model preset 'qwen3.5-4b'"), and a run
    went on to take its writer lock there, making the folder."""
    missing = tmp_path / "no such data"
    line = _refused_up_front(monkeypatch, capsys, [command, "--part", "1", "--rig", "my-rig", "--data-dir",
                                                   str(missing)])
    assert line.startswith(f"error: --data-dir {missing}: no such folder"), line
    assert not missing.exists()


@pytest.mark.parametrize("overrides, named", [
    ({"01-hit-the-wal": {"target_window_s": 2.0}}, "overrides: unknown part(s) ['01-hit-the-wal']"),
    ({"03-batching-cliff": {"capz": [1, 4]}}, "unknown parameter(s) ['capz'] for part 03-batching-cliff"),
])
def test_a_profile_overriding_an_unknown_part_or_parameter_is_refused_before_anything_starts(
        overrides, named, tmp_path, monkeypatch, capsys):
    (tmp_path / "rigs").mkdir()
    (tmp_path / "rigs" / "my-rig.json").write_text(json.dumps({"overrides": overrides}))
    line = _refused_up_front(monkeypatch, capsys, ["sweep", "--part", "1", "--rig", "my-rig", "--data-dir",
                                                   str(tmp_path)])
    assert named in line and "my-rig" in line


@pytest.mark.parametrize("command", ["plan", "sweep", "reproduce"])
@pytest.mark.parametrize("overrides, named", [
    # before, a run took these: the first failed after the server's warm-up (can't multiply sequence by non-int of
    # type 'float', naming neither), the second ran and recorded caps [1, "4"]; --set refused the first at once
    ({"03-batching-cliff": {"min_window_s": "2"}}, 'overrides of part 03-batching-cliff: min_window_s must be a '
                                                   'number, not "2"'),
    ({"03-batching-cliff": {"caps": [1, "4"]}}, 'overrides of part 03-batching-cliff: caps must be a list of whole '
                                                'numbers, not [1, "4"]'),
    ({"01-hit-the-wall": {"input_len": 32.5}}, "overrides of part 01-hit-the-wall: input_len must be a whole number, "
                                               "not 32.5"),
])
def test_a_profile_override_of_the_wrong_kind_is_refused_by_the_rule_set_follows(command, overrides, named, tmp_path,
                                                                                 monkeypatch, capsys):
    (tmp_path / "rigs").mkdir()
    (tmp_path / "rigs" / "my-rig.json").write_text(json.dumps({"overrides": overrides}))
    monkeypatch.setattr(cli, "_writer", lambda request: pytest.fail("took the lock"))
    line = _refused_up_front(monkeypatch, capsys, [command, "--part", "3", "--rig", "my-rig", "--data-dir",
                                                   str(tmp_path)])
    assert line == f"error: {tmp_path / 'rigs' / 'my-rig.json'}: {named}"


@pytest.mark.parametrize("command", ["plan", "sweep", "reproduce"])
@pytest.mark.parametrize("profile, named", [
    ({"serve_arg": ["--enforce-eager"]}, "unknown keys ['serve_arg']"),
    ({"overrides": {"03-batching-cliff": {"capz": [1]}}}, "unknown parameter(s) ['capz'] for part 03-batching-cliff"),
])
def test_a_bad_profile_of_another_rig_is_refused_before_a_run_not_at_its_page(command, profile, named, tmp_path,
                                                                           monkeypatch, capsys):
    """The pages read every rig's profile: before, a schema-invalid profile of another rig failed a clean run's page
    render after its points were measured (rc 2 at the end of the run)."""
    (tmp_path / "rigs").mkdir()
    (tmp_path / "rigs" / "other-rig.json").write_text(json.dumps(profile))
    line = _refused_up_front(monkeypatch, capsys, [command, "--part", "3", "--rig", "my-rig", "--data-dir",
                                                   str(tmp_path)])
    assert "other-rig" in line and named in line


@pytest.mark.parametrize("value, named", [('"32"', 'input_len must be a whole number, not "32"'),
                                          ("32.5", "input_len must be a whole number, not 32.5")])
def test_plan_refuses_what_a_run_refuses_in_one_line(value, named, tmp_path, capsys):
    """Before, plan --set input_len='"32"' ended in a traceback (cli._plan_header) and input_len=32.5 printed a plan."""
    rc = cli.main(["plan", "--part", "3", "--rig", "my-rig", "--data-dir", str(tmp_path), "--set", f"input_len={value}"])
    captured = capsys.readouterr()
    assert rc == 2 and captured.out == "" and captured.err.strip().splitlines() == [
        f"error: --set: {named} (see `plan --part 03-batching-cliff --rig my-rig`)"]


def test_every_committed_profile_passes_the_rule_for_its_overrides():
    from inference_wall.parts.runrequest import check_every_profile

    check_every_profile(ROOT / "data")


def test_plan_never_prints_a_secret_of_the_profile(tmp_path, capsys):
    token, key = "hf_PROFILEtokenPROFILEtokenPROFILE0123", "profile-api-key-0123456789"
    (tmp_path / "rigs").mkdir()
    (tmp_path / "rigs" / "my-rig.json").write_text(json.dumps({
        "description": f"uses {key}", "env": {"HF_TOKEN": token}, "serve_args": ["--api-key", key, "--enforce-eager"]}))
    (tmp_path / "models").symlink_to(ROOT / "data" / "models")
    assert cli.main(["plan", "--part", "3", "--rig", "my-rig", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "--api-key <redacted> --enforce-eager" in out
    assert token not in out and key not in out


_KERNEL_RUN = """
import os, sys, nbformat, papermill
from inference_wall.cli import _KernelSignals
nb = nbformat.v4.new_notebook()
nb.cells = [nbformat.v4.new_code_cell("import os, time\\nprint('stop file', bool(os.environ.get('IW_STOP_FILE')))"),
            nbformat.v4.new_code_cell(
                "try:\\n    open(%(started)r, 'w').close()\\n    time.sleep(120)\\n"
                "except KeyboardInterrupt:\\n    time.sleep(7)\\n    open(%(cleaned)r, 'w').close()\\n    raise"),
            nbformat.v4.new_code_cell("open(%(after)r, 'w').close()")]
with _KernelSignals() as signals:
    try:
        signals.run(lambda: papermill.execute_notebook(nb, %(out)r, kernel_name="python3", progress_bar=False))
    except papermill.PapermillExecutionError as e:
        print("cell failed with", e.ename)
print("received", signals.received)
"""


@pytest.mark.parametrize("sig", ["SIGHUP", "SIGTERM"])
def test_a_signal_to_reproduce_reaches_the_kernel_and_waits_for_its_cleanup(tmp_path, sig):
    """The kernel runs in a session of its own: before, SIGHUP killed the CLI and left the kernel's cell (the
    sweep) running, and SIGTERM made nbclient SIGKILL the kernel 5 s into its cleanup. Now the kernel gets an
    interrupt, its cleanup (7 s here, as a server's stop may take) runs to its end, and no later cell runs."""
    files = {name: str(tmp_path / name) for name in ("started", "cleaned", "after", "out")}
    proc = subprocess.Popen([sys.executable, "-c", _KERNEL_RUN % files], cwd=tmp_path, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(240):
            if Path(files["started"]).exists() or proc.poll() is not None:
                break
            time.sleep(0.5)
        assert Path(files["started"]).exists(), proc.communicate(timeout=30)
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "cell failed with KeyboardInterrupt" in out and f"received {int(getattr(signal, sig))}" in out, out
    assert Path(files["cleaned"]).exists() and not Path(files["after"]).exists()


def test_plan_dry_run_prints_the_serve_and_bench_lines_and_starts_and_writes_nothing(tmp_path, capsys):
    from inference_wall import parts

    before = sorted(p.name for p in (store.REPO / "_build" / "models").glob("*")) \
        if (store.REPO / "_build" / "models").is_dir() else []
    plans = parts.plan(3, "cpu-tiny")
    name = plans[0].name
    rc = cli.main(["plan", "--part", "3", "--rig", "cpu-tiny", "--dry-run", "--points", name])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    serve = [line for line in out if " serve " in line and "bench" not in line]
    bench = [line for line in out if " bench serve " in line]
    assert len(serve) == 1 and f"--max-num-seqs {plans[0].max_num_seqs}" in serve[0]
    # the session's warm-up flood first, then each of the point's passes, each line a command a shell can run
    assert len(bench) == 1 + len(plans[0].passes)
    assert "warmup.json" in bench[0] and all(f"/{name}" in line for line in bench)
    after = sorted(p.name for p in (store.REPO / "_build" / "models").glob("*")) \
        if (store.REPO / "_build" / "models").is_dir() else []
    assert after == before  # no model folder prepared


def test_plan_dry_run_of_an_unknown_point_is_one_line_and_exit_2(capsys):
    rc = cli.main(["plan", "--part", "3", "--rig", "cpu-tiny", "--dry-run", "--points", "nope"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "unknown point" in err[0]


def test_a_run_into_another_data_dir_writes_its_page_files_beside_it(tmp_path, monkeypatch):
    """`make reproduce` with a data dir of its own (a test's, a scratch run) renders its page from that data: its
    figures and CSVs go to a _static/ beside it; a run into the repository's data/ writes the book's own."""
    from inference_wall import cli, figures

    monkeypatch.setenv(figures.STATIC_DIR_ENV, "x")  # recorded as unset: teardown removes what the call sets
    monkeypatch.delenv(figures.STATIC_DIR_ENV)
    with cli._page_files_beside(cli.REPO / "data"):
        assert figures.STATIC_DIR_ENV not in os.environ
        assert figures.static_dir() == figures.book_root() / "_static"
    with cli._page_files_beside(tmp_path / "data"):
        assert os.environ[figures.STATIC_DIR_ENV] == str((tmp_path / "_static").resolve())
        assert figures.figures_dir() == (tmp_path / "_static" / "figures").resolve()
        path = figures.save_csv(__import__("pandas").DataFrame({"a": [1]}), "part9-x")
        assert path == (tmp_path / "_static" / "tables" / "part9-x.csv").resolve()
    # the setting lasts for the run alone: the full suite once ran a reproduce in-process, and a later end-to-end
    # run in the same worker inherited its _static/ (its own page files were not beside its data)
    assert figures.STATIC_DIR_ENV not in os.environ


def test_check_args_accepts_every_option_reproduce_accepts():
    """make passes reproduce's whole ARGS to check-args too: an option only reproduce knew (--output) stopped every
    `make reproduce ... ARGS="... --output x"` at check-args with 'unrecognized arguments'."""
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))

    def options(name):
        return {o for a in sub.choices[name]._actions for o in a.option_strings}

    assert options("reproduce") <= options("check-args")
    args = cli.build_parser().parse_args(["check-args", "--part", "3", "--rig", "cpu-tiny", "--output", "x.ipynb"])
    assert args.command == "check-args"


def test_a_run_request_reads_the_rigs_start_estimate_once_and_carries_it(tmp_path, monkeypatch):
    from inference_wall.parts.runrequest import RunRequest
    from inference_wall.run import sweep

    _manifest(tmp_path, "00-inside-a-step", "my-rig", "b", 175.0)  # another part's start counts for the rig
    calls = []
    real = sweep.rig_start_estimate
    monkeypatch.setattr(sweep, "rig_start_estimate", lambda *a: calls.append(a) or real(*a))
    p = argparse.ArgumentParser()
    RunRequest.add_cli_args(p)
    req = RunRequest.from_cli_args(p.parse_args(["--part", "3", "--rig", "my-rig", "--budget-min", "8",
                                                 "--data-dir", str(tmp_path)]))
    assert req.start_estimate_s == 175.0 and len(calls) == 1
    assert RunRequest.from_params(req.to_params()).start_estimate_s == 175.0  # the notebook's kernel gets it too
