"""vLLM's /server_info as stored (records/serverinfo.py): the config's fields, and where a point has none, its log's
config line."""
from __future__ import annotations

import json
import math
from pathlib import Path

from inference_wall.records.serverinfo import ServerInfo, capture_size, graph_capture_limit

DATA = Path(__file__).resolve().parents[1] / "data"


def _info(config: str) -> str:
    return json.dumps({"vllm_config": config, "vllm_env": {"VLLM_LOGGING_LEVEL": "INFO"}, "system_env": {"os": "x"}})


def test_the_three_sections_and_the_capture_size():
    info = ServerInfo.parse(_info("dtype=torch.float16, compilation_config={'max_cudagraph_capture_size': 512}"))
    assert info.vllm_env == {"VLLM_LOGGING_LEVEL": "INFO"} and info.system_env == {"os": "x"}
    assert info.cudagraph_capture_size == 512
    assert ServerInfo.parse(_info("dtype=torch.float16")).cudagraph_capture_size is None
    assert ServerInfo.parse("not json 'max_cudagraph_capture_size': 8").cudagraph_capture_size == 8  # kept whole


def test_a_stored_server_info_of_a_gpu_rig_states_its_capture_size():
    stored = sorted((DATA / "runs" / "03-batching-cliff" / "h200").glob("*/server_info.json"))
    assert stored
    sizes = {ServerInfo.parse(p.read_text()).cudagraph_capture_size for p in stored}
    assert sizes and all(isinstance(s, int) and s > 0 for s in sizes)


def test_the_limit_reads_server_info_first_then_the_log(tmp_path):
    log_line = "Initializing a V1 LLM engine with config: ... 'max_cudagraph_capture_size': 256, ...\n"
    (tmp_path / "server.log").write_text(log_line)
    assert graph_capture_limit(tmp_path) == 256.0  # no server_info.json: the log's config line
    (tmp_path / "server_info.json").write_text(_info("{'max_cudagraph_capture_size': 512}"))
    assert graph_capture_limit(tmp_path) == 512.0
    (tmp_path / "server_info.json").write_text(_info("dtype=torch.float16"))
    assert graph_capture_limit(tmp_path) == 256.0  # the config does not say: the log does
    (tmp_path / "server.log").write_text("nothing\n")
    assert math.isnan(graph_capture_limit(tmp_path))
    assert capture_size("max_cudagraph_capture_size\": 64") == 64
