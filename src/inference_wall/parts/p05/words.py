"""Part 5's sentences, pure over its views and tables: each rig's findings, the findings box, the series'
forecasts in words, the closing note and the texts beside the figures."""
from __future__ import annotations

import pandas as pd

from .. import variants
from ...measure.analysis import Interval
from ...measure.claims import known_number, missing
from ..variants import STEP_NAMES, interval_words, num, pct, sig
from .plan import NAME, REFERENCE
from .view import ceiling_gaps
from ...words import per_rig


def findings(view: dict) -> str:
    """One paragraph per variant of one rig: what it reads, what the log says, what it measured."""
    lines = []
    bw = view.get("bandwidth_gb_s")
    for key, v in view["variants"].items():
        parts = [f"**{v['label']}**"]
        if "bytes" in v:
            parts.append(f"reads {num(v['bytes'].gb)} GB per decode step by its shapes"
                         + (f" (floor {interval_words(v.get('floor_ms'), 'ms')} at {num(bw.value)} GB/s)" if bw else ""))
        if not missing(v.get("weights_gib")):
            parts.append(f"the log reports {num(v['weights_gib'])} GiB of weights")
        if v.get("kernels"):
            parts.append(f"linear kernels: {v['kernels']}")
        parts.append(f"single-stream ITL {interval_words(v.get('single_itl_ms'), 'ms')}")
        if "fixed" in v:
            parts.append(f"step at batch 1 (the fixed cost) {interval_words(v['fixed'], 'ms')}")
        if "fit" in v:
            b = v["slope"] if "slope" in v else Interval.exact(v["fit"].slope)
            parts.append(f"per-sequence cost {interval_words(b, 'ms')} (the step fit's slope over decode batches up to "
                         f"{v['fit_max_batch']}; measured at {', '.join(str(int(b)) for b in v['decode']['batch'])})")
        if "bend_ratio" in v:
            parts.append(f"at batch {v['bend_batch']} the step is {num(v['bend_step_ms'])} ms, "
                         f"{num(v['bend_ratio'])}x what the line predicts there")
        if "ceiling_tok_s" in v:
            parts.append(f"flood at cap {v['top_cap']}: {num(v['ceiling_tok_s'].value)} output tok/s")
        if not missing(v.get("admission_limit")):
            parts.append(f"its KV pool admits {num(v['admission_limit'])} requests at once")
        lines.append("- " + "; ".join(parts) + ".")
    for fmt_name, why in (view.get("skipped") or {}).items():
        lines.append(f"- **{fmt_name}** not run on this rig: {why}.")
    return "\n".join(lines)


def series_summary(rows: pd.DataFrame, views: dict[str, dict]) -> str:
    """Per rig, in words: how the series' own forecasts fared (the claims whose post starts "The series"), and the
    formats of the part's model ordered by per-sequence cost and by flood ceiling, from the data."""
    out = []
    for rig, view in views.items():
        mine = rows[(rows["rig"] == rig) & rows["post"].str.startswith("The series")]
        said = [f"`{r.claim}` {r.verdict} (measured {r.measured}, predicted {r.predicted})" for r in mine.itertuples()
                if r.verdict != "not measured on this rig"]
        if not said:
            continue
        text = f"**{rig}**: the series' forecasts: " + "; ".join(said) + "."
        fmts = {k: v for k, v in view["variants"].items() if k != REFERENCE}
        slopes = {k: v["slope"].value for k, v in fmts.items() if "slope" in v}
        if len(slopes) >= 2:
            order = sorted(slopes, key=slopes.get)
            text += (" Per-sequence cost by the median ITL, least first: "
                     + ", ".join(f"{k} {num(slopes[k])} ms" for k in order))
            other = {k: v["slope_other"].value for k, v in fmts.items() if "slope_other" in v}
            if len(other) == len(slopes):
                text += ("; by the median TPOT: " + ", ".join(f"{k} {num(other[k])} ms"
                                                              for k in sorted(other, key=other.get)))
            text += "."
        tops = {k: v["ceiling_tok_s"].value for k, v in fmts.items() if "ceiling_tok_s" in v}
        if len(tops) >= 2:
            order = sorted(tops, key=tops.get, reverse=True)
            text += (" Flood ceiling, highest first: " + ", ".join(f"{k} {num(tops[k])} tok/s" for k in order) + ".")
        out.append(text)
    return "\n\n".join(out)


def closing_note(views: dict[str, dict], device: pd.DataFrame | None = None) -> str:
    """Per rig: weights GiB, single ITL, the fit and the ceiling per format, and the device minutes used."""
    return variants.closing_note(views, device, NAME, skip=(REFERENCE,), weights=True)


def spread_text(view: dict, spread: pd.DataFrame) -> str:
    """The ceilings' gaps to fp16 set against the run-to-run spread, in words."""
    gaps = ceiling_gaps(view, spread)
    if not gaps:
        return ""
    if not len(spread):
        return ("Flood ceilings against fp16: " + ", ".join(f"{g['format']} {pct(g['gap'])}" for g in gaps)
                + "; this rig has no repeated run to set them against.")
    where = ", ".join(f"{r} in part {int(part.split('-', 1)[0])}" for (part, r), _ in
                      spread.groupby(["part", "repeat"], sort=False))
    words = []
    for g in gaps:
        words.append(f"{g['format']}'s ceiling is {pct(g['gap'])} against fp16's, "
                     + ("within" if g["within"] else "outside") + " that spread")
    return (f"Run to run, the same flood on {view['rig']} changed by {pct(spread['change'].min())} to "
            f"{pct(spread['change'].max())} between repeats ({view['rig']} against {where}; {len(spread)} floods): " + "; ".join(words) + ". A gap within the spread is no difference these runs can "
            "tell.")


def clocks_text(view: dict) -> str:
    """Each format's GPU clock beside its ceiling and its bend: the busy SM clock's median and the share of samples
    at the software power cap, from the passes' own GPU samples."""
    items = []
    for key, v in view["variants"].items():
        if key == REFERENCE or not known_number(v.get("ceiling_sm_mhz")):
            continue
        items.append(f"{key} {sig(v['ceiling_sm_mhz'], exact_whole=False)} MHz, {sig(100 * v['ceiling_power_cap'], 2)}% of samples at "
                     f"the power cap ({sig(v['ceiling_tok_s'].value)} tok/s)")
    if not items:
        return ""
    return ("The GPU's SM clock during each flood at the top cap (median over busy samples) and the share of its "
            "samples at the software power cap: " + "; ".join(items) + ".")


def bends_alike(fp16: float | None, int4: float | None) -> bool:
    """Whether fp16's step bends above its line at least as much as int4's (within 5%): then the bend is not 4-bit
    work, and the runs do not show a format turning compute-bound. False where either is unknown."""
    return known_number(fp16) and known_number(int4) and fp16 >= int4 * 0.95


def bend_text(view: dict) -> str:
    """The largest decode batch's step over the fit's line, per format, with that pass's clock: what the bend shows
    and what it does not (a format that bends as much as another is not bent by what only the other does)."""
    bends = {k: v for k, v in view["variants"].items() if k != REFERENCE and "bend_ratio" in v}
    if len(bends) < 2:
        return ""
    batch = next(iter(bends.values()))["bend_batch"]
    items = [f"{k} {sig(v['bend_ratio'])}x" + (f" ({sig(v['bend_sm_mhz'], exact_whole=False)} MHz, {sig(100 * v['bend_power_cap'], 2)}% "
                                                 f"at the power cap)" if known_number(v.get("bend_sm_mhz")) else "")
             for k, v in bends.items()]
    text = f"At a batch of {batch} the step over what each format's line predicts: " + "; ".join(items) + "."
    if bends_alike(bends.get("fp16", {}).get("bend_ratio"), bends.get("int4", {}).get("bend_ratio")):
        text += (" fp16 bends as much as int4, so the bend is not 4-bit work (unpacking) and these runs do not show "
                 "a format turning compute-bound; what sets it is not measured here (candidates: the arithmetic that "
                 "grows with the batch, and the clock, which the power cap lowers at large batches).")
    return text


def _apart(a: Interval, b: Interval) -> int:
    """-1 where a's range lies wholly below b's, 1 wholly above, 0 where they overlap."""
    return -1 if a.high < b.low else (1 if a.low > b.high else 0)


def larger_model_text(view: dict) -> str:
    """Whether the larger model costs less per sequence than the reference: said only where both step estimators
    (ITL and TPOT) put its slope's range wholly below the reference's; otherwise what each estimator gives."""
    vs = view["variants"]
    if REFERENCE not in vs or "fp16" not in vs:
        return ""
    r, x = vs[REFERENCE], vs["fp16"]
    pairs = [(STEP_NAMES["itl_p50_ms"], x.get("slope"), r.get("slope")),
             (STEP_NAMES["tpot_p50_ms"], x.get("slope_other"), r.get("slope_other"))]
    pairs = [(n, a, b) for n, a, b in pairs if isinstance(a, Interval) and isinstance(b, Interval)]
    if not pairs:
        return ""
    said = "; ".join(f"by the {n}, {sig(a.value)} ms ({sig(a.low)} to {sig(a.high)}) against "
                     f"{sig(b.value)} ({sig(b.low)} to {sig(b.high)})" for n, a, b in pairs)
    order = {_apart(a, b) for _, a, b in pairs}
    head = f"Per sequence, {x['preset']} in fp16 against {r['preset']}: {said}."
    if len(pairs) == 2 and order == {-1}:
        return head + " Both estimators agree: the larger model costs less per sequence on this rig."
    if len(pairs) == 2 and order == {1}:
        return head + " Both estimators agree: the larger model costs more per sequence on this rig."
    return head + (" The estimators disagree (or their ranges overlap), so these runs do not say which model costs "
                   "less per sequence.")


def key_findings(views: dict[str, dict], tables: dict) -> list[str]:
    """The findings box: 3-5 bullets, one a finding with every shown rig that has it (words.per_rig; the bytes, the
    tables' `predicted`, need no run). A bold verdict only where every rig's numbers bear it out."""
    by = tables["predicted"].set_index("format")
    out = [f"**Four bits do not quarter the bytes:** a 4-bit step reads {sig(by.loc['int4', 'decode_gb'])} GB against "
           f"fp16's {sig(by.loc['fp16', 'decode_gb'])} GB ({sig(by.loc['int4', 'decode_gb'] / by.loc['fp16', 'decode_gb'])}"
           f" of it), since the {sig(by.loc['int4', 'head_gb'])} GB output head stays in 16 bits."]
    fixed, ceilings, bends, larger = [], [], [], []
    for rig, view in views.items():
        vs = view["variants"]
        if "fp16" in vs and "int4" in vs and "fixed" in vs["fp16"] and "fixed" in vs["int4"]:
            f16, f4 = vs["fp16"]["fixed"].value, vs["int4"]["fixed"].value
            share = vs["int4"]["decode_gb"] / vs["fp16"]["decode_gb"]
            fixed.append((rig, f4 / f16 > share, f"the batch-1 step went from {sig(f16)} ms (fp16) to {sig(f4)} ms "
                                                 f"(int4), {sig(f4 / f16)} of it, for {sig(share)} of the bytes"))
        g4 = next((g for g in ceiling_gaps(view, tables["spread"][rig]) if g["format"] == "int4"), None)
        if g4 and g4["within"] is not None:
            ceilings.append((rig, g4["within"], f"{pct(g4['gap'])}, " + ("within" if g4["within"] else "outside")
                             + f" the up to {sig(100 * g4['spread'], 2)}% by which repeats of one flood differ there"))
        bend = {k: v.get("bend_ratio") for k, v in vs.items() if k in ("fp16", "int4")}
        if len(bend) == 2 and all(known_number(b) for b in bend.values()):
            bends.append((rig, bends_alike(bend["fp16"], bend["int4"]),
                          f"at batch {vs['int4']['bend_batch']} fp16's step is {sig(bend['fp16'])}x its line and "
                          f"int4's {sig(bend['int4'])}x"
                          + (f" (fp16's flood at {sig(vs['fp16']['ceiling_sm_mhz'], exact_whole=False)} MHz, "
                             f"{sig(100 * vs['fp16']['ceiling_power_cap'], 2)}% of its samples at the software "
                             "power cap)" if known_number(vs["fp16"].get("ceiling_sm_mhz")) else "")))
        lm = larger_model_text(view)
        if lm:
            r, x = vs[REFERENCE], vs["fp16"]
            said = (lm.split("Both estimators agree: ")[1][:-1] if "Both estimators agree" in lm
                    else "it depends on the estimator")
            larger.append((rig, said + (f" ({sig(x['slope'].value)} against {sig(r['slope'].value)} ms by ITL, "
                                        f"{sig(x['slope_other'].value)} against {sig(r['slope_other'].value)} ms by TPOT)"
                                        if "slope_other" in x and "slope_other" in r else "")))
    if fixed:
        out.append(("**The fixed cost fell less than the bytes:** " if all(k for _, k, _ in fixed) else
                    "**The fixed cost, fp16 to int4:** ") + per_rig([(r, t) for r, _, t in fixed], name_one=True) + ".")
    if ceilings:
        out.append("**int4's flood ceiling against fp16's:** " + per_rig([(r, t) for r, _, t in ceilings], name_one=True)
                   + (": no difference these runs can tell." if all(w for _, w, _ in ceilings) else "."))
    if bends:
        out.append(("**4-bit is not shown to turn compute-bound:** " if all(a for _, a, _ in bends) else
                    "**The step at the largest batch against its line:** ")
                   + per_rig([(r, t) for r, _, t in bends], name_one=True) + ".")
    if larger:
        out.append("**Per sequence, the 9B against the 4B:** " + per_rig(larger, name_one=True) + ".")
    return out[:5]
