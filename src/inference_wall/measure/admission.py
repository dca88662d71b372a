"""The running batch a server admits at once: min(max_num_seqs, the KV pool's admission limit for one request's
prompt + output), with its arithmetic. Parts 1 and 3 both predict a flood's running batch from it (part 3 at its
top cap, from part 1's view of the same rig)."""
from __future__ import annotations

from .analysis import Interval
from .claims import need


def running_limit(view: dict, cap_key: str = "max_num_seqs") -> tuple[Interval, str]:
    """min(max_num_seqs, KV admission limit for one request's prompt + output), and the arithmetic (`view`: a rig's
    view with its cap, KV `pool`, `request_tokens` and `admission` limit)."""
    cap = int(need(view, cap_key))
    pool = need(view, "pool")
    tokens = view["request_tokens"]
    adm = need(view, "admission")
    limit = Interval(min(cap, adm.value), min(cap, adm.low), min(cap, adm.high))
    per = pool.pages_per_request(tokens)
    how = (f"min(max_num_seqs {cap}, ({pool.num_blocks} pages - 1) // {per} pages per {tokens}-token request "
           f"= {adm.value:.0f}) = {limit.value:.0f}; pool: {pool.source}, {pool.block_size}-token pages")
    return limit, how
