"""The package's shape as tests: which module may import which (the import graph, lazy imports inside functions
included: a circle closed inside a function is still a circle)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "inference_wall"


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that `name` imports, anywhere in its file (`from . import x` names module x)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in known:
                    found.add(f"{target}.{alias.name}")
                elif target in known:
                    found.add(target)
    return found - {name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


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
    assert "inference_wall.model.pools" in edges["inference_wall.parts"]  # a function's `from ..model.pools import`
    assert "inference_wall.parts.p02" in edges["inference_wall.parts.mixedsteps"]  # `from . import p02`
