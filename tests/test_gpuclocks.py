"""GPU clock samples (gpuclocks): the parser and summary on captured nvidia-smi text, the sampler's lifecycle
against a fake `nvidia-smi` first on PATH, and the artefact a sweep point gets."""
from __future__ import annotations

import datetime as dt
import gzip
import lzma
import math
import os
import stat
import time
from pathlib import Path

import pytest

from inference_wall.records import gpuclocks
from inference_wall.records.gpuclocks import (FALLBACK_FIELDS, FIELDS, artefact_name, parse_samples, read_sample_file,
                                      sampling, summarize)

# What the sampler's query prints (nounits), and the header line it writes above it
NOUNITS = """\
2026/12/01 04:12:00.623, 0, 1980, 3201, 402.10, 52, 100, 0x0000000000000000
2026/12/01 04:12:01.123, 0, 1770, 3201, 690.91, 58, 100, 0x0000000000000004
2026/12/01 04:12:01.623, 0, 1755, 3201, 699.80, 59, 100, 0x0000000000000004
2026/12/01 04:12:02.123, 0, 1650, 3201, 700.02, 61, 97, 0x0000000000000048
2026/12/01 04:12:02.623, 0, 345, 3201, 80.20, 50, 0, 0x0000000000000001
2026/12/01 04:12:03.1"""  # a line cut short by the stop
# nvidia-smi's own `--format=csv` (gpu/h200-run.sh): its header with units, values with units
UNITS = """\
timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], temperature.gpu, utilization.gpu [%], memory.used [MiB], clocks_event_reasons.active
2026/12/01 04:18:25.675, 345 MHz, 3201 MHz, 80.20 W, 38, 0 %, 0 MiB, 0x0000000000000001
2026/12/01 04:18:26.681, 1980 MHz, 3201 MHz, [N/A], 44, 100 %, 130000 MiB, 0x0000000000000000
2026/12/01 04:18:27.682, 1770 MHz, 3201 MHz, 690.91 W, 58, 100 %, 130000 MiB, 0x0000000000000004
"""


def _header(fields=FIELDS) -> str:
    return ", ".join(fields) + "\n"


def test_parse_maps_local_stamps_to_epoch_and_reads_numbers_and_reason_bits():
    f = parse_samples(_header() + NOUNITS, utc_offset_s=3600)  # the rig ran at UTC+1
    assert len(f) == 5  # the cut last line is skipped
    assert list(f.columns) == gpuclocks.FRAME_COLUMNS
    first = dt.datetime(2026, 12, 1, 3, 12, 0, 623000, tzinfo=dt.timezone.utc).timestamp()
    assert f["epoch"].iloc[0] == pytest.approx(first)
    assert f["t_s"].tolist() == pytest.approx([0, 0.5, 1.0, 1.5, 2.0])
    row = f.iloc[1]
    assert (row["gpu"], row["sm_mhz"], row["mem_mhz"], row["power_w"], row["temp_c"], row["util_pct"]) == \
        (0, 1770, 3201, 690.91, 58, 100)
    assert f["reasons"].tolist() == [0, 4, 4, 0x48, 1]
    # no header (the bare nvidia-smi lines): FIELDS assumed
    assert parse_samples(NOUNITS).equals(parse_samples(_header() + NOUNITS))


def test_parse_reads_nvidia_smi_csv_with_units():
    f = parse_samples(UNITS)
    assert f["sm_mhz"].tolist() == [345, 1980, 1770]
    assert f["util_pct"].tolist() == [0, 100, 100]
    assert math.isnan(f["power_w"].iloc[1])  # [N/A]
    assert f["gpu"].isna().all() and f["reasons"].tolist() == [1, 0, 4]


def test_summary_over_busy_samples():
    s = summarize(parse_samples(_header() + NOUNITS))
    assert s["samples"] == 5 and s["busy_samples"] == 4 and s["gpus"] == 1
    assert s["sm_mhz_median"] == pytest.approx((1770 + 1755) / 2) and s["sm_mhz_min"] == 1650  # idle 345 left out
    assert s["power_w_max"] == pytest.approx(700.02)
    assert s["sw_power_cap_share"] == pytest.approx(2 / 4)  # 0x4, 0x4 (0x48 is 0x40 + 0x8)
    assert s["hw_slowdown_share"] == pytest.approx(1 / 4)  # 0x48: HW slowdown + HW thermal
    assert summarize(parse_samples("")) is None and summarize(None) is None


def test_summary_without_reasons_column():
    lines = "\n".join(line.rsplit(",", 1)[0] for line in NOUNITS.splitlines()[:4])
    s = summarize(parse_samples(_header(FALLBACK_FIELDS) + lines))
    assert s["sm_mhz_min"] == 1650 and math.isnan(s["sw_power_cap_share"]) and math.isnan(s["hw_slowdown_share"])


def test_read_sample_file_xz_and_gzipped_xz(tmp_path):
    path = tmp_path / artefact_name("bench")
    assert path.name == "bench-gpu-samples.csv.xz"
    path.write_bytes(lzma.compress((_header() + NOUNITS).encode()))
    assert len(read_sample_file(path)) == 5
    big = tmp_path / (path.name + ".gz")  # what store.compress_large makes of a large one
    big.write_bytes(gzip.compress(path.read_bytes()))
    assert len(read_sample_file(big)) == 5


# ---------------------------------------------------------------------------------------------
# The sampler, against a fake nvidia-smi
# ---------------------------------------------------------------------------------------------

FAKE_SMI = """#!/bin/bash
# a fake nvidia-smi: records its arguments and pid, then prints a sample every 0.1 s until killed
echo "$@" >> "{log}"
echo $$ > "{pidfile}"
{prelude}
case "$*" in
  *clocks_event_reasons.active*) line="0, 1770, 3201, 690.91, 58, 100, 0x0000000000000004" ;;
  *) line="0, 1770, 3201, 690.91, 58, 100" ;;
esac
while true; do
  printf '%s, %s\\n' "$(date '+%Y/%m/%d %H:%M:%S.%3N')" "$line"
  sleep 0.1
done
"""
REJECT = """case "$*" in *clocks_event_reasons.active*)
  echo 'Field "clocks_event_reasons.active" is not a valid field to query.'; exit 2 ;; esac"""


def _install(tmp_path: Path, monkeypatch, prelude: str = "") -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text(FAKE_SMI.format(log=tmp_path / "calls.log", pidfile=tmp_path / "smi.pid", prelude=prelude))
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_sampler_writes_the_artefact_and_leaves_no_process(tmp_path, monkeypatch):
    _install(tmp_path, monkeypatch)
    out = tmp_path / "point" / artefact_name("bench")
    with sampling(out) as s:
        proc = s.proc
        deadline = time.monotonic() + 30  # a loaded machine may take a while to start the fake at all
        while not (tmp_path / "smi.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        assert proc.poll() is None and not out.exists()
    assert proc.poll() is not None and _gone(int((tmp_path / "smi.pid").read_text()))
    text = lzma.decompress(out.read_bytes()).decode()
    assert text.splitlines()[0] == ", ".join(FIELDS)
    f = read_sample_file(out)
    # the fake prints its first sample as it starts: how many more came depends on the machine's load, not the code
    assert len(f) >= 1 and s.samples == len(f) and (f["reasons"] == 4).all()
    call = (tmp_path / "calls.log").read_text().splitlines()
    assert call == [f"--query-gpu={','.join(FIELDS)} --format=csv,noheader,nounits -lms 500"]


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_sampler_stops_when_the_body_raises(tmp_path, monkeypatch, exc):
    _install(tmp_path, monkeypatch)
    out = tmp_path / artefact_name("bench")
    with pytest.raises(exc):
        with sampling(out) as s:
            proc = s.proc
            time.sleep(0.3)
            raise exc("the pass failed")
    assert proc.poll() is not None and _gone(proc.pid)
    assert len(read_sample_file(out)) >= 1  # what was sampled until then is kept


def test_sampler_falls_back_when_the_reasons_field_is_rejected(tmp_path, monkeypatch):
    _install(tmp_path, monkeypatch, prelude=REJECT)
    out = tmp_path / artefact_name("bench")
    with sampling(out) as s:
        time.sleep(0.3)
    assert s.fields == FALLBACK_FIELDS and s.proc is None
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert len(calls) == 2 and "clocks_event_reasons" in calls[0] and "clocks_event_reasons" not in calls[1]
    f = read_sample_file(out)
    assert len(f) >= 1 and f["reasons"].isna().all() and (f["sm_mhz"] == 1770).all()
    assert "not a valid field" not in lzma.decompress(out.read_bytes()).decode()


def test_sampler_kills_an_nvidia_smi_that_ignores_terminate(tmp_path, monkeypatch):
    _install(tmp_path, monkeypatch, prelude="trap '' TERM")
    monkeypatch.setattr(gpuclocks, "STOP_WAIT_S", 0.3)
    out = tmp_path / artefact_name("bench")
    with sampling(out) as s:
        proc = s.proc
    assert proc.returncode == -9 and out.exists()


def test_no_nvidia_smi_no_artefact(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    out = tmp_path / artefact_name("bench")
    with sampling(out) as s:
        assert s is None
    with sampling(out, enabled=False) as s:
        assert s is None
    assert not out.exists()


def test_an_nvidia_smi_that_prints_nothing_leaves_no_artefact(tmp_path, monkeypatch):
    _install(tmp_path, monkeypatch, prelude="echo 'NVIDIA-SMI has failed'; exit 9")
    out = tmp_path / artefact_name("bench")
    with pytest.warns(RuntimeWarning, match="no GPU samples"):
        with sampling(out):
            pass
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# A sweep point gets the artefact, registered in its manifest and read back checked
# ---------------------------------------------------------------------------------------------

def test_a_sweep_point_records_gpu_samples(tmp_path, monkeypatch):
    import fake_vllm
    from test_sweep import _context, _plans

    from inference_wall.run import server
    from inference_wall.records import store
    from inference_wall.run.rig import RigProfile
    from inference_wall.run.sweep import run_sweep

    monkeypatch.setenv("PYTHONPATH", fake_vllm.install(tmp_path / "fakevllm"))
    monkeypatch.setenv("INFERENCE_WALL_BENCH_FORK", "0")
    monkeypatch.setattr(server, "REGISTRY", tmp_path / "registry")
    _install(tmp_path, monkeypatch)
    # the fake stamps local time, like nvidia-smi; rig.capture records this offset
    offset = -(time.altzone if time.daylight and time.localtime().tm_isdst else time.timezone)
    ctx = _context(tmp_path, RigProfile(name="fake", model_preset="tiny-dense"), rig_info={"utc_offset_s": offset})
    assert run_sweep(_plans(1), ctx).done == ["p0"]
    pdir = ctx.rig_dir / "p0"
    name = artefact_name("bench")
    m = store.read_manifest(pdir)
    assert name in m["files"] and m["artefacts"][name]["sha256"] == store.sha256_file(pdir / name)
    assert not (pdir / artefact_name("warmup")).exists()  # the warm-up flood is not sampled
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert len(calls) == 1  # one pass sampled, and its nvidia-smi is gone
    assert _gone(int((tmp_path / "smi.pid").read_text()))
    pt = store.PointData("03-batching-cliff", "fake", pdir, m)
    samples = gpuclocks.point_samples(pt)
    assert len(samples) >= 1 and set(samples["label"]) == {"bench"}
    rec = pt.record.pass_("bench")
    assert samples["epoch"].between(rec.started - 2, rec.ended + 2).all()
    summary = gpuclocks.point_summary(pt)
    assert summary["point"] == "p0" and summary["sm_mhz_min"] == 1770 and summary["sw_power_cap_share"] == 1.0
    (pdir / name).write_bytes(lzma.compress(b"tampered"))
    with pytest.raises(store.CorruptArtefact):
        gpuclocks.point_samples(pt)


def test_the_clock_table_groups_each_kind_of_point_from_its_own_samples():
    """Part 1's clock table: one row per rig and kind of point, each the points' own GPU samples (gpuclocks) folded
    together: the lowest clock the lowest of theirs, the share at the power cap the mean of theirs."""
    from inference_wall.parts import p01
    from inference_wall.records.gpuclocks import point_summary
    from inference_wall.records.store import load_points

    table = p01.clock_table()
    assert len(table) and set(table["points"]) <= set(p01.CLOCK_KINDS.values())
    assert not table.duplicated(["rig", "points"]).any() and (table["sampled"] >= 1).all()
    for row in table.itertuples():
        kinds = {k for k, v in p01.CLOCK_KINDS.items() if v == row.points}
        own = [s for s in (point_summary(pt) for pt in load_points(p01.NAME, None, [row.rig])
                           if pt.params.get("kind") in kinds) if s]
        assert len(own) == row.sampled
        assert row.sm_mhz_min == min(s["sm_mhz_min"] for s in own)
        assert row.sw_power_cap_pct == pytest.approx(100 * sum(s["sw_power_cap_share"] for s in own) / len(own))
    assert p01.clock_table(None, ["a10g-published"]).empty  # the published rig kept no samples
