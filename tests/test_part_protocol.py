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


# The parts each part's module may import: the series' data dependencies (a part that compares with an earlier part's
# measurements of the same rig), never a part imported for its helpers. What two parts share lives in a module of its
# own (parts/variants.py for parts 5 and 6).
# Part 0 runs part 2's sessions (background, injected prompt, trace) on the dense model and reads them beside part 2's
# traces of the 4B (mixedsteps), so part 2 is one of its data dependencies as well as part 3.
DATA_DEPENDENCIES = {0: {2, 3}, 1: set(), 2: {1}, 3: {1}, 4: {1}, 5: {1, 3}, 6: set()}


def _part_imports(path: Path) -> set[int]:
    import ast
    import re

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            names = [mod.split(".")[-1]] if re.fullmatch(r"(?:\.?|.*\.)p0\d", mod) else []
            if node.level and not mod or mod.endswith("parts"):
                names += [a.name for a in node.names]
            found |= {int(n[1:]) for n in names if re.fullmatch(r"p0\d", n)}
    return found


@pytest.mark.parametrize("n", NUMBERS)
def test_a_part_imports_only_the_parts_whose_data_it_builds_on(n):
    path = Path(parts.module(n).__file__)
    assert _part_imports(path) - {n} == DATA_DEPENDENCIES[n]


def test_the_variant_wing_imports_no_part():
    assert not _part_imports(ROOT / "src" / "inference_wall" / "parts" / "variants.py")
    assert _part_imports(ROOT / "src" / "inference_wall" / "parts" / "p05.py") == {1, 3}
