"""The package's layout shows its architecture (issue 25): a few folders by layer, and imports that point down.

From the bottom: the names every layer shares (errors, schema, words, the package's own __init__), what stores and parses
records (records/), analysis and judgement over records (measure/), the model's shape and memory (model/), what runs
vLLM and the client (run/), the parts (parts/), what the pages show above the parts (pages/, and the charts in
figures/), and the command line (cli, __main__). A module imports only its own layer or lower ones; every import
counts, a function's own included (ast.walk sees them all).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "inference_wall"

# rank: a module may import from its own rank or a lower one
LAYERS = {
    "": 0, "errors": 0, "schema": 0, "words": 0,  # "": the package's __init__ (__version__); words: a reader's numbers
    "records": 1,
    "measure": 2,
    "model": 3,
    "run": 4,
    "parts": 5,
    "pages": 6, "figures": 6,
    "cli": 7, "__main__": 7,
}
TOP_MODULES = {"__init__.py", "__main__.py", "cli.py", "errors.py", "schema.py", "words.py"}
TOP_FOLDERS = {"records", "measure", "model", "run", "parts", "pages", "figures"}


def module_name(path: Path, src: Path = SRC) -> tuple[str, bool]:
    """(dotted name under the package, is a package's __init__) of a source file."""
    rel = path.relative_to(src).with_suffix("")
    if rel.name == "__init__":
        return ".".join(rel.parts[:-1]), True
    return ".".join(rel.parts), False


def is_module(dotted: str, src: Path = SRC) -> bool:
    path = src.joinpath(*dotted.split(".")) if dotted else src
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(path: Path, src: Path = SRC) -> list[tuple[int, str]]:
    """(line, dotted module under the package) of every import of the package in `path`, relative or absolute,
    at module level or inside a function."""
    name, is_pkg = module_name(path, src)
    here = name.split(".") if name else []
    package = here if is_pkg else here[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name.split(".", 1)[1] if "." in a.name else "")
                      for a in node.names if a.name.split(".")[0] == "inference_wall"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                assert node.level - 1 <= len(package), f"{path}:{node.lineno}: import beyond the package"
                base = package[:len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "inference_wall":
                base = node.module.split(".")[1:]
            else:
                continue
            base_name = ".".join(base)
            for a in node.names:  # `from . import store` names a module; `from .store import x` an attribute of one
                sub = f"{base_name}.{a.name}" if base_name else a.name
                found.append((node.lineno, sub if is_module(sub, src) else base_name))
    return found


def rank(dotted: str) -> int:
    return LAYERS[dotted.split(".")[0]]


def upward_imports(src: Path = SRC) -> list[str]:
    bad = []
    for path in sorted(src.rglob("*.py")):
        name, _ = module_name(path, src)
        for line, target in imports_of(path, src):
            if rank(target) > rank(name):
                bad.append(f"{path.relative_to(src)}:{line}: {name or '__init__'} (layer {rank(name)}) imports "
                           f"{target} (layer {rank(target)})")
    return bad


def test_every_import_points_down():
    assert upward_imports() == []


def test_the_top_level_holds_only_the_shared_names_the_entry_points_and_the_layers():
    entries = {p.name for p in SRC.iterdir() if p.name != "__pycache__"}
    assert {e for e in entries if e.endswith(".py")} == TOP_MODULES
    assert {e for e in entries if (SRC / e).is_dir()} == TOP_FOLDERS
    assert entries == TOP_MODULES | TOP_FOLDERS
    assert all((SRC / d / "__init__.py").is_file() for d in TOP_FOLDERS)
    assert set(LAYERS) == {""} | {m[:-3] for m in TOP_MODULES - {"__init__.py"}} | TOP_FOLDERS


def test_every_module_has_a_layer():
    assert all(module_name(p)[0].split(".")[0] in LAYERS for p in SRC.rglob("*.py"))


@pytest.mark.parametrize("source, where, target", [
    ("from ..parts import p01\n", "records/x.py", "parts.p01"),
    ("def f():\n    from .. import parts\n", "model/x.py", "parts"),
    ("from inference_wall.run.sweep import PointPlan\n", "measure/x.py", "run.sweep"),
    ("import inference_wall.cli\n", "pages/x.py", "cli"),
    ("from . import sweep\n", "run/__init__.py", "run.sweep"),
])
def test_the_check_finds_an_upward_import(tmp_path, source, where, target):
    src = tmp_path / "inference_wall"
    for folder in TOP_FOLDERS:
        (src / folder).mkdir(parents=True)
        (src / folder / "__init__.py").write_text("")
    for module in ("cli.py", "errors.py", "parts/p01.py", "run/sweep.py"):
        (src / module).write_text("")
    (src / where).write_text(source)
    found = upward_imports(src)
    if rank(module_name(src / where, src)[0]) >= rank(target):
        assert found == []
    else:
        assert len(found) == 1 and found[0].endswith(f"imports {target} (layer {rank(target)})"), found


def test_a_downward_or_sideways_import_passes(tmp_path):
    src = tmp_path / "inference_wall"
    for folder in TOP_FOLDERS:
        (src / folder).mkdir(parents=True)
        (src / folder / "__init__.py").write_text("")
    (src / "errors.py").write_text("")
    (src / "records" / "store.py").write_text("")
    (src / "run" / "sweep.py").write_text("from ..records.store import x\nfrom .. import errors, __version__\n"
                                          "def f():\n    from . import lock\n")
    assert upward_imports(src) == []


def test_the_repository_root_and_the_data_dir_are_defined_once():
    """schema.REPO and schema.DATA_DIR: no other module finds the repository from its own file's place, nor spells
    the data folder's path (issue 25: the root was computed in six modules, three levels up or two)."""
    from inference_wall import schema

    assert (schema.REPO / "pyproject.toml").is_file() and schema.DATA_DIR == schema.REPO / "data"
    found = []
    for path in SRC.rglob("*.py"):
        if path.name == "schema.py" and path.parent == SRC:
            continue
        text = path.read_text()
        found += [f"{path.relative_to(SRC)}: {needle}" for needle in ("resolve().parents[", 'REPO / "data"')
                  if needle in text]
    assert not found, found
