"""gpuenv: reading nvidia-smi, choosing a CUDA build of vLLM for the driver, refusing a GPU rig without a GPU;
and scripts/setup-vllm-gpu.sh's refusals on this machine (no GPU here: the install itself is not run).

nvidia-smi texts are real captures (tests/fixtures/nvidia-smi/README.md says where from); a stand-in
`nvidia-smi` that prints them is put on PATH where a test needs a GPU host's answer.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inference_wall import gpuenv
from inference_wall.errors import UserError
from inference_wall.rig import RigProfile, load_profile

ROOT = Path(__file__).resolve().parents[1]
SMI = ROOT / "tests" / "fixtures" / "nvidia-smi"
SCRIPT = ROOT / "scripts" / "setup-vllm-gpu.sh"


@pytest.mark.parametrize("fixture, version", [("580-cuda13.0.txt", (13, 0)), ("575-cuda12.9.txt", (12, 9)),
                                              ("570-cuda12.8.txt", (12, 8)), ("550-cuda12.4.txt", (12, 4))])
def test_the_driver_cuda_version_is_read_from_the_header(fixture, version):
    assert gpuenv.parse_cuda_version((SMI / fixture).read_text()) == version


def test_a_header_without_a_cuda_version_reads_as_none():
    assert gpuenv.parse_cuda_version("| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: N/A |") is None
    assert gpuenv.parse_cuda_version("") is None


def test_the_gpu_list_is_read_and_an_nvml_error_lists_none():
    assert gpuenv.parse_gpus((SMI / "list-a10g.txt").read_text()) == ["NVIDIA A10G"]
    assert gpuenv.parse_gpus((SMI / "list-nvml-error.txt").read_text()) == []


@pytest.mark.parametrize("fixture, vllm, torch", [("580-cuda13.0.txt", "0.22.1", "2.11.0"),
                                                  ("575-cuda12.9.txt", "0.18.0", "2.10.0")])
def test_the_newest_build_the_driver_runs_is_picked(fixture, vllm, torch):
    pin = gpuenv.pick_vllm(gpuenv.parse_cuda_version((SMI / fixture).read_text()))
    assert (pin.vllm, pin.torch) == (vllm, torch)
    assert pin.requirements()[:2] == [f"vllm=={vllm}", f"torch=={torch}"]


def test_the_pick_follows_the_cuda_each_build_needs():
    assert gpuenv.pick_vllm((14, 2)).vllm == "0.22.1"  # a newer driver runs older CUDA builds
    assert gpuenv.pick_vllm((13, 0)).vllm == "0.22.1"
    assert gpuenv.pick_vllm((12, 10)).vllm == "0.18.0"  # 12.10 > 12.9 (numbers, not text)
    for pin in gpuenv.PINS:
        assert gpuenv.pick_vllm(pin.cuda) is pin
    assert [p.cuda for p in gpuenv.PINS] == sorted((p.cuda for p in gpuenv.PINS), reverse=True)


@pytest.mark.parametrize("fixture", ["570-cuda12.8.txt", "550-cuda12.4.txt"])
def test_a_driver_below_every_build_is_one_line_naming_both_versions(fixture):
    driver = gpuenv.parse_cuda_version((SMI / fixture).read_text())
    with pytest.raises(UserError) as err:
        gpuenv.pick_vllm(driver)
    message = str(err.value)
    assert "\n" not in message
    assert f"CUDA {driver[0]}.{driver[1]}" in message and "CUDA 12.9" in message and "0.18.0" in message


def test_no_cuda_version_is_an_error_not_a_guess():
    with pytest.raises(UserError, match="CUDA Version"):
        gpuenv.pick_vllm(None)


def test_the_cuda_13_pin_is_environment_yml_s_and_its_extras_are_the_gpu_host_s():
    pip = next(d["pip"] for d in yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
               if isinstance(d, dict))
    assert f"vllm=={gpuenv.PINS[0].vllm}" in [line.split("#")[0].strip() for line in pip]
    staged = {line.strip() for line in (ROOT / "gpu" / "extra-requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    assert set(gpuenv.PINS[0].extras) <= staged


def test_cpu_rigs_are_the_tiny_preset_or_the_cpu_build_s_settings():
    assert gpuenv.is_cpu_rig(load_profile("cpu-tiny"))
    assert not gpuenv.is_cpu_rig(load_profile("h200"))
    assert not gpuenv.is_cpu_rig(RigProfile(name="my-a10g"))  # no profile: a stock GPU rig
    assert gpuenv.is_cpu_rig(RigProfile(name="laptop", has_profile=True, env={"VLLM_CPU_KVCACHE_SPACE": "1"}))
    assert gpuenv.is_cpu_rig(RigProfile(name="laptop", has_profile=True, model_preset="tiny-dense-gptq-int4"))


def test_a_gpu_rig_without_a_gpu_is_refused_in_one_line_naming_the_cpu_route():
    no_gpu = gpuenv.NvidiaInfo(problem="no nvidia-smi on PATH")
    with pytest.raises(UserError) as err:
        gpuenv.check_machine(load_profile("h200"), no_gpu, part="3")
    message = str(err.value)
    assert "\n" not in message and "no NVIDIA GPU" in message and "no nvidia-smi on PATH" in message
    assert "tiny preset" in message and "data/rigs/cpu-tiny.json" in message and "make vllm-cpu" in message
    assert "make reproduce PART=3 RIG=cpu-tiny" in message
    a10g = gpuenv.NvidiaInfo(gpus=("NVIDIA A10G",), cuda=(12, 8))
    assert gpuenv.check_machine(load_profile("h200"), a10g) is a10g
    assert gpuenv.check_machine(load_profile("cpu-tiny"), no_gpu) is None


def test_this_machine_is_probed_as_it_is(tmp_path):
    """No nvidia-smi here; a stand-in that fails as a driverless host's does is "lists no GPU"."""
    assert gpuenv.probe_nvidia(smi=str(tmp_path / "missing")).gpus == ()
    broken = _fake_smi(tmp_path, listing="list-nvml-error.txt", code=9)
    info = gpuenv.probe_nvidia(smi=str(broken / "nvidia-smi"))
    assert info.gpus == () and "lists no GPU" in info.problem and "Insufficient Permissions" in info.problem
    ok = gpuenv.probe_nvidia(smi=str(_fake_smi(tmp_path, header="575-cuda12.9.txt") / "nvidia-smi"))
    assert ok == gpuenv.NvidiaInfo(gpus=("NVIDIA A10G",), cuda=(12, 9))


def test_a_gpu_venv_is_wanted_only_for_a_gpu_rig_on_a_gpu_host_without_vllm(tmp_path):
    gpu = gpuenv.NvidiaInfo(gpus=("NVIDIA A10G",), cuda=(13, 0))
    h200, tiny = load_profile("h200"), load_profile("cpu-tiny")
    assert gpuenv.needs_gpu_venv(h200, sys.executable, gpu, environ={})  # the book's venv has no vLLM
    assert not gpuenv.needs_gpu_venv(h200, sys.executable, gpu, environ={"VLLM_PYTHON": "/opt/vllm/bin/python"})
    assert not gpuenv.needs_gpu_venv(tiny, sys.executable, gpu, environ={})
    assert not gpuenv.needs_gpu_venv(h200, sys.executable, gpuenv.NvidiaInfo(problem="none"), environ={})
    with_vllm = tmp_path / "site" / "vllm"
    with_vllm.mkdir(parents=True)
    (with_vllm / "__init__.py").write_text("")
    python = tmp_path / "python-with-vllm"
    python.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path / 'site'} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    assert gpuenv.has_vllm(str(python)) and not gpuenv.has_vllm(sys.executable)
    assert not gpuenv.needs_gpu_venv(h200, str(python), gpu, environ={})


# ---------------------------------------------------------------------------------------------
# scripts/setup-vllm-gpu.sh: its decision and refusals (the install needs a GPU and the network)
# ---------------------------------------------------------------------------------------------
def _fake_smi(tmp_path: Path, header: str = "580-cuda13.0.txt", listing: str = "list-a10g.txt", code: int = 0) -> Path:
    """A folder holding an `nvidia-smi` that prints captured output (-L: the GPU list)."""
    folder = tmp_path / f"bin-{header}-{listing}-{code}"
    folder.mkdir(exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text(f'#!/bin/sh\nif [ "$1" = -L ]; then cat {SMI / listing}; exit {code}; fi\ncat {SMI / header}\n')
    exe.chmod(0o755)
    return folder


def _path_without_nvidia_smi() -> str:
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nvidia-smi").exists())


def _script(tmp_path, *args, path=None):
    env = {**os.environ, "PATH": path or _path_without_nvidia_smi(), "VLLM_GPU_VENV": str(tmp_path / "venv"),
           "TMPDIR": str(tmp_path)}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)


def test_the_script_refuses_a_machine_without_a_gpu_in_one_line(tmp_path):
    res = _script(tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "no NVIDIA GPU" in lines[0] and "make vllm-cpu" in lines[0]
    assert not (tmp_path / "venv").exists()


def test_the_script_refuses_an_old_driver_in_one_line(tmp_path):
    path = f"{_fake_smi(tmp_path, header='550-cuda12.4.txt')}{os.pathsep}{_path_without_nvidia_smi()}"
    res = _script(tmp_path, path=path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "CUDA 12.4" in lines[0] and "CUDA 12.9" in lines[0], res.stderr
    assert not (tmp_path / "venv").exists()


@pytest.mark.parametrize("header, vllm", [("580-cuda13.0.txt", "0.22.1"), ("575-cuda12.9.txt", "0.18.0")])
def test_the_script_s_dry_run_prints_what_the_decision_picks(tmp_path, header, vllm):
    path = f"{_fake_smi(tmp_path, header=header)}{os.pathsep}{_path_without_nvidia_smi()}"
    res = _script(tmp_path, "--dry-run", path=path)
    assert res.returncode == 0, res.stderr
    pin = gpuenv.pick_vllm(gpuenv.parse_cuda_version((SMI / header).read_text()))
    assert pin.vllm == vllm
    assert [l for l in res.stdout.splitlines() if not l.startswith("setup-vllm-gpu:")] == pin.requirements()
    assert re.search(rf"driver CUDA \d+\.\d+ on NVIDIA A10G: vLLM {vllm}", res.stdout)
    assert not (tmp_path / "venv").exists()
