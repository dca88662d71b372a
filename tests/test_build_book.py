"""make book's build step runs a build again only when a notebook kernel did not start (a port race, or no answer in time)."""
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("build_book", ROOT / "scripts" / "build-book.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
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
    assert _script().notebook_pages(book) == ["notebooks/01-hit-the-wall", "notebooks/03-batching-cliff", "book/method"]


def test_a_data_file_of_part_3_changes_part_3_s_key_and_not_part_1_s(book):
    mod = _script()
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
    mod = _script()
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
    mod = _script()
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
    mod = _script()
    new = mod.input_parts("notebooks/01-hit-the-wall", book)
    assert mod.why_stale(None, new, book) == ["never executed here"]
    assert mod.why_stale({"succeeded": False, "inputs": new}, new, book) == ["its last execution failed"]
    assert mod.why_stale({"succeeded": True, "inputs": new}, new, book) == []
    was = dict(new, notebook="x", package="y")
    assert mod.why_stale({"succeeded": True, "inputs": was}, new, book) == ["notebook changed", "package changed"]
    gone = {"succeeded": True, "inputs": new, "figures": ["part1-roofline.png"]}
    assert mod.why_stale(gone, new, book) == ["figure files missing: _static/figures/part1-roofline.png"]


def test_each_part_s_runs_cover_the_parts_its_module_imports():
    """RUNS_READ names the other parts' data/runs/ a part reads: at least every part module its own module
    imports (and theirs), so a change of part 1's data re-runs the parts built on it."""
    import re

    mod = _script()
    parts = ROOT / "src" / "inference_wall" / "parts"
    names = {int(n[:2]): n for n in mod.RUNS_READ}
    imports = {}
    for path in parts.glob("p0[1-9]*.py"):
        n = int(path.stem[1:3])
        text = path.read_text()
        imports[n] = {int(m) for m in re.findall(r"\bp0(\d)\b", text) if int(m) not in (0, n)}
    for n, name in names.items():
        seen, todo = set(), set(imports.get(n, ()))
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo |= imports.get(m, set())
        assert {names[m] for m in seen if m in names} <= set(mod.RUNS_READ[name]), name
    stems = {p.stem for p in (ROOT / "notebooks").glob("0*.md")}
    assert set(names.values()) <= stems
    for unlisted in stems - set(names.values()):  # a part not in RUNS_READ reads every part's runs
        assert "data/runs" in mod.data_inputs(f"notebooks/{unlisted}")


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
    mod = _script()
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
