"""The server's setup read from its own startup log (fixtures: lines of real vLLM logs)."""
from __future__ import annotations

from pathlib import Path

from inference_wall.records.serversetup import setup_from_log, setup_table

FIXTURE = Path(__file__).parent / "fixtures" / "setup" / "h200-vllm-0.22.1-override.log"


def test_setup_from_a_real_h200_log_with_a_fixed_pool():
    text = FIXTURE.read_text()
    s = setup_from_log(text)
    assert s["vllm_version"] == "0.22.1" and s["dtype"] == "float16"
    assert s["weights"].startswith("dummy")
    assert s["max_model_len"] == 2048 and s["num_gpu_blocks_override"] == 586 and s["max_num_seqs"] == 256
    assert s["max_num_batched_tokens"] == 8192 and s["chunked_prefill"] == "yes"
    assert s["prefix_caching"] == "no" and s["sampler"] == "PyTorch-native"
    assert s["graphs"] == "VLLM_COMPILE, FULL_AND_PIECEWISE" and s["cudagraph_max"] == 512
    assert 0 < s["gpu_memory_utilization"] <= 1
    assert s["extra_flags"] == "gdn_prefill_backend=triton"


def test_a_setting_the_log_does_not_state_is_absent():
    text = FIXTURE.read_text()
    lines = [ln for ln in text.splitlines(keepends=True) if "Chunked prefill" not in ln and "sampl" not in ln]
    s = setup_from_log("".join(lines))
    assert "max_num_batched_tokens" not in s and "sampler" not in s
    assert s["max_num_seqs"] == 256


def test_eager_servers_read_as_eager():
    text = FIXTURE.read_text()
    s = setup_from_log(text.replace("enforce_eager=False", "enforce_eager=True"))
    assert s["graphs"].startswith("eager") and "cudagraph_max" not in s


def test_setup_table_has_the_published_rig_and_words_for_gaps():
    table = setup_table()
    assert (table["rig"] == "a10g-published").sum() == 1
    assert not table.isna().any().any()
    assert (table == "not stated").any().any()


def test_setup_table_says_yes_or_no_never_true_or_false():
    """Before, a switch's values were joined with str(): 'False, True' in the rigs page's server-setup table."""
    import re

    from inference_wall.records.serversetup import _flag, _joined

    table = setup_table()
    cells = [str(v) for v in table.to_numpy().ravel()]
    assert not [c for c in cells if re.search(r"(?<![\w-])(True|False|None|nan)(?![\w-])", c)]
    assert set(table["chunked prefill"]) <= {"yes", "no", "no, yes", "not stated"}
    assert _joined([False, True]) == "no, yes" and _joined(["False", "True"]) == "no, yes"
    assert _joined([1, 4]) == "1, 4"
    assert (_flag("async_scheduling", False), _flag("enable_logging_iteration_details", "True")) == (
        "--no-async-scheduling", "--enable-logging-iteration-details")
    assert _flag("tensor_parallel_size", 1) == "tensor_parallel_size=1"


def test_the_logged_weight_memory_is_not_called_what_a_decode_step_streams():
    """'Model loading took X GiB' counts a vision tower too, which a text decode step never reads."""
    from inference_wall.records.serversetup import FIELDS

    (source,) = [src for key, _, src in FIELDS if key == "weights_gib"]
    assert "decode step streams" not in source and "vision tower" in source
