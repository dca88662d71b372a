"""`make book`'s build step: execute the notebooks whose inputs changed, then `jupyter-book build . -W --keep-going`.

1. Each notebook page of _toc.yml (a MyST notebook: a `kernelspec` in its front matter) has an input key:
   the hashes of the notebook file, the package's source (src/inference_wall/**/*.py), the pinned
   environment (requirements.lock) and the data it reads (:func:`data_inputs`: the data/runs/<part>/
   folders its part's `Part.reads` names (parts/protocol.py), data/reference, data/rigs and data/models;
   the book/ pages read all of data/). Jupyter Book's own cache (jupyter-cache) hashes the code cells only
   and would miss a change of data. Each kernel notes the data/runs/ folders its notebook actually read
   (scripts/record-runs-read.py, an audit hook); a notebook that read one its key does not cover fails the
   build ("UnkeyedRead"), so a page cannot silently go stale when another part's runs change.
2. A notebook whose key differs from the one recorded under _build/executed/ (or that has none, or whose
   last execution failed, or whose saved figures are gone) is executed again, in parallel, as myst-nb
   executes it (jupyter-cache's single_nb_execution, the notebook's folder as working directory, the
   timeout in _config.yml); the build prints why ("notebook changed", "data changed: data/runs/03-...",
   "package changed"). Each notebook's executed copy (<docname>.ipynb) and its execution report
   (<docname>.json; <docname>.err.log with the traceback when it failed) stay under _build/executed/.
   A failed notebook prints its own error (the cell and the traceback's tail) whatever the job count.
3. Sphinx then builds incrementally (no --all): myst-nb takes each notebook's outputs from its executed
   copy instead of running it (the executed copy is the page's dependency, so a page is read again exactly
   when its notebook was executed again). Nothing changed: nothing executed, nothing re-read.

Nothing here is committed: a fresh clone has no _build/, so every notebook runs. IW_BOOK_JOBS sets how
many notebooks run at once (default: the number of notebook pages, at most 8 and at most one more than the cores); IW_BOOK_JOBS=1 runs them
one at a time. IW_BOOK_FORCE=1 executes every notebook again.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXECUTED = Path("_build") / "executed"  # under the book root
KEY_FORMAT = "1"  # bump when what a key covers changes

SHARED_DATA = ("data/reference", "data/rigs", "data/models")

# A kernel that fails to start is not the notebook's fault, and such a notebook (or build) is run once more;
# any other failure is not. Two ways were seen in fresh-clone CI runs:
# - jupyter_client picks a kernel's five TCP ports by binding port 0 and letting go, and only then starts the
#   kernel: notebooks started at once in parallel processes can draw the same free port, and that kernel dies
#   ("Address already in use", then "Kernel died before replying to kernel_info");
# - on a loaded 2-core machine a kernel took longer than nbclient's 60 s to answer its first request
#   ("Kernel didn't respond in 60 seconds"). Kernels now get KERNEL_START_S to start, and no more notebooks
#   start at once than jobs() allows.
PORT_RACE = ("Kernel died before replying to kernel_info", "Address already in use", "Kernel didn't respond in")
KERNEL_START_S = 300
# Run by each notebook's kernel before its first cell: it notes the data/runs/ folders the notebook reads (the
# record's "runs_read"), which the build checks against the folders its key covers (unkeyed_reads).
READS_HOOK = Path(__file__).resolve().with_name("record-runs-read.py")
_FIGURE_REF = re.compile(r"_static/figures/([a-z0-9][a-z0-9._-]*\.(?:png|svg))")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def say(text: str) -> None:
    print(f"build-book: {text}", flush=True)


# ---------------------------------------------------------------------------------------------
# The book's pages
# ---------------------------------------------------------------------------------------------
def toc_docnames(toc: Path = ROOT / "_toc.yml") -> list[str]:
    import yaml

    found: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            found.extend(str(node[k]) for k in ("root", "file") if k in node)
            for v in node.values():
                if isinstance(v, (dict, list)):
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(yaml.safe_load(toc.read_text()))
    return found


def toc_pages(toc: Path = ROOT / "_toc.yml") -> int:
    return len(toc_docnames(toc))


def is_notebook(text: str) -> bool:
    """A MyST notebook: YAML front matter with a kernelspec (as jupytext writes it)."""
    import yaml

    if not text.startswith("---\n"):
        return False
    end = text.find("\n---", 4)
    try:
        meta = yaml.safe_load(text[4:end]) if end > 0 else None
    except yaml.YAMLError:
        return False
    return isinstance(meta, dict) and "kernelspec" in meta


def notebook_pages(root: Path = ROOT) -> list[str]:
    """The docnames of _toc.yml whose source is a MyST notebook (<docname>.md)."""
    return [d for d in toc_docnames(root / "_toc.yml")
            if (root / f"{d}.md").is_file() and is_notebook((root / f"{d}.md").read_text())]


def jobs(root: Path = ROOT) -> int:
    raw = os.environ.get("IW_BOOK_JOBS", "")
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            sys.exit(f"IW_BOOK_JOBS={raw!r}: give a whole number of processes, 1 or more")
        return int(raw)
    # one more than the cores: a notebook waits on its kernel's start and on files now and then. Twice the cores
    # (four on 2 cores) made a fresh clone's book 66 s against 57-59 s at two or three: four notebooks at once
    # each parsed the raw files they share (part 1's, part 0's) before any had cached them (session 15).
    return max(1, min(8, cpus() + 1, len(notebook_pages(root)) or 1))


def cpus() -> int:
    """The cores this process may run on (the affinity mask where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:
        return os.cpu_count() or 1


# ---------------------------------------------------------------------------------------------
# Input keys
# ---------------------------------------------------------------------------------------------
class Hasher:
    """sha256 of files and folders, with a cache of each file's digest keyed by its size and mtime (kept in
    _build/executed/file-hashes.json), so an unchanged tree is stat-ed, not read."""

    def __init__(self, root: Path, cache: Path | None = None):
        self.root, self.cache_path = root, cache
        self.cache: dict[str, list] = {}
        if cache and cache.is_file():
            try:
                self.cache = json.loads(cache.read_text())
            except ValueError:
                self.cache = {}
        self.seen: dict[str, list] = {}

    def file(self, path: Path) -> str:
        rel = path.relative_to(self.root).as_posix()
        if rel in self.seen:
            return self.seen[rel][2]
        st = path.stat()
        hit = self.cache.get(rel)
        if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
            digest = hit[2]
        else:
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            digest = h.hexdigest()
        self.seen[rel] = [st.st_size, st.st_mtime_ns, digest]
        return digest

    def tree(self, path: Path, suffix: str | None = None) -> str:
        """A file's hash, or a folder's: every file's relative path and hash (__pycache__ and hidden
        writer locks left out); the hash of nothing for a missing path."""
        h = hashlib.sha256()
        if path.is_file():
            return self.file(path)
        if path.is_dir():
            for f in sorted(p for p in path.rglob("*") if p.is_file()):
                rel = f.relative_to(path).as_posix()
                if "__pycache__" in f.parts or f.name.startswith(".writer.") or (suffix and f.suffix != suffix):
                    continue
                h.update(f"{rel}\0{self.file(f)}\n".encode())
        return h.hexdigest()

    def save(self) -> None:
        if self.cache_path:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.cache_path.with_name(self.cache_path.name + ".tmp")
            tmp.write_text(json.dumps(self.seen))
            tmp.replace(self.cache_path)


@functools.lru_cache(maxsize=1)
def runs_read() -> dict[str, tuple[str, ...]]:
    """Each part's page (by its name, the notebook's): the data/runs/ folders it reads, its Part's runs_read
    (parts/protocol.py); empty, and said once, where the package does not import (its notebooks then fail with
    their own error, keyed on all of data/runs meanwhile)."""
    try:
        from inference_wall.parts import MODULES
        from inference_wall.parts.protocol import runs_read as of_part

        return {m.PART.name: of_part(m.PART) for m in MODULES.values()}
    except Exception as e:  # a broken package: the notebooks say what is wrong
        say(f"the package does not import ({type(e).__name__}: {e}): every part's page reads all of data/runs")
        return {}


EVIDENCE = "-evidence"  # notebooks/<part>-evidence.md: the tables and claims arithmetic behind a part's page


def data_inputs(docname: str, root: Path = ROOT) -> list[str]:
    """The data/ paths a notebook page reads (relative to the book root): a part's page and its evidence page
    (notebooks/<part>-evidence), the data/runs/ folders its Part.reads names (its own first) and the shared data; a notebook that is no part's, all of data/runs;
    the book/ pages (glance, method, rigs, primer), all of data/."""
    part = docname.split("/")[-1].removesuffix(EVIDENCE)  # a part's evidence page reads what its part reads
    if docname.startswith("notebooks/") and part in runs_read():
        return [f"data/runs/{p}" for p in runs_read()[part]] + list(SHARED_DATA)
    if docname.startswith("notebooks/"):
        return ["data/runs", *SHARED_DATA]
    return ["data"]


def unkeyed_reads(record: dict, inputs: dict[str, str]) -> list[str]:
    """The data/runs/ folders an executed notebook read (its record's runs_read, from its kernel) that its key
    does not cover: a page that would not be executed again when they change."""
    covered = {k for k in inputs if k == "data" or k.startswith("data/runs")}
    if covered & {"data", "data/runs"}:
        return []
    return [f"data/runs/{f}" for f in record.get("runs_read", []) if f"data/runs/{f}" not in covered]


def input_parts(docname: str, root: Path = ROOT, hasher: Hasher | None = None) -> dict[str, str]:
    """What a notebook's key is made of: {input: hash} for the notebook, the package, the environment and
    each data path it reads."""
    hasher = hasher or Hasher(root)
    parts = {"format": KEY_FORMAT,
             "notebook": hasher.file(root / f"{docname}.md"),
             "package": hasher.tree(root / "src" / "inference_wall", suffix=".py"),
             "environment": hasher.tree(root / "requirements.lock")}
    for rel in data_inputs(docname, root):
        parts[rel] = hasher.tree(root / rel)
    return parts


def input_key(docname: str, root: Path = ROOT, hasher: Hasher | None = None) -> str:
    return hashlib.sha256(json.dumps(input_parts(docname, root, hasher), sort_keys=True).encode()).hexdigest()


def why_stale(old: dict | None, new: dict[str, str], root: Path = ROOT) -> list[str]:
    """Why a notebook must be executed again, in words; [] when its record matches `new`."""
    if not old:
        return ["never executed here"]
    if not old.get("succeeded"):
        return ["its last execution failed"]
    was = old.get("inputs", {})
    if was.get("format") != new["format"]:
        return ["build-book's key changed"]
    reasons = []
    if was.get("notebook") != new["notebook"]:
        reasons.append("notebook changed")
    if was.get("package") != new["package"]:
        reasons.append("package changed")
    if was.get("environment") != new["environment"]:
        reasons.append("environment changed (requirements.lock)")
    changed = [k for k in new if k.startswith("data") and was.get(k) != new[k]]
    if changed:
        reasons.append("data changed: " + ", ".join(changed))
    missing = [f for f in old.get("figures", []) if not (root / "_static" / "figures" / f).is_file()]
    if missing:
        reasons.append(f"figure files missing: _static/figures/{missing[0]}" + (f" and {len(missing) - 1} more"
                                                                                if len(missing) > 1 else ""))
    return reasons


# ---------------------------------------------------------------------------------------------
# Execution
# ---------------------------------------------------------------------------------------------
def executed_path(root: Path, docname: str, suffix: str = ".ipynb") -> Path:
    return root / EXECUTED / f"{docname}{suffix}"


def read_record(root: Path, docname: str) -> dict | None:
    path = executed_path(root, docname, ".json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def book_config(root: Path) -> dict:
    import yaml

    return yaml.safe_load((root / "_config.yml").read_text()) or {}


def read_notebook(root: Path, docname: str):
    """The notebook as myst-nb reads it for the page (the same cells in the same order)."""
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    extensions = (book_config(root).get("parse") or {}).get("myst_enable_extensions") or []
    path = root / f"{docname}.md"
    return read_myst_markdown_notebook(path.read_text(), MdParserConfig(enable_extensions=set(extensions)),
                                       add_source_map=True, path=path)


def execute_one(root: Path, docname: str, inputs: dict[str, str]) -> dict:
    """Execute one notebook as myst-nb does; write its executed copy and report under _build/executed/."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    timeout = (book_config(root).get("execute") or {}).get("timeout", 600)
    nb = read_notebook(root, docname)
    reads = executed_path(root, docname, ".reads")
    reads.parent.mkdir(parents=True, exist_ok=True)
    reads.unlink(missing_ok=True)
    os.environ.update({"IW_READS_LOG": str(reads), "IW_READS_UNDER": str(root / "data" / "runs")})
    t0 = time.monotonic()
    try:
        result = single_nb_execution(nb, cwd=str((root / docname).parent), timeout=timeout, allow_errors=False,
                                     meta_override=True, startup_timeout=KERNEL_START_S,
                                     extra_arguments=[f"--IPKernelApp.exec_files={READS_HOOK}"])
        error, trace, runtime = result.err, result.exc_string, result.time
    except Exception as e:  # a kernel that died or never started: not a CellExecutionError
        import traceback

        error, trace, runtime = e, traceback.format_exc(), time.monotonic() - t0
    out = executed_path(root, docname)
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"docname": docname, "inputs": inputs, "succeeded": error is None, "runtime": runtime,
              "error": type(error).__name__ if error else None, "finished": time.time(),
              "runs_read": sorted(set(reads.read_text().split())) if reads.is_file() else []}
    reads.unlink(missing_ok=True)
    err_log = executed_path(root, docname, ".err.log")
    if error is None:
        text = nbformat.writes(nb)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(out)
        record["figures"] = sorted(set(_FIGURE_REF.findall(text)))
        err_log.unlink(missing_ok=True)
    else:
        err_log.write_text(_ANSI.sub("", trace or str(error)))
        record["report"] = str(err_log.relative_to(root))
    executed_path(root, docname, ".json").write_text(json.dumps(record, indent=1))
    return record


def _clip(lines: list[str], keep: int, tail: bool) -> list[str]:
    if len(lines) <= keep:
        return lines
    note = f"    ... ({len(lines) - keep} lines left out)"
    return [note, *lines[-keep:]] if tail else [*lines[:keep], note]


def error_tail(text: str, cell_lines: int = 12, trace_lines: int = 25) -> str:
    """A failed notebook's own error, from its report: the cell that failed (nbclient's CellExecutionError:
    "An error occurred while executing the following cell:", the cell between two dashed lines, then the
    kernel's traceback) and the traceback's tail; the report's tail where it has no such cell."""
    start = text.find("An error occurred while executing the following cell")
    lines = (text[start:] if start >= 0 else text).rstrip().splitlines()
    dashes = [i for i, line in enumerate(lines) if line.strip() and set(line.strip()) == {"-"}]
    if start < 0 or len(dashes) < 2:
        return "\n".join(_clip(lines, trace_lines, tail=True))
    a, b = dashes[0], dashes[1]
    cell = _clip(lines[a + 1:b], cell_lines, tail=False)
    trace = _clip([line for line in lines[b + 1:] if line.strip()], trace_lines, tail=True)
    return "\n".join([lines[0], lines[a], *cell, lines[b], *trace])


def execute_stale(root: Path = ROOT, n_jobs: int | None = None, force: bool | None = None,
                  worker: list[str] | None = None) -> int:
    """Execute every notebook page whose input key changed; print why each runs and each failure's own
    error. Returns the number of notebooks that failed."""
    force = os.environ.get("IW_BOOK_FORCE") == "1" if force is None else force
    hasher = Hasher(root, root / EXECUTED / "file-hashes.json")
    todo: dict[str, dict[str, str]] = {}
    pages = notebook_pages(root)
    for doc in pages:
        inputs = input_parts(doc, root, hasher)
        reasons = ["IW_BOOK_FORCE=1"] if force else why_stale(read_record(root, doc), inputs, root)
        if reasons:
            todo[doc] = inputs
            say(f"{doc}: executing ({'; '.join(reasons)})")
    hasher.save()
    say(f"{len(pages) - len(todo)} of {len(pages)} notebooks unchanged (their executed copies in {EXECUTED} are used)")
    if not todo:
        return 0
    n_jobs = n_jobs or jobs(root)
    worker = worker or [sys.executable, str(Path(__file__).resolve()), "--execute", str(root)]

    def run(doc: str) -> dict:
        for attempt in (1, 2):
            executed_path(root, doc, ".json").unlink(missing_ok=True)  # the worker writes it anew
            proc = subprocess.run([*worker, doc], input=json.dumps(todo[doc]), capture_output=True, text=True)
            record = read_record(root, doc) or {}
            if not record:
                record = {"succeeded": False, "error": f"worker exit {proc.returncode}",
                          "stderr": (proc.stdout + proc.stderr)[-3000:]}
            text = ""
            if not record.get("succeeded"):
                try:
                    text = (root / record.get("report", "")).read_text() if record.get("report") else ""
                except OSError:
                    pass
                text += record.get("stderr", "")
            if record.get("succeeded") or attempt == 2 or not any(k in text for k in PORT_RACE):
                return record
            say(f"{doc}: its kernel did not start (a port taken by another's, or no answer in time); executing it once more")
        return record

    failed = 0
    with ThreadPoolExecutor(max_workers=min(n_jobs, len(todo))) as pool:
        for doc, record in zip(todo, pool.map(run, todo)):
            unkeyed = unkeyed_reads(record, todo[doc]) if record.get("succeeded") else []
            if unkeyed:  # executed, but its page would go stale: it counts as failed, and runs again next build
                failed += 1
                record.update(succeeded=False, error="UnkeyedRead")
                executed_path(root, doc, ".json").write_text(json.dumps(record, indent=1))
                say(f"{doc}: FAILED: it read {', '.join(unkeyed)}, which its key does not cover: name the part(s) in "
                    f"its Part's reads (src/inference_wall/parts/), or the page goes stale when they change")
            elif record.get("succeeded"):
                say(f"{doc}: executed in {record['runtime']:.1f} s")
            else:
                failed += 1
                report = root / record["report"] if record.get("report") else None
                say(f"{doc}: FAILED ({record.get('error')}; report {report.relative_to(root) if report else 'none'}):")
                text = report.read_text() if report and report.is_file() else record.get("stderr", "")
                print("\n".join("    " + line for line in error_tail(text).splitlines()), flush=True)
    return failed


# ---------------------------------------------------------------------------------------------
# Sphinx, with each notebook's outputs from its executed copy
# ---------------------------------------------------------------------------------------------
def use_executed_copies(root: Path) -> None:
    """Make myst-nb take a notebook's outputs from _build/executed/<docname>.ipynb where that copy has the
    page's cells (any other page is executed by myst-nb as configured), and make the copy the page's
    dependency, so Sphinx reads the page again when the copy is rewritten."""
    import nbformat
    import myst_nb.sphinx_ as nb_sphinx
    from myst_nb.core.execute.base import NotebookClientBase

    original_create, original_parse = nb_sphinx.create_client, nb_sphinx.Parser.parse

    def copy_for(source) -> tuple[Path, dict] | None:
        try:
            doc = Path(source).resolve().relative_to(root.resolve()).with_suffix("").as_posix()
        except (ValueError, OSError):
            return None
        record, path = read_record(root, doc), executed_path(root, doc)
        return (path, record) if record and record.get("succeeded") and path.is_file() else None

    class FromExecutedCopy(NotebookClientBase):
        def start_client(self):
            executed = self._kwargs["executed"]
            for cell, done in zip(self.notebook.cells, executed.cells):
                if cell.cell_type == "code":
                    cell.outputs = done.get("outputs", [])
                    cell.execution_count = done.get("execution_count")
            for key, value in executed.metadata.items():
                if key not in ("source_map",):
                    self.notebook.metadata[key] = value
            record = self._kwargs["record"]
            self.logger.info(f"Outputs from {self._kwargs['copy']} (executed in {record['runtime']:.2f} s)")
            self.exec_metadata = {"mtime": record["finished"], "runtime": record["runtime"], "method": "build-book",
                                  "succeeded": True, "error": None, "traceback": None}

    def create_client(notebook, source, nb_config, logger, read_fmt=None):
        found = copy_for(source)
        if found:
            path, record = found
            executed = nbformat.read(path, as_version=4)
            same = [c.source for c in notebook.cells] == [c.source for c in executed.cells]
            if same:
                return FromExecutedCopy(notebook, Path(source), nb_config, logger, executed=executed, record=record,
                                        copy=path.relative_to(root))
            say(f"{path} does not hold the cells of {source}: myst-nb executes it")
        return original_create(notebook, source, nb_config, logger, read_fmt)

    def parse(self, inputstring, document):
        env = getattr(document.settings, "env", None) or self.env
        found = copy_for(env.doc2path(env.docname))
        if found:
            env.note_dependency(str(found[0]))
        return original_parse(self, inputstring, document)

    nb_sphinx.create_client = create_client
    nb_sphinx.Parser.parse = parse


def main(root: Path = ROOT, cmd: list[str] | None = None) -> int:
    """Build once in a child process (`cmd`, default this script with --once); once more if a kernel did not start."""
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
        print("build-book: a notebook's kernel did not start (a port taken by another's, or no answer in time); building once more", flush=True)
    return rc


def build_once(root: Path = ROOT) -> int:
    t0 = time.monotonic()
    failed = execute_stale(root)
    if failed:
        say(f"{failed} notebook(s) failed: the site is not built (each one's report is under {EXECUTED})")
        return 1
    say(f"notebooks ready ({time.monotonic() - t0:.1f} s); jupyter-book build (incremental)")
    from jupyter_book import sphinx as jb_sphinx
    from jupyter_book.cli.main import main as jb_main

    # Sphinx reads pages in parallel (jobs > 1, more than five pages to read; inference_wall.pages.book_static
    # declares that safe): Jupyter Book 1.0.4's command line always asks for one process.
    jb_sphinx.build_sphinx = functools.partial(jb_sphinx.build_sphinx, jobs=jobs(root))
    use_executed_copies(root)
    return jb_main(["build", str(root), "-W", "--keep-going"])  # click exits with the build's status


if __name__ == "__main__":
    if sys.argv[1:2] == ["--once"]:
        sys.exit(build_once(Path(sys.argv[2])))
    if sys.argv[1:2] == ["--execute"]:  # one notebook, its inputs' hashes on stdin (execute_stale's worker)
        record = execute_one(Path(sys.argv[2]), sys.argv[3], json.loads(sys.stdin.read()))
        sys.exit(0 if record["succeeded"] else 1)
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
