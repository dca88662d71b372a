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
