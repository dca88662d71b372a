"""`make book`'s build step: `jupyter-book build . --all -W --keep-going`, with its notebooks executed in parallel.

Jupyter Book 1.0.4's command line always asks Sphinx for one process (build_sphinx's `jobs` has no
option), so every notebook runs after the one before it. Sphinx reads (and myst-nb executes) pages in
parallel when it is given jobs > 1, there are more than five pages to read, and every extension declares
parallel reading safe (inference_wall.book_static declares the one that does not). This script runs the
same command with `jobs` set; execute_notebooks stays `force` (_config.yml).

Sphinx splits the pages into len(pages) // jobs chunks in name order and runs up to `jobs` chunks at
once: with jobs at least the number of pages, each page runs in its own process and the slowest notebook,
not the sum of all, bounds the read (the CPUs are shared among them). IW_BOOK_JOBS sets jobs
(default: the number of pages in _toc.yml, at most 8); IW_BOOK_JOBS=1 builds as jupyter-book does.
"""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def toc_pages(toc: Path = ROOT / "_toc.yml") -> int:
    import yaml

    def count(node) -> int:
        if isinstance(node, dict):
            return ("file" in node or "root" in node) + sum(count(v) for v in node.values() if isinstance(v, (dict, list)))
        if isinstance(node, list):
            return sum(count(v) for v in node)
        return 0

    return count(yaml.safe_load(toc.read_text()))


def jobs(root: Path = ROOT) -> int:
    raw = os.environ.get("IW_BOOK_JOBS", "")
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            sys.exit(f"IW_BOOK_JOBS={raw!r}: give a whole number of processes, 1 or more")
        return int(raw)
    return max(1, min(8, toc_pages(root / "_toc.yml")))


# jupyter_client picks a kernel's five TCP ports by binding port 0 and letting go, and only then starts the
# kernel: notebooks started at once in parallel processes can draw the same free port, and that kernel dies
# ("Address already in use", then "Kernel died before replying to kernel_info"). Seen once in a fresh-clone
# CI run; such a build is run once more, any other failure is not.
PORT_RACE = ("Kernel died before replying to kernel_info", "Address already in use")


def main(root: Path = ROOT, cmd: list[str] | None = None) -> int:
    """Build once in a child process (`cmd`, default this script with --once); once more if it lost a port race."""
    import subprocess

    cmd = cmd or [sys.executable, str(Path(__file__).resolve()), "--once", str(root)]
    for attempt in (1, 2):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        raced = False
        for line in proc.stdout:
            sys.stdout.write(line)
            raced = raced or any(k in line for k in PORT_RACE)
        rc = proc.wait()
        if rc == 0 or not raced or attempt == 2:
            return rc
        print("build-book: a notebook's kernel lost its port to another's at start; building once more", flush=True)
    return rc


def build_once(root: Path = ROOT) -> int:
    from jupyter_book import sphinx as jb_sphinx
    from jupyter_book.cli.main import main as jb_main

    n = jobs(root)
    # jupyter-book's build command imports build_sphinx from this module when it runs
    jb_sphinx.build_sphinx = functools.partial(jb_sphinx.build_sphinx, jobs=n)
    print(f"jupyter-book build with {n} processes (IW_BOOK_JOBS)", flush=True)
    return jb_main(["build", str(root), "--all", "-W", "--keep-going"])  # click exits with the build's status


if __name__ == "__main__":
    if sys.argv[1:2] == ["--once"]:
        sys.exit(build_once(Path(sys.argv[2])))
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
