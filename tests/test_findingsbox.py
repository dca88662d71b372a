"""The findings box at the top of each part (inference_wall.pages.findingsbox): leads shown, the rest behind one switch."""
from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from inference_wall.pages import findingsbox
from inference_wall.pages.findingsbox import LONG, MIN_LEAD, TOGGLE_ID, findings_box, split

CSS = Path(__file__).resolve().parents[1] / "_static" / "inference-wall.css"
OPENING = "The flood ceiling on the first rig of the page was set by its pool"  # longer than MIN_LEAD


def box(bullets, **kw):
    return BeautifulSoup(findings_box(bullets, **kw), "html.parser").select_one("div.iw-findings")


def whole(html_li) -> str:
    """A rendered item's text with the fold's ellipsis left out: the lead and the rest as the reader reads them."""
    for more in html_li.select(".iw-more"):
        more.decompose()
    return html_li.get_text()


# ------------------------------------------------------------------------------------------------ split
def test_the_lead_ends_at_the_first_clause_break_and_nothing_is_lost():
    bullet = f"{OPENING}; h200 ran 146; h200-run2 ran 150."
    lead, rest = split(bullet)
    assert lead == OPENING and rest == "; h200 ran 146; h200-run2 ran 150."
    assert lead + rest == bullet


def test_a_bullet_without_a_break_is_all_lead():
    assert split(f"  {OPENING}.  ") == (f"{OPENING}.", "")


def test_a_break_too_early_to_end_a_statement_is_passed_over():
    early = "Short; " + OPENING + "; the rest."
    assert early.index("; ") < MIN_LEAD
    lead, rest = split(early)
    assert lead == "Short; " + OPENING and rest == "; the rest."


@pytest.mark.parametrize("inside", [
    "`--flag a; b`",            # a code span
    "**bold a; b**",            # strong
    "*leaning a; b*",           # emphasis
    "(4 pages; 146 requests)",  # a parenthesis
    "[the claims; below](#claims)",  # a link's text
])
def test_no_lead_ends_inside_a_span(inside):
    bullet = f"{OPENING} {inside} and then; the second fact."
    lead, rest = split(bullet)
    assert lead == f"{OPENING} {inside} and then" and rest == "; the second fact."


# ------------------------------------------------------------------------------------------------ the box
def test_each_bullet_is_one_item_its_rest_folded_and_nothing_reworded():
    bullets = [f"{OPENING}; **h200** ran `146`.", "A short second finding that has no break at all.",
               f"- {OPENING} (a bullet as Markdown, its dash dropped)"]
    b = box(bullets)
    items = b.select("ul.iw-findings-list > li")
    assert len(items) == 3
    first = items[0]
    assert first.select_one(".iw-lead").get_text() == OPENING
    assert first.select_one(".iw-rest").get_text() == "; h200 ran 146."
    assert first.select_one(".iw-rest strong").get_text() == "h200" and first.select_one(".iw-rest code")
    # the folded rest is named in words, not an ellipsis that reads as a cut sentence (issue 41)
    assert first.select_one(".iw-more").get_text().strip() == "(more in full)"
    assert items[1].select(".iw-rest") == [] and items[1].select(".iw-more") == []
    assert whole(items[2]) == f"{OPENING} (a bullet as Markdown, its dash dropped)"
    assert [whole(li) for li in items[:2]] == [f"{OPENING}; h200 ran 146.",
                                               "A short second finding that has no break at all."]


def test_the_switch_comes_first_so_the_title_and_the_list_follow_it():
    b = box([f"{OPENING}; the rest."])
    assert "iw-foldable" in b["class"]
    children = [c for c in b.children if getattr(c, "name", None)]
    assert [c.name for c in children] == ["input", "p", "ul"]
    toggle, title, _ = children
    assert toggle["type"] == "checkbox" and toggle["id"] == TOGGLE_ID and toggle.has_attr("aria-label")
    assert "admonition-title" in title["class"] and title.get_text(" ").startswith("Findings")
    label = title.select_one("label.iw-findings-switch")
    assert label["for"] == TOGGLE_ID
    assert label.select_one(".iw-when-short").get_text() == "in full"
    assert label.select_one(".iw-when-full").get_text() == "shorter"


def test_short_bullets_need_no_switch_and_a_long_lead_gets_one():
    short = box(["A first finding that fits on one line.", "A second that does too."])
    assert short.select("input") == [] and short.select("label") == []
    assert "iw-foldable" not in short["class"] and short.select_one(".admonition-title").get_text() == "Findings"
    long_lead = "x" * (LONG + 1)
    assert box([long_lead]).select_one("input.iw-findings-toggle") is not None
    assert box(["x" * LONG]).select_one("input.iw-findings-toggle") is None


def test_no_bullets_say_the_empty_words_as_markdown():
    b = box([], empty="No rig has run it: `make reproduce PART=0 RIG=<rig>` runs it.")
    (item,) = b.select("li")
    assert item.select_one("code").get_text() == "make reproduce PART=0 RIG=<rig>"
    assert box(["", "  "]).select_one("li").get_text() == "No rig has measured this part yet."


def test_words_read_as_the_sites_prose_flags_keep_their_dashes_and_html_is_text():
    b = box(["The post's \"ceiling\" holds with --max-num-seqs 256 for <rig> on every rig shown here."])
    text = b.select_one("li").get_text()
    assert "post\u2019s \u201cceiling\u201d" in text
    assert "--max-num-seqs" in text and "\u2013" not in text and "\u2014" not in text
    assert "<rig>" in text  # escaped text, not a tag


def test_without_the_book_toolchain_the_box_still_shows_code_and_bold(monkeypatch):
    """A GPU host in run mode has no markdown-it: code spans and bold still render, HTML is escaped."""
    import builtins

    real = builtins.__import__

    def no_markdown_it(name, *args, **kw):
        if name.startswith("markdown_it"):
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_markdown_it)
    b = box([f"**{OPENING}** for <rig>; `a <b>` here."])
    assert b.select_one(".iw-lead strong").get_text() == OPENING
    assert b.select_one(".iw-rest code").get_text() == "a <b>"
    assert "<rig>" in b.select_one(".iw-lead").get_text()


def test_the_stylesheet_folds_what_the_box_marks():
    """The classes the box emits have their rules in the site's CSS: the rest hidden until the switch is on."""
    css = CSS.read_text()
    for rule in (".iw-findings .iw-when-full, .iw-findings .iw-rest { display: none; }",
                 ".iw-findings-toggle:checked ~ .iw-findings-list .iw-rest",
                 ".iw-findings-toggle:checked ~ .admonition-title .iw-when-full",
                 ".iw-findings-toggle:checked ~ .iw-findings-list .iw-more"):
        assert rule in css, rule
    # a lead is shown whole on a phone too, never cut mid-sentence with an ellipsis (issue 41)
    assert "line-clamp" not in css
    assert findingsbox.BREAK == "; "


def test_more_bullets_are_in_the_box_but_shown_only_in_full():
    from inference_wall.pages.findingsbox import findings_box

    box = findings_box(["**a**: first of a", "**b**: first of b"], more=["**a**: second of a"])
    assert box.count("<li") == 3 and box.count('class="iw-more-item"') == 1
    assert 'class="iw-findings-toggle"' in box  # the switch that shows them
    assert box.index("second of a") > box.index("first of b")
