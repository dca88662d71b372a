"""How each rig's server was actually set up, read from the server's own record (its startup log), so that
every deviation from the series' setup is shown from data, not from what a profile meant to do.

vLLM prints, at start, the arguments that differ from its defaults (`non-default args: {...}`), the prefill
budget (`Chunked prefill is enabled with max_num_batched_tokens=N`), the engine's config line (`Initializing
a V1 LLM engine (vX) with config: ...`), the sampler it picked, and the effective memory fraction (`The
current --gpu-memory-utilization=X ...`, 0.21+). The published rig's setup is what the posts state
(data/reference/server_setup.csv); anything they do not state reads "not stated".
"""
from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

import pandas as pd

from .logs import scan_log

# (field, label, where the value comes from)
FIELDS = [
    ("vllm_version", "vLLM", "the engine's config line"),
    ("dtype", "dtype", "the engine's config line"),
    ("weights", "weights", "load_format on the engine's config line (dummy = random weights of the real shapes)"),
    ("weights_gib", "weights in memory (GiB)", "'Model loading took X GiB': every weight the server holds, dummy or "
                                               "real; more than a decode step reads where a vision tower is loaded "
                                               "(a text decode step does not run it)"),
    ("max_model_len", "max_model_len", "the engine's config line (max_seq_len)"),
    ("max_num_seqs", "max_num_seqs", "non-default args (every sweep sets it: a sweep's caps are joined)"),
    ("gpu_memory_utilization", "gpu_memory_utilization", "'The current --gpu-memory-utilization=X' or non-default args"),
    ("num_gpu_blocks_override", "KV pages fixed at", "non-default args (num_gpu_blocks_override)"),
    ("chunked_prefill", "chunked prefill", "the engine's config line (enable_chunked_prefill)"),
    ("max_num_batched_tokens", "prefill budget (tokens per step)", "'Chunked prefill is enabled with max_num_batched_tokens=N'"),
    ("prefix_caching", "prefix caching", "the engine's config line (enable_prefix_caching)"),
    ("sampler", "sampler", "the sampler line (FlashInfer or PyTorch-native)"),
    ("graphs", "compile / CUDA graphs", "the engine's config line (enforce_eager, compilation mode, cudagraph_mode)"),
    ("cudagraph_max", "largest CUDA-graph batch", "the engine's config line (max_cudagraph_capture_size)"),
    ("extra_flags", "other non-default flags", "non-default args, less the model paths, host and port"),
]
_ROUTINE_ARGS = {"model_tag", "model", "tokenizer", "host", "port", "served_model_name", "dtype", "max_model_len",
                 "load_format", "max_num_seqs", "gpu_memory_utilization", "num_gpu_blocks_override",
                 "enable_chunked_prefill", "max_num_batched_tokens", "enable_prefix_caching", "enforce_eager",
                 "disable_log_requests", "enable_log_requests"}


# The derived-table cache keys on logs.py and store.py; this module's own parsing adds its digest.
_CACHE_KIND = "setup-" + hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


def _config_value(config: str, key: str) -> str | None:
    m = re.search(r"(?:^|[\s,{'])" + re.escape(key) + r"['\"]?\s*[=:]\s*(<[^>]*>|'[^']*'|[^,}]+)", config)
    return m[1].strip().strip("'") if m else None


def _non_default_args(message: str) -> dict:
    text = message.split("non-default args:", 1)[1].strip()
    try:
        value = ast.literal_eval(text)
        return value if isinstance(value, dict) else {}
    except (ValueError, SyntaxError):
        return dict(re.findall(r"'(\w+)': ('[^']*'|[^,}]+)", text))


def _yes_no(value):
    """A switch as a reader says it: the log's True/False (or a bool) as yes/no; anything else as it is."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return {"True": "yes", "False": "no"}.get(value, value) if isinstance(value, str) else value


def _flag(key: str, value) -> str:
    """A non-default arg as a reader meets it: a switch as the flag that set it (`--no-async-scheduling`),
    anything else as key=value."""
    if value is True or value == "True":
        return "--" + key.replace("_", "-")
    if value is False or value == "False":
        return "--no-" + key.replace("_", "-")
    return f"{key}={value}"


def setup_from_log(text: str, path: str | Path | None = None) -> dict:
    """The server's setup as its startup log states it; a field the log does not state is absent."""
    out: dict = {}
    args: dict = {}
    for line in scan_log(text, path):
        msg = line.message
        if "non-default args:" in msg and not args:
            args = _non_default_args(msg)
        elif "Chunked prefill is enabled with max_num_batched_tokens=" in msg and "max_num_batched_tokens" not in out:
            out["max_num_batched_tokens"] = int(msg.rsplit("=", 1)[1].strip(". "))
        elif "with config:" in msg and "Initializing" in msg and "dtype" not in out:
            cfg = msg.split("with config:", 1)[1]
            if m := re.search(r"\(v(\d+\.\d+[\w.+-]*)\)", msg):
                out["vllm_version"] = m[1]
            out["dtype"] = (_config_value(cfg, "dtype") or "").replace("torch.", "") or None
            out["weights"] = {"dummy": "dummy (random)"}.get(_config_value(cfg, "load_format") or "",
                                                              _config_value(cfg, "load_format"))
            if (v := _config_value(cfg, "max_seq_len")) is not None:
                out["max_model_len"] = int(v)
            out["chunked_prefill"] = _yes_no(_config_value(cfg, "enable_chunked_prefill"))
            out["prefix_caching"] = _yes_no(_config_value(cfg, "enable_prefix_caching"))
            eager = _config_value(cfg, "enforce_eager") == "True"
            mode = _config_value(cfg, "'mode'") or _config_value(cfg, "mode")
            graphs = _config_value(cfg, "'cudagraph_mode'") or _config_value(cfg, "cudagraph_mode")
            out["graphs"] = "eager (no compile, no graphs)" if eager else ", ".join(
                v.strip("<>").split(":")[0].split(".")[-1] for v in (mode, graphs) if v) or None
            if (v := _config_value(cfg, "'max_cudagraph_capture_size'")) and v.isdigit() and not eager:
                out["cudagraph_max"] = int(v)
        elif "sampl" in msg and ("FlashInfer" in msg or "PyTorch-native" in msg) and "sampler" not in out:
            out["sampler"] = "PyTorch-native" if "PyTorch-native" in msg else "FlashInfer"
        elif "The current --gpu-memory-utilization=" in msg and "gpu_memory_utilization" not in out:
            out["gpu_memory_utilization"] = float(re.search(r"utilization=([\d.]+)", msg)[1])
    from .logs import parse_startup

    if (weights := parse_startup(text, path).weights_gib) is not None:
        out["weights_gib"] = weights
    for key in ("max_num_seqs", "num_gpu_blocks_override"):
        if key in args:
            out[key] = int(args[key])
    if "gpu_memory_utilization" not in out and "gpu_memory_utilization" in args:
        out["gpu_memory_utilization"] = float(args["gpu_memory_utilization"])
    extra = {k: v for k, v in args.items() if k not in _ROUTINE_ARGS}
    out["extra_flags"] = ", ".join(_flag(k, v) for k, v in sorted(extra.items())) or "none"
    return {k: v for k, v in out.items() if v is not None}


def _joined(values) -> str:
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return ", ".join(str(_yes_no(v)) for v in seen)


def setup_table(data_dir: Path | None = None) -> pd.DataFrame:
    """One row per rig: each setup field as the rig's server starts recorded it (distinct values joined, e.g.
    the caps of a sweep), the published rig from the posts; a field no record states reads "not stated"."""
    from .reference import load_reference
    from ..schema import PARTS, PUBLISHED_RIG
    from .store import derived, iter_points, open_artefact, read_text

    by_rig: dict[tuple[str, str], list[dict]] = {}
    for part in PARTS.values():
        for _, rig, point, m in iter_points(data_dir, part):
            if not (m.get("session") or {}).get("has_startup"):
                continue
            model = (m.get("model") or {}).get("preset") or "?"
            log = open_artefact(point, "server.log")
            by_rig.setdefault((rig, model), []).append(derived(_CACHE_KIND, log, lambda log=log: setup_from_log(read_text(log), log)))
    rows = []
    try:
        published = load_reference(1, data_dir)["server_setup"].set_index("setting")["stated"].to_dict()
        memory = load_reference(1, data_dir)["memory_report"].iloc[0]
        rows.append({"rig": PUBLISHED_RIG, "model": "qwen3.5-4b", "weights_gib": memory["model_weights_gib"], **published})
    except (KeyError, FileNotFoundError):
        pass
    for (rig, model), setups in sorted(by_rig.items()):
        row = {"rig": rig, "model": model}
        for field, _label, _src in FIELDS:
            vals = sorted({s[field] for s in setups if field in s}, key=lambda v: (isinstance(v, str), v))
            row[field] = _joined(vals) if vals else None
        rows.append(row)
    table = pd.DataFrame(rows, columns=["rig", "model", *[f for f, _, _ in FIELDS]])
    table = table.fillna("not stated")
    return table.rename(columns={f: label for f, label, _ in FIELDS})
