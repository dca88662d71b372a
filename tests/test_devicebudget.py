"""Machine time of the committed runs, from their manifests."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from inference_wall.records.devicebudget import device_lines, device_table

ROOT = Path(__file__).resolve().parents[1]


def test_every_gpu_run_has_a_row_with_positive_time():
    table = device_table()
    assert len(table) and (table["device_min"] > 0).all() and (table["sessions"] >= 1).all()
    assert len(device_lines()) == len(table)


def test_a_later_pass_lengthens_the_session(tmp_path):
    src = ROOT / "data" / "runs" / "03-batching-cliff" / "cpu-tiny"
    dest = tmp_path / "runs" / "03-batching-cliff" / "cpu-tiny"
    shutil.copytree(src, dest)
    for name in ("rigs", "models", "reference"):
        (tmp_path / name).symlink_to(ROOT / "data" / name)
    before = device_table(tmp_path)
    point = sorted(p for p in dest.iterdir() if p.is_dir())[0]
    m = json.loads((point / "manifest.json").read_text())
    m["passes"][-1]["ended"] += 600
    (point / "manifest.json").write_text(json.dumps(m))
    after = device_table(tmp_path)
    assert after["device_min"].sum() - before["device_min"].sum() == __import__("pytest").approx(10, abs=0.01)


def test_one_part_s_rows_are_the_whole_table_s_rows_of_that_part():
    whole = device_table()
    for part in sorted(set(whole["part"])):
        own = device_table(None, part)
        assert set(own["part"]) == {part}
        expect = whole[whole["part"] == part].reset_index(drop=True)
        __import__("pandas").testing.assert_frame_equal(own.reset_index(drop=True), expect)
