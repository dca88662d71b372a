"""make book's build step runs a build again only when a notebook kernel did not start (a port race, or no answer in time)."""
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script(reads: dict[str, tuple[str, ...]] | None = None):
    """scripts/build-book.py as a module; with `reads`, the parts' pages read those runs (not the package's parts')."""
    spec = importlib.util.spec_from_file_location("build_book", ROOT / "scripts" / "build-book.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if reads is not None:
        mod.runs_read = lambda: reads
    return mod


@pytest.mark.parametrize("says, rc, runs, final", [
    ("RuntimeError: Kernel died before replying to kernel_info", 1, 2, 1),  # the race, twice: run again once, then fail
    ("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:40897')", 1, 2, 1),
    ("RuntimeError: Kernel didn't respond in 60 seconds", 1, 2, 1),  # a loaded machine's slow start (CI)
    ("NameError: name 'x' is not defined", 1, 1, 1),  # a real failure is not retried
    ("build succeeded.", 0, 1, 0),
])
def test_only_a_kernel_port_race_is_built_again(tmp_path, capsys, says, rc, runs, final):
    count = tmp_path / "runs"
    child = (f"import sys; open({str(count)!r}, 'a').write('x'); print({says!r}); sys.exit({rc})")
    assert _script().main(tmp_path, cmd=[sys.executable, "-c", child]) == final
    assert len(count.read_text()) == runs
    assert says in capsys.readouterr().out  # the build's output is passed through


def test_a_kernel_gets_more_than_nbclient_s_60_s_to_start(tmp_path, monkeypatch):
    """CI failed once with "Kernel didn't respond in 60 seconds" (eight kernels starting at once on 2 cores):
    the executor passes its own start limit to nbclient's NotebookClient, and never starts more notebooks at
    once than one more than the cores."""
    from nbclient import NotebookClient

    mod, seen = _script(), {}
    monkeypatch.setattr(NotebookClient, "execute", lambda self, **kw: seen.setdefault("startup", self.startup_timeout))
    monkeypatch.setattr(mod, "read_notebook", lambda root, doc: __import__("nbformat").v4.new_notebook())
    (tmp_path / "_config.yml").write_text("execute:\n  timeout: 600\n")
    assert mod.execute_one(tmp_path, "page", {})["succeeded"]
    assert seen["startup"] == mod.KERNEL_START_S > 60
    monkeypatch.delenv("IW_BOOK_JOBS", raising=False)
    monkeypatch.setattr(mod, "cpus", lambda: 2)
    monkeypatch.setattr(mod, "notebook_pages", lambda root: ["p"] * 10)
    assert mod.jobs() == 3
    monkeypatch.setattr(mod, "cpus", lambda: 16)
    assert mod.jobs() == 8


def test_a_race_then_a_clean_build_succeeds(tmp_path):
    count = tmp_path / "runs"
    child = (f"import sys; n = len(open({str(count)!r}).read()) if __import__('os').path.exists({str(count)!r}) else 0; "
             f"open({str(count)!r}, 'a').write('x'); print('Kernel died before replying to kernel_info' if n == 0 "
             "else 'ok'); sys.exit(1 if n == 0 else 0)")
    assert _script().main(tmp_path, cmd=[sys.executable, "-c", child]) == 0
    assert len(count.read_text()) == 2


# ---------------------------------------------------------------------------------------------
# Only what changed runs again: each notebook's input key
# ---------------------------------------------------------------------------------------------
FRONT = "---\nkernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n# {title}\n\n```{{code-cell}} ipython3\nprint(1)\n```\n"


# The fake book's two parts: part 3's page reads part 1's runs besides its own.
FAKE_READS = {"01-hit-the-wall": ("01-hit-the-wall",), "03-batching-cliff": ("03-batching-cliff", "01-hit-the-wall")}


@pytest.fixture
def book(tmp_path):
    """A small fake book: two parts, a book/ page, an intro without a kernel, the package, the data."""
    root = tmp_path / "book"
    files = {
        "_toc.yml": "format: jb-book\nroot: book/intro\nchapters:\n  - file: notebooks/01-hit-the-wall\n"
                    "  - file: notebooks/03-batching-cliff\n  - file: book/method\n",
        "book/intro.md": "# Intro\n",
        "book/method.md": FRONT.format(title="Method"),
        "notebooks/01-hit-the-wall.md": FRONT.format(title="Part 1"),
        "notebooks/03-batching-cliff.md": FRONT.format(title="Part 3"),
        "src/inference_wall/__init__.py": "",
        "src/inference_wall/parts/p03.py": "X = 1\n",
        "requirements.lock": "pandas==2.2.3\n",
        "data/runs/01-hit-the-wall/a10g/point/manifest.json": "{}",
        "data/runs/03-batching-cliff/cpu-tiny/mns-001/manifest.json": '{"status": "complete"}',
        "data/reference/published.json": "{}",
        "data/rigs/cpu-tiny.json": "{}",
        "data/models/tiny/config.json": "{}",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _keys(mod, root):
    hasher = mod.Hasher(root)
    return {d: mod.input_key(d, root, hasher) for d in mod.notebook_pages(root)}


def test_the_notebook_pages_are_the_toc_s_pages_with_a_kernel(book):
    assert _script(FAKE_READS).notebook_pages(book) == ["notebooks/01-hit-the-wall", "notebooks/03-batching-cliff", "book/method"]


def test_a_data_file_of_part_3_changes_part_3_s_key_and_not_part_1_s(book):
    mod = _script(FAKE_READS)
    before = _keys(mod, book)
    assert len(set(before.values())) == 3
    (book / "data/runs/03-batching-cliff/cpu-tiny/mns-001/manifest.json").write_text('{"status": "failed"}')
    after = _keys(mod, book)
    assert after["notebooks/03-batching-cliff"] != before["notebooks/03-batching-cliff"]
    assert after["notebooks/01-hit-the-wall"] == before["notebooks/01-hit-the-wall"]
    assert after["book/method"] != before["book/method"]  # the book/ pages read all of data/
    new = mod.input_parts("notebooks/03-batching-cliff", book)
    old = {"succeeded": True, "inputs": mod.input_parts("notebooks/01-hit-the-wall", book) | {
        k: v for k, v in new.items() if not k.startswith("data/runs/03")} | {"data/runs/03-batching-cliff": "old"}}
    old["inputs"]["notebook"] = new["notebook"]
    assert mod.why_stale(old, new, book) == ["data changed: data/runs/03-batching-cliff"]


def test_a_new_point_folder_is_a_change_and_a_touch_is_not(book):
    mod = _script(FAKE_READS)
    before = _keys(mod, book)
    manifest = book / "data/runs/03-batching-cliff/cpu-tiny/mns-001/manifest.json"
    manifest.write_text(manifest.read_text())  # same bytes, a new mtime
    os.utime(manifest, ns=(1, 1))
    assert _keys(mod, book) == before
    (book / "data/runs/03-batching-cliff/cpu-tiny/mns-004").mkdir()
    (book / "data/runs/03-batching-cliff/cpu-tiny/mns-004/manifest.json").write_text("{}")
    assert _keys(mod, book)["notebooks/03-batching-cliff"] != before["notebooks/03-batching-cliff"]
    assert _keys(mod, book)["notebooks/01-hit-the-wall"] == before["notebooks/01-hit-the-wall"]


def test_the_package_changes_every_key_and_a_notebook_only_its_own(book):
    mod = _script(FAKE_READS)
    before = _keys(mod, book)
    (book / "notebooks/01-hit-the-wall.md").write_text(FRONT.format(title="Part 1, again"))
    after = _keys(mod, book)
    assert [d for d in before if before[d] != after[d]] == ["notebooks/01-hit-the-wall"]
    (book / "src/inference_wall/parts/p03.py").write_text("X = 2\n")
    (book / "src/inference_wall/parts/__pycache__").mkdir()
    again = _keys(mod, book)
    assert all(again[d] != after[d] for d in after)
    (book / "src/inference_wall/parts/__pycache__/p03.cpython-311.pyc").write_bytes(b"\0")
    assert _keys(mod, book) == again  # compiled files are no input


def test_the_reasons_name_what_changed(book):
    mod = _script(FAKE_READS)
    new = mod.input_parts("notebooks/01-hit-the-wall", book)
    assert mod.why_stale(None, new, book) == ["never executed here"]
    assert mod.why_stale({"succeeded": False, "inputs": new}, new, book) == ["its last execution failed"]
    assert mod.why_stale({"succeeded": True, "inputs": new}, new, book) == []
    was = dict(new, notebook="x", package="y")
    assert mod.why_stale({"succeeded": True, "inputs": was}, new, book) == ["notebook changed", "package changed"]
    gone = {"succeeded": True, "inputs": new, "figures": ["part1-roofline.png"]}
    assert mod.why_stale(gone, new, book) == ["figure files missing: _static/figures/part1-roofline.png"]


def test_each_part_s_reads_cover_the_parts_its_module_imports():
    """Part.reads names at least every part module a part's module imports (and theirs): a part that builds on
    another's page reads that part's runs, whatever the last build happened to open."""
    import re

    from inference_wall.parts import MODULES
    from inference_wall.parts.protocol import runs_read
    from inference_wall.schema import PARTS

    mod = _script()
    imports = {}
    for n, m in MODULES.items():
        imports[n] = {int(k) for k in re.findall(r"\bp0(\d)\b", Path(m.__file__).read_text()) if int(k) != n}
    for n, m in MODULES.items():
        seen, todo = set(), set(imports[n])
        while todo:
            k = todo.pop()
            if k not in seen:
                seen.add(k)
                todo |= imports.get(k, set())
        assert {PARTS[k] for k in seen} <= set(runs_read(m.PART)), m.NAME
        assert mod.data_inputs(f"notebooks/{m.NAME}") == [f"data/runs/{r}" for r in runs_read(m.PART)] + list(
            mod.SHARED_DATA)
        # its evidence page is keyed on the same runs: rebuilt when they change, as the part's page is
        assert mod.data_inputs(f"notebooks/{m.NAME}-evidence") == mod.data_inputs(f"notebooks/{m.NAME}")
    stems = {p.stem.removesuffix("-evidence") for p in (ROOT / "notebooks").glob("0*.md")}
    assert stems == {m.NAME for m in MODULES.values()}  # every part page (and evidence page) is a part's


def test_reads_name_known_parts_only():
    from inference_wall.parts import protocol

    part = protocol.Part("01-hit-the-wall", {}, None, None, None, None, None, reads=("03-cliff",))
    with pytest.raises(ValueError, match="unknown part"):
        protocol.runs_read(part)
    ok = protocol.Part("01-hit-the-wall", {}, None, None, None, None, None, reads=("00-inside-a-step",
                                                                                     "01-hit-the-wall"))
    assert protocol.runs_read(ok) == ("01-hit-the-wall", "00-inside-a-step")


# ---------------------------------------------------------------------------------------------
# What a notebook read: its kernel notes it, the build checks it against the page's key
# ---------------------------------------------------------------------------------------------
def test_the_kernel_hook_notes_each_runs_folder_opened_or_listed_once(tmp_path):
    runs = tmp_path / "data" / "runs"
    for part in ("01-hit-the-wall", "03-batching-cliff", "05-four-bits"):
        (runs / part / "rig" / "p").mkdir(parents=True)
        (runs / part / "rig" / "p" / "manifest.json").write_text("{}")
    (tmp_path / "other.txt").write_text("x")
    log = tmp_path / "reads"
    code = (f"exec(open({str(ROOT / 'scripts' / 'record-runs-read.py')!r}).read())\n"
            "import os, pathlib\n"
            f"open({str(runs / '01-hit-the-wall' / 'rig' / 'p' / 'manifest.json')!r}).read()\n"
            f"open({str(runs / '01-hit-the-wall' / 'rig' / 'p' / 'manifest.json')!r}).read()\n"
            f"list(pathlib.Path({str(runs / '03-batching-cliff')!r}).iterdir())\n"
            f"os.chdir({str(runs)!r}); list(pathlib.Path('05-four-bits').glob('*/*'))\n"
            f"open({str(tmp_path / 'other.txt')!r}).read(); os.listdir({str(runs)!r})\n")
    env = {**os.environ, "IW_READS_LOG": str(log), "IW_READS_UNDER": str(runs)}
    import subprocess

    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    assert log.read_text().split() == ["01-hit-the-wall", "03-batching-cliff", "05-four-bits"]


def test_a_read_the_key_does_not_cover_is_named():
    mod = _script()
    keyed = {"notebook": "x", "data/runs/02-prefill-freeze": "a", "data/runs/01-hit-the-wall": "b", "data/rigs": "c"}
    record = {"runs_read": ["01-hit-the-wall", "00-inside-a-step", "02-prefill-freeze"]}
    assert mod.unkeyed_reads(record, keyed) == ["data/runs/00-inside-a-step"]
    assert mod.unkeyed_reads(record, {**keyed, "data/runs/00-inside-a-step": "d"}) == []
    assert mod.unkeyed_reads(record, {"data/runs": "all"}) == mod.unkeyed_reads(record, {"data": "all"}) == []
    assert mod.unkeyed_reads({}, keyed) == []  # a record of an older build: nothing noted


@pytest.mark.book
def test_a_new_point_re_executes_exactly_the_pages_that_read_its_part_s_runs(tmp_path):
    """For each part: a point added to its runs (in a book of the same pages, in a temporary folder) makes the build
    execute again every notebook whose last execution read that part's runs (what its kernel noted in the last make
    book's records), and no other part's page; a book/ page (keyed on all of data/) runs again whenever it reads it."""
    import shutil

    from inference_wall.schema import PARTS

    mod = _script()
    pages = mod.notebook_pages(ROOT)
    records = {d: mod.read_record(ROOT, d) for d in pages}
    unread = [d for d, r in records.items() if not (r and r.get("succeeded") and "runs_read" in r)]
    if unread:
        pytest.fail(f"no record of what {', '.join(unread)} read: build the book first (make book, or make test)")
    root = tmp_path / "book"
    files = {"_toc.yml": (ROOT / "_toc.yml").read_text(), "requirements.lock": "pandas\n",
             "src/inference_wall/__init__.py": "", "data/reference/x.csv": "a\n", "data/rigs/r.json": "{}",
             "data/models/m/config.json": "{}"}
    files |= {f"{d}.md": (ROOT / f"{d}.md").read_text() for d in pages}
    files |= {f"data/runs/{part}/rig/point-1/manifest.json": '{"status": "complete"}' for part in PARTS.values()}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert mod.notebook_pages(root) == pages
    executed = {d: {"succeeded": True, "inputs": mod.input_parts(d, root)} for d in pages}
    part_pages = {d for d in pages if d.startswith("notebooks/")}
    for part in PARTS.values():
        point = root / "data" / "runs" / part / "rig" / "point-2"
        point.mkdir()
        (point / "manifest.json").write_text('{"status": "complete"}')
        again = {d for d in pages if mod.why_stale(executed[d], mod.input_parts(d, root), root)}
        readers = {d for d in pages if part in records[d]["runs_read"]}
        # a part's page and its evidence page share one key (the part's reads): where the evidence page reads a
        # part's runs, the page is executed again with it, although it may show none of them itself
        unit = readers | {d.removesuffix(mod.EVIDENCE) for d in readers if d.endswith(mod.EVIDENCE)}
        said = f"a point of {part}: executed again {sorted(again)}; read by {sorted(readers)}"
        assert again & part_pages == unit & part_pages, said
        assert readers <= again, said
        shutil.rmtree(point)
    assert not any(mod.why_stale(executed[d], mod.input_parts(d, root), root) for d in pages)


# ---------------------------------------------------------------------------------------------
# A failed notebook prints its own error, whatever the job count
# ---------------------------------------------------------------------------------------------
CELL_ERROR = """Traceback (most recent call last):
  File "jupyter_cache/executors/utils.py", line 58, in single_nb_execution
nbclient.exceptions.CellExecutionError: An error occurred while executing the following cell:
------------------
tables = p03.tables(data_dir)
view = p03.view(rig, tables)
------------------

---------------------------------------------------------------------------
KeyError                                  Traceback (most recent call last)
Cell In[3], line 2
----> 2 view = p03.view(rig, tables)
KeyError: 'running_max'
"""


def test_the_error_shown_is_the_failing_cell_and_its_traceback_tail():
    shown = _script().error_tail(CELL_ERROR)
    assert "view = p03.view(rig, tables)" in shown and shown.rstrip().endswith("KeyError: 'running_max'")
    assert "single_nb_execution" not in shown  # the executor's own frames are not the notebook's error
    long = CELL_ERROR.replace("KeyError: 'running_max'", "\n".join(f"  frame {i}" for i in range(100)) + "\nKeyError: 'x'")
    shown = _script().error_tail(long)
    assert "lines left out" in shown and shown.rstrip().endswith("KeyError: 'x'") and len(shown.splitlines()) < 45


@pytest.mark.parametrize("n_jobs", [1, 4])
def test_a_failed_notebook_s_error_and_report_are_shown_and_kept(book, capsys, n_jobs):
    mod = _script(FAKE_READS)
    # a stand-in worker: part 3 fails with CELL_ERROR, the others succeed (records as execute_one writes them)
    worker = book / "worker.py"
    worker.write_text(f"""import json, sys, time
from pathlib import Path
root, doc = Path(sys.argv[1]), sys.argv[2]
inputs = json.loads(sys.stdin.read())
base = root / "_build" / "executed" / doc
base.parent.mkdir(parents=True, exist_ok=True)
ok = not doc.endswith("03-batching-cliff")
rec = {{"docname": doc, "inputs": inputs, "succeeded": ok, "runtime": 0.1, "finished": time.time(),
       "error": None if ok else "CellExecutionError"}}
if ok:
    base.with_name(base.name + ".ipynb").write_text("{{}}")
else:
    base.with_name(base.name + ".err.log").write_text({CELL_ERROR!r})
    rec["report"] = str(base.with_name(base.name + ".err.log").relative_to(root))
base.with_name(base.name + ".json").write_text(json.dumps(rec))
sys.exit(0 if ok else 1)
""")
    assert mod.execute_stale(book, n_jobs=n_jobs, worker=[sys.executable, str(worker), str(book)]) == 1
    out = capsys.readouterr().out
    assert "notebooks/03-batching-cliff: executing (never executed here)" in out
    assert "notebooks/03-batching-cliff: FAILED (CellExecutionError; report _build/executed/notebooks/03-batching-cliff.err.log)" in out
    assert "view = p03.view(rig, tables)" in out and "KeyError: 'running_max'" in out
    assert (book / "_build/executed/notebooks/03-batching-cliff.err.log").is_file()
    # a second build runs the failed one alone
    assert mod.execute_stale(book, n_jobs=n_jobs, worker=[sys.executable, str(worker), str(book)]) == 1
    out = capsys.readouterr().out
    assert "2 of 3 notebooks unchanged" in out and "03-batching-cliff: executing (its last execution failed)" in out
    assert "01-hit-the-wall: executing" not in out


def test_a_notebook_that_read_runs_its_key_does_not_cover_fails_and_runs_again(book, capsys):
    """Part 1's page read part 3's runs, which its key (FAKE_READS) leaves out: the build fails and says what to
    declare, and the next build executes it again (and would until its Part.reads names them)."""
    mod = _script(FAKE_READS)
    worker = book / "worker.py"
    worker.write_text("""import json, sys, time
from pathlib import Path
root, doc = Path(sys.argv[1]), sys.argv[2]
base = root / "_build" / "executed" / doc
base.parent.mkdir(parents=True, exist_ok=True)
base.with_name(base.name + ".ipynb").write_text("{}")
reads = ["01-hit-the-wall", "03-batching-cliff"] if doc.endswith("01-hit-the-wall") else []
rec = {"docname": doc, "inputs": json.loads(sys.stdin.read()), "succeeded": True, "runtime": 0.1,
       "finished": time.time(), "error": None, "runs_read": reads}
base.with_name(base.name + ".json").write_text(json.dumps(rec))
""")
    run = [sys.executable, str(worker), str(book)]
    assert mod.execute_stale(book, n_jobs=1, worker=run) == 1
    out = capsys.readouterr().out
    assert ("notebooks/01-hit-the-wall: FAILED: it read data/runs/03-batching-cliff, which its key does not cover"
            in out)
    assert mod.read_record(book, "notebooks/01-hit-the-wall")["error"] == "UnkeyedRead"
    assert mod.execute_stale(book, n_jobs=1, worker=run) == 1
    assert "01-hit-the-wall: executing (its last execution failed)" in capsys.readouterr().out
