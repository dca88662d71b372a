"""ModelShape: the one reader of a preset's config.json, read once, giving what kvcache and weightbytes give."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from inference_wall.measure import analysis
from inference_wall.model import weightbytes
from inference_wall.errors import UserError
from inference_wall.model.kvcache import ModelLayout, RECURRENT_LAYER_TYPES
from inference_wall.model.modelshape import preset_decode_bytes
from inference_wall.model.pools import rig_pool
from inference_wall.model.modelkit import DEFAULT_DATA_DIR, list_presets, models_dir
from inference_wall.model.modelshape import ModelShape, UnknownPreset

SRC = Path(__file__).resolve().parents[1] / "src" / "inference_wall"
PRESETS = list_presets()


def _fresh(preset: str) -> dict:
    """The preset's config read here, apart from ModelShape."""
    return json.loads((models_dir() / preset / "config.json").read_text())


def _data_dir(tmp_path: Path, preset: str) -> Path:
    (tmp_path / "models").mkdir()
    shutil.copytree(models_dir() / preset, tmp_path / "models" / preset)
    return tmp_path


def test_the_presets_this_file_leans_on_exist():
    assert {"qwen3.5-4b", "qwen2.5-0.5b"} <= set(PRESETS)


def test_the_same_preset_and_data_dir_give_the_same_object():
    shape = ModelShape.of("qwen3.5-4b")
    assert ModelShape.of("qwen3.5-4b") is shape
    assert ModelShape.of("qwen3.5-4b", DEFAULT_DATA_DIR) is shape  # None and the default dir are one data dir
    assert ModelShape.of("qwen3.5-4b", str(DEFAULT_DATA_DIR / "models" / "..")) is shape  # resolved
    assert ModelShape.of("qwen2.5-0.5b") is not shape


def test_the_file_is_read_once_per_data_dir(tmp_path):
    data = _data_dir(tmp_path, "qwen2.5-0.5b")
    before = ModelShape.of("qwen2.5-0.5b", data)
    path = data / "models" / "qwen2.5-0.5b" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "vocab_size": 1000}))
    assert ModelShape.of("qwen2.5-0.5b", data).vocab_size == before.vocab_size != 1000  # the cached read
    assert ModelShape.of("qwen2.5-0.5b", data).config == _fresh("qwen2.5-0.5b")
    assert ModelShape.of("qwen2.5-0.5b").config == _fresh("qwen2.5-0.5b")  # the repo's dir: another entry


def test_the_text_config_is_the_nested_one_where_there_is_one():
    nested = ModelShape.of("qwen3.5-4b")
    assert "text_config" in nested.config and "vision_config" in nested.config
    assert nested.text == _fresh("qwen3.5-4b")["text_config"]
    assert nested.text is nested.config["text_config"]
    flat = ModelShape.of("qwen2.5-0.5b")
    assert "text_config" not in flat.config
    assert flat.text is flat.config
    assert flat.vocab_size == _fresh("qwen2.5-0.5b")["vocab_size"]


@pytest.mark.parametrize("preset", PRESETS)
def test_kv_bytes_per_token_are_kvcaches_and_analysis_own(preset):
    config = _fresh(preset)
    text = config.get("text_config", config)
    shape = ModelShape.of(preset)
    types = text.get("layer_types") or ["full_attention"] * text["num_hidden_layers"]
    full = sum(t not in RECURRENT_LAYER_TYPES for t in types)
    head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    assert shape.kv_bytes_per_token == 2 * text["num_key_value_heads"] * head_dim * 2 * full
    assert shape.kv_bytes_per_token == analysis.kv_bytes_per_token_per_layer(text) * analysis.attention_layer_counts(text)[0]
    assert shape.layout == ModelLayout.from_config(config)
    assert shape.attention_layers + shape.recurrent_layers == text["num_hidden_layers"]
    if shape.recurrent_layers:
        assert shape.state_bytes_per_seq == analysis.gdn_state_bytes(text) * shape.recurrent_layers > 0
        assert shape.hybrid_block_size == analysis.hybrid_block_size(text)
    else:
        assert shape.state_bytes_per_seq == 0 and shape.layout.state_groups == 0


@pytest.mark.parametrize("preset", PRESETS)
def test_weights_are_weightbytes_own(preset):
    config = _fresh(preset)
    shape = ModelShape.of(preset)
    for fmt in weightbytes.FORMATS:
        assert shape.decode_bytes(fmt) == weightbytes.decode_bytes(config, fmt) == preset_decode_bytes(preset, fmt)
    assert shape.group_size == weightbytes.group_size(config)
    assert shape.matmul_params == sum(lin.params for lin in weightbytes.block_linears(config))
    assert shape.vision_tower_params == analysis.vision_tower_params(config)


def test_p02_still_answers_config_matmul_params():
    from inference_wall.parts import p02

    config = _fresh("qwen3.5-4b")
    assert p02.config_matmul_params(config) == weightbytes.config_matmul_params(config) == ModelShape.of("qwen3.5-4b").matmul_params


def test_an_unknown_preset_is_a_user_error_and_a_missing_file(tmp_path):
    with pytest.raises(UnknownPreset, match="unknown model preset 'nope'; valid presets: .*qwen3.5-4b"):
        ModelShape.of("nope")
    assert issubclass(UnknownPreset, UserError) and issubclass(UnknownPreset, FileNotFoundError)
    data = _data_dir(tmp_path, "qwen2.5-0.5b")
    with pytest.raises(UserError, match="valid presets: qwen2.5-0.5b$"):
        ModelShape.of("qwen3.5-4b", data)
    assert rig_pool(data / "runs" / "03-batching-cliff" / "x", "qwen3.5-4b", data) is None  # as a missing file was


READS = [re.compile(r'"config\.json"\s*\)\s*\.read_text'), re.compile(r'json\.loads?\([^\n]*config\.json'),
         re.compile(r'/\s*"config\.json"')]


def test_no_other_module_reads_a_config_json():
    """Neither the package (but modelshape, and modelkit, which prepares a model folder) nor a page's notebook."""
    offenders = []
    book = SRC.parents[1]
    pages = sorted((book / "notebooks").glob("*.md")) + sorted((book / "book").glob("*.md"))
    for path in [*sorted(SRC.rglob("*.py")), *pages]:
        if path.name in {"modelshape.py", "modelkit.py"}:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if any(rx.search(line) for rx in READS):
                offenders.append(f"{path.relative_to(book)}:{n}: {line.strip()}")
    assert not offenders, "read config.json through ModelShape.of:\n" + "\n".join(offenders)


def test_the_grep_would_catch_the_old_readers():
    old = ['json.loads((preset_dir(preset, data_dir) / "config.json").read_text())',
           'path = models_dir(data_dir) / preset / "config.json"']
    assert all(any(rx.search(line) for rx in READS) for line in old)
