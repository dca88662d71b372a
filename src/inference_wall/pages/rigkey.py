"""The rig key at the top of each part: what each rig on the page is, in a few words a reader can hold.

One bullet per rig, from its profile in data/rigs/<rig>.json (shown through :func:`rig.shown`, so no secret
of a profile reaches the page) and from what its runs recorded (the manifests' ``rig_info.vllm`` and
``model.source``): the description, whether the weights are the real checkpoint or random ones of its shapes,
the vLLM version beside the series' own, and the flags and environment that differ from a stock
``vllm serve``. The profiles' notes, which say why, fold behind one toggle under the list; the whole key folds behind
one line that names the rigs, so that it takes one line of the page's first screen.
"""
from __future__ import annotations

import html
import re
from collections.abc import Iterable
from pathlib import Path

from ..run.rig import load_profile, shown as shown_profile
from ..records.store import part_name
from ..schema import PUBLISHED_RIG
from ..words import MISSING

WEIGHTS = {"dummy": "dummy (random, of the real model's shapes)", "hub": "the real checkpoint"}


def _code(text: str) -> str:
    """An inline code span that survives a backtick in ``text``."""
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def series_setup(data_dir: Path | None = None) -> dict[str, str]:
    """The published rig's setup as the posts state it (data/reference/01-hit-the-wall/server_setup.csv)."""
    from ..records.reference import load_reference

    frame = load_reference(1, data_dir)["server_setup"]
    rows = frame[frame["rig"] == PUBLISHED_RIG]
    return dict(zip(rows["setting"], rows["stated"]))


def recorded(rig: str, data_dir: Path | None = None, part: int | str | None = None) -> dict[str, list[str]]:
    """What the rig's complete runs recorded: the vLLM versions and the model sources, each sorted."""
    from ..records.store import iter_points

    versions, sources = set(), set()
    for _part, _rig, _point, m in iter_points(data_dir, part, rig=rig):
        version = (m.get("rig_info") or {}).get("vllm")
        if version:
            versions.add(str(version))
        source = (m.get("model") or {}).get("source")
        if source:
            sources.add(str(source))
    return {"vllm": sorted(versions), "source": sorted(sources)}


def _html_words(text: str) -> str:
    """A note as HTML: escaped, its `code spans` as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _published(setup: dict[str, str]) -> str:
    parts = [f"**{PUBLISHED_RIG}**: the series' own numbers as its posts print them (data/reference, not "
             f"measured here): one NVIDIA A10G, vLLM {setup.get('vllm_version', '–')}"]
    if setup.get("weights"):
        parts.append(f"weights: {setup['weights']}")
    if setup.get("dtype"):
        parts.append(setup["dtype"])
    return ", ".join(parts) + "."


def _deviations(profile) -> str:
    flags = " ".join(profile.serve_args)
    env = " ".join(f"{k}={v}" for k, v in profile.env.items())
    if not flags and not env:
        return "A stock `vllm serve`"
    items = [f"flags {_code(flags)}" if flags else "", f"environment {_code(env)}" if env else ""]
    return "Off stock: " + "; ".join(i for i in items if i)


def _repeated(profile, data_dir: Path | None):
    """The shown profile of the rig this one repeats (None if it repeats none)."""
    return shown_profile(load_profile(profile.repeat_of, data_dir)) if profile.repeat_of else None


def _bullet(rig: str, data_dir: Path | None, part, series_vllm: str) -> tuple[str, list[str]]:
    """(the rig's bullet, its notes to fold away)."""
    profile = load_profile(rig, data_dir)
    profile = shown_profile(profile.for_run(part_name(part)) if part is not None else profile)
    runs = recorded(rig, data_dir, part)
    if not profile.has_profile:
        head = f"**{rig}**: no profile in data/rigs: a stock `vllm serve`, no extra flags or environment."
    else:
        head = f"**{rig}**: {profile.description.strip().rstrip('.')}." if profile.description.strip() else f"**{rig}**:"
        if profile.repeat_of:
            head += f" A repeat of {profile.repeat_of}."
    sources = runs["source"] or ([profile.model_source] if profile.has_profile else [])
    words = [WEIGHTS.get(s, s) for s in sources]
    facts = []
    if words:
        facts.append("Weights: " + " and ".join(words))
    version = ", ".join(runs["vllm"]) if runs["vllm"] else "not recorded"
    facts.append(f"vLLM {version} (the series: {series_vllm})")
    other = _repeated(profile, data_dir) if profile.has_profile else None
    if profile.has_profile:
        same = other is not None and (other.serve_args, other.env) == (profile.serve_args, profile.env)
        facts.append(f"Off stock: as {profile.repeat_of}" if same else _deviations(profile))
    notes = [n for n in profile.notes if n.strip()]
    if other is not None:  # what the repeated rig's key already says is not said twice
        notes = [n for n in notes if n not in set(other.notes)]
    return f"{head} {'. '.join(facts)}.", notes


def rig_key(rigs: Iterable[str], data_dir: Path | None = None, part: int | str | None = None) -> str:
    """Markdown: one bullet per rig shown (the published rig from data/reference), then the profiles' notes
    behind a toggle, all folded behind one line that names the rigs (a ``<details>`` whose summary is
    :func:`summary_line`). ``part`` limits the recorded vLLM versions to that part's runs (default: all parts)."""
    rigs = list(dict.fromkeys(rigs))
    if not rigs:
        return "**Rig key**: no rig has measured this part yet."
    setup = series_setup(data_dir)
    series_vllm = setup.get("vllm_version", MISSING)
    bullets, folded = [], []
    for rig in rigs:
        if rig == PUBLISHED_RIG:
            bullets.append(_published(setup))
            continue
        line, notes = _bullet(rig, data_dir, part, series_vllm)
        bullets.append(line)
        if notes:
            folded.append((rig, notes))
    text = f"{summary_line(rigs)}\n\n" + "\n".join(f"- {b}" for b in bullets)
    if folded:
        body = "".join(f"<p><strong>{html.escape(rig)}</strong></p><ul>"
                       + "".join(f"<li>{_html_words(n)}</li>" for n in notes) + "</ul>" for rig, notes in folded)
        text += ("\n\n<details><summary>Why each rig differs from a stock server (its profile's notes)</summary>"
                 f"{body}</details>")
    return text + "\n\n</details>\n"


def summary_line(rigs: list[str]) -> str:
    """The key's one visible line, the opening of its toggle: which rigs the page shows (HTML)."""
    names = ", ".join(html.escape(r) for r in rigs)
    return (f'<details class="iw-rigkey"><summary><strong>Rig key</strong>: {names} '
            '<span class="iw-rigkey-hint">(what each rig is: its weights, vLLM and flags)</span></summary>')
