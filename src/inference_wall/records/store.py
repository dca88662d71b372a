"""The data layout: data/runs/<part>/<rig>/<point>/ holds raw artefacts plus manifest.json.

A point is complete only when its manifest says so. The manifest is written last, atomically
(temp file + fsync + rename), so a crash leaves either a complete point or a folder a rerun redoes.
"""
from __future__ import annotations

import errno
import functools
import gzip
import hashlib
import lzma
import json
import os
import pickle
import platform
import re
import shutil
import subprocess
import tempfile
import zlib
from pathlib import Path

from ..errors import LogParseError, UserError
from .record import FORMAT_VERSION, MANIFEST, PointRecord, read_manifest, read_record  # noqa: F401  (record.py is
# the one reader of manifests; callers that read one through the store import it from here)
from ..schema import DATA_DIR, PARTS, PUBLISHED_RIG, REPO

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


RESERVED_RIGS = {PUBLISHED_RIG: "the series' published numbers (data/reference)"}


def check_run_rig(rig: str) -> str:
    """A rig name a run may write: well formed and not reserved for published data."""
    check_rig_name(rig)
    if rig in RESERVED_RIGS:
        raise UserError(f"rig name {rig!r} is reserved for {RESERVED_RIGS[rig]}; name this machine's rig "
                        f"differently, e.g. my-a10g")
    return rig


def runs_dir(data_dir: Path | None = None) -> Path:
    return Path(data_dir or DATA_DIR) / "runs"


def rig_dir(part: int | str, rig: str, data_dir: Path | None = None) -> Path:
    return runs_dir(data_dir) / part_name(part) / check_rig_name(rig)


def point_dir(part: int | str, rig: str, point: str, data_dir: Path | None = None) -> Path:
    return rig_dir(part, rig, data_dir) / point


class WriteFailed(UserError):
    """An artefact that could not be written (a full disk, most often): names the path; no partial file is left."""


def write_failed(path: Path, error: OSError) -> WriteFailed:
    """The one-line error for an artefact `path` that could not be written."""
    why = error.strerror or str(error) or type(error).__name__
    hint = ("free space on its disk, then rerun the same command (complete "
            "points are kept)" if error.errno in (errno.ENOSPC, errno.EDQUOT) else
            "then rerun the same command (complete points are kept)")
    return WriteFailed(f"could not write {path}: {why}; nothing partial was kept; {hint}")


def write_json_atomic(path: Path, obj) -> None:
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 otherwise: the mode of every other artefact
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise write_failed(path, e) from None
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def is_complete(point: Path) -> bool:
    rec = read_record(point)
    return rec is not None and rec.complete


def fresh_point_dir(point: Path, replace_complete: bool = False) -> Path:
    """An empty folder for a point that is about to (re)run; a complete point only when asked to replace it
    (a point made with other settings, remade under --redo-changed)."""
    point = Path(point)
    if is_complete(point) and not replace_complete:
        raise RuntimeError(f"refusing to overwrite complete point {point}")
    if point.exists():
        shutil.rmtree(point)
    point.mkdir(parents=True)
    return point


def compress_large(point: Path, limit: int = COMPRESS_OVER_BYTES) -> None:
    """gzip raw files over `limit` bytes (bench JSON with per-request arrays, long logs), keep the rest."""
    for f in sorted(Path(point).iterdir()):
        if f.is_file() and f.suffix != ".gz" and f.name != MANIFEST and f.stat().st_size > limit:
            gz = f.with_name(f.name + ".gz")
            try:
                with open(f, "rb") as src, gzip.open(gz, "wb", compresslevel=9) as dst:
                    shutil.copyfileobj(src, dst)
            except OSError as e:  # a truncated .gz would pass for the artefact: only the original stays
                gz.unlink(missing_ok=True)
                raise write_failed(gz, e) from None
            except BaseException:
                gz.unlink(missing_ok=True)
                raise
            f.unlink()


# ---------------------------------------------------------------------------------------------
# Integrity: a manifest records each artefact's size and sha256 (`artefacts`); reading one checks them
# ---------------------------------------------------------------------------------------------

class CorruptArtefact(UserError):
    """A raw file that differs from what its manifest recorded: names the file."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=4096)
def _sha256_cached(path: str, mtime_ns: int, size: int) -> str:
    return sha256_file(Path(path))


def file_digest(path: Path, st: os.stat_result | None = None) -> str:
    """The sha256 of the file at `path` (`st`: its stat, where the caller has it), hashed once per process for each
    file version under its real path (a page reads a file several times, and a data dir that links to the committed
    runs reads the same files)."""
    real = Path(path).resolve()
    st = st or real.stat()
    return _sha256_cached(str(real), st.st_mtime_ns, st.st_size)


def artefact_records(point: Path) -> dict[str, dict]:
    """{file name: {"bytes", "sha256"}} for every raw file of a point (what its manifest records)."""
    return {f.name: {"bytes": f.stat().st_size, "sha256": sha256_file(f)}
            for f in sorted(Path(point).iterdir()) if f.is_file() and f.name != MANIFEST}


@functools.lru_cache(maxsize=1024)
def _recorded_artefacts(manifest: str, mtime_ns: int, size: int) -> dict:
    try:
        rec = read_record(Path(manifest).parent)
    except (OSError, UserError):
        return {}
    if rec is None:
        return {}
    # a manifest that predates the records lists its files' names only: their presence is still checked
    return rec.artefacts or {name: {} for name in rec.files}


def _listed(point: Path) -> dict:
    manifest = Path(point) / MANIFEST
    try:
        mst = manifest.stat()
    except OSError:
        return {}
    return _recorded_artefacts(str(manifest), mst.st_mtime_ns, mst.st_size)


def _missing(path: Path) -> CorruptArtefact:
    return CorruptArtefact(f"{path.parent}: {path.name} is listed in its manifest but missing from disk: restore it "
                           f"(git checkout -- {path.name} in its folder) or rerun the point")


def verify_artefact(path: Path) -> Path:
    """Check a raw file against its point's manifest: its size always, its sha256 once per file version.
    Files of points whose manifest predates the record (no `artefacts`) pass unchecked."""
    path = Path(path)
    manifest = path.parent / MANIFEST
    try:
        mst = manifest.stat()
    except OSError:
        return path
    expected = _recorded_artefacts(str(manifest), mst.st_mtime_ns, mst.st_size).get(path.name)
    if expected is None:
        return path
    try:
        st = path.stat()
    except FileNotFoundError:
        raise _missing(path) from None
    if not expected:
        return path
    if st.st_size != expected.get("bytes", st.st_size):
        raise CorruptArtefact(f"{path}: {st.st_size} bytes, but its manifest recorded {expected['bytes']}: the "
                              f"file is truncated or was changed; restore it (git checkout -- {path.name} in its "
                              f"folder) or rerun the point")
    if expected.get("sha256") and file_digest(path, st) != expected["sha256"]:
        raise CorruptArtefact(f"{path}: its sha256 differs from the one its manifest recorded: the file was changed "
                              f"or corrupted; restore it (git checkout) or rerun the point")
    return path


def open_artefact(point: Path, name: str) -> Path:
    """The path of a raw file, plain or gzipped, checked against its manifest (verify_artefact)."""
    p = Path(point) / name
    if p.exists():
        return verify_artefact(p)
    gz = p.with_name(p.name + ".gz")
    if gz.exists():
        return verify_artefact(gz)
    listed = _listed(point)
    for candidate in (p, gz):
        if candidate.name in listed:
            raise _missing(candidate)  # never a missing value: the point recorded this file
    raise FileNotFoundError(p)


# ---------------------------------------------------------------------------------------------
# Migration: a format-1 manifest (no `format` key) brought to the current format once, so that every point's
# files are checked on read against the size and sha256 its manifest records (artefact_records' scheme)
# ---------------------------------------------------------------------------------------------

def format_1_points(data_dir: Path | None = None) -> list[Path]:
    """The point folders under the data dir's runs whose manifest is of format 1, complete or not, sorted."""
    return [point for _part, _rig, point, m in iter_points(data_dir, complete_only=False)
            if m is not None and "format" not in m]


def migration_problems(point: Path) -> list[str]:
    """Why point folder `point`'s format-1 manifest cannot be migrated as it is (empty: it can). Recorded hashes
    are never replaced: a file whose size or sha256 differs from its manifest's is a problem, not a new hash. A
    file without a recorded hash gets one only where it is intact: the folder holds exactly the files its
    manifest lists, a .gz decompresses to its end, a JSON file parses, and, where git's HEAD holds the folder,
    the file is the committed one (so a hash is that of the committed bytes)."""
    point = Path(point)
    m = read_manifest(point) or {}
    recorded = m.get("artefacts") or {}
    listed = set(recorded) or set(m.get("files") or [])
    on_disk = {f.name for f in point.iterdir() if f.is_file()} - {MANIFEST}
    out = []
    if listed != on_disk:
        out.append(f"the folder holds {', '.join(sorted(on_disk)) or 'no file'} but its manifest lists "
                   f"{', '.join(sorted(listed)) or 'none'}")
    to_hash = []
    for name in sorted(listed & on_disk):
        f, want = point / name, recorded.get(name) or {}
        if want.get("bytes") is not None and f.stat().st_size != want["bytes"]:
            out.append(f"{name} has {f.stat().st_size} bytes, its manifest recorded {want['bytes']}")
        elif want.get("sha256") and sha256_file(f) != want["sha256"]:
            out.append(f"{name}'s sha256 differs from the one its manifest recorded")
        elif not want.get("sha256"):
            to_hash.append(name)
            try:
                raw = gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()
                if name.endswith((".json", ".json.gz")):
                    json.loads(raw)
            except (OSError, EOFError, ValueError, zlib.error) as e:
                out.append(f"{name} does not read ({e})")
    out += [f"{name} is not the file git's HEAD holds" for name in _differ_from_head(point, to_hash)]
    return out


def _differ_from_head(point: Path, names: list[str]) -> list[str]:
    """Of the files `names` of `point`, those that differ from git's HEAD where HEAD holds the folder (none
    where it does not, or where git is absent)."""
    if not names:
        return []
    try:
        tree = subprocess.run(["git", "ls-tree", "HEAD", "--", "."], cwd=point, capture_output=True, text=True)
        if tree.returncode != 0 or not tree.stdout.strip():
            return []
        committed = {line.split("\t", 1)[1]: line.split()[2] for line in tree.stdout.splitlines() if "\t" in line}
        hashed = subprocess.run(["git", "hash-object", "--", *names], cwd=point, capture_output=True, text=True,
                                check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return []
    return [name for name, blob in zip(names, hashed) if committed.get(name) != blob]


def migrate_record(point: Path) -> list[str]:
    """Bring point folder `point`'s format-1 manifest to the current format, once: its artefacts' sizes and
    hashes (artefact_records; the recorded ones checked, never replaced) and `format`, every other key as
    written. Returns the problems that leave it at format 1 (migration_problems: nothing is written); [] when it
    was migrated or is of a later format already."""
    point = Path(point)
    m = read_manifest(point)
    if m is None or "format" in m:
        return []
    problems = migration_problems(point)
    if problems:
        return problems
    new = {**m, "artefacts": artefact_records(point), "format": FORMAT_VERSION}
    PointRecord.from_dict(new, point / MANIFEST)
    write_json_atomic(point / MANIFEST, new)
    return []


def read_text(path: Path) -> str:
    path = Path(path)
    # newline="": keep progress bars' carriage returns, so line numbers match `grep -n` (see logs.read_log)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", errors="replace", newline="") as f:
            return f.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise LogParseError(path, None, f"truncated or corrupt gzip file ({e})") from None


def read_xz_text(path: Path) -> str:
    """The text of an xz artefact (the poller's, the GPU sampler's): compress_large may have gzipped it on top;
    text without the xz header is read as it is. A truncated or corrupt file names itself."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        if raw[:6] == b"\xfd7zXZ\x00":
            raw = lzma.decompress(raw)
    except (EOFError, OSError, lzma.LZMAError) as e:
        raise LogParseError(path, None, f"truncated or corrupt compressed file ({e})") from None
    return raw.decode(errors="replace")


def read_artefact(point: Path, name: str) -> str:
    return read_text(open_artefact(point, name))


def read_trace(path: Path) -> dict:
    """A profiler trace (Chrome trace JSON, gzipped where it ends in .gz) as the dict it holds."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def request_throughput(point: Path, label: str = "bench") -> float:
    """Completed requests per second of a pass's saved result (raises if absent or unreadable)."""
    return float(json.loads(read_artefact(point, f"{label}.json"))["request_throughput"])


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


# ---------------------------------------------------------------------------------------------
# Loading raw artefacts into tidy frames (the book's side of the boundary)
# ---------------------------------------------------------------------------------------------

def log_epoch(stamp: str, near_epoch: float, utc_offset_s: float = 0.0) -> float:
    """Epoch seconds of a vLLM log stamp 'MM-DD HH:MM:SS' (no year): the year is the one that puts it
    closest to `near_epoch` (the manifest's own clock), in the rig's local time."""
    import datetime as dt

    month_day, clock = stamp.split(" ")[:2]
    month, day = (int(x) for x in month_day.split("-"))
    h, m, s = (int(float(x)) for x in clock.split(":"))
    near = dt.datetime.fromtimestamp(near_epoch, dt.timezone.utc)
    best = None
    for year in (near.year - 1, near.year, near.year + 1):
        try:
            t = dt.datetime(year, month, day, h, m, s, tzinfo=dt.timezone.utc).timestamp() - utc_offset_s
        except ValueError:
            continue
        if best is None or abs(t - near_epoch) < abs(best - near_epoch):
            best = t
    return best


# ---------------------------------------------------------------------------------------------
# The derived-table cache: what a parser makes of one raw file, kept outside git (_build/cache/derived)
# ---------------------------------------------------------------------------------------------
# Every book build runs every notebook, and each used to re-parse every raw log and bench result. A
# parse result is stored once, under a key made of the file's sha256 (the hash the manifest records,
# checked by verify_artefact), the file's real path (symlinks resolved), the kind of result, and the parser's
# version: the source of logs.py and store.py plus the pandas, numpy and Python versions that pickled it. Any
# change to a raw file or to the parsers therefore misses the cache and parses again; nothing is ever invalidated
# by hand.
# Format: pickle (protocol 5) of the parser's own objects (dataclasses holding pandas frames). Measured on
# the committed data (2-core machine): pyarrow 26 would add 166 MB to the venv and 0.14 s of import per
# notebook, and parquet cannot hold the objects without a second schema (BenchResult keeps the JSON it
# came from); pickle loads all of part 1's bench results in 0.34 s against 3.1 s to parse them.
# The cache is this machine's own build output (like _build/html): an entry that fails to load is
# parsed again. IW_CACHE_DIR moves it; IW_CACHE_DIR=off turns it off.

DERIVED_CACHE = REPO / "_build" / "cache" / "derived"
CACHE_FORMAT = 1  # bump to drop every entry (e.g. a change to what an entry holds)


def cache_dir() -> Path | None:
    """Where derived tables are cached; None when IW_CACHE_DIR=off."""
    where = os.environ.get("IW_CACHE_DIR", "")
    if where.lower() == "off":
        return None
    return Path(where) if where else DERIVED_CACHE


@functools.lru_cache(maxsize=1)
def parser_version() -> str:
    """A digest of everything that shapes a derived table: the parsers' source and the pickling stack."""
    import numpy
    import pandas

    from . import logs

    h = hashlib.sha256(f"{CACHE_FORMAT} {platform.python_version()} {pandas.__version__} {numpy.__version__}".encode())
    for module in (logs.__file__, __file__):
        h.update(Path(module).read_bytes())
    return h.hexdigest()[:16]


def cache_key(kind: str, path: Path) -> str:
    """The key of `kind` derived from raw file `path` (which must exist): its content hash, real path (symlinks
    resolved: a data dir whose runs/ links to the committed one, as the tests and `--data-dir` copies make, reads
    the same entries) and parser."""
    real = Path(path).resolve()
    return hashlib.sha256(f"{kind}\0{parser_version()}\0{real}\0{file_digest(real)}".encode()).hexdigest()[:32]


_memo: dict[str, object] = {}


def derived(kind: str, path: Path, build):
    """build(), the result of parsing raw file `path` into a `kind` of table, from the cache when this file
    version was parsed before by this parser version. Each result is loaded once per process and shared:
    treat it as read-only. A build that raises is not cached."""
    key = cache_key(kind, path)
    if key in _memo:
        return _memo[key]
    where = cache_dir()
    entry = where / kind / f"{key}.pkl" if where else None
    value = _MISSING = object()
    if entry is not None:
        try:
            with open(entry, "rb") as f:
                value = pickle.load(f)
        except FileNotFoundError:
            pass
        except Exception:  # a partial or foreign entry: parse again and overwrite it
            value = _MISSING
    if value is _MISSING:
        value = build()
        if entry is not None:
            _write_entry(entry, value)
    _memo[key] = value
    return value


def _write_entry(entry: Path, value) -> None:
    """Atomically (temp file + rename: notebooks building in parallel may write the same entry); a cache
    that cannot be written (read-only checkout) is skipped."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=entry.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, protocol=5)
        os.replace(tmp, entry)
    except Exception:
        Path(tmp).unlink(missing_ok=True)


def clear_memo() -> None:
    """Forget what this process loaded (tests; a long-lived kernel after new runs land)."""
    _memo.clear()


def _parse_bench_file(path: Path):
    from .logs import bench_from_dict

    try:
        raw = json.loads(read_text(path))
    except ValueError as e:
        raise LogParseError(path, getattr(e, "lineno", None), f"not valid JSON: {e}")
    return bench_from_dict(raw, path)


def bench_result(path: Path):
    """A bench result file (checked against its manifest), parsed once per file version and parser version
    (large ones are megabytes of per-request arrays). Treat what it returns as read-only."""
    path = verify_artefact(Path(path))
    return derived("bench", path, lambda: _parse_bench_file(path))


def _stats_and_first_ts(text: str, path: Path):
    from .logs import parse_startup, parse_stats

    frame = parse_stats(text, path)
    return frame, (parse_startup(text).first_ts if len(frame) else None)


def log_stats(path: Path):
    """(stats frame, first timestamp) of a server log (checked against its manifest): logs.parse_stats's
    frame without the `epoch` column (which needs the manifest) and the log's first timestamp."""
    path = verify_artefact(Path(path))
    return derived("stats", path, lambda: _stats_and_first_ts(read_text(path), path))


def log_startup(path: Path):
    """logs.parse_startup of a server log (checked against its manifest), cached like every derived table."""
    from .logs import parse_startup

    path = verify_artefact(Path(path))
    return derived("startup", path, lambda: parse_startup(read_text(path), path))


def log_metrics(path: Path) -> dict:
    """logs.parse_metrics of a /metrics snapshot (checked against its manifest), cached."""
    from .logs import parse_metrics

    path = verify_artefact(Path(path))
    return derived("metrics", path, lambda: parse_metrics(read_text(path), path))


class PointData:
    """One complete point: its manifest (`manifest`, the dict as written; `record`, the same as a typed,
    versioned record.PointRecord, loaded once) and lazy access to its raw files."""

    def __init__(self, part: str, rig: str, path: Path, manifest: dict):
        self.part, self.rig, self.path, self.manifest = part, rig, Path(path), manifest
        self.name = self.path.name

    @functools.cached_property
    def record(self):
        from .record import PointRecord

        return PointRecord.from_dict(self.manifest, self.path / MANIFEST)

    @property
    def params(self) -> dict:
        return self.record.params

    def passes(self, kind: str | None = None) -> list[dict]:
        return [p for p in self.manifest.get("passes", []) if kind is None or p["kind"] == kind]

    def bench(self, label: str = "bench"):
        return bench_result(open_artefact(self.path, f"{label}.json"))

    def server_log(self) -> str:
        return read_artefact(self.path, "server.log")

    def startup(self):
        """The startup report, if this point's log slice holds the server's start."""
        if not (self.record.session and self.record.session.has_startup):
            return None
        return log_startup(open_artefact(self.path, "server.log"))

    def stats(self):
        """Periodic stats lines of this point's log slice, with an `epoch` column (a fresh frame each call)."""
        frame, first = log_stats(open_artefact(self.path, "server.log"))
        frame = frame.copy()
        if len(frame):
            offset = float(self.record.rig_info.get("utc_offset_s", 0.0))
            frame["epoch"] = log_epoch(first, self.record.written, offset) + frame["t_s"]
        else:
            frame["epoch"] = []
        return frame

    def stats_during(self, label: str = "bench"):
        rec = self.record.pass_(label)
        frame = self.stats()
        if rec is None or not len(frame):
            return frame.iloc[0:0]
        return frame[(frame["epoch"] >= rec.started - 1) & (frame["epoch"] <= rec.ended + 1)]

    def metrics(self, which: str) -> dict:
        try:
            return dict(log_metrics(open_artefact(self.path, f"metrics-{which}.prom")))
        except FileNotFoundError:
            return {}


def load_points(part: int | str, data_dir: Path | None = None, rigs: list[str] | None = None) -> list[PointData]:
    return [PointData(p, r, d, m) for p, r, d, m in iter_points(data_dir, part)
            if rigs is None or r in rigs]


def pass_summary(point: PointData, label: str = "bench") -> dict:
    """The measured pass of a point as one tidy row (units in column names)."""
    import math

    b = point.bench(label)
    stats = point.stats_during(label)
    delta_tokens = delta_steps = math.nan
    before, after = point.metrics("before"), point.metrics("after")
    if before and after:
        # mean tokens per engine step over the pass (prefill + decode): the running batch, on average
        key = "vllm:iteration_tokens_total"
        delta_tokens = after.get(f"{key}_sum", math.nan) - before.get(f"{key}_sum", math.nan)
        delta_steps = after.get(f"{key}_count", math.nan) - before.get(f"{key}_count", math.nan)
    return {
        "rig": point.rig,
        "point": point.name,
        "max_num_seqs": point.record.max_num_seqs,
        "num_prompts": b.num_prompts if b.num_prompts is not None else b.completed,
        "completed": b.completed,
        "duration_s": b.duration_s,
        "completed_rps": b.request_throughput,
        "output_tok_s": b.output_throughput,
        "ttft_p50_ms": b.ms("ttft", "p50"),
        "ttft_p99_ms": b.ms("ttft", "p99"),
        "tpot_p50_ms": b.ms("tpot", "p50"),
        "itl_p50_ms": b.ms("itl", "p50"),
        "itl_p99_ms": b.ms("itl", "p99"),
        "e2el_p50_ms": b.ms("e2el", "p50"),
        "e2el_p99_ms": b.ms("e2el", "p99"),
        "running_max": float(stats["running"].max()) if len(stats) else math.nan,
        "running_mean": float(stats["running"].mean()) if len(stats) else math.nan,
        "waiting_max": float(stats["waiting"].max()) if len(stats) else math.nan,
        "kv_usage_max_pct": float(stats["kv_usage_pct"].max()) if len(stats) else math.nan,
        "stats_lines": int(len(stats)),
        "tokens_per_step": delta_tokens / delta_steps if delta_steps and delta_steps > 0 else math.nan,
        "preemptions": (after.get("vllm:num_preemptions_total", math.nan) - before.get("vllm:num_preemptions_total", math.nan))
        if before and after else math.nan,
    }


def server_starts(data_dir: Path | None = None):
    """One row per recorded server start: how long to healthy, and the parts of it vLLM's log times."""
    import pandas as pd

    rows = []
    for part in sorted(PARTS.values()):
        for pt in load_points(part, data_dir):
            rep = pt.startup()
            if rep is None:
                continue
            s = pt.record.session
            rows.append({"rig": pt.rig, "part": part, "first_point": pt.name, "max_num_seqs": pt.record.max_num_seqs,
                         "start_to_healthy_s": s.start_to_healthy_s, "profile_warmup_s": rep.profile_warmup_s,
                         "torch_compile_s": rep.torch_compile_s, "graph_capture_s": rep.graph_capture_s,
                         "init_engine_s": rep.init_engine_s, "started": s.server_started})
    return pd.DataFrame(rows).sort_values(["rig", "started"]).drop(columns="started") if rows else pd.DataFrame()
