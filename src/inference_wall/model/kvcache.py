"""The KV pool and its admission limit: how many requests of a given length fit at once.

vLLM's paged KV cache is a pool of `num_blocks` pages. A request holds, per KV-cache group of the model,
enough pages for its tokens: ceil(tokens / block_size) pages for each group of full-attention layers, and
a fixed number of pages for each group of recurrent (Gated DeltaNet / Mamba) layers, whatever its length.
The scheduler admits a waiting request only when its pages fit, so the running batch of a flood can never
exceed

    admission limit = (num_blocks - 1) // pages_per_request(prompt + output)

(vLLM's block pool keeps one page aside as the "null block"). With Qwen3.5-4B's 8 full-attention and 24
Gated DeltaNet layers, vLLM groups layers eight at a time (the smallest count of one kind), so a request
holds one attention page per 528 tokens plus three state pages.

The pool is read from the server's own log: vLLM prints the concurrency its pool allows at max_model_len,
`Maximum concurrency for L tokens per request: Cx`, which is num_blocks / pages_per_request(L) (0.18 to
0.22: `get_max_concurrency_for_kv_cache_config`), so num_blocks = C x pages_per_request(L) within the
printed precision; where the log says `Overriding num_gpu_blocks=... with num_gpu_blocks_override=N`, N is
exact. The block size is the log's `Setting attention block size to N tokens` (hybrid models) or vLLM's
default for a dense model (16). Pure arithmetic over a config and a parsed log: what a rig's stored runs say of
its pool and page (`rig_pool`, `block_size`, `pool_of_point`) is model/pools.py's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_BLOCK_SIZE = 16  # vLLM's default page for dense models on CUDA (0.18-0.22)
CPU_BLOCK_SIZE = 128  # the CPU build's default page when none is given (vLLM 0.32, platforms/cpu.py)
NULL_BLOCKS = 1  # vLLM's BlockPool reserves one page as the null block
RECURRENT_LAYER_TYPES = {"linear_attention", "mamba", "mamba2", "gated_delta_net"}


@dataclass(frozen=True)
class ModelLayout:
    """How one request's pages are counted for a model: attention groups and state groups."""

    attention_groups: int  # groups of full-attention layers (1 for a dense model)
    state_groups: int  # groups of recurrent layers: one fixed page each per request

    @classmethod
    def from_config(cls, config: dict) -> "ModelLayout":
        """From a checkpoint's config.json (the text config where the model nests one)."""
        text = config.get("text_config", config)
        types = text.get("layer_types")
        if not types:
            return cls(attention_groups=1, state_groups=0)
        recurrent = sum(t in RECURRENT_LAYER_TYPES for t in types)
        attention = len(types) - recurrent
        if not recurrent:
            return cls(attention_groups=1, state_groups=0)
        if not attention:
            return cls(attention_groups=0, state_groups=1)
        per_group = min(recurrent, attention)  # vLLM's group size: the smallest count of one layer kind
        return cls(attention_groups=math.ceil(attention / per_group), state_groups=math.ceil(recurrent / per_group))

    def pages_per_request(self, tokens: int, block_size: int) -> int:
        return self.attention_groups * math.ceil(tokens / block_size) + self.state_groups


@dataclass(frozen=True)
class KVPool:
    """A server's KV pool: `num_blocks` pages of `block_size` tokens (low/high: what the log's precision allows)."""

    num_blocks: int
    block_size: int
    layout: ModelLayout
    num_blocks_low: int
    num_blocks_high: int
    source: str  # where num_blocks comes from, in words

    def pages_per_request(self, tokens: int) -> int:
        return self.layout.pages_per_request(tokens, self.block_size)

    def admission_limit(self, tokens: int) -> int:
        """Requests of `tokens` (prompt + output) that fit at once."""
        return (self.num_blocks - NULL_BLOCKS) // self.pages_per_request(tokens)

    def admission_interval(self, tokens: int) -> tuple[int, int]:
        per = self.pages_per_request(tokens)
        return (self.num_blocks_low - NULL_BLOCKS) // per, (self.num_blocks_high - NULL_BLOCKS) // per


def pool_from_report(report, layout: ModelLayout) -> KVPool | None:
    """The pool a server started with, from its parsed startup log (logs.StartupReport); None if the log
    does not say."""
    dense_default = CPU_BLOCK_SIZE if report.kv_cache_device == "CPU" else DEFAULT_BLOCK_SIZE
    block = report.block_size or (dense_default if not layout.state_groups else None)
    if block is None:
        return None
    if report.num_gpu_blocks_override:
        n = int(report.num_gpu_blocks_override)
        return KVPool(n, block, layout, n, n, "the log's num_gpu_blocks_override")
    conc, length = report.max_concurrency, report.max_concurrency_tokens_per_request
    if not conc or not length:
        return None
    pool = pool_from_concurrency(conc, length, block, layout, digits=2)
    tokens = report.kv_cache_tokens
    if tokens and abs(tokens - conc * length) <= 0.005 * length + 1:
        # vLLM 0.22+ prints tokens = int(num_blocks / pages_per_request(L) x L): a finer reading of num_blocks
        per = layout.pages_per_request(length, block)
        low, high = math.ceil(tokens * per / length - 1e-9), math.ceil((tokens + 1) * per / length) - 1
        if pool.num_blocks_low <= low <= high <= pool.num_blocks_high:
            return KVPool(low if low == high else round(tokens * per / length), block, layout, low, high,
                          f"'GPU KV cache size: {tokens:,} tokens' = num_blocks / {per} pages x {length:,} tokens")
    return pool


def pool_from_concurrency(concurrency: float, max_model_len: int, block_size: int, layout: ModelLayout,
                          digits: int = 2) -> KVPool:
    """num_blocks = concurrency x pages per max-length request, with the rounding of the printed concurrency."""
    per = layout.pages_per_request(max_model_len, block_size)
    half = 0.5 * 10 ** -digits
    low, high = math.ceil((concurrency - half) * per), math.floor((concurrency + half) * per)
    return KVPool(round(concurrency * per), block_size, layout, low, max(low, high),
                  f"'Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:g}x' x "
                  f"{per} pages per request")


# What sizes a start's KV pool beyond the preset: the pool's own flags, and the weights' format (part 5's fp8
# server of the 16-bit preset leaves another pool than the 16-bit server).
POOL_FLAGS = ("--num-gpu-blocks-override", "--kv-cache-memory-bytes", "--gpu-memory-utilization", "--quantization")


def pool_flags(args: list[str]) -> dict[str, str]:
    """The flags of a `vllm serve` command line that size its KV pool (POOL_FLAGS), with their values (the last one given
    wins, as in vLLM's parser; `--flag=value` too)."""
    out: dict[str, str] = {}
    args = [str(a) for a in args]
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        if name in POOL_FLAGS:
            out[name] = value if eq else (args[i + 1] if i + 1 < len(args) else "")
    return out


def block_size_from_args(args: list[str]) -> int | None:
    """The page a `vllm serve` command line sets (`--block-size N`), None where it sets none."""
    return int(args[args.index("--block-size") + 1]) if "--block-size" in args else None
