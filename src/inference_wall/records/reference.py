"""Published reference numbers: the tables and scattered facts of the source posts, as tidy frames.

The CSVs live in data/reference/<part folder>/ (see data/reference/SOURCES.md for where each number
comes from). They are published numbers, shown as rig `a10g-published`, not measured by this project.

    frames = load_reference(1)                 # {"rate_sweep": df, "memory_report": df, "facts": df, ...}
    reference_fact(frames, "plateau_batch")    # -> 64.0
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..errors import UserError
from .store import part_name
from ..schema import DATA_DIR as DEFAULT_DATA_DIR, FACT_COLUMNS, MNS_SWEEP_COLUMNS, RATE_SWEEP_COLUMNS


# A market listing, not the series' and not a rig's: GPU-hour prices per provider tier (reference/prices/).
PRICE_COLUMNS = ["gpu", "match", "tier", "usd_per_gpu_hour_low", "usd_per_gpu_hour_high", "as_of", "source"]
PRICES_FOLDER = "prices"
# Datasheet figures per GPU model, not a rig's measurement (reference/gpus/): what predict.py scales the h200's
# measured step to. A tensor figure the datasheet prints only with 2:4 sparsity stays in the sparse column.
DATASHEET_COLUMNS = ["key", "gpu", "memory_gb", "memory_bandwidth_gb_s", "fp16_tensor_dense_tflops",
                     "fp16_tensor_sparse_tflops", "source", "note"]
GPUS_FOLDER = "gpus"
# Columns a given file stem must have, exactly and in this order (other files: only `rig`).
REQUIRED_COLUMNS: dict[str, list[str]] = {
    "rate_sweep": RATE_SWEEP_COLUMNS,
    "mns_sweep": MNS_SWEEP_COLUMNS,
    "facts": FACT_COLUMNS,
    "gpu_hour": PRICE_COLUMNS,
    "datasheets": DATASHEET_COLUMNS,
}
# Columns kept as text; every other column must parse as a number (empty = NaN, `inf` = math.inf).
TEXT_COLUMNS = {"rig", "key", "unit", "note", "server_state", "setting", "stated", "gpu", "match", "tier", "as_of",
                "source"}


def read_reference_csv(path: Path) -> pd.DataFrame:
    """Read one reference CSV, checking its columns and that numeric columns are numbers."""
    path = Path(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a readable CSV ({exc})") from exc

    columns = list(df.columns)
    expected = REQUIRED_COLUMNS.get(path.stem)
    if expected is not None and columns != expected:
        raise UserError(f"{path}: columns {columns} do not match the schema {expected}")
    rigged = expected is None or "rig" in expected  # a schema without `rig` (the price listing) needs none
    if rigged and "rig" not in columns:
        raise UserError(f"{path}: has no `rig` column")
    if len(set(columns)) != len(columns) or any(c.startswith("Unnamed:") for c in columns):
        raise UserError(f"{path}: duplicate or unnamed columns {columns}")
    if df.empty:
        raise UserError(f"{path}: has a header but no rows")
    if rigged and (df["rig"].str.strip() == "").any():
        raise UserError(f"{path}: a row has an empty `rig`")

    for column in columns:
        if column in TEXT_COLUMNS:
            df[column] = df[column].str.strip()
            continue
        df[column] = [_parse_number(path, column, row, text) for row, text in enumerate(df[column], start=2)]
        df[column] = df[column].astype(float)
    if "part" in df.columns and df["part"].notna().all() and (df["part"] % 1 == 0).all():
        df["part"] = df["part"].astype(int)
    return df


def _parse_number(path: Path, column: str, line: int, text: str) -> float:
    text = text.strip()
    if text == "":
        return math.nan
    if text.lower() in {"inf", "+inf", "infinity"}:
        return math.inf
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{path}:{line}: column {column!r} holds {text!r}, not a number") from None
    if math.isnan(value):
        raise UserError(f"{path}:{line}: column {column!r} holds NaN; leave the cell empty instead")
    return value


def load_reference(part: int | str, data_dir: Path | None = None) -> dict[str, pd.DataFrame]:
    """All reference tables of one part, keyed by file stem (e.g. "rate_sweep", "facts")."""
    folder = Path(data_dir) if data_dir is not None else DEFAULT_DATA_DIR
    part_dir = folder / "reference" / part_name(part)
    files = sorted(part_dir.glob("*.csv"))
    if not files:
        raise UserError(f"{part_dir}: no reference CSV files")
    return {path.stem: read_reference_csv(path) for path in files}


def reference_fact(frames_or_df: Mapping[str, pd.DataFrame] | pd.DataFrame, key: str) -> float:
    """The value of one fact, from load_reference()'s dict or a facts frame. Unit: the row's `unit`."""
    if isinstance(frames_or_df, pd.DataFrame):
        facts = frames_or_df
    else:
        if "facts" not in frames_or_df:
            raise UserError("these reference frames have no `facts` table")
        facts = frames_or_df["facts"]
    rows = facts[facts["key"] == key]
    if len(rows) == 0:
        known = ", ".join(sorted(facts["key"]))
        raise UserError(f"no reference fact {key!r}; known keys: {known}")
    if len(rows) > 1:
        raise UserError(f"reference fact {key!r} appears {len(rows)} times; expected once per rig and part")
    return float(rows["value"].iloc[0])


def gpu_prices(data_dir: Path | None = None) -> pd.DataFrame:
    """The GPU-hour price listing (reference/prices/gpu_hour.csv, SOURCES.md): one row per GPU and tier, the
    low and high of the tier's range in USD. A low above its high is an error naming the row."""
    folder = Path(data_dir) if data_dir is not None else DEFAULT_DATA_DIR
    path = folder / "reference" / PRICES_FOLDER / "gpu_hour.csv"
    if not path.is_file():
        raise UserError(f"{path}: no GPU price listing")
    df = read_reference_csv(path)
    bad = df[~(df["usd_per_gpu_hour_low"] <= df["usd_per_gpu_hour_high"])]
    if len(bad):
        r = bad.iloc[0]
        raise UserError(f"{path}: {r['gpu']} {r['tier']}: low {r['usd_per_gpu_hour_low']} is not at most its high "
                        f"{r['usd_per_gpu_hour_high']}")
    return df


def price_for_gpu(prices: pd.DataFrame, gpu_name: str | None) -> dict | None:
    """A GPU's listed price, matched by the listing's `match` word in the GPU's name (nvidia-smi's): the
    cheapest tier's low, the dearest tier's high, and the median of the tiers' midpoints; None if not listed."""
    if not gpu_name:
        return None
    rows = prices[[str(m).lower() in str(gpu_name).lower() for m in prices["match"]]]
    if not len(rows):
        return None
    first = rows.iloc[0]
    rows = rows[rows["match"] == first["match"]]
    mids = (rows["usd_per_gpu_hour_low"] + rows["usd_per_gpu_hour_high"]) / 2
    return {"gpu": first["gpu"], "low": float(rows["usd_per_gpu_hour_low"].min()),
            "high": float(rows["usd_per_gpu_hour_high"].max()), "mid": float(mids.median()),
            "tiers": len(rows), "as_of": first["as_of"], "source": first["source"]}


def gpu_datasheets(data_dir: Path | None = None) -> pd.DataFrame:
    """The GPU datasheet figures (reference/gpus/datasheets.csv, SOURCES.md): one row per GPU model, its memory (GB as
    the datasheet prints it), memory bandwidth (GB/s) and FP16/BF16 tensor TFLOP/s, dense and with sparsity where
    printed. A row without memory or bandwidth, or with a dense figure above its sparse one, is an error naming it."""
    folder = Path(data_dir) if data_dir is not None else DEFAULT_DATA_DIR
    path = folder / "reference" / GPUS_FOLDER / "datasheets.csv"
    if not path.is_file():
        raise UserError(f"{path}: no GPU datasheet table")
    df = read_reference_csv(path)
    for r in df.itertuples():
        if not (r.memory_gb > 0 and r.memory_bandwidth_gb_s > 0):
            raise UserError(f"{path}: {r.key}: memory and bandwidth must be positive numbers")
        if r.fp16_tensor_dense_tflops > r.fp16_tensor_sparse_tflops:
            raise UserError(f"{path}: {r.key}: dense {r.fp16_tensor_dense_tflops} TFLOP/s above its sparse "
                            f"{r.fp16_tensor_sparse_tflops}")
    if df["key"].duplicated().any():
        raise UserError(f"{path}: a key appears twice")
    return df
