"""What the committed runs cost in machine time, from their manifests: per part and rig, the server sessions,
the minutes from each server's launch to its last pass (what a rented GPU is busy for; installs, packing and
idle time come on top), every start-to-healthy time, and the benchmark client's own overhead per pass (a
pass's wall time minus the benchmark duration vLLM reports)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pandas as pd

COLUMNS = ["part", "rig", "gpu", "sessions", "points", "device_min", "start_to_healthy_s", "client_overhead_s"]


def device_table(data_dir: Path | None = None, part: int | str | None = None) -> pd.DataFrame:
    """One row per part and rig (COLUMNS); `part`: that part's runs only (a part's page: the client overhead of
    every other part's passes would parse every bench result in data/runs for rows the page drops)."""
    from .store import PointData, iter_points

    sessions: dict[tuple[str, str, str], dict] = {}
    points: dict[tuple[str, str], int] = defaultdict(int)
    overhead: dict[tuple[str, str], list[float]] = defaultdict(list)
    gpu: dict[tuple[str, str], str] = {}
    for pname, rig, point, m in iter_points(data_dir, part):
        data = PointData(pname, rig, point, m)
        points[(pname, rig)] += 1
        info = m.get("rig_info") or {}
        gpu[(pname, rig)] = (info.get("gpu") or {}).get("name") or f"CPU ({info.get('cpu_count')} cores)"
        for p in m.get("passes") or []:
            try:
                overhead[(pname, rig)].append(p["ended"] - p["started"] - data.bench(p["label"]).duration_s)
            except (OSError, KeyError, TypeError, ValueError):
                pass
        s = m.get("session") or {}
        if not s.get("server_started") or not m.get("passes"):
            continue
        rec = sessions.setdefault((pname, rig, s["id"]), {"start": s["server_started"], "end": 0.0, "healthy_s": None})
        rec["healthy_s"] = s.get("start_to_healthy_s") if s.get("start_to_healthy_s") is not None else rec["healthy_s"]
        rec["end"] = max(rec["end"], max(p["ended"] for p in m["passes"]))
    per: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for (pname, rig, _), rec in sessions.items():
        per[(pname, rig)].append(rec)
    rows = []
    for key, recs in sorted(per.items()):
        recs.sort(key=lambda r: r["start"])
        over = sorted(overhead[key])
        rows.append({"part": key[0], "rig": key[1], "gpu": gpu.get(key), "sessions": len(recs), "points": points[key],
                     "device_min": sum(r["end"] - r["start"] for r in recs) / 60,
                     "start_to_healthy_s": ", ".join(f"{r['healthy_s']:.0f}" for r in recs if r["healthy_s"] is not None),
                     "client_overhead_s": over[len(over) // 2] if over else float("nan")})
    return pd.DataFrame(rows, columns=COLUMNS)


def device_lines(data_dir: Path | None = None) -> list[str]:
    """`make bench`'s lines: one per part and rig."""
    lines = []
    for r in device_table(data_dir).itertuples(index=False):
        over = "    -" if r.client_overhead_s != r.client_overhead_s else f"{r.client_overhead_s:5.1f}"
        lines.append(f"{r.part:20s} {r.rig:14s} {str(r.gpu):14s} sessions {r.sessions:2d}  points {r.points:3d}  "
                     f"device minutes (server start to last pass) {r.device_min:6.1f}  "
                     f"client overhead per pass (s, median) {over}  start to healthy (s): {r.start_to_healthy_s}")
    return lines
