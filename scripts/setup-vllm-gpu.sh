#!/usr/bin/env bash
# Build .venv-vllm-gpu: a CUDA build of vLLM for this host's NVIDIA driver, the interpreter that
# `make reproduce` serves a GPU rig with when the Python running the package has no vLLM (`make vllm-gpu`).
#
# Which vLLM: src/inference_wall/run/gpuenv.py (pick_vllm) reads the driver's version in nvidia-smi's header
# ("Driver Version: 580.95.05") and applies NVIDIA's rule (CUDA compatibility guide, minor-version
# compatibility: CUDA 13.x builds need R580+, CUDA 12.x builds run from R525 on):
#   R580 or newer   vllm==0.22.1 + torch==2.11.0 (the CUDA 13 build: vLLM's _C needs libcudart.so.13,
#                   nvcc 13.0; torch 2.11.0 requires cuda-toolkit 13.0.2; what the h200 rig ran)
#   R525-R579       vllm==0.18.0 + torch==2.10.0 (the CUDA 12 build: vLLM's _C needs libcudart.so.12,
#                   nvcc 12.9; torch 2.10.0 requires the CUDA 12.8 runtime; the series' own stack)
#   older, or no GPU  one line on stderr, exit 2, nothing installed
#   VLLM=0.18.0     the series' own stack on any driver that runs it (R525 on), e.g. on an R580 host
# plus what the parts need on the server side beyond vLLM's own dependencies (with 0.22.1, part 5's
# compressed-tensors, humming-kernels, loguru, pyelftools: gpu/extra-requirements.txt). The notebooks and
# the analysis keep running in .venv (requirements.lock, the same pins as environment.yml); only vLLM's
# processes run here, so vLLM's pins never touch the book's. Idempotent: a stamp of this script, the
# decision module and the chosen pins skips all work.
#
#   scripts/setup-vllm-gpu.sh             # build or confirm .venv-vllm-gpu
#   scripts/setup-vllm-gpu.sh --dry-run   # print the driver, the choice and the pins it would install, install nothing
#   VLLM=0.18.0 scripts/setup-vllm-gpu.sh # the series' own vLLM instead of the driver's pick (make vllm-gpu VLLM=0.18.0)
#   VLLM_GPU_VENV=/some/dir scripts/...   # build elsewhere
set -Eeuo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${VLLM_GPU_VENV:-$repo/.venv-vllm-gpu}
stamp=$venv/.setup-stamp
log=${TMPDIR:-/tmp}/setup-vllm-gpu.log
start=$SECONDS

say() { echo "setup-vllm-gpu: $*"; }
die() { echo "setup-vllm-gpu: $* (details: $log)" >&2; exit 1; }
step() {
  local what=$1 t0=$SECONDS; shift
  "$@" >>"$log" 2>&1 || die "failed to $what (exit $?)"
  say "$what ($((SECONDS - t0)) s)"
}

case "${1:-}" in
  ""|--dry-run) ;;
  *) echo "setup-vllm-gpu: unknown option '$1' (valid: --dry-run)" >&2; exit 2 ;;
esac

# The decision, in one place (tested in tests/test_gpuenv.py; $VLLM reaches it through the environment).
# Without a GPU, with a driver below every pinned build, or with a $VLLM it cannot honour, it prints its
# one-line error and this script exits with its status before touching anything. The stamp below holds the
# chosen pins, so a different choice rebuilds the venv.
host_python=$(command -v python3) || { echo "setup-vllm-gpu: python3 not found on PATH" >&2; exit 2; }
pins=$(PYTHONPATH="$repo/src" "$host_python" -m inference_wall.run.gpuenv pin) || exit $?
reqs=$(grep -v '^#' <<<"$pins")
vllm_version=$(sed -n 's/^vllm==//p' <<<"$reqs")
torch_version=$(sed -n 's/^torch==//p' <<<"$reqs")
say "$(grep '^#' <<<"$pins" | sed 's/^# //')"
if [[ ${1:-} == --dry-run ]]; then
  echo "$reqs"
  exit 0
fi

want=$( { cat "${BASH_SOURCE[0]}" "$repo/src/inference_wall/run/gpuenv.py"; echo "$reqs"; } | sha256sum | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" && -x $venv/bin/python ]]; then
  say "$venv is up to date (stamp matches); nothing to do ($((SECONDS - start)) s)"
  exit 0
fi
: >"$log"

# vLLM 0.18.0 wants Python 3.10-3.13, 0.22.1 3.10-3.14; environment.yml (and the h200 host) use 3.12.
# The first of these that runs: a name on PATH may be a pyenv shim for a version pyenv has not enabled,
# which exits 127 with pyenv's own message; it is skipped. sys.executable goes past shims to the binary.
python=
for v in 3.12 3.11 3.13 3.10; do
  candidate=$(command -v "python$v" 2>/dev/null) || continue
  if python=$("$candidate" -c 'import sys; print(sys.executable)' 2>/dev/null) && [[ -x $python ]]; then break; fi
  python=
done
[[ -n $python ]] || die "no python3.12, 3.11, 3.13 or 3.10 on PATH that runs (vLLM $vllm_version needs one)"

if command -v uv >/dev/null 2>&1; then
  uv=(uv)
elif [[ -x $repo/.venv/bin/uv ]]; then
  uv=("$repo/.venv/bin/uv")  # the one `make setup` installs
else
  step "install uv with pip (uv not on PATH)" "$python" -m pip install --quiet uv==0.13.9
  uv=("$python" -m uv)
fi
export UV_PYTHON_DOWNLOADS=never

step "create $venv (python $("$python" -c 'import platform; print(platform.python_version())'))" \
  "${uv[@]}" venv --clear --quiet --python "$python" "$venv"

# PyPI's torch wheels are its CUDA builds (2.11.0: CUDA 13.0; 2.10.0: CUDA 12.8): no extra index needed.
# --compile-bytecode: without .pyc files every `vllm` start compiles its imports again.
# shellcheck disable=SC2086  # one requirement per word
step "install $(tr '\n' ' ' <<<"$reqs")" \
  "${uv[@]}" pip install --quiet --python "$venv/bin/python" --compile-bytecode $reqs

step "check that vllm $vllm_version and torch $torch_version import and torch sees the GPU" "$venv/bin/python" -c "
import importlib.metadata as m, torch, vllm
assert m.version('vllm') == '$vllm_version', m.version('vllm')
assert torch.__version__.split('+')[0] == '$torch_version', torch.__version__
assert torch.cuda.is_available(), 'torch.cuda.is_available() is False (torch ' + torch.__version__ + ', CUDA ' + str(torch.version.cuda) + ')'
print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name(0))
"
step "check that the vllm console script runs" "$venv/bin/vllm" --version

echo "$want" >"$stamp"
say "done: $venv ready, vllm $vllm_version, torch $torch_version ($((SECONDS - start)) s)"
