"""Add `artefacts` (size and sha256 of each raw file) to manifests written before the sweep recorded them.

Run once per such point:  .venv/bin/python scripts/record-artefact-hashes.py [--check]
Only points whose files are intact get hashes: the folder holds exactly the files its manifest lists, every
.gz decompresses to its end, every JSON parses, and git knows the folder with no uncommitted change (so the
hashes are those of the committed bytes). Anything else is reported and left hash-less.
"""
from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from inference_wall.records.store import MANIFEST, artefact_records, iter_points, write_json_atomic  # noqa: E402


def problems(point: Path, manifest: dict) -> list[str]:
    out = []
    files = {f.name for f in point.iterdir() if f.is_file()} - {MANIFEST}
    if set(manifest.get("files") or []) != files:
        out.append(f"files {sorted(files)} differ from the manifest's list {manifest.get('files')}")
    for f in sorted(point.iterdir()):
        try:
            raw = gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()
            if f.name.endswith((".json", ".json.gz")):
                json.loads(raw)
        except (OSError, EOFError, ValueError) as e:
            out.append(f"{f.name}: {e}")
    status = subprocess.run(["git", "status", "--porcelain", "--", str(point)], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    tracked = subprocess.run(["git", "ls-files", "--", str(point)], cwd=ROOT, capture_output=True, text=True).stdout
    if status or not tracked.strip():
        out.append("not committed as is (git status: " + (status.replace("\n", "; ") or "untracked") + ")")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report what would change")
    args = ap.parse_args()
    added = skipped = 0
    for _part, _rig, point, manifest in iter_points(complete_only=False):
        if manifest is None or manifest.get("artefacts"):
            continue
        bad = problems(point, manifest)
        if bad:
            print(f"left hash-less: {point.relative_to(ROOT)}: {'; '.join(bad)}")
            skipped += 1
            continue
        if not args.check:
            write_json_atomic(point / MANIFEST, {**manifest, "artefacts": artefact_records(point)})
        added += 1
    print(f"{'would add' if args.check else 'added'} hashes to {added} manifests; left {skipped} hash-less")
    return 1 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
