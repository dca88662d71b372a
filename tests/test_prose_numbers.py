"""Every number in a part's prose comes from data: markdown cells hold no digits outside glue roles.

Names that contain digits (a model, a GPU, a percentile, a part's number, a date in a citation) are
allowed by pattern; anything else with a digit is a number typed into prose and fails.
"""
import re
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.md"))

GLUE = re.compile(r"\{glue:(?:text|)\}`[^`]+`")
CODE = re.compile(r"`[^`]*`")
ALLOWED = re.compile(
    r"Qwen3\.5-4B|A10G|H200|H100|h200|h100|fp16|p50|p99|E2E|Figure \d+[a-z]?|Part \d+|part \d+|[Pp]art \d+'s|"
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December) \d{1,2}, \d{4}|"
    r"\]\([^)\s]+\)|"  # a link's target (another part's page) is a name, not a number
    r"^# .*$",  # the page title names the part
    re.MULTILINE,
)


def prose(path: Path) -> str:
    nb = jupytext.read(path)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def typed_numbers(text: str) -> list[str]:
    text = ALLOWED.sub(" ", CODE.sub(" ", GLUE.sub(" ", text)))
    return re.findall(r"[^\s]*\d[^\s]*", text)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_number_is_typed_into_prose(path):
    assert typed_numbers(prose(path)) == []


def test_the_check_catches_a_typed_number():
    assert typed_numbers("the knee sits at 7 req/s, {glue:text}`knee:.0f` measured") == ["7"]
    assert typed_numbers("[part 6](06-past-one-gpu.md) reads 8 GB") == ["8"]  # a link target is not a number


def test_every_glued_name_is_glued_by_the_notebook():
    for path in NOTEBOOKS:
        nb = jupytext.read(path)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        for name in re.findall(r"\{glue:text\}`([^`:]+)", prose(path)):
            assert re.search(rf"""\bg(?:lue)?\(\s*["']{re.escape(name)}["']|\bg\((key|name)""", code) or \
                   re.search(rf"""["']{re.escape(name)}["']""", code), f"{path.name}: {name} is never glued"
