"""vLLM's /server_info as a run stored it (`server_info.json`, written once per server session, secrets redacted:
records/redact.py): the engine's config (`vllm_config`, the config line vLLM also logs, as one string), its
environment (`vllm_env`) and the host's (`system_env`). Beside records/serversetup.py, which reads the start's log;
a field the config holds is read here first, and from the log's config line where a point has no server_info.json."""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

CAPTURE_SIZE = re.compile(r"max_cudagraph_capture_size'?\"?:\s*(\d+)")  # the config's, in either record


@dataclass(frozen=True)
class ServerInfo:
    """One stored /server_info: the engine's config string and the two environments."""
    vllm_config: str
    vllm_env: dict = field(default_factory=dict)
    system_env: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> ServerInfo:
        """From server_info.json's text; a text that is not its JSON object is kept whole as the config (what an
        older vLLM, or a truncated write, left), so a field of the config is still found in it."""
        try:
            raw = json.loads(text)
        except ValueError:
            return cls(text)
        if not isinstance(raw, dict):
            return cls(text)
        config = raw.get("vllm_config", "")
        return cls(config if isinstance(config, str) else json.dumps(config), raw.get("vllm_env") or {},
                   raw.get("system_env") or {})

    @property
    def cudagraph_capture_size(self) -> int | None:
        """The largest batch (tokens per step) the engine captures a CUDA graph for, None where the config does not
        say."""
        return capture_size(self.vllm_config)


def capture_size(text: str) -> int | None:
    """`max_cudagraph_capture_size` where `text` (a config string, or a log holding the engine's config line) states
    it, else None."""
    m = CAPTURE_SIZE.search(text)
    return int(m[1]) if m else None


def graph_capture_limit(point_dir: Path) -> float:
    """The largest batch (tokens per step) the point's server captured a CUDA graph for: its server_info.json's
    config, else its log's config line; NaN where neither says."""
    from .store import read_artefact

    for name, read in (("server_info.json", lambda t: ServerInfo.parse(t).cudagraph_capture_size),
                       ("server.log", capture_size)):
        try:
            text = read_artefact(point_dir, name)
        except FileNotFoundError:
            continue
        if (size := read(text)) is not None:
            return float(size)
    return math.nan
