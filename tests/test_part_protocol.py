"""Every part offers the runner one `PART` (parts/protocol.py) with one signature per job, and the runner calls it
instead of probing the module for what it has."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from inference_wall import parts
from inference_wall.parts import protocol
from inference_wall.run.rig import load_profile

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


@pytest.mark.parametrize("path", ["src/inference_wall/parts/__init__.py", "src/inference_wall/parts/registry.py",
                                  "src/inference_wall/cli.py"])
def test_the_runner_probes_no_part(path):
    text = (ROOT / path).read_text()
    assert "hasattr(mod" not in text and "inspect.signature" not in text


# A part's module imports another part only for the series' data dependencies (a part that compares with an earlier
# part's measurements of the same rig), never for its helpers: what two parts share lives in a module of its own
# (parts/variants.py for parts 5 and 6). So every part it imports is one whose runs its page reads (Part.reads).
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
    from inference_wall.schema import PARTS

    path = Path(parts.module(n).__file__)
    files = sorted(path.parent.glob("*.py")) if path.name == "__init__.py" else [path]  # a part's folder: every file
    reads = {k for k, name in PARTS.items() if name in protocol.runs_read(parts.protocol_of(n))}
    assert set().union(*(_part_imports(f) for f in files)) - {n} <= reads - {n}


def test_the_variant_wing_imports_no_part():
    assert not _part_imports(ROOT / "src" / "inference_wall" / "parts" / "variants.py")
    assert not set().union(*(_part_imports(f) for f in (ROOT / "src" / "inference_wall" / "parts" / "p05").glob("*.py")))


# The page's jobs, each with the protocol's one signature (parameter names, in order), and the runner's.
JOB_PARAMETERS = {"plan": ["params", "profile", "pools", "data_dir"], "served_presets": ["params", "profile"],
                  "gpus_needed": ["params"], "tables": ["data_dir", "rigs"], "shows": ["rig", "tables"],
                  "view": ["rig", "tables", "params"],
                  "findings": ["view"], "claims": ["views"], "claim_ids": ["views"], "box": ["views", "tables"],
                  "closing": ["views", "device"]}


def test_the_protocol_lists_every_job():
    assert set(protocol.JOBS) == set(JOB_PARAMETERS)
    assert set(protocol.JOBS) <= {f.name for f in dataclasses.fields(protocol.Part)}


@pytest.mark.parametrize("n", NUMBERS)
@pytest.mark.parametrize("job", list(JOB_PARAMETERS))
def test_every_part_implements_each_job_with_the_protocols_signature(n, job):
    """Each job takes the protocol's arguments, positionally, and needs no other; the page's jobs (adapters written
    for the protocol where a part's own function differs) also name them as the protocol does."""
    import inspect

    sig = inspect.signature(getattr(parts.protocol_of(n), job))
    sig.bind(*JOB_PARAMETERS[job])
    required = [p.name for p in sig.parameters.values() if p.default is inspect.Parameter.empty]
    assert len(required) <= len(JOB_PARAMETERS[job])
    if job not in ("plan", "served_presets", "gpus_needed"):
        assert list(sig.parameters)[:len(JOB_PARAMETERS[job])] == JOB_PARAMETERS[job], f"part {n}'s {job}"


DATA = ROOT / "data"


def _same(new, old) -> None:
    """Equal, frame by frame and field by field (a table may hold dicts of objects without an equality)."""
    if isinstance(old, pd.DataFrame):
        pd.testing.assert_frame_equal(new, old)
    elif isinstance(old, pd.Series):
        pd.testing.assert_series_equal(new, old)
    elif isinstance(old, np.ndarray):
        np.testing.assert_array_equal(new, old)
    elif isinstance(old, dict):
        assert list(new) == list(old)
        for key in old:
            _same(new[key], old[key])
    elif isinstance(old, (list, tuple)):
        assert len(new) == len(old)
        for a, b in zip(new, old):
            _same(a, b)
    elif dataclasses.is_dataclass(old):
        assert type(new) is type(old)
        _same({f.name: getattr(new, f.name) for f in dataclasses.fields(old)},
              {f.name: getattr(old, f.name) for f in dataclasses.fields(old)})
    elif hasattr(old, "__dict__") and type(old).__eq__ is object.__eq__:
        assert type(new) is type(old)
        _same(vars(new), vars(old))
    else:
        assert new == old or (new != new and old != old)


def _same_tables(new: dict, old: dict) -> None:
    """The page's tables are the old ones, and the protocol's keys besides."""
    assert set(new) - set(old) <= {protocol.DATA_DIR, protocol.REFERENCE}
    _same({k: new[k] for k in old}, old)


def _rigs(n: int, published: bool = True) -> list[str]:
    from inference_wall.schema import PUBLISHED_RIG

    return [r for r in parts.page_rigs(n, DATA) if published or r != PUBLISHED_RIG]


def test_part_1s_page_is_its_per_part_calls():
    from inference_wall.measure.claims import evaluate
    from inference_wall.parts import p01

    shown = _rigs(1)
    page = protocol.page(p01.PART, DATA, shown)
    tables = p01.page_tables(DATA, shown)
    views = {rig: p01.rig_view(rig, DATA, tables) for rig in shown}
    _same_tables(page.tables, tables)
    assert page.findings == {rig: p01.key_findings({rig: v}) for rig, v in views.items()}
    pd.testing.assert_frame_equal(page.claims, evaluate(p01.CLAIMS, views, p01.claim_facts(DATA)))


def test_part_3s_page_is_its_per_part_calls():
    from inference_wall.measure.claims import evaluate
    from inference_wall.parts import p01, p03

    shown = _rigs(3)
    page = protocol.page(p03.PART, DATA, shown)
    table, facts = p03.sweep_table(DATA, shown), p03.reference_view(DATA)
    rigs1 = sorted({p03.part1_rig(r, DATA) for r in shown})
    tables1 = p01.page_tables(DATA, rigs1)
    views1 = {r: {**p01.rig_view(r, DATA, tables1), protocol.REFERENCE: p01.claim_facts(DATA)} for r in rigs1}
    fits = {rig: views1[p03.part1_rig(rig, DATA)] for rig in shown}  # part 1's views through its PART
    spread = p03.run_to_run(table)
    views = {rig: p03.rig_view(table, rig, fits[rig], facts, spread) for rig in shown}
    _same_tables(page.tables, {"sweep": table, "part1": fits, "spread": spread, protocol.REFERENCE: facts})
    assert page.findings == {rig: p03.key_findings({rig: v}, facts) for rig, v in views.items()}
    assert page.box == p03.key_findings(page.views, facts)
    pd.testing.assert_frame_equal(page.claims, evaluate(p03.CLAIMS, views, facts))


def test_part_5s_page_is_its_per_part_calls():
    from inference_wall.measure.claims import evaluate
    from inference_wall.parts import p05

    shown = _rigs(5, published=False)
    page = protocol.page(p05.PART, DATA, shown)
    tables = p05.page_tables(DATA, shown)
    views = {rig: p05.rig_view(rig, tables, parts.parameters(5, rig, DATA), DATA) for rig in shown}
    _same_tables(page.tables, tables)
    assert page.findings == {rig: [p05.findings(v)] for rig, v in views.items()}
    pd.testing.assert_frame_equal(page.claims, evaluate(p05.CLAIMS, views))
    assert p05.PART.closing(page.views, None) == p05.closing_note(views, None)


# The optional job: what one part's runs say on another part's page (Part.answers), gathered by the asking page
# through every part's PART (parts.answers -> protocol.answers_for), so neither part imports the other's modules.
ANSWERS_PARAMETERS = ["asking", "data_dir", "shown"]


@pytest.mark.parametrize("n", NUMBERS)
def test_a_part_s_answers_job_has_the_protocols_signature(n):
    import inspect

    job = parts.protocol_of(n).answers
    if job is None:
        return
    assert list(inspect.signature(job).parameters)[:3] == ANSWERS_PARAMETERS


def test_part_0_answers_parts_1_2_3_and_5_and_no_part_answers_itself():
    assert parts.protocol_of(0).answers is not None
    told = parts.answers(2, DATA, _rigs(2))
    assert isinstance(told, protocol.Answers) and told.checks == []  # the step model predicts no part-2 measurement
    for n in (1, 3, 5):
        got = parts.answers(n, DATA, _rigs(n, published=n != 5))
        assert all(isinstance(p, str) and "(part " not in p.split("**")[1] for p in got.paragraphs if p.startswith("**"))
        assert all(len(c) == 3 for c in got.checks)


def test_answers_for_asks_each_answering_part_once_in_order_and_skips_those_without():
    calls = []

    def answering(tag):
        def job(asking, data_dir, shown):
            calls.append((tag, asking, tuple(shown)))
            return protocol.Answers([f"{tag} on {asking}"], [(shown[0], pd.DataFrame(), tag)])
        return job

    base = parts.protocol_of(4)
    a = dataclasses.replace(base, answers=answering("a"))
    b = dataclasses.replace(base, answers=answering("b"))
    told = protocol.answers_for("03-batching-cliff", [a, base, b], None, ["h200"])
    assert told.paragraphs == ["a on 03-batching-cliff", "b on 03-batching-cliff"]
    assert [c[2] for c in told.checks] == ["a", "b"]
    assert calls == [("a", "03-batching-cliff", ("h200",)), ("b", "03-batching-cliff", ("h200",))]
