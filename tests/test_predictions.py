"""Frozen predictions (data/predictions/<gpu>.csv): what the step model said about a GPU before that GPU was
measured, written once by scripts/freeze-prediction.py."""
import pytest

from inference_wall.errors import UserError
from inference_wall.parts.p00 import predict


@pytest.fixture(scope="module")
def h100_rows():
    return predict.prediction_rows("h100-sxm")


def test_a_prediction_states_every_quantity_the_validation_compares_for_each_model(h100_rows):
    four = h100_rows[h100_rows["model"] == "4B"]
    assert set(four["quantity"]) >= {"single stream", "decode ceiling", "KV admission", "decode step",
                                     "decode step, async scheduling off", "flood output",
                                     "added sequence stops paying"}
    assert sorted(four[four["quantity"] == "decode step"]["batch"]) == list(predict.FROZEN_BATCHES)
    assert sorted(four[four["quantity"] == "flood output"]["cap"]) == list(predict.FROZEN_CAPS)
    # the admission at the series' utilization and at the one the rig's own starts logged
    assert len(four[four["quantity"] == "KV admission"]["utilization"].unique()) == 2
    assert (h100_rows["predicted"] > 0).all() and h100_rows["predicted"].notna().all()
    # a flood never runs more sequences than the model admits
    adm = four[(four["quantity"] == "KV admission") & (four["utilization"] == 0.9)]["predicted"].iloc[0]
    assert (four[four["quantity"] == "flood output"]["batch"] <= adm).all()


def test_a_gpu_without_a_datasheet_row_is_refused_by_name():
    with pytest.raises(UserError, match="no datasheet row 'h101'"):
        predict.prediction_rows("h101")


# --- frozen files: older than every run of their GPU's rig, and never changed since ------------------------------

import json
import subprocess
from pathlib import Path

import pandas as pd

from inference_wall.run.rig import known_profiles, load_profile
from inference_wall.schema import DATA_DIR, REPO

FROZEN = sorted((Path(DATA_DIR) / "predictions").glob("*.csv"))


def _git(*args):
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()


@pytest.fixture(scope="module")
def history():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the order of commits cannot be read")
    if _git("rev-parse", "--is-shallow-repository") == ["true"]:
        pytest.skip("a shallow clone: the frozen files' first commits are not in it")
    return _git


def _rig_manifests(frozen: Path):
    """The manifests a frozen file predicts: every run of its GPU's rigs, or (a file whose rows name their runs, as
    a refit's does) those runs alone."""
    datasheet = frozen.stem.removesuffix("-refit")
    rigs = [r for r in known_profiles() if load_profile(r).datasheet == datasheet]
    rows = pd.read_csv(frozen)
    if "run" in rows:
        return [Path(DATA_DIR, "runs", run.split("/")[0], r, run.split("/")[1], "manifest.json")
                for r in rigs for run in sorted(set(rows["run"]))
                if Path(DATA_DIR, "runs", run.split("/")[0], r, run.split("/")[1], "manifest.json").exists()]
    return [m for r in rigs for m in sorted(Path(DATA_DIR, "runs").glob(f"*/{r}/*/manifest.json"))]


def test_there_is_a_frozen_prediction_for_the_h100():
    assert "h100-sxm" in [p.stem for p in FROZEN]


@pytest.mark.parametrize("frozen", FROZEN, ids=lambda p: p.stem)
def test_a_frozen_prediction_was_committed_once_and_before_any_run_of_its_gpu(frozen, history):
    rel = str(frozen.relative_to(REPO))
    commits = history("log", "--format=%H", "--", rel)
    assert len(commits) == 1, f"{rel} was changed after it was frozen: {commits}"
    frozen_at = int(history("show", "-s", "--format=%ct", commits[0])[0])
    rows = pd.read_csv(frozen)
    model_commit = rows["model_commit"].iloc[0]
    # the model it names is an ancestor of the freeze and its time is the one the file states
    subprocess.run(["git", "merge-base", "--is-ancestor", model_commit, commits[0]], cwd=REPO, check=True)
    assert int(rows["model_commit_time"].iloc[0]) <= frozen_at
    for man in _rig_manifests(frozen):
        added = history("log", "--diff-filter=A", "--format=%H", "--", str(man.relative_to(REPO)))
        for c in added:  # every commit that added a run of this GPU descends from the freeze
            assert subprocess.run(["git", "merge-base", "--is-ancestor", commits[0], c], cwd=REPO).returncode == 0, \
                f"{man} was committed before {rel}"
        started = (json.loads(man.read_text()).get("session") or {}).get("server_started")
        assert started and started > frozen_at, f"{man}'s server started before {rel} was committed"


# --- the frozen prediction against what its GPU measured (parts/validation.py) ----------------------------------

@pytest.fixture(scope="module")
def h200_as_if_frozen(tmp_path_factory):
    """A data dir with the committed runs and a prediction for the h200's own datasheet row written as a frozen
    file would be (in sample: only to exercise the join on real measurements)."""
    import os

    tmp = tmp_path_factory.mktemp("data")
    for d in ("runs", "models", "reference", "rigs"):
        os.symlink(Path(DATA_DIR) / d, tmp / d)
    (tmp / "predictions").mkdir()
    rows = predict.prediction_rows("h200-sxm", tmp)
    rows.assign(model_commit="0" * 40, model_commit_time=0).to_csv(tmp / "predictions" / "h200-sxm.csv", index=False)
    return tmp, rows


def test_the_validation_joins_each_measured_quantity_to_its_frozen_row(h200_as_if_frozen):
    from inference_wall.parts import p00
    from inference_wall.parts.p00 import validation

    tmp, rows = h200_as_if_frozen
    val = validation.table("h200", tmp)
    view = p00.rig_view("h200", p00.page_tables(tmp, ["h200"]), None, tmp)
    curve = view["curve"].set_index(["variant", "batch"])["step_ms"]
    r = val[(val["model"] == "4B") & (val["quantity"] == "decode step") & (val["batch"] == 64)].iloc[0]
    frozen = rows[(rows["model"] == "4B") & (rows["quantity"] == "decode step") & (rows["batch"] == 64)]
    assert r.measured == pytest.approx(curve[("4b", 64)])
    assert r.predicted == pytest.approx(float(frozen["predicted"].iloc[0]), rel=1e-9)
    assert r.error_pct == pytest.approx(100 * (r.predicted - r.measured) / r.measured)
    # a flood is shown twice, whole pass and steady window, against the one prediction
    flood = val[(val["model"] == "4B") & (val["quantity"] == "flood output") & (val["cap"] == 256)]
    assert len(flood) == 2 and flood["predicted"].nunique() == 1 and flood["measured"].nunique() == 2
    # the admission is joined at the utilization the start logged
    adm = val[(val["model"] == "4B") & (val["quantity"] == "KV admission")]
    assert len(adm) == 1 and "max_num_seqs" not in adm["source"].iloc[0]
    # no measured batch without a frozen row (512 is not one of the frozen batches)
    assert 512 not in set(val[val["quantity"] == "decode step"]["batch"])
    words = validation.sentences(val, validation.frozen("h200-sxm", tmp))
    assert words[0].startswith("Before h200's first run") and "0000000000" in words[0]
    assert "the step at batch 8" in words[1] and "nan" not in " ".join(words)


def test_a_rig_without_a_frozen_prediction_has_no_validation_rows():
    from inference_wall.parts.p00 import validation

    assert validation.table("h200").empty and validation.table("cpu-tiny").empty


def test_todays_model_is_a_column_of_its_own_beside_the_frozen_one(h200_as_if_frozen):
    """The frozen numbers are shown as written; where today's model says otherwise (here the file is edited to
    differ), its prediction is a second, named column, never in place of the frozen one."""
    from inference_wall.parts.p00 import validation

    tmp, rows = h200_as_if_frozen
    val = validation.table("h200", tmp, today=True)
    same = validation.shown(val)
    assert validation.HEADERS["today"] not in same  # nothing changed since this file was written
    path = tmp / "predictions" / "h200-sxm.csv"
    edited = rows.assign(predicted=rows["predicted"] * 1.5, model_commit="0" * 40, model_commit_time=0)
    edited.to_csv(path, index=False)
    try:
        val2 = validation.table("h200", tmp, today=True)
        shown = validation.shown(val2)
        assert validation.HEADERS["today"] in shown and validation.HEADERS["predicted"] in shown
        assert list(val2["predicted"]) == pytest.approx(list(val2["today"] * 1.5), rel=1e-5)
    finally:
        rows.assign(model_commit="0" * 40, model_commit_time=0).to_csv(path, index=False)


# --- the refit (parts/p00/refit.py) -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def measured():
    from inference_wall.parts.p00 import refit

    return refit.measured_gpus()


def test_the_refit_reads_each_part_of_a_step_from_the_fit_gpus_traces(measured):
    """A step the refit predicts for the fit GPU itself, at a traced batch, is that GPU's measured step (every part
    scaled by 1, the wait its own idle): the parts add up to the step by construction, on the raw traces."""
    from inference_wall.parts.p00 import refit

    tf = {k: g.tflops for k, g in predict.gpus().items()}
    res, _ = refit.resources_from({r: m["fit"] for r, m in measured.items()}, tf)
    for rig, m in measured.items():
        f = m["fit"]
        own = refit.Target(m["datasheet"], rig, f.bandwidth_gb_s, "its own", tf[m["datasheet"]])
        for b, row in f.table.iterrows():
            assert refit.predicted_step(f, res, own, tf[m["datasheet"]], b)["step"] == pytest.approx(row["step_ms"])


def test_a_bandwidth_part_scales_with_the_copy_and_the_wait_shrinks_where_the_fit_gpu_waited_on_its_host(measured):
    from inference_wall.parts.p00 import refit

    f = next(iter(measured.values()))["fit"]
    res = {n: ("bandwidth" if n.startswith("weights") else "not bandwidth") for n in f.parts(1)}
    fast = refit.Target("x", "x", f.bandwidth_gb_s, "", 1.0)
    slow = refit.Target("y", "y", f.bandwidth_gb_s / 2, "", 1.0)
    a = refit.kernels(f, res, fast, 1.0, 1)
    b = refit.kernels(f, res, slow, 1.0, 1)
    w = refit.part_name("weights (matmul)", refit.AT_ONE)
    assert b[w] == pytest.approx(2 * a[w])
    assert all(b[n] == pytest.approx(a[n]) for n in a if n != w)
    # a host-bound batch: a slower GPU's kernels fill the wait, down to the launch gaps
    host = max(f.table.index, key=lambda x: f.table.loc[x, "GPU idle"] / f.table.loc[x, "step_ms"])
    p_fast, p_slow = (refit.predicted_step(f, res, t, 1.0, host) for t in (fast, slow))
    if p_fast["host_bound"]:
        assert p_slow["wait"] <= p_fast["wait"] and p_slow["wait"] >= f.table["GPU idle"].clip(lower=0).min()


def _raw_decode_step_ms(point, batch: int, share: float = 0.95) -> float:
    """The pure-decode step of a point recomputed from its raw polls alone, with prometheus_client's own parser (not
    the package's): every poll interval with at least `share` of `batch` running at both ends, the engine's step
    counter moving and no prompt token counted, taken together; seconds (poll midpoints) over steps."""
    import json
    import lzma
    from pathlib import Path

    from prometheus_client.parser import text_string_to_metric_families

    names = {"vllm:num_requests_running": "running", "vllm:iteration_tokens_total_count": "steps",
             "vllm:prompt_tokens_total": "prompt"}
    polls = []
    for line in lzma.open(Path(point) / "bench-metrics.jsonl.xz", "rt"):
        rec = json.loads(line)
        if rec.get("status") != 200:
            continue
        v = dict.fromkeys(names.values(), 0.0)
        for family in text_string_to_metric_families(rec["text"]):
            for sample in family.samples:
                if sample.name in names:
                    v[names[sample.name]] += sample.value
        polls.append(((rec["t0"] + rec["t1"]) / 2, v))
    need, secs, steps = max(1, int(share * batch)), 0.0, 0.0
    for (ta, a), (tb, b) in zip(polls, polls[1:]):
        if a["running"] >= need and b["running"] >= need and b["steps"] > a["steps"] and a["prompt"] == b["prompt"]:
            secs, steps = secs + tb - ta, steps + b["steps"] - a["steps"]
    return 1000 * secs / steps


def test_the_leave_one_gpu_out_table_recomputes_from_the_raw_runs(measured):
    """Three rows of the table, recomputed from the raw artefacts: the measured step from the point's raw /metrics
    polls (parsed here by prometheus_client, not by the package), the error from the row's prediction and that step,
    and where the target is the h100 the frozen model's error from data/predictions/h100-sxm.csv's own row."""
    import csv

    from inference_wall.parts.p00 import refitloo
    from inference_wall.records.store import REPO

    if len(measured) < 2:
        pytest.skip("one measured GPU: nothing to leave out")
    t = refitloo.loo_table()
    rigs = list(measured)
    frozen = {int(r["batch"]): float(r["predicted"])
              for r in csv.DictReader(open(REPO / "data" / "predictions" / "h100-sxm.csv"))
              if r["model"] == "4B" and r["quantity"] == "decode step"}
    for fit_rig, target, b in ((rigs[0], rigs[1], 64), (rigs[1], rigs[0], 256), (rigs[1], rigs[0], 1)):
        r = t[(t["fit"] == fit_rig) & (t["target"] == target) & (t["quantity"] == "decode step")
              & (t["at"] == f"batch {b:,}")].iloc[0]
        raw = _raw_decode_step_ms(REPO / "data" / "runs" / "00-inside-a-step" / target / f"4b-decode-b{b:04d}", b)
        assert r.measured == pytest.approx(raw, rel=1e-6)
        assert r.error_pct == pytest.approx(100 * (r.predicted - raw) / raw)
        if target == "h100" and b in frozen:
            assert r.frozen_error_pct == pytest.approx(100 * (frozen[b] - raw) / raw)
    assert {"a10g-published"} <= set(t["target"])


def test_the_chapters_tested_table_reads_the_h100s_runs_against_both_frozen_files():
    """The chapter page's table of what was predicted before it was measured: the measured single stream and the
    flood's whole pass straight from the runs' bench.json, each prediction as its frozen file wrote it, the error
    signed as predicted less measured over measured, and a quantity a file does not state left empty."""
    import gzip

    from inference_wall.parts.p00 import validation

    h = validation.headline("h100").set_index("quantity")
    runs = Path(DATA_DIR) / "runs"
    single = json.loads((runs / "01-hit-the-wall/h100/single/bench.json").read_text())
    flood = json.loads(gzip.open(runs / "03-batching-cliff/h100/mns-256/bench.json.gz").read())
    first = pd.read_csv(Path(DATA_DIR) / "predictions/h100-sxm.csv")
    refit = pd.read_csv(Path(DATA_DIR) / "predictions/h100-sxm-refit.csv")

    def stated(rows, quantity, **at):
        r = rows[(rows["model"] == "4B") & (rows["quantity"] == quantity)]
        for k, v in at.items():
            r = r[r[k] == v]
        return float(r["predicted"].iloc[0])

    s = h.loc["single stream, ms a token"]
    assert s.measured == pytest.approx(single["median_itl_ms"])
    assert s.frozen == pytest.approx(stated(first, "single stream")) and s.refit == pytest.approx(stated(refit, "single stream"))
    assert s.frozen_error_pct == pytest.approx(100 * (s.frozen - s.measured) / s.measured)
    f = h.loc["flood at cap 256, whole pass, tok/s"]
    assert f.measured == pytest.approx(flood["output_throughput"])
    assert f.refit == pytest.approx(stated(refit, "flood output", cap=256))
    assert f.refit_error_pct == pytest.approx(100 * (f.refit - f.measured) / f.measured)
    step = h.loc["step at batch 64, ms"]
    assert step.frozen == pytest.approx(stated(first, "decode step", batch=64)) and step.refit != step.refit  # not stated
    words = validation.headline_words(validation.headline("h100"), "h100")
    assert f"states {h['frozen'].notna().sum()}" in words and "nan" not in words
    shown = validation.headline_shown(validation.headline("h100"))
    assert "–" in set(shown["its error "]) and not shown.isna().any().any()


def test_each_frozen_files_section_names_its_own_file():
    from inference_wall.parts.p00 import validation

    first, refit = validation.section("h100"), validation.section("h100", model="refit")
    assert "`data/predictions/h100-sxm.csv`" in first["sentences"][0] and first["sentences"][0].startswith("Before")
    assert "`data/predictions/h100-sxm-refit.csv`" in refit["sentences"][0] and "refit" in refit["sentences"][0]
    worst = " ".join(refit["sentences"])
    assert "nan" not in worst and ("((" not in worst)
