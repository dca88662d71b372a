"""A verdict in the book's prose comes from the data the sentence cites, never from typed text.

The claims engine's verdicts (claims.HOLDS, DIFFERS, INCONCLUSIVE) reach a page only through the code that judges:
a markdown sentence of a page (notebooks/*.md's markdown cells, book/*.md) that types one fails, glued numbers or
not. "holds" counts as a verdict where it stands without an object ("the claim holds", "holds on every rig",
"holds when ..."), not where something is held ("a request holds 3 pages", "holds memory"). A comparison a reader
takes for a finding ("faster", "slower", "only", "because", "bends") needs the number behind it in the same
sentence: a glue role ({glue:text}`name`, {glue}`name`); a sentence that types one without any fails.

Sentences that use these words for a definition or a method (what the verdicts mean, "only measured rigs
appear") are listed, each with its reason, in tests/verdict_words_allowlist.py; so are sentences flagged where
another engineer edits the page, marked pending. The list is checked both ways: an entry that no longer matches a
flagged sentence fails too, so it cannot outlive the sentence it was reviewed for, and its length is capped.

What is read: markdown cells only (code cells' words are computed), with fenced blocks, inline code (a name: a
column, a flag), glue roles and link targets taken out before the words are looked for.
"""
from __future__ import annotations

import re
from pathlib import Path

import jupytext
import pytest

from inference_wall.measure.claims import DIFFERS, HOLDS, INCONCLUSIVE

from verdict_words_allowlist import ALLOWED, MAX_ENTRIES, PENDING

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "notebooks").glob("*.md")) + sorted((ROOT / "book").glob("*.md"))

CLAIM_WORDS = (HOLDS, DIFFERS, INCONCLUSIVE)  # the engine's verdict words
COMPARISON_WORDS = ("faster", "slower", "only", "because", "bends")
# what follows "holds" used as a verdict (intransitive): the end of a clause, or a word that qualifies the verdict
# (where, when, on which rigs); anything else is what is held
VERDICT_AFTER_HOLDS = re.compile(r"\s*(?:$|[.,;:!?)*_]|(?:on|for|when|where|wherever|whenever|in|at|here|there|across|"
                                 r"everywhere|nowhere|only|if|once|while|until|up|true|still|again|too|within|"
                                 r"but|or|because|so|then|even|exactly|roughly|approximately)\b)", re.IGNORECASE)

GLUE = re.compile(r"\{glue(?::[a-z]+)?\}`[^`]*`")
CODE = re.compile(r"`[^`]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
DIRECTIVE_LINE = re.compile(r"^[ \t]*(?::::+.*|:[a-z-]+:.*|%.*|<!--.*?-->)$", re.MULTILINE)
ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+\.)[ \t]+")
# a full stop, then a capital, a number, a glue role or markup, or a name like vLLM or fp8
SENTENCE_END = re.compile(r"(?<=[.!?])[*_)\]]*\s+(?=[*_(\[{`]*(?:[A-Z0-9{`]|[a-z]+[A-Z0-9]))")


def _words(words) -> re.Pattern:
    return re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)


CLAIM_RE, COMPARISON_RE = _words(CLAIM_WORDS), _words(COMPARISON_WORDS)


def markdown_text(path: Path) -> str:
    """The page's markdown cells (a page without a kernelspec is one markdown cell)."""
    nb = jupytext.read(path)
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def sentences(text: str) -> list[str]:
    """The prose sentences of markdown text: headings and list items stand alone, paragraphs split at a full stop
    that a capital (or a number, a glue role, markup) follows; a paragraph that stops without a full stop goes on
    in the next (a formula set on its own between)."""
    text = DIRECTIVE_LINE.sub("", FENCE.sub("\n\n", text))
    units: list[list[str]] = []
    current: list[str] | None = None  # the paragraph that the next line continues
    for block in re.split(r"\n[ \t]*\n", text):
        if current is not None and re.search(r"[.!?:;][*_)\]]*$", current[-1]):
            current = None
        for line in block.splitlines():
            if not line.strip():
                continue
            heading, item = line.lstrip().startswith("#"), ITEM.match(line)
            if heading or item or current is None:
                current = [ITEM.sub("", line).strip()]
                units.append(current)
                if heading:
                    current = None
            else:
                current.append(line.strip())
        if current is not None and len(units) and units[-1] is current and ITEM.match(block.lstrip()):
            current = None  # a list's last item does not run on into the paragraph after it
    out = []
    for unit in units:
        joined = " ".join(unit).strip()
        out.extend(s.strip() for s in SENTENCE_END.split(joined) if s.strip())
    return out


def flagged(sentence: str) -> list[str]:
    """The verdict words a sentence types without the data behind them: every claim verdict, and a comparison
    word where the sentence cites no glued value."""
    bare = LINK_TARGET.sub("]", CODE.sub(" ", GLUE.sub(" ", sentence)))
    found = [m.group(1).lower() for m in CLAIM_RE.finditer(bare)
             if m.group(1).lower() != HOLDS or VERDICT_AFTER_HOLDS.match(bare, m.end())]
    if not GLUE.search(sentence):
        found += [m.group(1).lower() for m in COMPARISON_RE.finditer(bare)]
    return found


def page_flags(path: Path) -> list[tuple[str, list[str]]]:
    return [(s, w) for s in sentences(markdown_text(path)) if (w := flagged(s))]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _allowed(page: str, sentence: str) -> bool:
    return any(p == page and snippet in sentence for p, snippet, _ in ALLOWED)


@pytest.mark.parametrize("path", PAGES, ids=_rel)
def test_no_verdict_is_typed_into_prose(path):
    page = _rel(path)
    typed = [f"{', '.join(dict.fromkeys(w))}: {s}" for s, w in page_flags(path) if not _allowed(page, s)]
    assert typed == [], (f"{page}: a verdict typed into prose; glue it from the data (a part's words function, "
                         "claims' verdicts) or reword it, or list a definition in tests/verdict_words_allowlist.py "
                         "with its reason:\n" + "\n".join(typed))


def test_every_allowlist_entry_is_reviewed_and_still_needed():
    assert len(ALLOWED) <= MAX_ENTRIES, "the allowlist is for definitions and method, not for findings"
    pages = {_rel(p): p for p in PAGES}
    for page, snippet, reason in ALLOWED:
        assert page in pages, f"{page}: no such page"
        assert len(reason.split()) >= 4, f"{page}: {snippet!r} needs its reason"
        assert PENDING[0] not in reason or page.startswith("notebooks/00-"), f"{page}: not part 0's page"
        hits = [s for s, _ in page_flags(pages[page]) if snippet in s]
        assert len(hits) == 1, (f"{page}: {snippet!r} matches {len(hits)} flagged sentences: "
                                "remove a stale entry, or make its snippet name one sentence")


def test_the_guard_catches_a_typed_verdict():
    page = ("Part 1 left a gap.\n\n## The cap\n\nThe claim holds on every rig. fp8 is faster than fp16, because "
            "it reads fewer bytes.\n\n- The step bends at {glue:text}`bend_batch:.0f` sequences.\n"
            "- Only `differs` is a column.\n\n```{code-cell} ipython3\nprint('holds')\n```\n")
    got = [(s, flagged(s)) for s in sentences(page)]
    assert got == [("Part 1 left a gap.", []), ("## The cap", []), ("The claim holds on every rig.", ["holds"]),
                   ("fp8 is faster than fp16, because it reads fewer bytes.", ["faster", "because"]),
                   ("The step bends at {glue:text}`bend_batch:.0f` sequences.", []),
                   ("Only `differs` is a column.", ["only"])]
    # a glued number does not excuse a typed claim verdict: the verdict itself must be glued
    assert flagged("It {glue:text}`verdict` on {glue:text}`n:.0f` rigs, and holds on the rest.") == ["holds"]
    # what is held is not a verdict; a sentence that runs on past a formula is one sentence
    assert flagged("A request holds {glue:text}`pages:.0f` pages, and the pool holds memory.") == []
    assert sentences("A request of T tokens therefore holds\n\npages(T) = 2 x T\n\npages.") == [
        "A request of T tokens therefore holds pages(T) = 2 x T pages."]
    assert flagged("Where the pool is small the claim holds.") == ["holds"]
    # a link's target is not prose
    assert flagged("See [the method](method.md#only-because).") == []
