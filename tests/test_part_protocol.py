"""Every part offers the runner one `PART` (parts/protocol.py) with one signature per job, and the runner calls it
instead of probing the module for what it has."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference_wall import parts
from inference_wall.parts import protocol
from inference_wall.rig import load_profile

ROOT = Path(__file__).resolve().parents[1]
NUMBERS = range(7)
# Each part's plan for cpu-tiny, captured through parts.plan before the protocol existed (the probing runner).
# A change to a part's plan changes this file too: regenerate it from parts.plan(n, "cpu-tiny").
PLANS_BEFORE = json.loads((ROOT / "tests" / "fixtures" / "parts" / "plans-cpu-tiny.json").read_text())


def _points(plans) -> list[dict]:
    return [{"name": p.name, "serve_args": list(p.serve_args)} for p in plans]


@pytest.mark.parametrize("n", NUMBERS)
def test_every_part_has_a_part_of_the_right_kind(n):
    mod = parts.module(n)
    spec = mod.PART
    assert isinstance(spec, protocol.Part)
    assert parts.protocol_of(n) is spec
    assert spec.name == mod.NAME
    assert spec.defaults is mod.DEFAULTS
    assert callable(spec.plan) and callable(spec.served_presets) and callable(spec.gpus_needed)


@pytest.mark.parametrize("n", NUMBERS)
def test_the_plan_through_the_protocol_is_the_plan_before_it(n):
    assert _points(parts.plan(n, "cpu-tiny")) == PLANS_BEFORE[str(n)]
    # and the protocol's plan is the module's own, called as the module takes it
    mod, profile = parts.module(n), load_profile("cpu-tiny")
    params = parts.parameters(n, "cpu-tiny")
    pools = parts.rig_pools(n, profile, params)
    own = mod.plan(params, profile, pools=pools, **({"data_dir": None} if mod.PART.plan is mod.plan else {}))
    assert _points(mod.PART.plan(params, profile, pools, None)) == _points(own)


def test_served_presets_of_parts_with_their_own_and_of_one_without():
    for n in (5, 6):
        mod = parts.module(n)
        assert mod.PART.served_presets is mod.served_presets
    profile = load_profile("h200")
    assert parts.protocol_of(6).served_presets(parts.parameters(6, "h200"), profile) == ["qwen3.5-9b"]
    p5 = parts.protocol_of(5).served_presets(parts.parameters(5, "h200"), profile)
    assert "qwen3.5-9b" in p5 and profile.model_preset in p5  # its formats' variants and the reference server
    # part 3 has none of its own: the rig's model, and its small model where set
    params = parts.parameters(3, "h200")
    assert parts.protocol_of(3).served_presets is protocol.rig_presets
    assert parts.protocol_of(3).served_presets({**params, "small_preset": None}, profile) == [profile.model_preset]
    assert parts.protocol_of(3).served_presets({**params, "small_preset": "qwen2.5-0.5b"}, profile) == [
        profile.model_preset, "qwen2.5-0.5b"]


def test_gpus_needed_of_part_6_and_of_one_part_without():
    p6 = parts.parameters(6, "h200")
    assert parts.protocol_of(6).gpus_needed(p6) == 2
    assert parts.protocol_of(6).gpus_needed({**p6, "configs": ["tp1"]}) == 1
    assert parts.protocol_of(1).gpus_needed is protocol.one_gpu
    assert parts.protocol_of(1).gpus_needed(parts.parameters(1, "h200")) == 1


@pytest.mark.parametrize("path", ["src/inference_wall/parts/__init__.py", "src/inference_wall/cli.py"])
def test_the_runner_probes_no_part(path):
    text = (ROOT / path).read_text()
    assert "hasattr(mod" not in text and "inspect.signature" not in text
