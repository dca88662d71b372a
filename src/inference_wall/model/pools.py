"""What a rig's stored runs say of its KV pool and attention page, over the model's shape: the one module of model/
that reads runs (the records' startup logs). kvcache and weightbytes are arithmetic over a config and a parsed log;
modelshape reads a preset's config; this module sits above them.

- `pool_of_point`: the pool of the server a stored point ran on;
- `rig_pool`: a rig's pool for a preset (its profile's override, else its latest start with the profile's flags);
- `block_size`: a preset's attention page (the serve args, else the page a start of it logged, else vLLM's rule).
"""
from __future__ import annotations

from pathlib import Path

from ..records.record import read_record
from ..records.store import log_startup, open_artefact, runs_dir as default_runs_dir
from .kvcache import DEFAULT_BLOCK_SIZE, KVPool, block_size_from_args, pool_flags, pool_from_report
from .modelshape import ModelShape


def pool_of_point(point, data_dir: Path | None = None) -> KVPool | None:
    """The KV pool of the server a stored point ran on (its session's start), or None."""
    report = point.startup()
    if report is None:
        return None
    preset = point.record.model.get("preset")
    if not preset:
        return None
    return pool_from_report(report, ModelShape.of(preset, data_dir).layout)


def rig_pool(rig_dir: Path, preset: str, data_dir: Path | None = None, serve_args: list[str] | None = None
             ) -> KVPool | None:
    """The KV pool of a rig for a model preset: exact when the rig's profile fixes it
    (`--num-gpu-blocks-override`, in pages of `block_size`, which needs no start of its own), else from the
    latest server start recorded for that preset in any part of the rig (`rig_dir` is one part's folder;
    its siblings are the other parts) whose pool-sizing flags are the profile's: a start that a part sized
    itself (part 4's `--num-gpu-blocks-override`) says nothing of the pool the rig's other servers get."""
    try:
        layout = ModelShape.of(preset, data_dir).layout
    except FileNotFoundError:
        return None
    args = serve_args or []
    if "--num-gpu-blocks-override" in args:
        n = int(args[args.index("--num-gpu-blocks-override") + 1])
        block = block_size(preset, Path(rig_dir).parent.parent, data_dir, args)
        return KVPool(n, block, layout, n, n, "the rig profile's --num-gpu-blocks-override")
    rig = Path(rig_dir).name
    wanted = pool_flags(args)
    starts = []
    for part_dir in sorted(Path(rig_dir).parent.parent.glob(f"*/{rig}")):
        if not part_dir.is_dir():
            continue
        for pdir in part_dir.iterdir():
            rec = read_record(pdir) if pdir.is_dir() else None
            if not rec or not rec.complete or not (rec.session and rec.session.has_startup):
                continue
            if rec.model.get("preset") != preset:
                continue
            command = rec.session.server_command
            if command is not None and pool_flags(command) != wanted:
                continue  # a start whose pool another part sized on purpose (part 4's overrides) is not the rig's
            starts.append((rec.session.server_started or 0, pdir))
    for _, pdir in sorted(starts, reverse=True):
        pool = pool_from_report(log_startup(open_artefact(pdir, "server.log")), layout)
        if pool is not None:
            return pool
    return None


def block_size(preset: str, runs_dir: Path | None = None, data_dir: Path | None = None,
               serve_args: list[str] | None = None) -> int:
    """The attention page (tokens) a server of `preset` uses: `--block-size` where the serve args give it;
    for a hybrid model, the size a start of it logged on any rig under `runs_dir` (default: the data dir's
    runs), that being vLLM's own word, else what vLLM derives from the config (analysis.hybrid_block_size:
    a page at least one recurrent layer's state), so a pool can be counted before the model has ever
    started; for a dense model, vLLM's default."""
    given = block_size_from_args(serve_args or [])
    if given is not None:
        return given
    shape = ModelShape.of(preset, data_dir)
    if not shape.layout.state_groups:
        return DEFAULT_BLOCK_SIZE
    runs = Path(runs_dir) if runs_dir is not None else default_runs_dir(data_dir)
    return _logged_block_size(runs, preset) or shape.hybrid_block_size


def _logged_block_size(runs: Path, preset: str) -> int | None:
    """The attention block size a hybrid model's start logged on any rig (vLLM derives it from the model's
    page sizes, not from the pool's size)."""
    for log in sorted(runs.glob("*/*/*/server.log*")):
        rec = read_record(log.parent)
        if rec and rec.model.get("preset") == preset and rec.session and rec.session.has_startup:
            block = log_startup(open_artefact(log.parent, "server.log")).block_size
            if block:
                return block
    return None


def published_pool(preset: str, data_dir: Path | None = None) -> KVPool:
    """The A10G's KV pool from the post's own log line ('Maximum concurrency for 2,048 tokens per request:
    83.7x'), with the attention page vLLM gives `preset` (the posts' model: analysis.hybrid_block_size, 528 tokens).
    Part 1's memory table and part 0's A10G prediction read it."""
    from ..records.reference import load_reference
    from .kvcache import pool_from_concurrency

    mem = load_reference(1, data_dir)["memory_report"].iloc[0]
    shape = ModelShape.of(preset, data_dir)
    printed = f"{mem['max_concurrency_x']:g}"
    digits = len(printed.split(".")[1]) if "." in printed else 0
    return pool_from_concurrency(float(mem["max_concurrency_x"]), int(mem["max_concurrency_tokens_per_request"]),
                                 shape.hybrid_block_size, shape.layout, digits=digits)
