"""`make bench`: print the figures the project's speed targets are checked by (figures, not tests: a test
asserts no timing, a 2-core machine shared with other work would make it flaky).

1. wall time of `make book` with nothing changed (no notebook executed, Sphinx reads nothing again; target:
   under 15 s on 2 cores), the median of --runs builds;
2. wall time of `make book` with one notebook's inputs changed (--part, default part 3: its execution
   record under _build/executed/ removed, as when its data changes: that notebook alone runs again and
   Sphinx reads that page alone), the median of --runs builds;
3. with --cold: a build with no executed copies and no derived-table cache (every notebook runs, every raw
   file is parsed again);
4. each notebook's execution time in its last execution (_build/executed/<page>.json): the notebooks run in
   parallel (scripts/build-book.py), so each time includes waiting for the CPUs;
5. wall time from a fresh clone to a built book (`git clone` + `make book`, with whatever package caches
   exist; --no-clone leaves it out);
6. from the committed runs: per part and rig, server start-to-healthy times, the device time the
   sessions took (server start to the end of its last pass), and the bench client's overhead per pass
   (the pass's wall time less vLLM's own benchmark duration), read from the manifests and results;
   and part 3's flood at each cap per rig (output tokens per second), the figure tests/test_vllm_cpu.py
   no longer compares (cap 1 against the top cap on the CPU build).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from inference_wall.records.store import DERIVED_CACHE  # noqa: E402


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.monotonic()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        print(f"FAILED: {' '.join(cmd)}\n{res.stdout[-2000:]}{res.stderr[-2000:]}", file=sys.stderr)
        sys.exit(1)
    return time.monotonic() - t0


EXECUTED = ROOT / "_build" / "executed"


def book_build() -> float:
    """One `make book`: wall seconds."""
    return timed(["make", "-s", "book"], ROOT)


def one_part_changed(docname: str) -> float:
    """`make book` after removing one notebook's execution record: it alone runs again."""
    (EXECUTED / f"{docname}.json").unlink(missing_ok=True)
    return book_build()


def cold_build() -> float:
    shutil.rmtree(DERIVED_CACHE, ignore_errors=True)
    shutil.rmtree(EXECUTED, ignore_errors=True)
    return book_build()


def notebook_times(executed: Path = EXECUTED) -> dict[str, float]:
    """Each notebook page's run time in its last execution, from build-book's records."""
    times = {}
    for rec in sorted(executed.rglob("*.json")):
        try:
            data = json.loads(rec.read_text())
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("docname") and data.get("runtime") is not None:
            times[data["docname"]] = float(data["runtime"])
    return times


def fresh_clone_to_book() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        t0 = time.monotonic()
        timed(["git", "clone", "-q", str(ROOT), str(clone)], Path(tmp))
        timed(["make", "-s", "book"], clone)
        return time.monotonic() - t0


def device_time() -> list[str]:
    from inference_wall.records.devicebudget import device_lines

    return device_lines()


def median_line(walls: list[float]) -> str:
    return f"{statistics.median(walls):6.1f} s" + (f" (median of {len(walls)}: {', '.join(f'{w:.1f}' for w in walls)})"
                                                   if len(walls) > 1 else "")


def three_digits(x: float) -> str:
    """At most 3 significant digits, thousands separated; a dash for a missing value."""
    if x != x:
        return "-"
    rounded = float(f"{x:.3g}")
    return f"{rounded:,.0f}" if abs(rounded) >= 100 else f"{rounded:g}"


def flood_lines() -> list[str]:
    """Part 3's flood at each cap, per rig with committed points (output tokens per second)."""
    from inference_wall.parts import p03

    table = p03.sweep_table(None)
    lines = []
    for (rig, model), rows in table.groupby(["rig", "model"], sort=True):
        if rows["source"].astype(str).str.contains("published").all():
            continue
        cells = [f"cap {int(r.max_num_seqs)}: {three_digits(r.output_tok_s)} tok/s"
                 for r in rows.sort_values("max_num_seqs").itertuples()]
        lines.append(f"{rig} ({model}): " + ", ".join(cells))
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="print the book's build times and the committed runs' device time")
    ap.add_argument("--runs", type=int, default=3, help="builds of each kind; medians are printed")
    ap.add_argument("--part", default="notebooks/03-batching-cliff", help="the page whose inputs change in (2)")
    ap.add_argument("--cold", action="store_true", help="also time a build from no executed copies and no cache")
    ap.add_argument("--no-clone", action="store_true", help="leave out the fresh clone to built book")
    args = ap.parse_args(argv)

    print(f"machine: {os.cpu_count()} CPUs, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"(other work on the machine slows every figure below)")
    if args.cold:
        print(f"make book, cold (every notebook runs): {median_line([cold_build()])}")
    book_build()  # whatever changed since the last build runs now, so that the next ones change nothing
    unchanged = [book_build() for _ in range(args.runs)]
    print(f"make book, nothing changed:            {median_line(unchanged)}  (target < 15 s on 2 cores)")
    changed = [one_part_changed(args.part) for _ in range(args.runs)]
    print(f"make book, {args.part} changed: {median_line(changed)}")
    print("notebook execution, last run of each (run in parallel, so each includes waiting for the CPUs):")
    for page, t in notebook_times().items():
        print(f"  {page:32s} {t:6.1f} s")
    if not args.no_clone:
        print(f"fresh clone to built book:       {fresh_clone_to_book():6.1f} s")
    print("committed runs (from manifests):")
    for line in device_time():
        print("  " + line)
    print("part 3's flood per cap (committed runs; a figure, not a test):")
    for line in flood_lines():
        print("  " + line)


if __name__ == "__main__":
    main()
