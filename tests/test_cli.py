"""The CLI and `make reproduce` validate before anything slow starts, and pass the sweep's outcome on."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inference_wall import cli, store

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def run_cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "inference_wall", *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout, cwd=ROOT)


def _one_error_line(res) -> str:
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["reproduce", "sweep", "check-args"])
def test_the_published_rig_name_is_refused(command, tmp_path):
    extra = [] if command == "check-args" else ["--data-dir", str(tmp_path)]
    line = _one_error_line(run_cli(command, "--part", "3", "--rig", "a10g-published", *extra))
    assert "reserved" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", ["reproduce", "sweep"])
def test_a_budget_below_one_point_says_so_and_exits_non_zero(command, tmp_path):
    line = _one_error_line(run_cli(command, "--part", "3", "--rig", "my-rig", "--budget-min", "2",
                                   "--data-dir", str(tmp_path)))
    assert "--budget-min 2 is below what one point needs" in line


def test_an_invalid_rig_profile_fails_before_anything_starts(tmp_path):
    (tmp_path / "rigs").mkdir()
    (tmp_path / "rigs" / "my-rig.json").write_text('{"serve_args": "--enforce-eager"}')
    line = _one_error_line(run_cli("sweep", "--part", "3", "--rig", "my-rig", "--data-dir", str(tmp_path)))
    assert "my-rig.json" in line and "serve_args" in line and "not of type 'array'" in line


def test_a_rig_folder_that_cannot_be_written_fails_before_a_server_starts(tmp_path):
    (tmp_path / "runs").write_text("a file where the runs folder should be")
    line = _one_error_line(run_cli("reproduce", "--part", "3", "--rig", "my-rig", "--data-dir", str(tmp_path)))
    assert "cannot be written" in line and "my-rig" in line


def test_make_passes_part_and_rig_without_evaluating_them(tmp_path):
    marker = tmp_path / "evaluated"
    res = subprocess.run(["make", "-s", "reproduce", f'PART=1"; touch {marker}; echo "',
                          f"RIG=x$(shell touch {marker})", f"PYTHON={sys.executable}"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode != 0
    assert not marker.exists()
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"touch {marker}" in errors[0], res.stderr  # the value, verbatim


def test_reproduce_exits_3_when_points_are_left_for_a_later_run(tmp_path, monkeypatch):
    args = argparse.Namespace(part="3", rig="my-rig", data_dir=tmp_path, set=['caps=[1,4]'], points=None)
    assert cli._left_over(args) == 3
    for name in ("mns-001", "mns-004"):
        store.write_json_atomic(store.point_dir(3, "my-rig", name, tmp_path) / "manifest.json", {"status": "complete"})
    assert cli._left_over(args) == 0
    args.points = ["mns-001"]
    (store.point_dir(3, "my-rig", "mns-004", tmp_path) / "manifest.json").unlink()
    assert cli._left_over(args) == 0  # only the points asked for count
