"""Shared pytest fixtures.

Browser tests (mark `browser`) drive the system Chromium (Debian's `chromium` package):
`playwright install` cannot download a browser here and is not needed.
"""
from __future__ import annotations

import os
import shutil
import signal

import pytest

# A test run started in the background by a script (`bash .ci/run &`, nohup) inherits SIGINT ignored, and every
# process it starts would too (an ignored signal survives exec): the tests that send SIGINT to a sweep or a server
# then see it ignored (session 11's clean-clone run failed two that way). A Python handler is reset to the default
# on exec, so installing Python's own here gives every child the normal Ctrl-C.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Two test files run at once (pytest-xdist), so two CPU vLLM servers often share the machine's cores, each with the
# cpu-tiny rig's two OpenMP threads. By default those threads spin at every barrier while a sibling waits for a core,
# and each server slows the other: session 17 ran tests/test_p04.py and tests/test_p05.py side by side on 2 cores in
# 99 s, and in 58 s with OMP_WAIT_POLICY=PASSIVE (threads sleep at a barrier); test_p05.py alone took 47 s and 48 s.
# The servers inherit it from this process (server.server_environment); the rig profile, and so the committed
# cpu-tiny runs and what `make reproduce` starts, are untouched.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch options, pointed at the system Chromium."""
    if not (os.path.isfile(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture
def linked_data(tmp_path):
    """A data dir of its own for a run (runs/ empty), with the repository's models, rigs and reference linked in."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    data = tmp_path / "data"
    data.mkdir()
    for name in ("models", "rigs", "reference"):
        (data / name).symlink_to(root / "data" / name)
    return data


def sweep_cli(part: int, rig: str, data, python, sets: list[str], timeout: float):
    """`python -m inference_wall sweep` of a part on a rig into `data`, with `--set` overrides, as a user runs it."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "inference_wall", "sweep", "--part", str(part), "--rig", rig, "--data-dir", str(data),
           "--python", str(python), "--no-progress", *[x for s in sets for x in ("--set", s)]]
    return subprocess.run(cmd, cwd=root, env={**os.environ, "PYTHONPATH": str(root / "src")}, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def fake_vllm_env(tmp_path, monkeypatch):
    """A fake vLLM importable by this interpreter, server registry in tmp, bench passes as processes."""
    import fake_vllm

    path = fake_vllm.install(tmp_path / "fakevllm")
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("INFERENCE_WALL_BENCH_FORK", "0")
    from inference_wall.run import server

    monkeypatch.setattr(server, "REGISTRY", tmp_path / "registry")
    return tmp_path


# The files that take longest first, so that the two xdist workers (`--dist loadfile --no-loadscope-reorder`, see
# the Makefile) finish together: xdist hands out files in collection order, and by default reorders them by test
# count, which put the 14 tests of test_vllm_cpu.py (about 450 s, its module fixture runs part 3 end to end) last
# on one worker while the other had finished. The order follows `--durations` of a clean-clone run (session 15;
# session 17 split part 1's run out of test_vllm_cpu.py); it is a schedule, not a check: a file missing from it runs
# after.
SLOW_FILES_FIRST = ("test_vllm_cpu.py", "test_p02.py", "test_vllm_cpu_part1.py", "test_p00.py", "test_signals.py",
                    "test_p06.py", "test_p04.py", "test_p05.py", "test_site.py", "test_cli.py", "test_redact.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: within a file, the file's order
