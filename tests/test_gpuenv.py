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

from inference_wall.run import gpuenv
from inference_wall.errors import UserError
from inference_wall.run.rig import RigProfile, load_profile

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


def _driver_header(driver: str, cuda: str) -> str:
    """A real capture's text (580-cuda13.0.txt) with its driver and CUDA versions replaced: the driver
    strings no capture here has (R525, R595, a pre-R525 one), faked for the decision."""
    text = (SMI / "580-cuda13.0.txt").read_text()
    return (text.replace("NVIDIA-SMI 580.95.05", f"NVIDIA-SMI {driver}")
                .replace("Driver Version: 580.95.05", f"Driver Version: {driver}")
                .replace("CUDA Version: 13.0", f"CUDA Version: {cuda}"))


# NVIDIA's rule (CUDA compatibility guide, minor-version compatibility): CUDA 12.x builds run on drivers
# from R525 on, CUDA 13.x builds need R580 on. Captures for R550, R570, R575 and R580; R525 and R595 faked.
DRIVERS = {
    "R525": _driver_header("525.147.05", "12.0"),
    "R550": (SMI / "550-cuda12.4.txt").read_text(),
    "R570": (SMI / "570-cuda12.8.txt").read_text(),
    "R575": (SMI / "575-cuda12.9.txt").read_text(),
    "R580": (SMI / "580-cuda13.0.txt").read_text(),
    "R595": _driver_header("595.45.04", "13.2"),
}
BY_RULE = {"R525": "0.18.0", "R550": "0.18.0", "R570": "0.18.0", "R575": "0.18.0", "R580": "0.22.1", "R595": "0.22.1"}


@pytest.mark.parametrize("fixture, driver", [("580-cuda13.0.txt", "580.95.05"), ("575-cuda12.9.txt", "575.57.08"),
                                             ("570-cuda12.8.txt", "570.133.07"), ("550-cuda12.4.txt", "550.54.15")])
def test_the_driver_version_is_read_from_the_header(fixture, driver):
    assert gpuenv.parse_driver_version((SMI / fixture).read_text()) == driver
    assert gpuenv.driver_branch(driver) == int(fixture[:3])
    assert gpuenv.parse_driver_version("| NVIDIA-SMI 580.95.05   Driver Version: N/A |") is None


@pytest.mark.parametrize("branch", sorted(DRIVERS))
def test_the_build_is_chosen_by_the_driver_branch(branch):
    """R525-R579 get the CUDA 12 build (vLLM 0.18.0), R580 on the CUDA 13 build (0.22.1): drivers R525-R574
    were refused before, by the CUDA version their header reports."""
    pin = gpuenv.pick_vllm(gpuenv.parse_driver_version(DRIVERS[branch]))
    assert pin.vllm == BY_RULE[branch]
    assert pin.cuda[0] == (13 if pin.vllm == "0.22.1" else 12)
    assert pin.requirements()[:2] == [f"vllm=={pin.vllm}", f"torch=={pin.torch}"]


def test_the_rule_s_edges_are_the_branches_not_the_cuda_header():
    assert gpuenv.pick_vllm("579.99.99").vllm == "0.18.0" and gpuenv.pick_vllm("580").vllm == "0.22.1"
    assert gpuenv.pick_vllm("525.60.13").vllm == "0.18.0"
    assert gpuenv.pick_vllm("1000.1").vllm == "0.22.1"  # numbers, not text ("1000" < "580" as text)
    assert [p.min_driver for p in gpuenv.PINS] == sorted((p.min_driver for p in gpuenv.PINS), reverse=True)
    assert {p.cuda[0]: p.min_driver for p in gpuenv.PINS} == {13: 580, 12: 525}


@pytest.mark.parametrize("driver", ["520.61.05", "470.256.02"])
def test_a_driver_below_r525_is_one_line_naming_it_and_r525(driver):
    with pytest.raises(UserError) as err:
        gpuenv.pick_vllm(gpuenv.parse_driver_version(_driver_header(driver, "11.8")))
    message = str(err.value)
    assert "\n" not in message
    assert driver in message and f"R{driver.split('.')[0]}" in message and "R525" in message and "0.18.0" in message


@pytest.mark.parametrize("branch", sorted(DRIVERS))
def test_the_series_own_vllm_is_honoured_on_any_driver_that_runs_it(branch):
    pin = gpuenv.pick_vllm(gpuenv.parse_driver_version(DRIVERS[branch]), wanted="0.18.0")
    assert (pin.vllm, pin.torch) == ("0.18.0", "2.10.0") and gpuenv.SERIES_VLLM == "0.18.0"


def test_a_wanted_vllm_the_driver_cannot_run_or_that_is_not_pinned_is_one_line():
    with pytest.raises(UserError) as err:
        gpuenv.pick_vllm("570.133.07", wanted="0.22.1")  # a CUDA 13 build on an R570 driver
    assert "\n" not in str(err.value) and "VLLM=0.22.1" in str(err.value) and "R580" in str(err.value)
    with pytest.raises(UserError) as err:
        gpuenv.pick_vllm("580.95.05", wanted="0.99.0")
    assert "\n" not in str(err.value) and "0.22.1, 0.18.0" in str(err.value)
    with pytest.raises(UserError):
        gpuenv.pick_vllm("520.61.05", wanted="0.18.0")  # below R525 nothing runs it


def test_no_driver_version_is_an_error_not_a_guess():
    with pytest.raises(UserError, match="Driver Version"):
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
    assert ok == gpuenv.NvidiaInfo(gpus=("NVIDIA A10G",), cuda=(12, 9), driver="575.57.08")


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
def _fake_smi(tmp_path: Path, header: str = "580-cuda13.0.txt", listing: str = "list-a10g.txt", code: int = 0,
              text: str | None = None) -> Path:
    """A folder holding an `nvidia-smi` that prints captured output (-L: the GPU list; else `header`'s
    capture, or `text` where given: a faked driver string)."""
    folder = tmp_path / f"bin-{header if text is None else abs(hash(text))}-{listing}-{code}"
    folder.mkdir(exist_ok=True)
    shown = SMI / header
    if text is not None:
        shown = folder / "header.txt"
        shown.write_text(text)
    exe = folder / "nvidia-smi"
    exe.write_text(f'#!/bin/sh\nif [ "$1" = -L ]; then cat {SMI / listing}; exit {code}; fi\ncat {shown}\n')
    exe.chmod(0o755)
    return folder


def _path_without_nvidia_smi() -> str:
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nvidia-smi").exists())


def _script(tmp_path, *args, path=None, vllm=None):
    env = {k: v for k, v in os.environ.items() if k != "VLLM"}
    env.update({"PATH": path or _path_without_nvidia_smi(), "VLLM_GPU_VENV": str(tmp_path / "venv"),
                "TMPDIR": str(tmp_path)})
    if vllm is not None:
        env["VLLM"] = vllm
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)


def test_the_script_refuses_a_machine_without_a_gpu_in_one_line(tmp_path):
    res = _script(tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "no NVIDIA GPU" in lines[0] and "make vllm-cpu" in lines[0]
    assert not (tmp_path / "venv").exists()


def test_the_script_refuses_an_old_driver_in_one_line(tmp_path):
    path = f"{_fake_smi(tmp_path, text=_driver_header('520.61.05', '11.8'))}{os.pathsep}{_path_without_nvidia_smi()}"
    res = _script(tmp_path, path=path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "520.61.05" in lines[0] and "R525" in lines[0], res.stderr
    assert not (tmp_path / "venv").exists()


@pytest.mark.parametrize("branch, vllm", [(b, None) for b in sorted(DRIVERS)] + [("R580", "0.18.0"), ("R595", "0.18.0")])
def test_the_script_s_dry_run_prints_the_choice_by_nvidia_s_rule(tmp_path, branch, vllm):
    path = f"{_fake_smi(tmp_path, text=DRIVERS[branch])}{os.pathsep}{_path_without_nvidia_smi()}"
    res = _script(tmp_path, "--dry-run", path=path, vllm=vllm)
    assert res.returncode == 0, res.stderr
    expected = vllm or BY_RULE[branch]
    pin = next(p for p in gpuenv.PINS if p.vllm == expected)
    assert [l for l in res.stdout.splitlines() if not l.startswith("setup-vllm-gpu:")] == pin.requirements()
    said = next(l for l in res.stdout.splitlines() if l.startswith("setup-vllm-gpu:"))
    assert re.search(rf"driver [\d.]+ \({branch}\) on NVIDIA A10G: vLLM {expected}", said), said
    assert ("VLLM=0.18.0" in said) == (vllm is not None) and ("series' own" in said) == (expected == "0.18.0")
    assert not (tmp_path / "venv").exists()


def test_the_script_refuses_a_wanted_vllm_the_driver_cannot_run_in_one_line(tmp_path):
    path = f"{_fake_smi(tmp_path, text=DRIVERS['R570'])}{os.pathsep}{_path_without_nvidia_smi()}"
    res = _script(tmp_path, "--dry-run", path=path, vllm="0.22.1")
    assert res.returncode == 2 and res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1 and "R580" in res.stderr


def _broken_pythons(tmp_path: Path) -> Path:
    """A folder whose python3.10-3.13 fail as pyenv's shims do for a version pyenv has not enabled (exit 127,
    pyenv's message on stderr): put first on PATH, they hide every real interpreter of those names."""
    folder = tmp_path / "shims"
    folder.mkdir(exist_ok=True)
    for v in ("3.10", "3.11", "3.12", "3.13"):
        exe = folder / f"python{v}"
        exe.write_text(f"#!/bin/sh\necho 'pyenv: python{v}: command not found' >&2\nexit 127\n")
        exe.chmod(0o755)
    return folder


def test_past_the_decision_an_interpreter_that_does_not_run_is_skipped_not_fatal(tmp_path):
    """On an R550 host (the CUDA 12 build by NVIDIA's rule) the script goes on to find a Python for the venv:
    names that do not run (pyenv shims) are passed over, and with none that runs it says so in one line of
    its own, before creating anything; before, the first shim's failure ended it with pyenv's message."""
    path = os.pathsep.join([str(_broken_pythons(tmp_path)), str(_fake_smi(tmp_path, text=DRIVERS["R550"])),
                            _path_without_nvidia_smi()])
    res = _script(tmp_path, path=path)
    assert res.returncode == 1, res.stderr
    assert "driver 550.54.15 (R550) on NVIDIA A10G: vLLM 0.18.0" in res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no python3.12, 3.11, 3.13 or 3.10 on PATH that runs" in lines[0], res.stderr
    assert "pyenv" not in res.stderr and not (tmp_path / "venv").exists()
