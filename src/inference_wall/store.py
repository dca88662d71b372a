"""The data layout: data/runs/<part>/<rig>/<point>/ holds raw artefacts plus manifest.json.

A point is complete only when its manifest says so. The manifest is written last, atomically
(temp file + fsync + rename), so a crash leaves either a complete point or a folder a rerun redoes.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from .errors import UserError
from .schema import PARTS

REPO = Path(__file__).resolve().parents[2]
DATA_DIR = REPO / "data"
MANIFEST = "manifest.json"
RIG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
COMPRESS_OVER_BYTES = 256 * 1024


def part_name(part: int | str) -> str:
    """1, '1', '01' or '01-hit-the-wall' -> '01-hit-the-wall'; anything else is a one-line error."""
    for number, name in PARTS.items():
        if str(part) in (str(number), f"{number:02d}", name):
            return name
    valid = ", ".join(f"{n} ({name})" for n, name in PARTS.items())
    raise UserError(f"unknown part {part!r}; valid parts: {valid}")


def part_number(part: int | str) -> int:
    name = part_name(part)
    return next(n for n, v in PARTS.items() if v == name)


def check_rig_name(rig: str) -> str:
    if not RIG_NAME.match(rig or ""):
        known = sorted(p.stem for p in (DATA_DIR / "rigs").glob("*.json"))
        raise UserError(f"bad rig name {rig!r}: use 1-40 lowercase letters, digits and '-', starting with a letter "
                        f"or digit (e.g. my-a10g); rigs with a profile: {', '.join(known) or 'none'}")
    return rig


def runs_dir(data_dir: Path | None = None) -> Path:
    return Path(data_dir or DATA_DIR) / "runs"


def rig_dir(part: int | str, rig: str, data_dir: Path | None = None) -> Path:
    return runs_dir(data_dir) / part_name(part) / check_rig_name(rig)


def point_dir(part: int | str, rig: str, point: str, data_dir: Path | None = None) -> Path:
    return rig_dir(part, rig, data_dir) / point


def write_json_atomic(path: Path, obj) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_manifest(point: Path) -> dict | None:
    path = Path(point) / MANIFEST
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise UserError(f"{path}: not valid JSON ({e})")


def is_complete(point: Path) -> bool:
    m = read_manifest(point)
    return bool(m) and m.get("status") == "complete"


def fresh_point_dir(point: Path) -> Path:
    """An empty folder for a point that is about to (re)run; never called on a complete point."""
    point = Path(point)
    if is_complete(point):
        raise RuntimeError(f"refusing to overwrite complete point {point}")
    if point.exists():
        shutil.rmtree(point)
    point.mkdir(parents=True)
    return point


def compress_large(point: Path, limit: int = COMPRESS_OVER_BYTES) -> None:
    """gzip raw files over `limit` bytes (bench JSON with per-request arrays, long logs), keep the rest."""
    for f in Path(point).iterdir():
        if f.is_file() and f.suffix != ".gz" and f.name != MANIFEST and f.stat().st_size > limit:
            with open(f, "rb") as src, gzip.open(f.with_name(f.name + ".gz"), "wb", compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)
            f.unlink()


def open_artefact(point: Path, name: str) -> Path:
    """The path of a raw file, plain or gzipped."""
    p = Path(point) / name
    if p.exists():
        return p
    gz = p.with_name(p.name + ".gz")
    if gz.exists():
        return gz
    raise FileNotFoundError(p)


def read_text(path: Path) -> str:
    path = Path(path)
    if path.suffix == ".gz":
        with gzip.open(path, "rt", errors="replace") as f:
            return f.read()
    return path.read_text(errors="replace")


def read_artefact(point: Path, name: str) -> str:
    return read_text(open_artefact(point, name))


def iter_points(data_dir: Path | None = None, part: int | str | None = None, rig: str | None = None,
                complete_only: bool = True):
    """Yield (part_name, rig, point_dir, manifest) for the points in data/runs, sorted."""
    base = runs_dir(data_dir)
    parts = [part_name(part)] if part is not None else sorted(PARTS.values())
    for pname in parts:
        pdir = base / pname
        if not pdir.is_dir():
            continue
        for rdir in sorted(d for d in pdir.iterdir() if d.is_dir()):
            if rig is not None and rdir.name != rig:
                continue
            for point in sorted(d for d in rdir.iterdir() if d.is_dir()):
                m = read_manifest(point)
                if complete_only and not (m and m.get("status") == "complete"):
                    continue
                yield pname, rdir.name, point, m


def rigs_with_data(part: int | str, data_dir: Path | None = None) -> list[str]:
    return sorted({rig for _, rig, _, _ in iter_points(data_dir, part)})
