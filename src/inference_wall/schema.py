"""Names shared by the store, the reference tables, the analysis and the figures.

Tidy frames: one row per observation, units in column names, a `rig` column everywhere so that
published and measured rigs stack into one frame and every figure can colour by rig.
"""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the repository root: the one definition every module imports
DATA_DIR = REPO / "data"  # the committed data (runs, rigs, models, reference): the default --data-dir

PARTS = {
    0: "00-inside-a-step",  # the chapter before part 1: what a step is made of (not in the series)
    1: "01-hit-the-wall",
    2: "02-prefill-freeze",
    3: "03-batching-cliff",
    4: "04-kv-starvation",
    5: "05-four-bits",
    6: "06-past-one-gpu",
}

PUBLISHED_RIG = "a10g-published"


def part_number(part: int | str) -> int:
    """A part's number, from its number or its folder name (PARTS)."""
    return part if isinstance(part, int) else next(n for n, name in PARTS.items() if name == part)


PUBLISHED_PRESET = "qwen3.5-4b"  # the posts' model, whose shapes data/models holds

# Part 1, table 1: the rate sweep (one row per offered rate; inf = flood).
RATE_SWEEP_COLUMNS = [
    "rig",
    "offered_rate_rps",  # float; math.inf for --request-rate inf
    "completed_rps",
    "output_tok_s",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "e2el_p99_ms",
]

# Part 3, the max_num_seqs sweep (one row per cap).
MNS_SWEEP_COLUMNS = [
    "rig",
    "max_num_seqs",
    "completed_rps",
    "output_tok_s",
    "ttft_p50_ms",
    "itl_p50_ms",
    "itl_p99_ms",
    "running_max",  # largest running batch seen in the stats lines during the pass (NaN if unknown)
]

# Scattered facts: one row per (rig, key); `value` in `unit`; `note` says where the number comes from.
FACT_COLUMNS = ["rig", "part", "key", "value", "unit", "note"]

# Where a run's page files (figures/, tables/) go when it is not the book's own build: `make reproduce` into a data
# dir other than the repository's data/ sets it (cli), figures.static_dir reads it.
STATIC_DIR_ENV = "IW_STATIC_DIR"
