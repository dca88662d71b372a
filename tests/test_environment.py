"""environment.yml (for GPU users) must pin what pyproject.toml pins, and its Python must be allowed."""
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]


def _env():
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def _env_pip() -> dict[str, Requirement]:
    pip = next(d["pip"] for d in _env()["dependencies"] if isinstance(d, dict) and "pip" in d)
    reqs = [Requirement(line.split("#")[0].strip()) for line in pip if not line.startswith("-")]
    return {r.name.lower(): r for r in reqs}


def test_every_runtime_dependency_is_pinned_identically():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = _env_pip()
    for dep in project["dependencies"]:
        req = Requirement(dep)
        assert req.name.lower() in env, f"{req.name} is in pyproject.toml but not in environment.yml"
        assert str(env[req.name.lower()].specifier) == str(req.specifier), f"{req.name}: pins differ"


def test_python_version_is_allowed_by_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    py = next(d for d in _env()["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert SpecifierSet(project["requires-python"]).contains(py.split("=", 1)[1] + ".0")


def test_environment_installs_the_project_and_vllm():
    pip = next(d["pip"] for d in _env()["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-e ." in pip
    assert "vllm" in _env_pip()
