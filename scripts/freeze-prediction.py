"""Freeze the step model's prediction for a GPU before that GPU is measured: data/predictions/<gpu>.csv.

    .venv/bin/python scripts/freeze-prediction.py h100-sxm            # the model of parts/p00/predict.py
    .venv/bin/python scripts/freeze-prediction.py h100-sxm refit      # parts/p00/refit.py: <gpu>-refit.csv, each row
                                                                      # naming the run that will measure it

Writes what parts/p00/predict.prediction_rows says today for the datasheet row <gpu> (every series model that fits),
each row naming the commit whose code and h200 runs made it (`model_commit`, `model_commit_time`), and adds a line to
data/predictions/SOURCES.md. Refuses when the file exists (a frozen prediction is never remade: a later model's
prediction is shown beside it under its own name) and when src/ or data/ differ from that commit (the commit named
would not be what made the numbers). Commit the file on its own, before the GPU's first run."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from inference_wall.parts.p00 import predict
from inference_wall.schema import DATA_DIR, REPO


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or (len(argv) == 2 and argv[1] != "refit"):
        print("usage: freeze-prediction.py GPU [refit] (GPU: a key of data/reference/gpus/datasheets.csv, e.g. "
              "h100-sxm)")
        return 2
    key, model = argv[0], (argv[1] if len(argv) == 2 else None)
    folder = Path(DATA_DIR) / "predictions"
    out = folder / (f"{key}-{model}.csv" if model else f"{key}.csv")
    if out.exists():
        print(f"freeze-prediction: {out.relative_to(REPO)} exists: a frozen prediction is never remade")
        return 2
    dirty = git("status", "--porcelain", "--", "src", "data")
    if dirty:
        print(f"freeze-prediction: src/ or data/ differ from HEAD ({len(dirty.splitlines())} paths): commit first, "
              "so that the commit the file names is the code and data that made it")
        return 2
    commit, when = git("rev-parse", "HEAD"), int(git("show", "-s", "--format=%ct", "HEAD"))
    if model == "refit":
        from inference_wall.parts.p00 import refit

        rows = refit.prediction_rows(key)
    else:
        rows = predict.prediction_rows(key)
    rows["model_commit"], rows["model_commit_time"] = commit, when
    folder.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out, index=False, float_format="%.6g")
    source = ("parts/p00/refit.py over that commit's measured GPUs' runs; each row names the run that will measure it"
              if model == "refit" else "parts/p00/predict.py over that commit's h200 runs")
    line = (f"- `{out.name}`: frozen {time.strftime('%Y-%m-%d', time.gmtime())} by `scripts/freeze-prediction.py "
            f"{' '.join(argv)}` from the model of commit {commit[:12]} ({source}) and the {key} datasheet row; "
            f"{len(rows)} rows. Never edited: a later model's prediction is shown beside it under its own name.\n")
    sources = folder / "SOURCES.md"
    if not sources.exists():
        sources.write_text("# Frozen predictions\n\nEach file was written once, before the GPU it names was measured, "
                           "and committed on its own; tests/test_predictions.py checks that it is older in git than "
                           "every run of that GPU's rig and that nothing changed it since.\n\n")
    with sources.open("a") as f:
        f.write(line)
    print(f"freeze-prediction: wrote {out.relative_to(REPO)} ({len(rows)} rows, model commit {commit[:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
