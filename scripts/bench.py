"""`make bench`: print the figures the project's speed targets are checked by.

1. wall time of `make book` with the existing .venv and a warm derived-table cache (a rebuild; target:
   under 30 s on 2 cores), the median of --runs builds;
2. the same with no cache (_build/cache/derived removed first: every raw file parsed again);
3. each notebook's execution time in those builds, as myst-nb recorded it (_build/.doctrees): the
   notebooks run in parallel (scripts/build-book.py), so each time includes waiting for the CPUs;
4. wall time from a fresh clone to a built book (`git clone` + `make book`, with whatever package caches
   exist; --no-clone leaves it out);
5. from the committed runs: per part and rig, server start-to-healthy times, the device time the
   sessions took (server start to the end of its last pass), and the bench client's overhead per pass
   (the pass's wall time less vLLM's own benchmark duration), read from the manifests and results.
"""
from __future__ import annotations

import argparse
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from inference_wall.store import DERIVED_CACHE  # noqa: E402


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.monotonic()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        print(f"FAILED: {' '.join(cmd)}\n{res.stdout[-2000:]}{res.stderr[-2000:]}", file=sys.stderr)
        sys.exit(1)
    return time.monotonic() - t0


def book_build(cold: bool = False) -> tuple[float, dict[str, float]]:
    """One `make book`: (wall seconds, {page: notebook execution seconds})."""
    if cold:
        shutil.rmtree(DERIVED_CACHE, ignore_errors=True)
    wall = timed(["make", "-s", "book"], ROOT)
    return wall, notebook_times(ROOT / "_build" / ".doctrees" / "environment.pickle")


def notebook_times(env_pickle: Path) -> dict[str, float]:
    """myst-nb's record of each executed page's run time in the last build."""
    with open(env_pickle, "rb") as f:
        env = pickle.load(f)
    return {doc: meta["exec_data"]["runtime"] for doc, meta in sorted(getattr(env, "nb_metadata", {}).items())
            if (meta.get("exec_data") or {}).get("runtime") is not None}


def fresh_clone_to_book() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        t0 = time.monotonic()
        timed(["git", "clone", "-q", str(ROOT), str(clone)], Path(tmp))
        timed(["make", "-s", "book"], clone)
        return time.monotonic() - t0


def device_time() -> list[str]:
    from inference_wall.devicebudget import device_lines

    return device_lines()


def summary(runs: list[tuple[float, dict[str, float]]]) -> tuple[str, dict[str, str]]:
    walls = [w for w, _ in runs]
    wall = f"{statistics.median(walls):6.1f} s" + (f" (median of {len(walls)}: {', '.join(f'{w:.1f}' for w in walls)})"
                                                   if len(walls) > 1 else "")
    pages = sorted({p for _, t in runs for p in t})
    per = {p: f"{statistics.median([t[p] for _, t in runs if p in t]):5.1f} s" for p in pages}
    return wall, per


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="print the book's build times and the committed runs' device time")
    ap.add_argument("--runs", type=int, default=1, help="builds of each kind (warm, cold); medians are printed")
    ap.add_argument("--no-clone", action="store_true", help="leave out the fresh clone to built book")
    args = ap.parse_args(argv)

    print(f"machine: {os.cpu_count()} CPUs, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"(other work on the machine slows every figure below)")
    cold = [book_build(cold=True) for _ in range(args.runs)]
    warm = [book_build() for _ in range(args.runs)]
    (cold_wall, cold_nb), (warm_wall, warm_nb) = summary(cold), summary(warm)
    print(f"make book, warm cache (rebuild): {warm_wall}  (target < 30 s on 2 cores)")
    print(f"make book, no cache (cold):      {cold_wall}")
    print("notebook execution (myst-nb; run in parallel, so each includes waiting for the CPUs):")
    for page in sorted(set(cold_nb) | set(warm_nb)):
        print(f"  {page:32s} warm {warm_nb.get(page, '    -'):>8s}   cold {cold_nb.get(page, '    -'):>8s}")
    if not args.no_clone:
        print(f"fresh clone to built book:       {fresh_clone_to_book():6.1f} s")
    print("committed runs (from manifests):")
    for line in device_time():
        print("  " + line)


if __name__ == "__main__":
    main()
