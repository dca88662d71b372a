"""Model folders for vLLM: a preset's shapes plus a synthetic tokenizer, or a hub id.

A preset is a folder under ``data/models/<preset>/``: the checkpoint's ``config.json`` (and
``generation_config.json`` and processor configs where the model has them), a
``special_tokens.json`` (id -> token) and a ``preset.json`` (``hub_id``: where real weights
live). ``prepare_model(preset, dest)`` turns it into a folder that ``vllm serve DEST
--load-format dummy`` can run: the same tensor shapes as the real model with random weights,
and a WordLevel tokenizer over the full vocabulary in which every ordinary id is a distinct
whitespace-separated word. Decoding any ids and encoding the text again gives back the same
ids, so ``vllm bench serve``'s random prompts have exactly the asked number of tokens.

The tokenizer lives in its own folder, ``DEST/tokenizer`` (pass it as ``--tokenizer``), without
the model's config.json beside it: transformers 5 picks the tokenizer class from the model type in
config.json, and for qwen2 and qwen3_5 it would load its byte-level Qwen2Tokenizer over our
vocabulary, which neither decodes to whitespace-separated words nor round-trips. It holds a config.json
of its own that names a model type with no tokenizer (``TOKENIZER_DIR_CONFIG``, a vision transformer's): vLLM
reads the tokenizer folder's config before loading the tokenizer, and vLLM 0.32 (the CPU build) retries a folder
without one after a 2-s sleep, in every server start (twice) and every benchmark client; with it, transformers
still takes the class from tokenizer_config.json (PreTrainedTokenizerFast), and the tokenizer decodes and encodes
the same ids as without it.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import UserError
from ..schema import DATA_DIR as DEFAULT_DATA_DIR

Source = Literal["dummy", "hub"]

# Files of a preset folder that describe the preset rather than the model.
PRESET_ONLY_FILES = {"preset.json", "special_tokens.json"}
STAMP = ".modelkit.json"
TOKENIZER_SUBDIR = "tokenizer"
# Bump when the written tokenizer changes, so that prepared folders are rewritten.
TOKENIZER_FORMAT = 2
# The tokenizer folder's config.json (see the module's docstring): a model type transformers knows, with no tokenizer.
TOKENIZER_DIR_CONFIG = {"model_type": "vit"}


@dataclass(frozen=True)
class ModelSpec:
    """What `vllm serve` and `vllm bench serve` need to run one model."""

    preset: str
    source: Source
    model: str  # a folder (dummy) or a hub id (hub)
    tokenizer: str
    load_format: Literal["dummy", "auto"]
    served_name: str


def models_dir(data_dir: str | os.PathLike | None = None) -> Path:
    return Path(data_dir if data_dir is not None else DEFAULT_DATA_DIR) / "models"


def list_presets(data_dir: str | os.PathLike | None = None) -> list[str]:
    """Names of the presets under ``data_dir/models``: folders that hold a config.json."""
    root = models_dir(data_dir)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "config.json").is_file())


def preset_dir(preset: str, data_dir: str | os.PathLike | None = None) -> Path:
    presets = list_presets(data_dir)
    if preset not in presets:
        valid = ", ".join(presets) if presets else f"none found in {models_dir(data_dir)}"
        raise UserError(f"unknown model preset {preset!r}; valid presets: {valid}")
    return models_dir(data_dir) / preset


def read_preset(preset: str, data_dir: str | os.PathLike | None = None) -> dict:
    """The preset's preset.json: ``hub_id`` is the checkpoint's hub id, or null if none."""
    path = preset_dir(preset, data_dir) / "preset.json"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: cannot read the preset description: {e}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("hub_id", ""), (str, type(None))):
        raise UserError(f"{path}: needs an object with 'hub_id' (a string, or null)")
    return meta


def text_config(config: dict) -> dict:
    """The language model's part of a config (multimodal configs nest it)."""
    return config.get("text_config", config)


def read_special_tokens(folder: Path) -> dict[int, str]:
    path = folder / "special_tokens.json"
    if not path.is_file():
        return {}
    return {int(i): tok for i, tok in json.loads(path.read_text()).items()}


def ordinary_word(token_id: int) -> str:
    """The synthetic word for an ordinary id: distinct, no whitespace, not a special token."""
    return f"t{token_id}"


def tokenizer_json(vocab_size: int, special: dict[int, str]) -> str:
    """A `tokenizers` WordLevel tokenizer over ids 0..vocab_size-1, as JSON text.

    Written as text directly: building the 248,320-word vocabulary through the `tokenizers`
    API and saving it is several times slower.
    """
    bad = [i for i in special if not 0 <= i < vocab_size]
    if bad:
        raise UserError(f"special token ids {bad} lie outside the vocabulary of {vocab_size}")
    words = [special.get(i) or ordinary_word(i) for i in range(vocab_size)]
    # Unknown words (text not made of our words) map to the first special token, so arbitrary
    # prompts still encode; with no special tokens, to id 0.
    unk = special[min(special)] if special else words[0]
    added = [
        {"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, tok in sorted(special.items())
    ]
    vocab = ",".join(f"{json.dumps(w)}:{i}" for i, w in enumerate(words))
    head = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None, "decoder": None,
    }
    # decoder None: decoding joins the words with single spaces, which WhitespaceSplit undoes.
    model = f'{{"type":"WordLevel","vocab":{{{vocab}}},"unk_token":{json.dumps(unk)}}}'
    return json.dumps(head)[:-1] + f',"model":{model}}}'


def tokenizer_config(config: dict, special: dict[int, str]) -> dict:
    """tokenizer_config.json for transformers' PreTrainedTokenizerFast over tokenizer.json."""
    text = text_config(config)

    def token(key: str) -> str | None:
        ids = text.get(key, config.get(key))
        ids = ids[0] if isinstance(ids, list) else ids
        return special.get(ids) if ids is not None else None

    out = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "clean_up_tokenization_spaces": False,  # would glue words to punctuation; ours has none
        "model_max_length": text.get("max_position_embeddings", 1 << 20),
        "bos_token": token("bos_token_id"),
        "eos_token": token("eos_token_id"),
        "pad_token": token("pad_token_id") or token("eos_token_id"),
        "unk_token": special[min(special)] if special else None,
        # Listed so that `vllm bench serve` keeps them out of random prompts, as it does with
        # the real tokenizers' special tokens.
        "additional_special_tokens": [tok for _, tok in sorted(special.items())] or None,
    }
    return {k: v for k, v in out.items() if v is not None}


def _inputs_digest(src: Path) -> str:
    h = hashlib.sha256(f"tokenizer-format-{TOKENIZER_FORMAT}".encode())
    for path in sorted(p for p in src.iterdir() if p.is_file()):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def model_spec(preset: str, dest: str | os.PathLike, source: Source = "dummy",
               data_dir: str | os.PathLike | None = None) -> ModelSpec:
    """What prepare_model would return for ``preset``, without writing anything (plan --dry-run)."""
    if source == "hub":
        hub_id = read_preset(preset, data_dir).get("hub_id")
        if not hub_id:
            raise UserError(f"model preset {preset!r} has no hub checkpoint; use source 'dummy'")
        return ModelSpec(preset, "hub", hub_id, hub_id, "auto", preset)
    if source != "dummy":
        raise UserError(f"unknown model source {source!r}; valid sources: dummy, hub")
    preset_dir(preset, data_dir)  # an unknown preset is refused here too
    return ModelSpec(preset, "dummy", str(Path(dest)), str(Path(dest) / TOKENIZER_SUBDIR), "dummy", preset)


def prepare_model(
    preset: str,
    dest: str | os.PathLike,
    source: Source = "dummy",
    data_dir: str | os.PathLike | None = None,
) -> ModelSpec:
    """Make ``preset`` servable: a dummy-weight model folder at ``dest``, or its hub id.

    Idempotent: a folder already prepared from the same preset files is left as it is.
    """
    src = preset_dir(preset, data_dir)
    meta = read_preset(preset, data_dir)
    if source == "hub":
        hub_id = meta.get("hub_id")
        if not hub_id:
            raise UserError(f"model preset {preset!r} has no hub checkpoint; use source 'dummy'")
        return ModelSpec(preset, "hub", hub_id, hub_id, "auto", preset)
    if source != "dummy":
        raise UserError(f"unknown model source {source!r}; valid sources: dummy, hub")

    dest = Path(dest)
    digest = _inputs_digest(src)
    tok_dir = dest / TOKENIZER_SUBDIR
    spec = ModelSpec(preset, "dummy", str(dest), str(tok_dir), "dummy", preset)
    stamp_path = dest / STAMP
    old = _read_stamp(stamp_path)
    if old.get("preset") == preset and old.get("inputs_sha256") == digest:
        return spec
    # Two runs on one machine (two test workers, two `make reproduce`) may prepare the same folder at once:
    # one writes it while the other waits, then finds it ready, instead of deleting files the first one's
    # server is reading.
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{dest.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _write_model(preset, src, dest, digest, spec)


def _write_model(preset: str, src: Path, dest: Path, digest: str, spec: ModelSpec) -> ModelSpec:
    tok_dir, stamp_path = dest / TOKENIZER_SUBDIR, dest / STAMP
    old = _read_stamp(stamp_path)
    if old.get("preset") == preset and old.get("inputs_sha256") == digest:
        return spec  # written by another run while this one waited

    tok_dir.mkdir(parents=True, exist_ok=True)
    stamp_path.unlink(missing_ok=True)  # the folder is incomplete until the stamp is back
    for name in old.get("files", []):  # what an earlier, different preparation wrote
        (dest / name).unlink(missing_ok=True)

    written = []
    for path in sorted(src.glob("*.json")):
        if path.name not in PRESET_ONLY_FILES:
            shutil.copyfile(path, dest / path.name)
            written.append(path.name)
    config = json.loads((src / "config.json").read_text())
    special = read_special_tokens(src)
    vocab_size = text_config(config)["vocab_size"]
    _write_atomic(tok_dir / "tokenizer.json", tokenizer_json(vocab_size, special))
    _write_atomic(
        tok_dir / "tokenizer_config.json", json.dumps(tokenizer_config(config, special), indent=1)
    )
    _write_atomic(tok_dir / "config.json", json.dumps(TOKENIZER_DIR_CONFIG, indent=1))
    written += [f"{TOKENIZER_SUBDIR}/tokenizer.json", f"{TOKENIZER_SUBDIR}/tokenizer_config.json",
                f"{TOKENIZER_SUBDIR}/config.json"]
    stamp = {"preset": preset, "inputs_sha256": digest, "files": written}
    _write_atomic(stamp_path, json.dumps(stamp, indent=1))
    return spec


def _read_stamp(path: Path) -> dict:
    try:
        stamp = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) else {}
