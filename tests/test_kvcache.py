"""The KV pool read from a server's log and the admission limit it implies."""
from __future__ import annotations

import pytest

import json

from inference_wall.measure import analysis
from inference_wall.model.kvcache import DEFAULT_BLOCK_SIZE, KVPool, ModelLayout, pool_from_concurrency, pool_from_report
from inference_wall.model.pools import block_size, rig_pool
from inference_wall.model.modelkit import models_dir
from inference_wall.records.logs import parse_startup
from inference_wall.parts import p03

HYBRID = {"text_config": {"layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 8}}
DENSE = {"num_hidden_layers": 24}


def test_hybrid_layout_groups_layers_like_vllm():
    layout = ModelLayout.from_config(HYBRID)
    assert (layout.attention_groups, layout.state_groups) == (1, 3)
    assert layout.pages_per_request(384, 528) == 4
    assert layout.pages_per_request(2048, 528) == 7  # 4 attention pages + 3 state pages
    assert layout.pages_per_request(529, 528) == 5


def test_dense_layout_has_no_state_pages():
    layout = ModelLayout.from_config(DENSE)
    assert (layout.attention_groups, layout.state_groups) == (1, 0)
    assert layout.pages_per_request(384, 16) == 24


def test_a10g_pool_from_the_posts_concurrency_line():
    # The post prints "83.7x" for 2,048 tokens: one decimal.
    pool = pool_from_concurrency(83.7, 2048, 528, ModelLayout.from_config(HYBRID), digits=1)
    assert pool.num_blocks_low <= 586 <= pool.num_blocks_high
    assert pool.admission_interval(384) == (146, 146)


def test_admission_limit_moves_with_the_pool_and_the_length():
    layout = ModelLayout.from_config(HYBRID)
    small, large = KVPool(586, 528, layout, 586, 586, "t"), KVPool(7302, 528, layout, 7302, 7302, "t")
    assert small.admission_limit(384) < large.admission_limit(384)
    assert small.admission_limit(2048) < small.admission_limit(384)
    assert KVPool(5, 528, layout, 5, 5, "t").admission_limit(384) == 1  # one page is vLLM's null block


LOG_022 = """\
(EngineCore pid=1) INFO 11-30 08:12:47 [interface.py:649] Setting attention block size to 528 tokens to ensure that attention page size is >= mamba page size.
(EngineCore pid=1) INFO 11-30 08:12:55 [kv_cache_utils.py:1733] GPU KV cache size: 3,828,350 tokens
(EngineCore pid=1) INFO 11-30 08:12:55 [kv_cache_utils.py:1734] Maximum concurrency for 262,144 tokens per request: 14.60x
"""

LOG_OVERRIDE = """\
(EngineCore pid=1) INFO 12-01 02:00:00 [interface.py:649] Setting attention block size to 528 tokens to ensure that attention page size is >= mamba page size.
(EngineCore pid=1) INFO 12-01 02:00:01 [kv_cache_utils.py:2022] Overriding num_gpu_blocks=7302 with num_gpu_blocks_override=586
(EngineCore pid=1) INFO 12-01 02:00:01 [kv_cache_utils.py:1733] GPU KV cache size: 171,428 tokens
(EngineCore pid=1) INFO 12-01 02:00:01 [kv_cache_utils.py:1734] Maximum concurrency for 2,048 tokens per request: 83.71x
"""


def test_pool_from_a_022_log_uses_the_token_count():
    pool = pool_from_report(parse_startup(LOG_022), ModelLayout.from_config(HYBRID))
    assert (pool.num_blocks_low, pool.num_blocks_high) == (7302, 7302)  # 3,828,350 x 500 / 262,144
    assert pool.block_size == 528


def test_pool_from_an_override_is_exact():
    report = parse_startup(LOG_OVERRIDE)
    assert (report.num_gpu_blocks, report.num_gpu_blocks_override) == (7302, 586)
    pool = pool_from_report(report, ModelLayout.from_config(HYBRID))
    assert pool.num_blocks == 586 and pool.admission_limit(384) == 146


def test_hybrid_pool_needs_the_block_size():
    text = LOG_022.splitlines(keepends=True)[1:]
    assert pool_from_report(parse_startup("".join(text)), ModelLayout.from_config(HYBRID)) is None


@pytest.mark.parametrize("blocks, expected", [
    (None, [1, 4, 16, 64, 256]),  # unknown pool: the series' caps
    (586, [1, 4, 16, 64, 256]),  # limit 146: 256 is the first cap over it
    (7302, [1, 4, 16, 64, 256, 512, 1024, 2048]),  # limit 1,825: doublings, then the first over it
    (41, [1, 4, 16]),  # limit 10: stop at the first cap over it
])
def test_automatic_caps_follow_the_admission_limit(blocks, expected):
    p = dict(p03.DEFAULTS)
    pool = None if blocks is None else KVPool(blocks, 528, ModelLayout.from_config(HYBRID), blocks, blocks, "t")
    assert p03.caps_for(p, pool) == expected


def test_given_caps_win_and_max_cap_bounds_the_list():
    pool = KVPool(7302, 528, ModelLayout.from_config(HYBRID), 7302, 7302, "t")
    assert p03.caps_for({**p03.DEFAULTS, "caps": [2, 8]}, pool) == [2, 8]
    assert p03.caps_for({**p03.DEFAULTS, "max_cap": 1024}, pool) == [1, 4, 16, 64, 256, 512, 1024]


def test_a_dense_model_on_the_cpu_build_counts_in_its_128_token_pages():
    from pathlib import Path

    text = (Path(__file__).parent / "fixtures" / "logs" / "cpu-vllm-0.32.0" / "server.log").read_text()
    report = parse_startup(text)
    pool = pool_from_report(report, ModelLayout.from_config(DENSE))
    assert report.kv_cache_device == "CPU" and pool.block_size == 128
    assert pool.num_blocks * 128 == pytest.approx(report.kv_cache_tokens, rel=0.01)


# ---------------------------------------------------------------------------------------------
# The page size of a preset: serve args, a logged start, or the config
# ---------------------------------------------------------------------------------------------
def _data_dir(tmp_path, *presets):
    """A data dir holding the repo's configs of `presets` and no runs."""
    for preset in presets:
        (tmp_path / "models" / preset).mkdir(parents=True)
        (tmp_path / "models" / preset / "config.json").write_text((models_dir() / preset / "config.json").read_text())
    return tmp_path


def _logged_start(data_dir, preset, block, part="03-batching-cliff", rig="my-rig"):
    """A complete point of `preset` whose server logged a `block`-token page."""
    point = data_dir / "runs" / part / rig / "point"
    point.mkdir(parents=True)
    (point / "manifest.json").write_text(json.dumps(
        {"status": "complete", "part": part, "rig": rig, "point": "point", "model": {"preset": preset},
         "session": {"id": "s", "has_startup": True, "server_started": 1}}))
    (point / "server.log").write_text(LOG_OVERRIDE.replace("size to 528 tokens", f"size to {block} tokens"))


def _config_block(preset):
    return analysis.hybrid_block_size(json.loads((models_dir() / preset / "config.json").read_text())["text_config"])


def test_a_hybrid_presets_page_is_the_one_its_start_logged(tmp_path):
    data = _data_dir(tmp_path, "qwen3.5-4b")
    _logged_start(data, "qwen3.5-4b", 544)  # not the config's page: the log, vLLM's own word, wins
    assert _config_block("qwen3.5-4b") != 544
    assert block_size("qwen3.5-4b", data_dir=data) == 544
    assert block_size("qwen3.5-4b", data_dir=data, serve_args=["--block-size", "32"]) == 32


def test_a_hybrid_preset_never_started_gets_the_page_its_config_implies(tmp_path):
    data = _data_dir(tmp_path, "qwen3.5-4b", "tiny-dense")
    _logged_start(data, "qwen3.5-9b", 544)  # another preset's start says nothing of this one
    assert block_size("qwen3.5-4b", data_dir=data) == _config_block("qwen3.5-4b")
    assert block_size("tiny-dense", data_dir=data) == DEFAULT_BLOCK_SIZE


def test_a_rig_pool_fixed_by_its_profile_needs_no_start(tmp_path):
    data = _data_dir(tmp_path, "qwen3.5-4b")
    where = data / "runs" / "04-kv-starvation" / "my-rig"
    pool = rig_pool(where, "qwen3.5-4b", data, ["--num-gpu-blocks-override", "586"])
    assert (pool.num_blocks, pool.block_size) == (586, _config_block("qwen3.5-4b"))
    assert pool.admission_limit(384) == 146


def _start(data_dir, part, log, started, command=None, preset="qwen3.5-4b", rig="my-rig"):
    point = data_dir / "runs" / part / rig / f"point-{started}"
    point.mkdir(parents=True)
    session = {"id": f"s{started}", "has_startup": True, "server_started": started}
    if command is not None:
        session["server_command"] = command
    (point / "manifest.json").write_text(json.dumps({"status": "complete", "part": part, "rig": rig, "point": point.name,
                                                     "model": {"preset": preset}, "session": session}))
    (point / "server.log").write_text(log)


def test_a_rig_pool_ignores_a_later_start_whose_pool_a_part_sized_itself(tmp_path):
    """Part 4 overrides the pool of its servers; the rig's pool for part 3's caps or the plan's header is the
    latest start sized as the profile sizes its servers."""
    data = _data_dir(tmp_path, "qwen3.5-4b")
    _start(data, "03-batching-cliff", LOG_022, 1, ["vllm", "serve", "m", "--max-num-seqs", "256"])
    _start(data, "04-kv-starvation", LOG_OVERRIDE, 2, ["vllm", "serve", "m", "--num-gpu-blocks-override", "586"])
    where = data / "runs" / "05-four-bits" / "my-rig"
    assert rig_pool(where, "qwen3.5-4b", data).num_blocks == 7302
    # the same override in the profile: that start is the rig's (here the profile alone already says it)
    assert rig_pool(where, "qwen3.5-4b", data, ["--num-gpu-blocks-override=586"]).num_blocks == 586
    # a manifest from before server commands were recorded still counts, as before
    _start(data, "04-kv-starvation", LOG_OVERRIDE, 3)
    assert rig_pool(where, "qwen3.5-4b", data).num_blocks == 586


def test_pool_flags_reads_both_spellings_and_the_last_wins():
    from inference_wall.model.kvcache import pool_flags

    assert pool_flags(["serve", "--gpu-memory-utilization", "0.9", "--max-num-seqs", "8",
                       "--gpu-memory-utilization=0.5"]) == {"--gpu-memory-utilization": "0.5"}
    assert pool_flags(["serve", "m", "--kv-cache-memory-bytes", "268435456"]) == {
        "--kv-cache-memory-bytes": "268435456"}
    assert pool_flags(["serve", "m", "--quantization", "fp8"]) == {"--quantization": "fp8"}
    assert pool_flags(["serve", "m", "--dtype", "float16"]) == {}
