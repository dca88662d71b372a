"""The model kit: presets, prepared folders, and a synthetic tokenizer that round-trips exactly."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from inference_wall.model import modelkit
from inference_wall.errors import UserError

PRESETS = modelkit.list_presets()


def test_the_book_presets_exist():
    assert {"qwen3.5-4b", "qwen2.5-0.5b", "tiny-dense"} <= set(PRESETS)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {p: modelkit.prepare_model(p, root / p) for p in PRESETS}


def load(spec: modelkit.ModelSpec) -> Tokenizer:
    return Tokenizer.from_file(f"{spec.tokenizer}/tokenizer.json")


def vocab_size(preset: str) -> int:
    config = json.loads((modelkit.preset_dir(preset) / "config.json").read_text())
    return modelkit.text_config(config)["vocab_size"]


@pytest.mark.parametrize("preset", PRESETS)
def test_random_ids_round_trip_with_their_length(prepared, preset):
    tok = load(prepared[preset])
    n = vocab_size(preset)
    assert tok.get_vocab_size() == n
    special = set(modelkit.read_special_tokens(modelkit.preset_dir(preset)))
    rng = random.Random(preset)
    # Both ends of the vocabulary, the special ids, and a random sample of the rest.
    ids = [0, 1, n - 2, n - 1, *special, *(rng.randrange(n) for _ in range(2000))]
    rng.shuffle(ids)
    text = tok.decode(ids, skip_special_tokens=False)
    assert tok.encode(text, add_special_tokens=False).ids == ids
    for length in (1, 32, 257):
        sample = [rng.randrange(n) for _ in range(length)]
        again = tok.encode(tok.decode(sample, skip_special_tokens=False), add_special_tokens=False)
        assert len(again.ids) == length and again.ids == sample


@pytest.mark.parametrize("preset", PRESETS)
def test_special_tokens_are_special(prepared, preset):
    tok = load(prepared[preset])
    special = modelkit.read_special_tokens(modelkit.preset_dir(preset))
    assert special, f"{preset} lists no special tokens"
    for token_id, content in special.items():
        assert tok.token_to_id(content) == token_id
    some_id, content = min(special.items())
    ordinary = 5
    ids = tok.encode(f"t{ordinary} {content} t{ordinary}", add_special_tokens=False).ids
    assert ids == [ordinary, some_id, ordinary]
    # Decoding may drop them, as a detokenizer does, leaving the ordinary words.
    assert tok.decode(ids, skip_special_tokens=True).split() == [f"t{ordinary}"] * 2
    config = json.loads((Path(prepared[preset].tokenizer) / "tokenizer_config.json").read_text())
    assert set(config["additional_special_tokens"]) == set(special.values())
    assert config["eos_token"] in special.values()


def test_prepared_folder_holds_the_shapes_and_a_separate_tokenizer(prepared, tmp_path):
    spec = prepared["qwen3.5-4b"]
    assert spec.load_format == "dummy" and spec.source == "dummy" and spec.served_name == "qwen3.5-4b"
    model = Path(spec.model)
    assert json.loads((model / "config.json").read_text()) == json.loads(
        (modelkit.preset_dir("qwen3.5-4b") / "config.json").read_text()
    )
    assert (model / "generation_config.json").is_file()
    # Nothing that describes the preset rather than the model, and no tokenizer beside
    # config.json (transformers would pick a byte-level class for it from the model type).
    assert not (model / "preset.json").exists() and not (model / "tokenizer.json").exists()
    # the tokenizer folder's own config names a model type that has no tokenizer, not the model's
    tok_config = json.loads((Path(spec.tokenizer) / "config.json").read_text())
    assert tok_config == modelkit.TOKENIZER_DIR_CONFIG and tok_config["model_type"] != "qwen3_5"


def test_prepare_is_idempotent_and_writes_nothing_the_second_time(prepared, monkeypatch):
    """A folder already prepared from the same preset files is left as it is: no file copied, no tokenizer
    built, no file touched (checked by what happened, not by how long it took)."""
    spec = prepared["qwen3.5-4b"]
    model = Path(spec.model)
    before = {p: p.stat().st_mtime_ns for p in model.rglob("*") if p.is_file()}

    def must_not_run(*args, **kwargs):
        raise AssertionError("a second prepare of the same preset rebuilt the folder")

    for name in ("tokenizer_json", "tokenizer_config", "_write_atomic"):
        monkeypatch.setattr(modelkit, name, must_not_run)
    monkeypatch.setattr(modelkit.shutil, "copyfile", must_not_run)
    again = modelkit.prepare_model("qwen3.5-4b", spec.model)
    assert again == spec
    assert {p: p.stat().st_mtime_ns for p in model.rglob("*") if p.is_file()} == before


def test_prepare_over_another_preset_removes_its_files(tmp_path):
    modelkit.prepare_model("qwen3.5-4b", tmp_path / "m")
    assert (tmp_path / "m" / "preprocessor_config.json").exists()
    spec = modelkit.prepare_model("tiny-dense", tmp_path / "m")
    assert not (tmp_path / "m" / "preprocessor_config.json").exists()
    assert load(spec).get_vocab_size() == vocab_size("tiny-dense")


def test_hub_source_gives_the_hub_id(tmp_path):
    spec = modelkit.prepare_model("qwen3.5-4b", tmp_path / "unused", source="hub")
    assert (spec.model, spec.tokenizer, spec.load_format) == ("Qwen/Qwen3.5-4B", "Qwen/Qwen3.5-4B", "auto")
    assert modelkit.prepare_model("qwen2.5-0.5b", tmp_path, source="hub").model == "Qwen/Qwen2.5-0.5B"
    assert not (tmp_path / "unused").exists()
    with pytest.raises(UserError, match="no hub checkpoint"):
        modelkit.prepare_model("tiny-dense", tmp_path, source="hub")


def test_unknown_preset_is_a_one_line_error_listing_the_valid_ones(tmp_path):
    with pytest.raises(UserError) as err:
        modelkit.prepare_model("qwen9-1t", tmp_path)
    message = str(err.value)
    assert "\n" not in message and "qwen9-1t" in message
    assert all(p in message for p in PRESETS)


def test_presets_come_from_the_data_dir_given(tmp_path):
    assert modelkit.list_presets(tmp_path) == []
    with pytest.raises(UserError, match="none found"):
        modelkit.prepare_model("tiny-dense", tmp_path / "m", data_dir=tmp_path)
    (tmp_path / "models" / "mini").mkdir(parents=True)
    (tmp_path / "models" / "mini" / "config.json").write_text(json.dumps({"vocab_size": 10}))
    (tmp_path / "models" / "mini" / "preset.json").write_text(json.dumps({"hub_id": None}))
    assert modelkit.list_presets(tmp_path) == ["mini"]
    spec = modelkit.prepare_model("mini", tmp_path / "m", data_dir=tmp_path)
    tok = load(spec)
    assert tok.encode(tok.decode([9, 0, 3])).ids == [9, 0, 3]



def test_a_run_preparing_a_folder_another_is_writing_waits_for_it(tmp_path):
    """Two runs on one machine (two test workers, two `make reproduce`) may prepare the same folder at once: the
    second waits on the folder's lock while the first holds it (instead of deleting the files the first one's
    server is reading), then finds it complete."""
    import fcntl
    import subprocess
    import sys

    dest = tmp_path / "m"
    dest.mkdir()
    with open(tmp_path / ".m.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another run is writing the folder
        child = subprocess.Popen([sys.executable, "-c", f"from inference_wall.model import modelkit; "
                                  f"modelkit.prepare_model('tiny-dense', {str(dest)!r})"])
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(3)
        assert not (dest / modelkit.STAMP).exists()
    assert child.wait(120) == 0
    stamp = json.loads((dest / modelkit.STAMP).read_text())
    assert stamp["files"] and all((dest / name).is_file() for name in stamp["files"])
