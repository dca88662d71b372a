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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


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
    from inference_wall.devicebudget import device_lines

    return device_lines()


def main() -> None:
    print(f"make book, existing venv:        {book_build():6.1f} s  (target < 30 s on 2 cores)")
    print(f"fresh clone + make setup:        {fresh_clone_setup():6.1f} s")
    print("committed runs (from manifests):")
    for line in device_time():
        print("  " + line)


if __name__ == "__main__":
    main()
