"""GPU clocks over time: `nvidia-smi -lms` samples clocks, power, temperature and throttle reasons during a pass.

Why: on an H200 one server session ran 13% slower than others with the same command, environment and GPU,
and in another session the SM clock fell from 1980 to 1770 MHz during floods with clocks_event_reasons 0x4
(SW power cap). The manifest records the rig's maximum clocks once; what the GPU actually ran at is only
known if it is sampled while the pass runs. So every pass the sweep measures (kind `measured` or `cold`;
not the warm-up flood, like the /metrics poller) gets a background `nvidia-smi` that prints one line per
GPU every 0.5 s, stopped when the pass ends (also when it raises or is interrupted).

The artefact is `<label>-gpu-samples.csv.xz` beside the pass's `<label>.json`: a header line naming the
queried fields (written here; nvidia-smi's own header adds units), then nvidia-smi's lines as they came
(`--format=csv,noheader,nounits`). `index` is queried besides the clocks so that a host with several GPUs
keeps them apart. Drivers that do not know `clocks_event_reasons.active` (older ones called it
clocks_throttle_reasons) reject the whole query at once: the sampler then runs the same query without it.
No `nvidia-smi` on PATH (a CPU rig), or one that prints no sample at all: no artefact, no error.
Being a file of the point folder, the artefact is listed, sized and hashed in the manifest like any other
and checked on read (store.open_artefact); store.compress_large gzips it on top if it ever passes 256 KB.

nvidia-smi stamps samples in the host's local time ('YYYY/MM/DD HH:MM:SS.mmm'); the manifest's
rig_info.utc_offset_s maps them to epoch seconds (as for vLLM's log stamps, store.log_epoch).
"""
from __future__ import annotations

import datetime as dt
import lzma
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

SUFFIX = "-gpu-samples.csv.xz"
INTERVAL_MS = 500
REASONS_FIELD = "clocks_event_reasons.active"
FIELDS = ["timestamp", "index", "clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "utilization.gpu",
          REASONS_FIELD]
FALLBACK_FIELDS = [f for f in FIELDS if f != REASONS_FIELD]
START_WAIT_S = 2.0  # how long start() waits for the first sample (a rejected field exits well before)
STOP_WAIT_S = 5.0

# clocks_event_reasons bits (nvml.h, nvmlClocksEventReason*)
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
BUSY_UTIL_PCT = 50.0  # clocks and reasons are summarised over samples at least this busy

# Column names of the frame, from nvidia-smi's field names (also the long names its own header uses)
COLUMNS = {"index": "gpu", "clocks.sm": "sm_mhz", "clocks.current.sm": "sm_mhz", "clocks.mem": "mem_mhz",
           "clocks.current.memory": "mem_mhz", "power.draw": "power_w", "temperature.gpu": "temp_c",
           "utilization.gpu": "util_pct", "memory.used": "mem_used_mib", REASONS_FIELD: "reasons",
           "clocks_throttle_reasons.active": "reasons"}
FRAME_COLUMNS = ["epoch", "t_s", "gpu", "sm_mhz", "mem_mhz", "power_w", "temp_c", "util_pct", "reasons"]
_STAMP = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?$")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)")


def artefact_name(label: str) -> str:
    return f"{label}{SUFFIX}"


class GpuSampler:
    """`nvidia-smi --query-gpu=... -lms` writing to a temporary file from start() to stop(); stop() ends the
    process (terminate, then kill if it lingers) and writes the samples, xz-compressed, to `path`."""

    def __init__(self, path: Path, interval_ms: int = INTERVAL_MS, smi: str | None = None):
        self.path, self.interval_ms = Path(path), int(interval_ms)
        self.smi = smi or shutil.which("nvidia-smi")
        self.fields: list[str] | None = None  # the query that runs (FIELDS, or FALLBACK_FIELDS)
        self.samples = 0
        self.proc: subprocess.Popen | None = None
        self._tmp: Path | None = None

    def _launch(self, fields: list[str]) -> bool:
        """Runs the query; True once it printed a sample or is still running after START_WAIT_S."""
        with open(self._tmp, "wb") as out:  # truncates what a rejected query printed
            self.proc = subprocess.Popen([self.smi, f"--query-gpu={','.join(fields)}",
                                          "--format=csv,noheader,nounits", "-lms", str(self.interval_ms)],
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self.fields = fields
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            if _sample_lines(self._tmp.read_text(errors="replace")):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.02)
        return self.proc.poll() is None

    def start(self) -> "GpuSampler":
        if not self.smi:
            return self
        fd, tmp = tempfile.mkstemp(prefix="iw-gpu-samples-", suffix=".csv")
        os.close(fd)
        self._tmp = Path(tmp)
        try:
            if not self._launch(FIELDS):
                self._end_process()
                self._launch(FALLBACK_FIELDS)  # the driver rejected clocks_event_reasons.active
        except BaseException:
            self.stop()
            raise
        return self

    def _end_process(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            except BaseException:  # interrupted while waiting: never leave it behind
                proc.kill()
                raise

    def stop(self) -> None:
        """Ends nvidia-smi and writes the artefact (none when no sample came). Safe to call twice."""
        try:
            self._end_process()
        finally:
            tmp, self._tmp = self._tmp, None
            if tmp is not None:
                try:
                    lines = _sample_lines(tmp.read_text(errors="replace"))
                    self.samples = len(lines)
                    if lines:
                        self.path.parent.mkdir(parents=True, exist_ok=True)
                        with lzma.open(self.path, "wt", preset=6) as f:
                            f.write(", ".join(self.fields) + "\n" + "".join(line + "\n" for line in lines))
                    else:
                        warnings.warn(f"nvidia-smi gave no GPU samples for {self.path.name}", RuntimeWarning,
                                      stacklevel=2)
                finally:
                    tmp.unlink(missing_ok=True)


def _sample_lines(text: str) -> list[str]:
    """Complete lines that start with a timestamp (not an error message, not a line cut short by the stop)."""
    if not text.endswith("\n"):
        text = text[:text.rfind("\n") + 1]
    return [line for line in text.splitlines() if _STAMP.match(line.split(",", 1)[0].strip())]


@contextmanager
def sampling(path: Path, enabled: bool = True, interval_ms: int = INTERVAL_MS):
    """`with sampling(pdir / artefact_name("bench")):` around a pass; yields None (no sampler) when disabled or
    when nvidia-smi is not on PATH. nvidia-smi never outlives the block, whatever ends it."""
    if not enabled or not shutil.which("nvidia-smi"):
        yield None
        return
    sampler = GpuSampler(path, interval_ms).start()
    try:
        yield sampler
    finally:
        sampler.stop()


# ---------------------------------------------------------------------------------------------
# Book side: the samples as a frame, and one summary row per point
# ---------------------------------------------------------------------------------------------

def _number(value: str) -> float:
    """'1770', '1770 MHz', '690.91 W', '100 %' -> float; '[N/A]', '[Not Supported]', '' -> NaN."""
    m = _NUMBER.match(value.strip())
    return float(m.group(0)) if m else math.nan


def _reasons(value: str):
    value = value.strip()
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        return pd.NA


def _stamp_epoch(stamp: str, utc_offset_s: float) -> float:
    local = dt.datetime.strptime(stamp.strip(), "%Y/%m/%d %H:%M:%S.%f" if "." in stamp else "%Y/%m/%d %H:%M:%S")
    return local.replace(tzinfo=dt.timezone.utc).timestamp() - utc_offset_s


def parse_samples(text: str, utc_offset_s: float = 0.0) -> pd.DataFrame:
    """Samples as FRAME_COLUMNS: `epoch` seconds (the local stamp shifted by utc_offset_s), `t_s` since the first
    sample, then numbers (NaN where nvidia-smi printed N/A or the column was not queried) and `reasons` as a
    nullable integer bit mask. Reads this module's artefact (nounits, header line) and nvidia-smi's own
    `--format=csv` output (its header with units, values with units, e.g. gpu/evidence/*/gpu-samples-*.csv.xz);
    a header-less text is taken to hold FIELDS. Lines that are not samples (errors, a cut last line) are skipped."""
    lines = [line for line in text.splitlines() if line.strip()]
    names = FIELDS
    if lines and not _STAMP.match(lines[0].split(",", 1)[0].strip()):
        names = [re.sub(r"\s*\[.*?\]$", "", h.strip()) for h in lines[0].split(",")]
        lines = lines[1:]
    rows = []
    for line in lines:
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(names) or not _STAMP.match(values[0]):
            continue
        row = {"epoch": _stamp_epoch(values[0], utc_offset_s)}
        for name, value in zip(names[1:], values[1:]):
            col = COLUMNS.get(name)
            if col == "reasons":
                row[col] = _reasons(value)
            elif col:
                row[col] = _number(value)
        rows.append(row)
    frame = pd.DataFrame(rows, columns=[c for c in FRAME_COLUMNS if c != "t_s"])
    frame.insert(1, "t_s", frame["epoch"] - frame["epoch"].iloc[0] if len(frame) else [])
    out = frame[FRAME_COLUMNS[:-1]].astype(float)
    out["reasons"] = frame["reasons"].astype("Int64")
    return out


def read_sample_file(path: Path, utc_offset_s: float = 0.0) -> pd.DataFrame:
    """parse_samples of an artefact: .xz, or .xz.gz (store.compress_large gzips any file over its limit)."""
    from .store import read_xz_text

    return parse_samples(read_xz_text(path), utc_offset_s)


def point_samples(pt) -> pd.DataFrame:
    """A store.PointData's samples, every sampled pass (a `label` column), each file checked against the
    manifest; an empty frame when the point has none (CPU rigs, points from before the sampler)."""
    from .store import open_artefact

    offset = float(pt.record.rig_info.get("utc_offset_s", 0.0))
    frames = []
    for p in pt.record.passes:
        try:
            path = open_artefact(pt.path, artefact_name(p.label))
        except FileNotFoundError:
            continue
        frames.append(read_sample_file(path, offset).assign(label=p.label))
    if not frames:
        return pd.DataFrame(columns=[*FRAME_COLUMNS, "label"])
    return pd.concat(frames, ignore_index=True)


def summarize(samples: pd.DataFrame) -> dict | None:
    """One row of what the GPU ran at: SM clock median and minimum and the share of samples with each slowdown
    reason over the busy samples (utilization >= 50%: an idle GPU clocks down by design, and on a host with
    several GPUs the idle ones drop out); maximum power over all samples. None when there are no samples.
    A share is NaN when the reasons were not sampled (the fallback query); clocks NaN when no sample was busy."""
    if samples is None or not len(samples):
        return None
    busy = samples[samples["util_pct"] >= BUSY_UTIL_PCT]
    reasons = busy["reasons"].dropna().astype("int64")

    def share(mask: int) -> float:
        return float(((reasons & mask) != 0).mean()) if len(reasons) else math.nan

    return {
        "samples": int(len(samples)),
        "busy_samples": int(len(busy)),
        "gpus": int(samples["gpu"].nunique()) if samples["gpu"].notna().any() else 1,
        "sm_mhz_median": float(busy["sm_mhz"].median()) if len(busy) else math.nan,
        "sm_mhz_min": float(busy["sm_mhz"].min()) if len(busy) else math.nan,
        "power_w_max": float(samples["power_w"].max()),
        "temp_c_max": float(samples["temp_c"].max()),
        "sw_power_cap_share": share(SW_POWER_CAP),
        "hw_slowdown_share": share(HW_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN),
    }


def point_summary(pt) -> dict | None:
    """summarize() of a point's samples, with its rig and name; None when the point has no samples."""
    row = summarize(point_samples(pt))
    return {"rig": pt.rig, "point": pt.name, **row} if row else None


def points_table(points) -> pd.DataFrame:
    """point_summary of every point that kept samples, one row each (empty, with the columns, when none did)."""
    rows = [r for r in (point_summary(pt) for pt in points) if r]
    return pd.DataFrame(rows, columns=["rig", "point", "samples", "busy_samples", "gpus", "sm_mhz_median", "sm_mhz_min",
                                       "power_w_max", "temp_c_max", "sw_power_cap_share", "hw_slowdown_share"])


def fold(table: pd.DataFrame, by: list[str], sort: bool = True) -> pd.DataFrame:
    """points_table rows folded per group of `by`: how many points kept samples (sampled), the lowest and the median
    busy SM clock, the most power drawn, and the mean share of busy samples at the software power cap, in percent."""
    return table.groupby(by, sort=sort).agg(
        sampled=("point", "count"), sm_mhz_min=("sm_mhz_min", "min"), sm_mhz_median=("sm_mhz_median", "median"),
        power_w_max=("power_w_max", "max"), sw_power_cap_pct=("sw_power_cap_share", lambda x: 100 * x.mean())
    ).reset_index()
