"""Part 2's claims: the freeze predicted from the long prompt's own prefill (alone on the idle server) and the
budget, on every rig, the published one included."""
from __future__ import annotations

from ...measure import freeze
from ...measure.analysis import Interval, combine
from ...measure.claims import Claim, Judgement, Missing, NOT_MEASURED, fmt_num, need
from .plan import A10G_BUDGET, DEFAULTS


def predicted_freeze(solo: Interval, prompt_len: int, budget: int | None, baseline_ms: float) -> Interval:
    """freeze.predicted_freeze_ms over the solo prefill's spread: the prefill share of the longest step, plus between
    none and one decode step (the central value takes half of one)."""
    lo, _ = freeze.predicted_freeze_ms(solo.low, prompt_len, budget, baseline_ms)
    mid_lo, mid_hi = freeze.predicted_freeze_ms(solo.value, prompt_len, budget, baseline_ms)
    _, hi = freeze.predicted_freeze_ms(solo.high, prompt_len, budget, baseline_ms)
    return Interval((mid_lo + mid_hi) / 2, lo, hi)


_fmt = fmt_num  # words.number


def _freeze_off_at(n: int):
    """freeze-is-prefill at one prompt length: the freeze with chunking off against that prompt's solo prefill."""
    def judge(v: dict) -> Judgement:
        o = (v.get("off_by_len") or {}).get(n)
        if o is None:
            raise Missing(f"freeze with chunking off at {n:,} tokens")
        return _freeze_off_side(o, n)
    return judge


def _freeze_off_side(o: dict, n: int) -> Judgement:
    pred = predicted_freeze(o["solo"], n, None, o["baseline_ms"])
    how = (f"{n:,}-token prompt alone: TTFT {_fmt(o['solo'].value)} ms; + 0 to 1 decode step of "
           f"{_fmt(o['baseline_ms'])} ms = {_fmt(pred.low)} to {_fmt(pred.high)} ms")
    return Judgement(pred, o["freeze"], how)


def _freeze_chunked(v: dict) -> Judgement:
    c, n, b = need(v, "chunked"), need(v, "cmp_len"), need(v, "budget")
    pred = predicted_freeze(c["solo"], n, b, c["baseline_ms"])
    how = (f"{_fmt(c['solo'].value)} ms x {b:,} / {n:,} tokens = {_fmt(c['solo'].value * b / n)} ms; + 0 to 1 decode "
           f"step of {_fmt(c['baseline_ms'])} ms = {_fmt(pred.low)} to {_fmt(pred.high)} ms")
    return Judgement(pred, c["freeze"], how)


def _chunk_step(v: dict) -> Judgement:
    """The step that carried a chunk, from the server's side: the longest logged step where the iteration log times
    steps; where vLLM scheduled asynchronously (the log times a wait, not a step), the long prompt's own TTFT over the
    number of steps the log shows carrying it (the log still counts each step's prompt tokens): the mean such step."""
    c, b = need(v, "chunked"), need(v, "budget")
    base = c["baseline_ms"]
    if v.get("steps_timed", True):
        step = c["max_step"]
        what = f"longest step carrying the prompt at budget {b:,} (iteration log, over the repeats): {_fmt(step.value)} ms"
    else:
        step = c["mean_step"]
        if step is None:  # no step of the log carried the prompt
            raise Missing("the steps that carried the prompt in the iteration log")
        what = (f"the prompt's TTFT in the stream over the {c['steps']:.0f} steps that carried it at budget {b:,} "
                f"(vLLM scheduled asynchronously: the log counts steps, does not time them): {_fmt(step.value)} ms")
    pred = Interval(step.value + base / 2, step.low, step.high + base)
    return Judgement(pred, c["freeze"], f"{what}; + 0 to 1 decode step of {_fmt(base)} ms = {_fmt(pred.low)} to "
                                        f"{_fmt(pred.high)} ms")


def _shrink(v: dict) -> Judgement:
    o, c, n, b = need(v, "off_cmp"), need(v, "chunked"), need(v, "cmp_len"), need(v, "budget")
    p_off = predicted_freeze(o["solo"], n, None, o["baseline_ms"])
    p_on = predicted_freeze(c["solo"], n, b, c["baseline_ms"])
    pred = combine(lambda a, d: a / d, p_off, p_on)
    meas = combine(lambda a, d: a / d, o["freeze"], c["freeze"])
    how = (f"predicted freeze off / at budget {b:,} ({n:,}-token prompt): {_fmt(p_off.value)} / {_fmt(p_on.value)} ms "
           f"= {_fmt(pred.value)}x")
    return Judgement(pred, meas, how)


def _published_shrink(v: dict) -> Judgement:
    """The post's shrink against this rig's at the A10G's budget, at every prompt length measured both ways: the
    measurement spans the rig's shrinks over the lengths (the post does not give its prompt's length)."""
    post = need(v, "published_shrink")
    by_len = v.get("shrink_by_len") or {}
    if not by_len:
        raise Missing(f"a freeze at the A10G's budget of {A10G_BUDGET:,}")
    n = max(by_len)
    at = by_len[n]
    meas = Interval(at.value, min(i.low for i in by_len.values()), max(i.high for i in by_len.values()))
    how = (f"the post's {post.value:g}x (its prompt length not given) against this rig's freeze off / at budget "
           f"{A10G_BUDGET:,}, per prompt length: " + "; ".join(f"{k:,} tokens {_fmt(i.value)}x" for k, i in sorted(by_len.items())))
    return Judgement(post, meas, how)


NOT_COMPARABLE = "not comparable"


class _LengthFreeClaim(Claim):
    """A claim against a published figure whose prompt length the post never gives: where the rig's measurement
    over the lengths it ran spans the figure (or one length alone was run), the figure is not comparable with it;
    differs only where no length measured comes near it."""

    def evaluate(self, view: dict, ref: dict | None = None) -> dict:
        row = super().evaluate(view, ref)
        if row["verdict"] == NOT_MEASURED:
            return row
        j = self.judge(view)
        by_len = view.get("shrink_by_len") or {}
        overlap = j.predicted.low <= j.measured.high and j.measured.low <= j.predicted.high
        if overlap or len(by_len) < 2:
            row.update(verdict=NOT_COMPARABLE, note=self.why)
        return row


def length_id(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else f"{n}"


def freeze_is_prefill(n: int) -> Claim:
    """freeze-is-prefill judged at one prompt length (the freeze's share of the solo prefill changes with it)."""
    return Claim(f"freeze-is-prefill-{length_id(n)}",
                 f"A long prompt freezes every stream that is decoding beside it (prompt of {n:,} tokens).",
                 f"with chunking off, the freeze at {n:,} tokens = that prompt's prefill time measured alone (TTFT on "
                 "the idle server) + 0 to 1 decode step", "ms", _freeze_off_at(n), (0.8, 1.25),
                 "a freeze shorter than the solo TTFT: a candidate is that the TTFT also holds what the server does "
                 "before the prefill step (receiving, tokenizing and scheduling the prompt), which stalls no stream; "
                 "a freeze longer than it means more than the prefill stalled the streams (the scheduler holding "
                 "decodes back, a first-seen shape compiling)")


def claims_for(lengths) -> list[Claim]:
    """Part 2's claims with freeze-is-prefill at each of `lengths`."""
    return [freeze_is_prefill(int(n)) for n in sorted(set(lengths))] + OTHER_CLAIMS


def page_claims(views: dict[str, dict]) -> list[Claim]:
    """The claims for the rigs shown: freeze-is-prefill at every length any of them measured with chunking off
    (the part's default lengths where none did)."""
    lengths = {n for v in views.values() for n in (v.get("off_by_len") or {})}
    return claims_for(lengths or DEFAULTS["prompt_lens"])


OTHER_CLAIMS = [
    Claim("freeze-is-one-chunk", "With chunked prefill the freeze falls to one chunk's share of the prompt's prefill.",
          "with chunking on, the freeze = one budget's share of the solo prefill time (solo TTFT x budget / prompt) + 0 "
          "to 1 decode step", "ms", _freeze_chunked, (0.75, 1.33),
          "a chunk step costs more than its share of the solo prefill when a fixed cost per step dominates (small "
          "chunks, a small model) or when late chunks attend over a long prefix, less when the decodes ride free"),
    Claim("freeze-is-one-step", "With chunked prefill the streams wait one chunk step at a time.",
          "with chunking on, the freeze (client side) = one engine step that carried part of the prompt (server side, "
          "vLLM's iteration log: its longest such step, or, where vLLM schedules asynchronously and the log does not "
          "time steps, the prompt's TTFT over the steps the log shows carrying it) + 0 to 1 decode step", "ms",
          _chunk_step, (0.8, 1.25),
          "a stall outside the model (the scheduler, the HTTP stream) shows in the freeze and not in the log; late "
          "chunks attend over a longer prefix, so the longest chunk step exceeds the mean one that TTFT over steps "
          "gives"),
    Claim("shrink-ratio", "Flipping one flag shrinks the freeze by the whole prefill over one chunk's share.",
          "freeze off / freeze chunked = the ratio of the two predictions above", "x", _shrink, (0.75, 1.33),
          "the ratio inherits both predictions' errors"),
    _LengthFreeClaim("published-shrink", "On the A10G, chunked prefill (budget {a10g_budget:,.0f}) shrank the freeze "
                     "{freeze_shrink_chunked:g}x.",
                     "this rig's shrink at the same budget at every prompt length it measured both ways, against the "
                     "post's figure (the post does not state its prompt length); not comparable where the rig's "
                     "shrinks over the lengths span the figure", "x", _published_shrink, (0.75, 1.33),
                     "the shrink grows with the prompt's length over the budget and with how much of a step is fixed "
                     "cost; the post states neither its prompt length nor the freeze's definition"),
]


CLAIMS = claims_for(DEFAULTS["prompt_lens"])


def lessons(claim_ids: list[str]) -> list[tuple[str, list[str]]]:
    """The part's take-aways: what it tested, in words, and the claims whose rows say what the data show."""
    prefill = [c for c in claim_ids if c.startswith("freeze-is-prefill-")]
    return [("With chunking off, a long prompt freezes every stream decoding beside it for about the prompt's whole "
             "prefill.", prefill),
            ("With chunked prefill the freeze falls to one chunk step, one budget's share of the prefill, whatever the "
             "prompt's length.", ["freeze-is-one-chunk", "freeze-is-one-step"]),
            ("Flipping the flag shrinks the freeze by the whole prefill over one chunk's share.", ["shrink-ratio"])]
