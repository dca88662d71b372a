"""A model preset's shape: the one reader of its ``config.json``.

Everything the book derives from a model's shapes (its KV pages, its bytes per decode step, its matmul parameters,
its heads) starts from ``data/models/<preset>/config.json``. ``ModelShape.of(preset, data_dir)`` reads that file
once per preset and data dir (cached) and hands out the raw config, the text config (the language model's part,
which a multimodal checkpoint nests under ``text_config``) and the quantities derived from them. The derived ones
delegate to the functions that compute them from a config dict (kvcache, weightbytes, analysis), so a number is
the same whether it is asked of the shape or of those functions.

No other module of the package reads a preset's config.json (tests/test_modelshape.py checks); modelkit's copy of
it into a folder for vLLM is the one exception. The config a shape holds is shared by every caller: read it, never
change it.
"""
from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..measure import analysis
from . import weightbytes
from ..errors import UserError
from .kvcache import ModelLayout
from .modelkit import models_dir, preset_dir, text_config


class UnknownPreset(UserError, FileNotFoundError):
    """No config.json for a preset: a UserError naming the valid presets (the CLI prints it as one line), and a
    FileNotFoundError, as a missing config was before (pools.rig_pool still reads it as 'no pool')."""


@dataclass(frozen=True, eq=False)
class ModelShape:
    """One preset's config.json, read once, and what its shapes give."""

    preset: str
    path: Path  # the config.json read
    config: dict  # the file as it stands (shared: never change it)

    @classmethod
    def of(cls, preset: str, data_dir: str | os.PathLike | None = None) -> "ModelShape":
        """The shape of `preset` under `data_dir` (default: the repository's data): the same object for the same
        preset and data dir. UnknownPreset where the data dir holds no such preset."""
        return _shape(preset, models_dir(data_dir).resolve())

    @property
    def text(self) -> dict:
        """The language model's config: the nested `text_config` where the checkpoint has one, else the top level."""
        return text_config(self.config)

    @property
    def vocab_size(self) -> int:
        return int(self.text["vocab_size"])

    @property
    def layer_types(self) -> list[str]:
        """The text model's layer kinds (empty where the config does not list them: a dense model)."""
        return self.text.get("layer_types") or []

    @property
    def layout(self) -> ModelLayout:
        """How vLLM counts one request's pages for this model (kvcache.ModelLayout)."""
        return ModelLayout.from_config(self.config)

    @property
    def attention_layers(self) -> int:
        """Layers that keep a growing KV cache (all of them for a dense model)."""
        return analysis.attention_layer_counts(self.text)[0]

    @property
    def layers(self) -> int:
        return analysis.attention_layer_counts(self.text)[1]

    @property
    def recurrent_layers(self) -> int:
        """Gated DeltaNet layers: 0 for a model whose config lists no layer kinds."""
        return self.layers - self.attention_layers if self.text.get("layer_types") else 0

    @property
    def kv_bytes_per_token_per_layer(self) -> int:
        return analysis.kv_bytes_per_token_per_layer(self.text)

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V bytes one token of context holds across the full-attention layers."""
        return self.kv_bytes_per_token_per_layer * self.attention_layers

    @property
    def state_bytes_per_seq(self) -> int:
        """One sequence's recurrent state across the Gated DeltaNet layers (0 for a dense model)."""
        return analysis.gdn_state_bytes(self.text) * self.recurrent_layers if self.recurrent_layers else 0

    @property
    def hybrid_block_size(self) -> int:
        """The attention page vLLM derives for a hybrid model (analysis.hybrid_block_size)."""
        return analysis.hybrid_block_size(self.text)

    @property
    def vision_tower_params(self) -> int:
        return analysis.vision_tower_params(self.config)

    @property
    def matmul_params(self) -> int:
        """Parameters a prefill multiplies every prompt token by (weightbytes.config_matmul_params)."""
        return weightbytes.config_matmul_params(self.config)

    @property
    def group_size(self) -> int:
        """GPTQ's inputs per scale group (weightbytes.group_size)."""
        return weightbytes.group_size(self.config)

    def decode_bytes(self, fmt: str) -> weightbytes.DecodeBytes:
        """The bytes one decode step reads in weight format `fmt` (weightbytes.decode_bytes)."""
        return weightbytes.decode_bytes(self.config, fmt)


def preset_decode_bytes(preset: str, fmt: str, data_dir: Path | None = None) -> weightbytes.DecodeBytes:
    """The bytes one decode step of `preset` reads in weight format `fmt` (its shape's decode_bytes)."""
    return ModelShape.of(preset, data_dir).decode_bytes(fmt)


def preset_group_size(preset: str, data_dir: Path | None = None) -> int:
    """group_size of a preset's quantization_config (its shape's group_size)."""
    return ModelShape.of(preset, data_dir).group_size


@functools.lru_cache(maxsize=None)
def _shape(preset: str, models: Path) -> ModelShape:
    path = models / preset / "config.json"
    if not path.is_file():
        try:
            preset_dir(preset, models.parent)
        except UserError as e:
            raise UnknownPreset(str(e)) from None
    return ModelShape(preset, path, json.loads(path.read_text()))
