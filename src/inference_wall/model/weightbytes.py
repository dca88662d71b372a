"""The bytes one decode step reads, from a model's config and its weight format.

A decode step streams every weight matrix of the language model once (the matrix-vector products of each
layer, then the output head over the whole vocabulary); the input embedding is a lookup of one row per
sequence, and a vision tower is never run for text. So the bytes a step must read are the text model's
linear layers at their stored width, plus the head at 16 bits, plus the (small) norms and state projections
kept in 16 bits. Divided by the rig's measured bandwidth this is the decode floor of the format.

Formats (what vLLM 0.22.1 does with them, read from its source):
- ``fp16``: every weight in 16 bits (``bf16`` on the CPU rig: the same width).
- ``fp8``: ``--quantization fp8`` quantizes every ``LinearBase`` layer online to one byte per weight with one
  scale per tensor (``Fp8OnlineLinearMethod``); the output head (a ``ParallelLMHead``, not a ``LinearBase``),
  the embedding, and the Gated DeltaNet's ``conv1d`` (built without a quant config) stay 16-bit.
- ``int4``: GPTQ, 4 bits per weight and one 16-bit scale per group of ``group_size`` inputs per output, for
  exactly the modules listed in ``quantization_config.modules_in_block_to_quantize`` (a substring of the layer's
  name, as ``gptq_utils.is_layer_gptq_quantized`` matches); the rest 16-bit. A GPTQ checkpoint also stores a
  4-bit zero point per group, but vLLM's ``AutoGPTQLinearMethod`` builds its kernel with ``zero_points=False``
  (a symmetric type, the zero folded into it), so a step never reads them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

FORMATS = ("fp16", "fp8", "int4")
GB = 1e9


@dataclass(frozen=True)
class Linear:
    name: str  # the module's name inside a decoder block, as a checkpoint names it (self_attn.q_proj)
    inputs: int
    outputs: int
    layers: int  # how many blocks hold it

    @property
    def params(self) -> int:
        return self.inputs * self.outputs * self.layers


def _text(config: dict) -> dict:
    return config.get("text_config", config)


def block_linears(config: dict) -> list[Linear]:
    """Every matrix of the decoder blocks (dense Qwen3 or hybrid Qwen3.5 text configs)."""
    t = _text(config)
    h, n_layers = t["hidden_size"], t["num_hidden_layers"]
    types = t.get("layer_types") or ["full_attention"] * n_layers
    full = sum(1 for x in types if x == "full_attention")
    linear = n_layers - full
    hd = t.get("head_dim") or h // t["num_attention_heads"]
    nq, nkv = t["num_attention_heads"], t["num_key_value_heads"]
    gate = 2 if t.get("attn_output_gate") else 1  # Qwen3.5's gated attention: q_proj also emits the gate
    out = [Linear("self_attn.q_proj", h, nq * hd * gate, full), Linear("self_attn.k_proj", h, nkv * hd, full),
           Linear("self_attn.v_proj", h, nkv * hd, full), Linear("self_attn.o_proj", nq * hd, h, full)]
    if linear:
        key = t["linear_num_key_heads"] * t["linear_key_head_dim"]
        value = t["linear_num_value_heads"] * t["linear_value_head_dim"]
        nv = t["linear_num_value_heads"]
        out += [Linear("linear_attn.in_proj_qkv", h, 2 * key + value, linear),
                Linear("linear_attn.in_proj_z", h, value, linear),
                Linear("linear_attn.in_proj_b", h, nv, linear), Linear("linear_attn.in_proj_a", h, nv, linear),
                Linear("linear_attn.out_proj", value, h, linear)]
    inter = t["intermediate_size"]
    out += [Linear("mlp.gate_proj", h, inter, n_layers), Linear("mlp.up_proj", h, inter, n_layers),
            Linear("mlp.down_proj", inter, h, n_layers)]
    return out


def small_params(config: dict) -> int:
    """16-bit parameters of the blocks besides their matrices: norms, the convolution, the decay terms."""
    t = _text(config)
    h, n_layers = t["hidden_size"], t["num_hidden_layers"]
    types = t.get("layer_types") or ["full_attention"] * n_layers
    full = sum(1 for x in types if x == "full_attention")
    hd = t.get("head_dim") or h // t["num_attention_heads"]
    n = n_layers * 2 * h + h + full * 2 * hd  # two norms per block, the final norm, q/k norms
    linear = n_layers - full
    if linear:
        key = t["linear_num_key_heads"] * t["linear_key_head_dim"]
        value = t["linear_num_value_heads"] * t["linear_value_head_dim"]
        nv = t["linear_num_value_heads"]
        n += linear * ((2 * key + value) * t["linear_conv_kernel_dim"] + 2 * nv + t["linear_value_head_dim"])
    return n


def quantized_modules(config: dict, fmt: str) -> list[str] | None:
    """The block modules a format stores below 16 bits: None for all of them (fp8), [] for none (fp16)."""
    if fmt == "fp16":
        return []
    if fmt == "fp8":
        return None
    if fmt == "int4":
        listed = _quantization(config).get("modules_in_block_to_quantize") or []
        return [m for group in listed for m in (group if isinstance(group, list) else [group])]
    raise ValueError(f"unknown weight format {fmt!r}; valid: {', '.join(FORMATS)}")


def _quantization(config: dict) -> dict:
    """The checkpoint's quantization_config, at the top level or in the text config (where vLLM also looks)."""
    return config.get("quantization_config") or _text(config).get("quantization_config") or {}


def group_size(config: dict) -> int:
    """GPTQ's inputs per scale group (128, GPTQ's usual size, where the config does not say)."""
    return int(_quantization(config).get("group_size", 128))


@dataclass(frozen=True)
class DecodeBytes:
    """What one decode step reads for one format, by component (bytes)."""

    fmt: str
    quantized: int  # the matrices stored below 16 bits, with the scales a step reads
    unquantized_linear: int  # block matrices left in 16 bits
    head: int  # the output head over the vocabulary (16-bit in every format)
    small: int  # norms, convolution, decay terms
    params: int  # parameters read per step (the embedding table and any vision tower excluded)
    quantized_names: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.quantized + self.unquantized_linear + self.head + self.small

    @property
    def gb(self) -> float:
        return self.total / GB

    def floor_ms(self, bandwidth_gb_s: float) -> float:
        """The least time a decode step can take at this bandwidth: every byte read once."""
        return self.total / (bandwidth_gb_s * GB) * 1000.0


def decode_bytes(config: dict, fmt: str) -> DecodeBytes:
    """The bytes one decode step of one sequence must read, by component (see the module's docstring)."""
    t = _text(config)
    listed = quantized_modules(config, fmt)
    q = u = 0
    names = []
    for lin in block_linears(config):
        is_q = listed is None or any(m in lin.name for m in listed)
        if not is_q:
            u += 2 * lin.params
            continue
        names.append(lin.name)
        if fmt == "fp8":
            q += lin.params + 4 * lin.layers  # one byte a weight, one fp32 scale per tensor
        else:  # GPTQ: 4-bit weights and a 16-bit scale per group of inputs per output (zero points: never read)
            groups = -(-lin.inputs // group_size(config))
            q += lin.params // 2 + lin.layers * groups * lin.outputs * 2
    head = 2 * t["vocab_size"] * t["hidden_size"]
    small = 2 * small_params(config)
    params = sum(lin.params for lin in block_linears(config)) + t["vocab_size"] * t["hidden_size"] + small_params(config)
    return DecodeBytes(fmt, q, u, head, small, params, names)


def config_matmul_params(config: dict) -> int:
    """Parameters a prefill multiplies every prompt token by: the language model's block matrices (attention or
    Gated DeltaNet projections and the MLP, from its config). Not the token embedding (a lookup), not the output head
    (a prefill computes the logits of its last position only), not a vision tower (never run for text)."""
    return sum(lin.params for lin in block_linears(config))
