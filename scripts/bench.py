"""`make bench`: print the figures the project's speed targets are checked by.

1. wall time of `make book` with the existing .venv (target: under 30 s on 2 cores);
2. wall time of a fresh-clone setup (`git clone` + `make setup`, with whatever package caches exist);
3. from the committed runs: per part and rig, server start-to-healthy times, the device time the
   sessions took (server start to the end of its last pass), and the bench client's overhead per pass
   (the pass's wall time less vLLM's own benchmark duration), read from the manifests and results.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from inference_wall.store import PointData, iter_points  # noqa: E402


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.monotonic()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        print(f"FAILED: {' '.join(cmd)}\n{res.stdout[-2000:]}{res.stderr[-2000:]}", file=sys.stderr)
        sys.exit(1)
    return time.monotonic() - t0


def book_build() -> float:
    return timed(["make", "-s", "book"], ROOT)


def fresh_clone_setup() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        t0 = time.monotonic()
        timed(["git", "clone", "-q", str(ROOT), str(clone)], Path(tmp))
        timed(["make", "-s", "setup"], clone)
        return time.monotonic() - t0


def device_time() -> list[str]:
    sessions: dict[tuple[str, str, str], dict] = defaultdict(lambda: {"start": None, "end": 0.0, "healthy_s": None})
    overhead: dict[tuple[str, str], list[float]] = defaultdict(list)
    for part, rig, point, m in iter_points(None):
        data = PointData(part, rig, point, m)
        for p in m.get("passes") or []:
            try:
                overhead[(part, rig)].append(p["ended"] - p["started"] - data.bench(p["label"]).duration_s)
            except (OSError, KeyError, TypeError, ValueError):
                pass
        s = m.get("session") or {}
        if not s.get("server_started") or not m.get("passes"):
            continue
        rec = sessions[(part, rig, s["id"])]
        rec["start"] = s["server_started"]
        rec["healthy_s"] = s.get("start_to_healthy_s")
        rec["end"] = max(rec["end"], max(p["ended"] for p in m["passes"]))
        rec["gpu"] = (m.get("rig_info") or {}).get("gpu", {}).get("name", "cpu")
    per = defaultdict(list)
    for (part, rig, _), rec in sessions.items():
        per[(part, rig)].append(rec)
    lines = []
    for (part, rig), recs in sorted(per.items()):
        minutes = sum(r["end"] - r["start"] for r in recs) / 60
        starts = ", ".join(f"{r['healthy_s']:.0f}" for r in sorted(recs, key=lambda r: r["start"]))
        over = sorted(overhead[(part, rig)])
        median = f"{over[len(over) // 2]:5.1f}" if over else "    -"
        lines.append(f"{part:20s} {rig:14s} {recs[0]['gpu']:14s} sessions {len(recs):2d}  "
                     f"device minutes (server start to last pass) {minutes:6.1f}  "
                     f"client overhead per pass (s, median) {median}  start to healthy (s): {starts}")
    return lines


def main() -> None:
    print(f"make book, existing venv:        {book_build():6.1f} s  (target < 30 s on 2 cores)")
    print(f"fresh clone + make setup:        {fresh_clone_setup():6.1f} s")
    print("committed runs (from manifests):")
    for line in device_time():
        print("  " + line)


if __name__ == "__main__":
    main()
