"""The package's shape as tests: which module may import which (the import graph, lazy imports inside functions
included: a circle closed inside a function is still a circle)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import test_layout as layout

PACKAGE = layout.SRC


def module_name(path: Path) -> str:
    """The dotted name of a source file of the package (inference_wall.parts.p06.view)."""
    name, _ = layout.module_name(path)
    return f"inference_wall.{name}" if name else "inference_wall"


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def _from_target(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` names, its relative dots resolved from `package`."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, path: Path) -> set[str]:
    """The package's modules that `name` imports, anywhere in its file (tests/test_layout.py's reading of imports:
    `from . import x` names module x)."""
    return {f"inference_wall.{t}" if t else "inference_wall" for _, t in layout.imports_of(path)} - {name}


def graph() -> dict[str, set[str]]:
    return {name: imports_of(name, path) for name, path in modules().items()}


def circles(nodes: set[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module among `nodes` (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in nodes:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


@pytest.mark.parametrize("folder", ["model"])
def test_no_import_circle_inside(folder):
    edges = graph()
    inside = {m for m in edges if m.startswith(f"inference_wall.{folder}.") or m == f"inference_wall.{folder}"}
    assert circles(inside, edges) == []


def test_the_model_s_arithmetic_reads_no_runs():
    """kvcache and weightbytes are arithmetic over a config (and a parsed log); modelshape reads a preset's config;
    only model/pools.py, above them, reads stored runs."""
    edges = graph()
    for name in ("kvcache", "weightbytes", "modelshape"):
        reached = {m for m in edges[f"inference_wall.model.{name}"] if m.startswith("inference_wall.records")}
        assert not reached, f"model/{name}.py imports {sorted(reached)}"
    assert not edges["inference_wall.model.kvcache"] & {"inference_wall.model.modelshape", "inference_wall.model.weightbytes"}
    assert not edges["inference_wall.model.weightbytes"] & {"inference_wall.model.modelshape", "inference_wall.model.kvcache"}


def test_the_graph_sees_lazy_and_package_imports():
    edges = graph()
    assert "inference_wall.model.pools" in edges["inference_wall.parts.protocol"]  # a function's `from ..model.pools import`
    assert "inference_wall.parts.injections" in edges["inference_wall.parts.p00.stepinputs"]  # a function's `from .. import injections`


# ---------------------------------------------------------------------------------------------
# Parts: a folder per part, one file per job, only PART crossing between parts
# ---------------------------------------------------------------------------------------------
PARTS_DIR = PACKAGE / "parts"
JOB_FILES = {"__init__.py", "plan.py", "tables.py", "view.py", "claims.py", "words.py"}
FOLDERS = ["p06", "p05", "p04", "p03", "p02", "p01", "p00"]  # every part is a folder (issue 44)
MAX_LINES = 400
NOT_YET_SPLIT: set[str] = set()  # every file of parts/ is within MAX_LINES


@pytest.mark.parametrize("part", FOLDERS)
def test_a_part_is_a_folder_with_the_same_job_files(part):
    files = {p.name for p in (PARTS_DIR / part).glob("*.py")}
    assert JOB_FILES <= files, f"parts/{part}/ lacks {sorted(JOB_FILES - files)}"
    assert not (PARTS_DIR / f"{part}.py").exists()
    init = (PARTS_DIR / part / "__init__.py").read_text()
    assert "\nPART = Part(" in init


def test_no_file_of_parts_is_over_400_lines():
    long = {str(p.relative_to(PARTS_DIR)): n for p in PARTS_DIR.rglob("*.py") if p.name not in NOT_YET_SPLIT
            and (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def _part_of(module: str) -> str | None:
    """The part a module of parts/ belongs to ('p06' for parts.p06.view), None for the wings and the protocol."""
    bits = module.split(".")
    return bits[2] if len(bits) > 2 and bits[1] == "parts" and bits[2][:2] == "p0" else None


def crossings(text: str, name: str, package: bool = False) -> list[str]:
    """What module `name` (a package's __init__ where `package`), whose source is `text`, imports from a part that
    is not its own, besides that part's PART."""
    mine = _part_of(name)
    package = name if package else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            target = _from_target(node, package)
            for alias in node.names:
                full = f"{target}.{alias.name}"
                other = _part_of(full) if _part_of(target) is None else _part_of(target)
                if other and other != mine and not (_part_of(target) == other and alias.name == "PART"):
                    out.append(f"{full}")
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if _part_of(a.name) not in (None, mine)]
    return out


@pytest.mark.parametrize("part", FOLDERS)
def test_a_part_imports_no_other_part_s_module_only_its_part(part):
    """No exception: what part 0 read of part 2's (its injections' readers and tables, the prefill's roofline) is the
    injections wing's (parts/injections.py), which both read (issue 44)."""
    found = {}
    for path in sorted((PARTS_DIR / part).glob("*.py")):
        crossed = crossings(path.read_text(), module_name(path), path.name == "__init__.py")
        if crossed:
            found[f"{part}/{path.name}"] = sorted(set(crossed))
    assert found == {}


def test_part_2_s_names_for_injections_are_the_wing_s():
    """Part 2 re-exports the wing's readers under its old names (notebooks and tests call p02.injection_table), the
    same functions part 0 reads: one definition, not two."""
    from inference_wall.parts import injections, p02

    for name in ("point_injections", "injection_table", "injections_of", "freeze_table", "chunk_step_table",
                 "config_label", "measured_points", "steps_timed", "matmul_params", "INJECTION_COLUMNS"):
        assert getattr(p02, name) is getattr(injections, name), name
    assert (p02.NAME, p02.OFF) == (injections.NAME, injections.OFF)  # the folder part 0 reads, chunking off


# What reads the data dir: the modules of the runs' points and artefacts, their manifests, the published reference,
# the rig profiles; and the functions that read, wherever they come from (the injections wing's readers of part 2's
# sessions among them), called by name or through their module
READERS = {"inference_wall.records.store", "inference_wall.records.record", "inference_wall.records.reference",
           "inference_wall.records.poller", "inference_wall.run.rig"}
READ_CALLS = {"read_csv", "read_text", "read_json", "read_parquet", "open", "read_log", "parse_bench", "load_points",
              "read_artefact", "open_artefact", "load_reference", "load_profile", "read_record", "rigs_with_data",
              "injection_table", "injections_of", "point_injections", "measured_points"}


def disk_reads(path: Path) -> set[str]:
    """What a module of a part reads the disk with: the reader modules it imports (lazily too), the reading calls."""
    calls = {(n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None))
             for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)}
    return (imports_of(module_name(path), path) & READERS) | {f"{c}()" for c in calls & READ_CALLS}


# A part's tables.py is the only file of it that reads the disk (issue 44, the last item: part 0's); the files that
# still read it besides (part 1's plan and view). This list may only shrink: an entry no longer found fails too.
STILL_READING = {"p01/plan.py", "p01/view.py"}


@pytest.mark.parametrize("part", FOLDERS)
def test_a_part_reads_the_disk_in_its_tables_only(part):
    reading = {f"{part}/{p.name}" for p in sorted((PARTS_DIR / part).glob("*.py"))
               if p.name != "tables.py" and disk_reads(p)}
    assert reading == {k for k in STILL_READING if k.startswith(f"{part}/")}


def test_the_disk_rule_sees_a_read():
    assert not disk_reads(PARTS_DIR / "p00" / "mixed.py")  # part 0's mixed steps take what tables.mixed_inputs read
    assert disk_reads(PARTS_DIR / "p00" / "tables.py") >= {"inference_wall.records.store"}
    assert disk_reads(PARTS_DIR / "p00" / "tables.py") >= {"read_csv()"}  # the frozen predictions
    assert "injection_table()" in disk_reads(PARTS_DIR / "p00" / "tables.py")  # a wing's reader, through its module
    assert not disk_reads(PARTS_DIR / "p00" / "stepinputs.py")  # the servers' starts and part 2's freezes: tables'


REGISTRY = {PARTS_DIR / "__init__.py", PARTS_DIR / "registry.py"}  # the registry (MODULES) and the runner over it


@pytest.mark.parametrize("wing", sorted(p.name for p in PARTS_DIR.glob("*.py") if p not in REGISTRY))
def test_a_wing_of_parts_imports_no_part(wing):
    """protocol.py, variants.py, cliffs.py, injections.py, runrequest.py, parameterkinds.py: what the parts share
    imports none of them (not even their PART): the registry alone lists the parts."""
    path = PARTS_DIR / wing
    assert not {m for m in imports_of(module_name(path), path) if _part_of(m)}


def test_parts_has_no_import_circle():
    """No module of parts/ reaches itself through the import graph (lazy imports included): a part's module that
    needs the registry (parts.parameters, parts.plan, parts.page_rigs) reads the protocol's registry-free
    functions instead (protocol.parameters_for, pools_for, page_rigs, rig_parameters)."""
    edges = graph()
    inside = {m for m in edges if m == "inference_wall.parts" or m.startswith("inference_wall.parts.")}
    assert circles(inside, edges) == []


def test_the_crossing_rule_sees_a_crossing():
    text = "from ..p01 import PART\nfrom ..p01.view import rig_view\nfrom .. import p03, variants\nfrom .plan import X\n"
    assert crossings(text, "inference_wall.parts.p06.view") == ["inference_wall.parts.p01.view.rig_view",
                                                                  "inference_wall.parts.p03"]
    assert crossings("from ..p06 import PART\nfrom .plan import X\n", "inference_wall.parts.p06.view") == []


# ---------------------------------------------------------------------------------------------
# Pages: the notebooks and the glance page go through the protocol's door
# ---------------------------------------------------------------------------------------------
BOOK = PACKAGE.parents[1]


@pytest.mark.parametrize("page", sorted(p.relative_to(BOOK).as_posix() for p in
                                        [*(BOOK / "notebooks").glob("*.md"), *(BOOK / "book").glob("*.md")]))
def test_a_notebook_reads_the_page_s_findings_and_calls_part_closing(page):
    """The findings box is page.box, each rig's findings page.findings, the closing words PART.closing: a notebook
    calls no part's key_findings or closing_note of its own."""
    text = (BOOK / page).read_text()
    assert "key_findings(" not in text and "closing_note(" not in text


@pytest.mark.parametrize("page", sorted(p.relative_to(BOOK).as_posix() for p in (BOOK / "notebooks").glob("0[1-6]-*.md")))
def test_another_part_s_page_gets_part_0_s_answers_through_the_protocol(page):
    """Parts 1-6's notebooks call none of part 0's modules (its answers, its step model against their
    measurements): parts.answers gathers them through every part's PART (Part.answers)."""
    text = (BOOK / page).read_text()
    assert "parts.p00" not in text and "import p00" not in text and "stepcheck" not in text


def test_the_glance_page_is_one_loop_over_the_parts_pages():
    """pages/glance.py reads the parts through their protocol pages only: no part module, no rig_view."""
    path = PACKAGE / "pages" / "glance.py"
    text = path.read_text()
    assert "rig_view" not in text
    imported = imports_of(module_name(path), path)
    assert not {m for m in imported if _part_of(m)}, sorted(m for m in imported if _part_of(m))
