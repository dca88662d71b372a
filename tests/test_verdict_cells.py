"""Every claim x rig verdict of parts 1-5 follows from what its own row prints (issue 41).

Read from the claims' rows as the pages render them (measure.claims.details, part 4's claim table and summary), not
from a typed copy:

- a ratio claim's verdict is recomputed from the printed prediction, measurement (with their ranges) and agreement
  band; a point claim's (part 4) from its printed expected range and measured value;
- a claim's sentence (what the verdict matrices and the glance page show beside every rig's verdict) quotes the
  published rig's figures only as the A10G's: a figure the post measured on the A10G, printed bare beside another rig's
  "holds", reads as if that rig measured it (part 1's "about 145" beside the h200's 256);
- the glance page's matrix says what the parts' own tables say, cell for cell.
"""
from __future__ import annotations

import math
import re
import string

import pytest

from inference_wall.measure.analysis import Interval
from inference_wall.measure.claims import (DIFFERS, HOLDS, INCONCLUSIVE, NOT_MEASURED, details, judge_contains,
                                           judge_ratio)
from inference_wall.pages import glance
from inference_wall.parts import p01, p02, p03, p04, p05
from inference_wall.schema import PUBLISHED_RIG

PARTS = (1, 2, 3, 4, 5)
CLAIM_LISTS = {1: p01.CLAIMS, 2: p02.CLAIMS, 3: p03.CLAIMS, 5: p05.CLAIMS}


@pytest.fixture(scope="module")
def pages():
    """Every part's page over the committed runs, as the notebooks and the glance page compute them."""
    return glance.pages()


_NUM = r"-?[0-9][0-9,]*(?:\.[0-9]+)?"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def parse_interval(text: str) -> Interval | None:
    """'1,130 tok/s (1,110 to 1,160)' -> Interval(1130, 1110, 1160); '256 seqs' -> exact; '' -> None."""
    text = str(text).strip()
    if not text:
        return None
    m = re.match(rf"^({_NUM})[^(]*(?:\(({_NUM}) to ({_NUM})\))?\s*$", text)
    assert m, f"unreadable printed value {text!r}"
    v = _num(m.group(1))
    lo, hi = (_num(m.group(2)), _num(m.group(3))) if m.group(2) else (v, v)
    return Interval(v, lo, hi)


def parse_band(text: str) -> tuple[float, float] | None:
    """'0.85 to 1.15' -> (0.85, 1.15); 'at least 3' -> (3, inf); the 'contains' rule's words -> None."""
    m = re.match(rf"^({_NUM}) to ({_NUM})$", text)
    if m:
        return _num(m.group(1)), _num(m.group(2))
    m = re.match(rf"^at least ({_NUM})$", text)
    if m:
        return _num(m.group(1)), math.inf
    assert text == "prediction inside the measured range", text
    return None


def test_parsers_read_printed_values():
    assert parse_interval("1,130 tok/s (1,110 to 1,160)") == Interval(1130, 1110, 1160)
    assert parse_interval("256 seqs") == Interval(256, 256, 256)
    assert parse_band("0.850 to 1.15") == (0.85, 1.15) and parse_band("at least 3.00") == (3.0, math.inf)


@pytest.mark.parametrize("part", [1, 2, 3, 5])
def test_ratio_verdicts_follow_from_the_printed_row(pages, part):
    """Recompute each cell's verdict from the prediction, the measurement and the band its row prints."""
    shown = details(pages[part].claims)
    wrong = []
    for r in shown.to_dict("records"):
        verdict = r["verdict"]
        if verdict == NOT_MEASURED or verdict not in (HOLDS, DIFFERS, INCONCLUSIVE):
            continue  # not judged (part 2's "not comparable": a published figure against a span of lengths)
        pred, meas = parse_interval(r["predicted"]), parse_interval(r["measured"])
        band = parse_band(r["agreement band"])
        again = judge_contains(pred, meas) if band is None else judge_ratio(pred, meas, band)[0]
        if again != verdict:
            wrong.append(f"{r['claim']} on {r['rig']}: prints {r['predicted']} / {r['measured']} in {r['agreement band']} "
                         f"-> {again}, says {verdict}")
    assert not wrong, "\n".join(wrong)


def test_point_verdicts_follow_from_the_printed_row(pages):
    """Part 4: a point's verdict from its printed expected range and measured value (inconclusive where its note says
    the pass cannot be evidence)."""
    wrong = []
    for r in pages[4].claims.to_dict("records"):
        if r["verdict"] == NOT_MEASURED:
            continue
        exp = r["expected"].rsplit(" ", 1)[0]
        m = re.match(rf"^(?:at least )?({_NUM})(?: to ({_NUM}))?$", exp)
        assert m, exp
        lo = _num(m.group(1))
        hi = math.inf if exp.startswith("at least") else (_num(m.group(2)) if m.group(2) else lo)
        value = _num(r["measured"].split(" ")[0])
        again = INCONCLUSIVE if r["verdict"] == INCONCLUSIVE and r["note"] else (HOLDS if lo <= value <= hi else DIFFERS)
        if again != r["verdict"]:
            wrong.append(f"{r['claim']} on {r['rig']} ({r['pool_pages']} pages): {r['measured']} against {r['expected']} "
                         f"-> {again}, says {r['verdict']}")
    assert not wrong, "\n".join(wrong)


def _sentences(template: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.;:])\s+", template) if s]


def post_figures(template: str) -> list[tuple[str, str]]:
    """(placeholder, sentence) for each of the post's figures a claim's sentence quotes."""
    out = []
    for sentence in _sentences(template):
        for _, name, _, _ in string.Formatter().parse(sentence):
            if name:
                out.append((name, sentence))
    return out


SETUP = {"max_num_seqs", "workload_input_tokens", "workload_output_tokens", "a10g_budget", "mid_cap", "top_cap",
         "small_model_params"}  # the setup a claim is judged under on every rig, not a result


@pytest.mark.parametrize("part", [1, 2, 3, 5])
def test_a_claims_sentence_quotes_the_posts_results_as_the_a10gs(part):
    """A claim's sentence stands beside every rig's verdict: a result the post measured (its placeholders over the
    reference facts, the setup aside) is quoted only in a sentence that names the A10G."""
    bare = [f"{c.id}: {{{name}}} in {sentence!r}" for c in CLAIM_LISTS[part] for name, sentence in post_figures(c.post)
            if name.split(":")[0] not in SETUP and "A10G" not in sentence]
    assert not bare, "\n".join(bare)


def test_a_claims_sentence_names_what_it_judges():
    """Part 2's chunked claim judges the freeze against one chunk's share of the prefill, not that it shrinks at all
    (it fell tenfold on the h200 and was called inconclusive): its sentence says what it judges."""
    chunk = next(c for c in p02.OTHER_CLAIMS if c.id == "freeze-is-one-chunk")
    assert "shrinks." not in chunk.post and "chunk" in chunk.post.split("freeze", 1)[1]


def test_glance_matrix_says_what_the_parts_tables_say(pages):
    rows, ids = glance.claim_rows(shown=pages)
    rigs = glance.shown_rigs(rows)
    m = glance.matrix(rows, ids, rigs).set_index(["part", "claim"])
    wrong = []
    for part in PARTS:
        table = pages[part].claims
        if part == 4:
            summary = p04.claim_summary(table, list(pages[4].views)).set_index("claim")
            for cid in summary.index:
                for rig in pages[4].views:
                    said, cell = summary.loc[cid, rig], m.loc[(4, cid), f"{rig} detail"]
                    if said != cell:
                        wrong.append(f"part 4 {cid} on {rig}: the part says {said!r}, the glance page {cell!r}")
            continue
        for r in table.to_dict("records"):
            cell = m.loc[(part, r["claim"]), r["rig"]]
            if cell != glance.word(r["verdict"]):
                wrong.append(f"part {part} {r['claim']} on {r['rig']}: the part says {r['verdict']}, the glance page {cell}")
    assert not wrong, "\n".join(wrong)


def test_part4_summary_counts_every_verdict():
    import pandas as pd
    t = pd.DataFrame({"claim": ["running-batch"] * 3, "rig": ["h200"] * 3, "verdict": [HOLDS, HOLDS, DIFFERS]})
    assert p04.claim_summary(t, ["h200"]).set_index("claim").loc["running-batch", "h200"] == \
        "holds on 2 of 3 points, differs on 1"


def significant_digits(token: str) -> int:
    """'1,132' -> 4, '1,130' -> 3, '0.0427' -> 3, '20' -> 1."""
    t = token.replace(",", "").lstrip("-")
    if "." in t:
        return len(t.replace(".", "").lstrip("0"))
    return len(t.lstrip("0").rstrip("0")) or 1


@pytest.mark.parametrize("part", [1, 2, 3, 5])
def test_claims_tables_print_three_significant_figures_at_most(pages, part):
    shown = details(pages[part].claims)
    long = [f"{r['claim']} on {r['rig']}: {r[col]!r}" for r in shown.to_dict("records")
            for col in ("predicted", "measured", "measured / predicted")
            for tok in re.findall(_NUM, str(r[col])) if significant_digits(tok) > 3]
    assert not long, "\n".join(long)
