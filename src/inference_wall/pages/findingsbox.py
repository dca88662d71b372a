"""The findings box at the top of each part: each bullet's lead shown, the rest one switch away, so that the box
takes little of the page's first screen.

A part computes its findings (3-5 Markdown bullets from the data: ``pN.key_findings``, part 0's ``p00.findings`` per
rig); :func:`findings_box` sets them in the box. Each bullet shows its lead, the text up to its first clause break
("; ", where a bullet goes on rig by rig or adds a second fact), and keeps the rest in the page behind one "in full"
switch (a checkbox and its label: no script needed). On a narrow screen a long lead is also cut to a few lines
(_static/inference-wall.css) until the switch is on. Nothing is reworded: the lead and the rest together are the
bullet as the part wrote it.

The box is HTML (the notebook displays it), so Sphinx neither smartens its quotes nor resolves its links: the
bullets' inline Markdown is rendered here, quotes curled as in the site's prose, dashes left alone (a flag keeps
its "--"), raw HTML escaped, and a link kept exactly as written (so a finding links by the built page's address).
"""
from __future__ import annotations

import html
import re
from collections.abc import Iterable

BREAK = "; "
MIN_LEAD = 40  # characters: a clause break this early leaves no statement before it, so it is not a lead's end
LONG = 170  # characters: a lead longer than this may be cut to a few lines on a phone, so the box offers "in full"
TOGGLE_ID = "iw-findings-full"


def _inline_html(markdown: str) -> str:
    """One bullet's inline Markdown (bold, emphasis, code, links) as HTML, with curly quotes as the site's prose has."""
    try:
        from markdown_it import MarkdownIt
    except ImportError:  # a GPU host in run mode stages no book toolchain: plain escaped text and code spans
        text = html.escape(markdown, quote=False)
        text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
        return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)
    md = MarkdownIt("commonmark", {"typographer": True, "html": False}).enable("smartquotes")
    return md.renderInline(markdown)


def _balanced(text: str) -> bool:
    """No code span, strong/emphasis run or parenthesis left open in ``text``."""
    plain = re.sub(r"`[^`]*`", "", text)
    return ("`" not in plain and plain.count("**") % 2 == 0 and plain.replace("**", "").count("*") % 2 == 0
            and plain.count("(") == plain.count(")") and plain.count("[") == plain.count("]"))


def split(bullet: str) -> tuple[str, str]:
    """(lead, rest) of a Markdown bullet: cut at its first clause break after :data:`MIN_LEAD` characters that is
    outside any code span, emphasis, parenthesis or link text (``rest`` starts with the break, so ``lead + rest`` is
    the bullet); ``rest`` is empty where there is none."""
    bullet = bullet.strip()
    start = MIN_LEAD
    while (at := bullet.find(BREAK, start)) != -1:
        if _balanced(bullet[:at]):
            return bullet[:at], bullet[at:]
        start = at + 1
    return bullet, ""


def findings_box(bullets: Iterable[str], empty: str = "No rig has measured this part yet.",
                 more: Iterable[str] = ()) -> str:
    """HTML: the admonition "Findings" with one item per bullet (its lead shown, its rest behind the switch, which
    the box offers only where some bullet has a rest or a lead over :data:`LONG` characters). ``more``: bullets shown
    only in full (a page with several rigs keeps its first screen for the first of each rig's). ``empty``
    (Markdown) is said where there are no bullets. The switch's checkbox comes first in the box, so that the title's
    label and the list follow it as siblings that the stylesheet can select on its state."""
    items = [b.strip().removeprefix("- ").strip() for b in bullets if b and b.strip()]
    extra = [b.strip().removeprefix("- ").strip() for b in more if b and b.strip()]
    if not items:
        items = [empty]
    parts = [split(b) for b in items] + [split(b) for b in extra]
    foldable = bool(extra) or any(rest or len(lead) > LONG for lead, rest in parts)
    lis = []
    for i, (lead, rest) in enumerate(parts):
        hidden = i >= len(items)
        body = f'<span class="iw-lead">{_inline_html(lead)}</span>'
        if rest:
            body += (f'<span class="iw-more" aria-hidden="true"> (more in full)</span>'
                     f'<span class="iw-rest">{_inline_html(rest)}</span>')
        cls = ' class="iw-more-item"' if hidden else ""
        lis.append(f'<li{cls}><span class="iw-finding">{body}</span></li>')
    switch = ""
    title = "Findings"
    if foldable:
        title += (f' <label class="iw-findings-switch" for="{TOGGLE_ID}"><span class="iw-when-short">in full</span>'
                  '<span class="iw-when-full">shorter</span></label>')
        switch = f'<input type="checkbox" class="iw-findings-toggle" id="{TOGGLE_ID}" aria-label="Each finding in full">'
    classes = "admonition tip iw-findings" + (" iw-foldable" if foldable else "")
    return (f'<div class="{classes}">{switch}<p class="admonition-title">{title}</p>'
            f'<ul class="iw-findings-list">{"".join(lis)}</ul></div>')
