"""The engine's pure parts: names and errors, the data layout, manifests, plans, analysis, claims."""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from inference_wall.measure import analysis
from inference_wall.records import store
from inference_wall.errors import UserError
from inference_wall.records.record import read_record
from inference_wall.parts import p01, p03, parameters, plan

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "inference_wall", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


@pytest.mark.parametrize("args, needle", [
    (["check-args", "--part", "7", "--rig", "x"],
     "valid parts: " + ", ".join(f"{n} ({name})" for n, name in sorted(__import__("inference_wall.schema").schema.PARTS.items()))),
    (["check-args", "--part", "3", "--rig", "My Rig"], "bad rig name 'My Rig'"),
    (["plan", "--part", "3", "--rig", "x", "--set", "capz=[1]"], "unknown parameter(s) ['capz']"),
    (["plan", "--part", "3", "--rig", "x", "--set", "caps=[1"], "is not JSON"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    res = run_cli(*args)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert needle in lines[0]


@pytest.mark.parametrize("part, rig, needle", [("9", "x", "valid parts"), ("3", "Bad_Rig", "bad rig name"),
                                               ("", "x", "unknown part ''")])
def test_make_reproduce_rejects_bad_part_or_rig(part, rig, needle):
    res = subprocess.run(["make", "-s", "reproduce", f"PART={part}", f"RIG={rig}", f"PYTHON={sys.executable}"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode != 0
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and needle in errors[0], res.stderr


def test_unknown_point_names_the_valid_ones(tmp_path):
    from inference_wall import parts

    with pytest.raises(UserError, match="valid: mns-001"):
        parts.run(3, "cpu-tiny", tmp_path, points=["mns-999"], python=sys.executable)


def test_manifest_write_is_atomic_and_leaves_no_temp_files(tmp_path):
    target = tmp_path / "p" / "manifest.json"
    store.write_json_atomic(target, {"status": "complete"})

    circular = {"status": "failed"}
    circular["self"] = circular  # json.dump fails half-way through writing
    with pytest.raises(ValueError):
        store.write_json_atomic(target, circular)
    assert json.loads(target.read_text())["status"] == "complete"
    assert [p.name for p in target.parent.iterdir()] == ["manifest.json"]


def test_complete_points_are_never_overwritten(tmp_path):
    point = tmp_path / "runs" / "03-batching-cliff" / "r" / "mns-001"
    store.fresh_point_dir(point)
    (point / "bench.json").write_text("{}")
    store.write_json_atomic(point / "manifest.json", {"status": "complete", "part": "03-batching-cliff", "rig": "r",
                                                      "point": "mns-001"})
    with pytest.raises(RuntimeError, match="refusing to overwrite"):
        store.fresh_point_dir(point)
    assert (point / "bench.json").exists()


def test_incomplete_and_failed_points_are_redone(tmp_path):
    point = tmp_path / "pt"
    point.mkdir()
    (point / "stale.json").write_text("{}")
    store.write_json_atomic(point / "manifest.json", {"status": "failed", "part": "03-batching-cliff", "rig": "r",
                                                      "point": "pt"})
    store.fresh_point_dir(point)
    assert list(point.iterdir()) == []


def test_compress_large_keeps_small_files_and_reads_back_gz(tmp_path):
    big = "x" * (store.COMPRESS_OVER_BYTES + 10)
    (tmp_path / "server.log").write_text(big)
    (tmp_path / "small.json").write_text("{}")
    store.compress_large(tmp_path)
    assert (tmp_path / "server.log.gz").exists() and not (tmp_path / "server.log").exists()
    assert store.read_artefact(tmp_path, "server.log") == big
    assert store.read_artefact(tmp_path, "small.json") == "{}"


def test_log_epoch_picks_the_year_nearest_the_manifest_clock():
    import datetime as dt

    near = dt.datetime(2027, 1, 1, 0, 0, 30, tzinfo=dt.timezone.utc).timestamp()
    assert store.log_epoch("12-31 23:59:50", near) == near - 40


def test_part3_plan_one_server_per_cap_and_same_seed():
    plans = plan(3, "any-rig", overrides={"caps": [1, 4, 16]})
    assert [p.name for p in plans] == ["mns-001", "mns-004", "mns-016"]
    assert len({p.session for p in plans}) == 3
    assert {p.passes[0].spec.seed for p in plans} == {0}
    assert [p.passes[0].spec.num_prompts for p in plans] == [p03.prompts_for_cap(c, p03.DEFAULTS) for c in (1, 4, 16)]


def test_part1_plan_one_session_fresh_seed_per_pass():
    plans = plan(1, "any-rig")
    assert len({p.session for p in plans}) == 1
    assert plans[0].name == "cold-warm" and plans[0].cold_start
    seeds = [ps.spec.seed for p in plans for ps in p.passes]
    assert len(seeds) == len(set(seeds))
    assert [p.name for p in plans].index("flood") < min(i for i, p in enumerate(plans) if p.name.startswith("rate-"))


def test_relative_rates_resolve_against_the_flood(tmp_path):
    flood = tmp_path / "flood"
    flood.mkdir()
    (flood / "bench.json").write_text(json.dumps({"request_throughput": 10.0}))
    pt = next(p for p in plan(1, "any-rig") if p.name.startswith("rate-x0.500"))

    class Ctx:
        rig_dir = tmp_path

    pt.resolve(pt, Ctx)
    assert pt.params["offered_rate_rps"] == 5.0
    assert pt.passes[0].spec.request_rate == 5.0


def test_rig_profile_overrides_part_parameters():
    params = parameters(3, "cpu-tiny")
    assert params["caps"] == json.loads((ROOT / "data/rigs/cpu-tiny.json").read_text())["overrides"][p03.NAME]["caps"]


def test_linear_fit_recovers_a_line_within_its_interval():
    rng = np.random.default_rng(1)
    x = np.array([1, 8, 16, 32, 64, 128, 256], float)
    a, b = 3.0, 0.05
    y = a + b * x + rng.normal(0, 0.05, len(x))
    fit = analysis.linear_fit(x, y)
    assert fit.intercept_ci[0] < a < fit.intercept_ci[1]
    assert fit.slope_ci[0] < b < fit.slope_ci[1]
    assert fit.crossover == pytest.approx(fit.intercept / fit.slope)
    # the 95% half-width is Student's t at n - 2 = 5 degrees of freedom (2.5706 in every t table) times the
    # slope's standard error
    se = math.sqrt(fit.cov[1, 1])
    assert (fit.slope_ci[1] - fit.slope_ci[0]) / 2 == pytest.approx(2.5706 * se, rel=1e-4)


def test_knee_and_plateau_on_synthetic_curves():
    rates = pd.DataFrame({"offered_rate_rps": [1, 2, 4, 8, math.inf], "completed_rps": [1, 2, 3.9, 5, 5.2],
                          "output_tok_s": [1, 2, 3, 4, 5]})
    k = analysis.knee(rates)
    assert (k["knee_rps"], k["last_kept_up_rps"], k["ceiling_rps"]) == (8, 4, 5.2)
    # a loaded machine: 0.5 req/s fell behind, 2 kept up again; the knee is the first that fell behind, and the
    # rate it kept up with is one below it (none here), so the page's range low..knee stays a range
    bumpy = pd.DataFrame({"offered_rate_rps": [0.25, 0.5, 2.0, math.inf], "completed_rps": [0.25, 0.4, 1.95, 2.5],
                          "output_tok_s": [1, 2, 3, 4]})
    k = analysis.knee(bumpy)
    assert (k["knee_rps"], k["last_kept_up_rps"]) == (0.5, 0.25)
    assert k["last_kept_up_rps"] <= k["knee_rps"]
    sweep = pd.DataFrame({"max_num_seqs": [1, 4, 16, 64], "output_tok_s": [10, 40, 100, 104]})
    assert analysis.plateau_cap(sweep, 0.05) == 16
    assert analysis.plateau_cap(sweep.iloc[:3], 0.05) == math.inf
    assert analysis.cliff_ratio(sweep) == pytest.approx(10.4)


# Claims: tests/test_claims.py


def test_a_pass_with_failed_requests_does_not_count(tmp_path):
    from inference_wall.run.bench import BenchError, PassSpec, check_result

    result = tmp_path / "bench.json"
    result.write_text(json.dumps({"completed": 3, "failed": 1, "num_prompts": 4}))
    with pytest.raises(BenchError, match="1 of 4 requests failed"):
        check_result(result, PassSpec(num_prompts=4), tmp_path / "bench.log")
    result.write_text(json.dumps({"completed": 4, "failed": 0, "num_prompts": 4}))
    check_result(result, PassSpec(num_prompts=4), tmp_path / "bench.log")


def _copy_point(src: Path, dest: Path, scale_throughput: float = 1.0) -> None:
    import shutil

    shutil.copytree(src, dest)
    bench = dest / "bench.json"
    data = json.loads(bench.read_text())
    data["output_throughput"] *= scale_throughput
    bench.write_text(json.dumps(data))
    manifest = store.read_manifest(dest)  # the edit is deliberate: record the edited file's size and hash
    store.write_json_atomic(dest / "manifest.json", {**manifest, "artefacts": store.artefact_records(dest)})


def test_run_to_run_pairs_the_points_two_runs_share(tmp_path):
    from inference_wall.run.rig import run_to_run

    data = tmp_path / "data"
    (data / "rigs").mkdir(parents=True)
    (data / "rigs" / "box-again.json").write_text(json.dumps({"repeat_of": "box"}))
    src = store.rig_dir(3, "cpu-tiny")
    first, second = sorted(p for p in src.iterdir() if (p / "bench.json").exists())[:2]
    _copy_point(first, store.rig_dir(3, "box", data) / first.name)
    _copy_point(second, store.rig_dir(3, "box", data) / second.name)  # only one run has this point
    _copy_point(first, store.rig_dir(3, "box-again", data) / first.name, scale_throughput=0.8)
    spread = run_to_run(data)
    assert set(spread["point"]) == {first.name}
    row = spread.set_index("metric").loc["output_tok_s"]
    assert (row["rig"], row["repeat"]) == ("box", "box-again")
    assert row["difference_pct"] == pytest.approx(25.0)
    assert spread.set_index("metric").loc["itl_p50_ms", "difference_pct"] == pytest.approx(0.0)


def test_inside_the_knee_splits_each_rate_pass_by_prefill():
    mixed = p01.mixed_step_table(None, ["cpu-tiny"])
    rates = p01.rate_table(None, ["cpu-tiny"])
    finite = rates[rates["offered_rate_rps"].apply(math.isfinite)]
    assert len(mixed) == len(finite) > 0
    out_len = json.loads(next(store.rig_dir(1, "cpu-tiny").glob("*/manifest.json")).read_text())["workload"]["output_len"]
    assert np.allclose(mixed["needed_gen_tok_s"], mixed["offered_rate_rps"] * out_len)
    assert mixed["intervals_with_prefill_pct"].between(0, 100).all()
    values = mixed[["gen_with_prefill_tok_s", "gen_decode_only_tok_s"]].stack().dropna()
    assert len(values) and (values >= 0).all()


def test_a_part_page_names_the_points_that_did_not_complete(tmp_path):
    from inference_wall.parts import unfinished_note

    data = tmp_path / "data"
    src = next(p for p in store.rig_dir(3, "cpu-tiny").iterdir() if (p / "manifest.json").exists())
    import shutil

    shutil.copytree(src, store.rig_dir(3, "box", data) / src.name)
    assert unfinished_note(3, data, ["box"]) is None
    broken = store.rig_dir(3, "box", data) / "mns-999"
    broken.mkdir()
    store.write_json_atomic(broken / "manifest.json", {"status": "interrupted", "error": "KeyboardInterrupt",
                                                       "part": "03-batching-cliff", "rig": "box", "point": "mns-999"})
    note = unfinished_note(3, data, ["box"])
    assert "box mns-999 (interrupted: KeyboardInterrupt)" in note and "PART=3" in note
    assert unfinished_note(3, data, ["other"]) is None


def _part1_family(tmp_path, flood_scale: dict, p3_scale_again: float) -> Path:
    """Rigs `box` and `box-again` (its repeat), each with cpu-tiny's part-1 session and its part-3 session at
    part 1's cap; each rig's part-1 flood scaled by `flood_scale[rig]`, box-again's part-3 flood by
    `p3_scale_again`."""
    from inference_wall.parts import p01

    data = tmp_path / "data"
    (data / "rigs").mkdir(parents=True)
    (data / "rigs" / "box.json").write_text(json.dumps({}))
    (data / "rigs" / "box-again.json").write_text(json.dumps({"repeat_of": "box"}))
    p1, p3 = store.rig_dir(1, "cpu-tiny"), store.rig_dir(3, "cpu-tiny")
    cap = p01._setup(read_record(p1 / "flood"))["command"]
    same = [p for p in sorted(p3.iterdir())  # a point folder; not the rig's .writer.lock that any run leaves
            if p.is_dir() and p01._setup(read_record(p))["command"] == cap]
    assert same, "cpu-tiny's part 3 has a session at part 1's cap"
    for rig, f3 in (("box", 1.0), ("box-again", p3_scale_again)):
        for pt in p1.iterdir():
            if pt.name in ("flood", "single") or pt.name.startswith("decode-"):
                _copy_point(pt, store.rig_dir(1, rig, data) / pt.name, flood_scale[rig] if pt.name == "flood" else 1.0)
        _copy_point(same[0], store.rig_dir(3, rig, data) / same[0].name, f3)
    return data, same[0]


def test_server_sessions_find_the_part1_flood_that_agrees_with_part3(tmp_path):
    from inference_wall.parts import p01
    from inference_wall.run.rig import run_to_run

    tok_s = lambda point: json.loads((point / "bench.json").read_text())["output_throughput"]
    p3 = tok_s(_part1_family(tmp_path / "probe", {"box": 1, "box-again": 1}, 1.0)[1])
    p1 = tok_s(store.rig_dir(1, "cpu-tiny") / "flood")
    # box-again's part-1 flood equals part 3's; box's is 20% under it, far outside the 2% repeat spread
    data, _ = _part1_family(tmp_path / "run", {"box": 0.8 * p3 / p1, "box-again": p3 / p1}, 1.02)
    sessions = p01.server_sessions(data, ["box", "box-again"])
    assert set(sessions["family"]) == {"box"} and len(sessions) == 4  # two rigs x (part 1 + part 3)
    assert (sessions["differs"] == "").all()  # copies of one session: the same setup
    steady = p01.steadiness(sessions, run_to_run(data))["box"]
    assert steady["tolerance"] == pytest.approx(1 - 1 / 1.02, rel=1e-6)  # box against its repeat
    assert steady["agreeing_rigs"] == ["box-again"]
    assert steady["flood_tok_s"][2] == pytest.approx(1.02 / 0.8 - 1, rel=1e-6)  # box's part 1 to box-again's part 3
    # a flood ceiling carries the spread of its repeat into the claims
    import shutil
    for sub in ("reference", "models"):
        shutil.copytree(store.runs_dir().parent / sub, data / sub)
    view = p01.rig_view("box", data, p01.page_tables(data, ["box", "box-again"]))
    assert view["flood_tok_s"].high / view["flood_tok_s"].value == pytest.approx(1.2, rel=1e-6)


def test_a_session_s_setup_holds_the_vllm_version_the_rig_capture_found():
    """_setup read `rig_info.vllm_version`, a key no manifest has (the capture writes `vllm`), so two sessions on
    different vLLM versions compared equal: the setup now takes the version from the typed record."""
    from inference_wall.parts import p01
    from inference_wall.records.record import PointRecord

    def rec(version):
        return PointRecord.from_dict({"status": "complete", "part": "01-hit-the-wall", "rig": "r", "point": "flood",
                                      "rig_info": {"vllm": version, "torch": "2.9"},
                                      "session": {"id": "s", "server_command": ["py", "serve", "m", "--port", "1"]}})

    a, b = p01._setup(rec("0.18.0")), p01._setup(rec("0.22.1"))
    assert a["vllm"] == "0.18.0" and a["command"] == "serve m"
    assert {k for k in a if a[k] != b[k]} == {"vllm"}
