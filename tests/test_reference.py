"""The published reference tables: they load, follow the schema, and agree with themselves.

No published number is written here: the numbers live only in data/reference/. The checks are
structural (columns, units, notes, provenance) and internal consistency between a post's table and
the ratios the same post states in prose, so a mistyped cell fails a test.
"""
from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from inference_wall.errors import UserError
from inference_wall.records.reference import TEXT_COLUMNS, DEFAULT_DATA_DIR, load_reference, reference_fact
from inference_wall.schema import (
    FACT_COLUMNS,
    MNS_SWEEP_COLUMNS,
    PARTS,
    PUBLISHED_RIG,
    RATE_SWEEP_COLUMNS,
)
from inference_wall.records.reference import GPUS_FOLDER, PRICES_FOLDER, gpu_prices, price_for_gpu

REFERENCE_DIR = DEFAULT_DATA_DIR / "reference"
ALL_CSVS = sorted(REFERENCE_DIR.glob("*/*.csv"))
# Ratios the posts state in prose are rounded ("about", "~"): allow this much relative slack.
ROUNDING = 0.10


@pytest.fixture(scope="module")
def part1():
    return load_reference(1)


@pytest.fixture(scope="module")
def part3():
    return load_reference(3)


def _close(stated: float, derived: float, rel: float = ROUNDING) -> bool:
    return math.isclose(stated, derived, rel_tol=rel)


# --- loading and schema -------------------------------------------------------------------------


# Parts whose numbers the series published (parts 1 and 3 as posts, part 2 by part 1's closing teaser); parts
# 4 and 5 have no published figure yet, so no reference folder: their pages judge rigs by mechanism alone.
PUBLISHED_PARTS = sorted(n for n, folder in PARTS.items() if (REFERENCE_DIR / folder).is_dir())


def test_every_reference_folder_has_csvs_and_the_posts_have_folders():
    assert ALL_CSVS, REFERENCE_DIR
    assert {1, 3} <= set(PUBLISHED_PARTS)
    for n in PUBLISHED_PARTS:
        assert list((REFERENCE_DIR / PARTS[n]).glob("*.csv")), PARTS[n]
    assert {p.name for p in REFERENCE_DIR.iterdir() if p.is_dir()} <= set(PARTS.values()) | {PRICES_FOLDER, GPUS_FOLDER}


@pytest.mark.parametrize("part", PUBLISHED_PARTS)
def test_part_loads_with_rig_and_facts(part):
    frames = load_reference(part)
    assert {"facts"} <= set(frames)
    folder_stems = {p.stem for p in (REFERENCE_DIR / PARTS[part]).glob("*.csv")}
    assert set(frames) == folder_stems
    for stem, df in frames.items():
        assert len(df) > 0, stem
        assert "rig" in df.columns, stem
        assert (df["rig"] == PUBLISHED_RIG).all(), stem


def test_part_aliases_and_unknown_part():
    by_number = load_reference(1)
    for alias in ("1", "01", PARTS[1]):
        assert set(load_reference(alias)) == set(by_number)
    with pytest.raises(UserError):
        load_reference(9)
    with pytest.raises(UserError):
        load_reference("nope")


def test_schema_columns(part1, part3):
    assert list(part1["rate_sweep"].columns) == RATE_SWEEP_COLUMNS
    assert list(part3["mns_sweep"].columns) == MNS_SWEEP_COLUMNS
    assert list(part1["facts"].columns) == FACT_COLUMNS
    assert list(part3["facts"].columns) == FACT_COLUMNS


def test_other_tables_name_units_in_columns(part1, part3):
    unit_suffix = re.compile(r"_(ms|s|gib|gb|tokens|x|pct|rps|seqs|tok_s|per_request|per_seq)$")
    for frames in (part1, part3):
        for stem, df in frames.items():
            if stem == "facts":
                continue
            for column in df.columns:
                if column in {"rig", "server_state", "max_num_seqs", "running_max"} | TEXT_COLUMNS:
                    continue
                assert unit_suffix.search(column), f"{stem}.{column} has no unit suffix"


# --- the rate sweep (part 1) --------------------------------------------------------------------


def test_rate_sweep_rates_increase_and_end_in_flood(part1):
    rates = part1["rate_sweep"]["offered_rate_rps"].tolist()
    assert all(a < b for a, b in zip(rates, rates[1:])), rates
    assert rates[-1] == math.inf
    assert all(math.isfinite(r) and r > 0 for r in rates[:-1])


def test_rate_sweep_values(part1):
    df = part1["rate_sweep"]
    measured = ["completed_rps", "output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "e2el_p99_ms"]
    assert df[measured].notna().all().all()
    assert (df[measured] > 0).all().all()
    assert df[["itl_p50_ms", "itl_p99_ms"]].isna().all().all()  # the post gives no ITL here
    assert (df["ttft_p99_ms"] >= df["ttft_p50_ms"]).all()
    assert (df["e2el_p99_ms"] >= df["ttft_p99_ms"]).all()
    # Completed can never exceed offered (allow the post's two-decimal rounding).
    assert (df["completed_rps"] <= df["offered_rate_rps"] + 0.01).all()


@pytest.mark.parametrize("part, table, rel", [(1, "rate_sweep", 0.02), (3, "mns_sweep", 0.03)])
def test_sweep_tokens_match_requests(part, table, rel):
    """Every request emits exactly workload_output_tokens, so tok/s = req/s x that (up to the posts' rounding)."""
    ref = load_reference(part)
    out = reference_fact(ref, "workload_output_tokens")
    df = ref[table]
    for rps, tok_s in zip(df["completed_rps"], df["output_tok_s"]):
        assert _close(tok_s, rps * out, rel=rel), (rps, tok_s)


def test_rate_sweep_below_knee_bound(part1):
    df = part1["rate_sweep"]
    below = df[df["offered_rate_rps"] < reference_fact(part1, "knee_offered_rate_low")]
    assert len(below) > 0
    assert (below["e2el_p99_ms"] < reference_fact(part1, "e2el_p99_bound_below_knee") * 1000).all()


def test_part1_stated_ceilings_match_table(part1):
    flood = part1["rate_sweep"].iloc[-1]
    assert _close(reference_fact(part1, "serving_ceiling_tok_s"), flood["output_tok_s"])
    assert _close(reference_fact(part1, "flood_ceiling_rps"), flood["completed_rps"])
    assert reference_fact(part1, "knee_offered_rate_low") < reference_fact(part1, "knee_offered_rate_high")
    assert reference_fact(part1, "knee_completed_rate_low") < reference_fact(part1, "knee_completed_rate_high")
    assert flood["completed_rps"] <= reference_fact(part1, "knee_completed_rate_high") + 0.05


# --- the max_num_seqs sweep (part 3) ------------------------------------------------------------


def test_mns_sweep_caps_and_values(part3):
    df = part3["mns_sweep"]
    caps = df["max_num_seqs"].tolist()
    assert all(c >= 1 and c == int(c) for c in caps)
    assert all(a < b for a, b in zip(caps, caps[1:])), caps
    assert caps[-1] == reference_fact(part3, "max_num_seqs_default")
    measured = ["completed_rps", "output_tok_s", "ttft_p50_ms", "itl_p50_ms", "itl_p99_ms"]
    assert df[measured].notna().all().all()
    assert (df["itl_p99_ms"] >= df["itl_p50_ms"]).all()
    tok = df["output_tok_s"].tolist()
    assert all(a < b for a, b in zip(tok, tok[1:])), "throughput should rise with the cap"
    known_running = df["running_max"].dropna()
    assert (known_running <= df.loc[known_running.index, "max_num_seqs"]).all()


def test_part3_stated_ratios_match_table(part3):
    df = part3["mns_sweep"].set_index("max_num_seqs")
    tok = df["output_tok_s"]
    first, last = tok.iloc[0], tok.iloc[-1]
    assert _close(reference_fact(part3, "batching_lift"), last / first)
    plateau = reference_fact(part3, "plateau_batch")
    assert plateau in tok.index
    assert _close(reference_fact(part3, "lift_cap1_to_cap64"), tok[plateau] / first)
    assert (last / tok[plateau] - 1) * 100 < reference_fact(part3, "gain_cap64_to_cap256_max")
    assert _close(reference_fact(part3, "ttft_p50_cap1") * 1000, df["ttft_p50_ms"].iloc[0])
    assert _close(reference_fact(part3, "ttft_p50_cap256") * 1000, df["ttft_p50_ms"].iloc[-1])
    # ~0.9 ms per sequence per token = step time / batch, and step time = batch / throughput.
    per_seq_ms = 1000 / last
    assert _close(reference_fact(part3, "per_seq_ms_per_token"), per_seq_ms)
    assert reference_fact(part3, "small_model_batching_lift") > reference_fact(part3, "batching_lift")


def test_parts_agree_on_the_ceiling(part1, part3):
    flood1 = part1["rate_sweep"].iloc[-1]
    full3 = part3["mns_sweep"].iloc[-1]
    assert _close(flood1["output_tok_s"], full3["output_tok_s"], rel=0.02)
    assert reference_fact(part1, "plateau_batch") == reference_fact(part3, "plateau_batch")


# --- the other part 1 tables ------------------------------------------------------------------


def test_memory_report_consistent_with_discount(part1):
    mem = part1["memory_report"]
    assert len(mem) == 1
    row = mem.iloc[0]
    naive = row["kv_cache_tokens"] / row["max_concurrency_tokens_per_request"]
    assert _close(reference_fact(part1, "concurrency_discount"), row["max_concurrency_x"] / naive)
    gb_per_gib = 2**30 / 1e9
    assert _close(reference_fact(part1, "weight_bytes_per_stream"), row["model_weights_gib"] * gb_per_gib, rel=0.02)
    assert row["model_weights_gib"] + row["kv_cache_gib"] < reference_fact(part1, "gpu_memory_usable")


def test_cold_warm(part1):
    cw = part1["cold_warm"].set_index("server_state")
    assert set(cw.index) == {"cold", "warm"}
    cold, warm = cw.loc["cold"], cw.loc["warm"]
    assert cold["offered_rate_rps"] == warm["offered_rate_rps"]
    assert (cw["ttft_p99_ms"] >= cw["ttft_p50_ms"]).all()
    assert _close(reference_fact(part1, "cold_ttft_p99_over_p50"), cold["ttft_p99_ms"] / cold["ttft_p50_ms"])
    assert _close(reference_fact(part1, "cold_over_warm_ttft_p99"), cold["ttft_p99_ms"] / warm["ttft_p99_ms"])
    # The warm re-run is the same point as the sweep's first row.
    first = part1["rate_sweep"].iloc[0]
    assert first["offered_rate_rps"] == warm["offered_rate_rps"]
    assert first["ttft_p99_ms"] == warm["ttft_p99_ms"]


def test_step_time_fit(part1):
    fit = part1["step_time_fit"]
    assert len(fit) == 1
    row = fit.iloc[0]
    assert _close(row["crossover_batch_seqs"], row["intercept_ms"] / row["slope_ms_per_seq"])
    assert _close(row["intercept_ms"], reference_fact(part1, "weight_stream_time"))
    assert 0 < row["gpu_busy_min_pct"] <= row["gpu_busy_max_pct"] <= 100
    # The raw decode ceiling is above the serving ceiling (prefill eats the difference).
    assert reference_fact(part1, "pure_decode_ceiling_tok_s") > reference_fact(part1, "serving_ceiling_tok_s")


# --- facts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("part", PUBLISHED_PARTS)
def test_facts_rows_are_complete(part):
    facts = load_reference(part)["facts"]
    assert (facts["part"] == part).all()
    assert facts["value"].map(math.isfinite).all()
    assert (facts["unit"].str.len() > 0).all(), facts[facts["unit"] == ""]
    assert (facts["note"].str.len() > 0).all(), facts[facts["note"] == ""]
    assert not facts.duplicated(["rig", "part", "key"]).any()
    for key, note in zip(facts["key"], facts["note"]):
        assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", key), key
        lowered = note.lower()
        assert any(w in lowered for w in ("exact", "approximate", "upper bound")), (key, note)
        assert "'" in note, f"{key}: the note should quote or name the post's section"


def test_reference_fact_accepts_frame_or_dict(part1):
    key = part1["facts"]["key"].iloc[0]
    assert reference_fact(part1, key) == reference_fact(part1["facts"], key)
    assert isinstance(reference_fact(part1, key), float)
    with pytest.raises(UserError):
        reference_fact(part1, "no_such_fact")
    with pytest.raises(UserError):
        reference_fact({"rate_sweep": part1["rate_sweep"]}, key)


# --- SOURCES.md -------------------------------------------------------------------------------


def test_sources_mentions_every_csv():
    sources = (REFERENCE_DIR / "SOURCES.md").read_text()
    for path in ALL_CSVS:
        assert f"`{path.relative_to(REFERENCE_DIR).as_posix()}`" in sources, path
    assert PUBLISHED_RIG in sources
    assert "not measurements by this project" in sources


# --- malformed CSVs ---------------------------------------------------------------------------


def _copy_reference(tmp_path: Path) -> Path:
    shutil.copytree(REFERENCE_DIR, tmp_path / "reference")
    return tmp_path


@pytest.mark.parametrize(
    "stem, mutate",
    [
        ("rate_sweep", lambda text: text.replace("e2el_p99_ms", "e2e_p99", 1)),  # wrong column
        ("rate_sweep", lambda text: text.replace(",inf,", ",lots,", 1)),  # not a number
        ("facts", lambda text: text.splitlines()[0] + "\n"),  # header only
        ("facts", lambda text: ""),  # empty file
        ("memory_report", lambda text: text + 'x,"unterminated\n'),  # broken quoting
    ],
)
def test_malformed_csv_names_the_file(tmp_path, stem, mutate):
    data_dir = _copy_reference(tmp_path)
    path = data_dir / "reference" / PARTS[1] / f"{stem}.csv"
    path.write_text(mutate(path.read_text()))
    with pytest.raises(UserError) as info:
        load_reference(1, data_dir=data_dir)
    assert f"{stem}.csv" in str(info.value)


def test_missing_part_folder_is_a_user_error(tmp_path):
    with pytest.raises(UserError):
        load_reference(1, data_dir=tmp_path)


def test_inf_parses_as_float_inf(part1):
    assert pd.api.types.is_float_dtype(part1["rate_sweep"]["offered_rate_rps"])
    assert math.isinf(part1["rate_sweep"]["offered_rate_rps"].max())


# --- the GPU price listing ---------------------------------------------------------------------


def test_gpu_prices_match_a_rigs_gpu_by_name_and_span_its_tiers():
    prices = gpu_prices()
    h200 = prices[prices["match"] == "H200"]
    got = price_for_gpu(prices, "NVIDIA H200")
    assert got["low"] == h200["usd_per_gpu_hour_low"].min() and got["high"] == h200["usd_per_gpu_hour_high"].max()
    assert got["low"] <= got["mid"] <= got["high"] and got["tiers"] == len(h200) > 1
    assert price_for_gpu(prices, "NVIDIA H100 80GB HBM3")["gpu"].startswith("H100")
    assert price_for_gpu(prices, "NVIDIA A10G") is None and price_for_gpu(prices, None) is None


def test_a_price_listing_with_a_low_above_its_high_names_the_row(tmp_path):
    data_dir = _copy_reference(tmp_path)
    path = data_dir / "reference" / PRICES_FOLDER / "gpu_hour.csv"
    lines = path.read_text().splitlines()
    cells = lines[1].split(",")
    cells[3], cells[4] = cells[4], cells[3]
    path.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    with pytest.raises(UserError) as info:
        gpu_prices(data_dir)
    assert "gpu_hour.csv" in str(info.value) and cells[2] in str(info.value)
