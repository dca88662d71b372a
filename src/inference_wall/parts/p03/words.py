"""Part 3's sentences, pure over its views and tables: the findings box, the takeaways, and the texts beside
the figures."""
from __future__ import annotations

import math

import pandas as pd

from ... import words
from ...measure import analysis
from ...measure.claims import fmt_num as fmt
from ...schema import PUBLISHED_RIG
from ..protocol import REFERENCE
from .plan import MID_CAP, STEADY_SHARE
from .view import MODEL_LABELS, added_sequence_ms, cliff_comparison, short_windows
from .claims import CLAIMS, REF_CAP, _batch_at
from ...measure.claims import DIFFERS


def short_window_words(table: pd.DataFrame) -> str:
    """The page's warning for measured passes too short to call steady (short_windows), or ''."""
    short = short_windows(table)
    if not len(short):
        return ""
    return ("**Warning:** these measured passes lasted less than the part's minimum window and are too short to call "
            "steady: " + ", ".join(f"{r.rig} cap {r.max_num_seqs:.0f} ({r.window_s:.1f} s)" for r in short.itertuples()))


def unpolled_words(table: pd.DataFrame) -> str:
    """The measured floods run before the book polled /metrics during a flood, by rig and model, or ''."""
    unpolled = table[(table["rig"] != PUBLISHED_RIG) & ~table["steady_polled"]]
    if not len(unpolled):
        return ""
    return ("*Not polled (run before the book polled floods): " + "; ".join(
        f"{rig}, {MODEL_LABELS.get(model, model)} at cap " + ", ".join(f"{c:,.0f}" for c in g["max_num_seqs"])
        for (rig, model), g in unpolled.groupby(["rig", "model"]))
        + ". Their figures are the whole pass only, so the claims below judge every cap by its whole pass, "
        "the one figure every cap has.*")


def small_model_words(v: dict, part1: dict, verdict: str, inside: str = "the coming chapter Inside a step") -> str:
    """The small model against the main one on one rig, in words from the data: the two cliffs over the same
    caps (`cliff`), the small model's single stream against its weight stream, and what one more running
    sequence adds to a step of each from cap 64 to cap 256 (`added_sequence_ms`). The cause of a shallower cliff
    is left open: a cost every step pays whatever its batch is shared by the batch, like the weight stream, and
    would make a cliff steeper, not shallower. "" where the rig has no small-model sweep."""
    if (v.get("small_cliff") is None or len(v.get("small", [])) < 2 or len(v["sweep"]) < 2
            or v.get("main_cliff_same_caps") is None):
        return ""
    lo, hi = v["small_caps"]
    small = v["small"].set_index("max_num_seqs")
    text = (f"On {v['rig']} the small model's cliff from cap {lo:,.0f} to cap {hi:,.0f} is {fmt(v['small_cliff'].value)}x "
            f"against the 4B's {fmt(v['main_cliff_same_caps'])}x over the same caps ({verdict} for the post's "
            f"steeper-cliff claim). One small-model request at a time gets a token every "
            f"{fmt(small.loc[lo, 'itl_p50_ms'])} ms")
    w = small["weights_gib"].dropna() if "weights_gib" in small else []
    bw = part1.get("bandwidth_gb_s")
    if len(w) and bw is not None:
        stream = analysis.weight_stream_floor_ms(float(w.iloc[0]), bw.value)
        text += (f", while its {fmt(float(w.iloc[0]))} GiB of weights stream in {fmt(stream)} ms at the rig's "
                 f"measured bandwidth: {stream / small.loc[lo, 'itl_p50_ms']:.0%} of the step")
    text += "."
    s_add, m_add = added_sequence_ms(v["small"], MID_CAP, REF_CAP), added_sequence_ms(v["sweep"], MID_CAP, REF_CAP)
    if s_add and m_add and m_add["ms_per_seq"] > 0:
        r = s_add["ms_per_seq"] / m_add["ms_per_seq"]
        than = "more than" if r > 1.05 else "less than" if r < 0.95 else "about as much as"
        text += (f" From cap {MID_CAP} to cap {REF_CAP} the small model's median ITL goes from "
                 f"{fmt(s_add['itl_lo'])} to {fmt(s_add['itl_hi'])} ms, {fmt(s_add['ms_per_seq'])} ms per added "
                 f"running sequence, against the 4B's {fmt(m_add['itl_lo'])} to {fmt(m_add['itl_hi'])} ms, "
                 f"{fmt(m_add['ms_per_seq'])} ms: each added sequence costs the small model {than} it costs the 4B "
                 f"({fmt(r)}x).")
        if r >= 0.95:
            text += (" A cost that every step pays whatever its batch would be shared by the batch, as the weight "
                     "stream is, and would make a cliff steeper, not shallower: that the small model's single stream "
                     "is mostly time other than its weight stream does not explain its shallower cliff. What a step "
                     "spends on each added sequence, and why that does not shrink with the model, is not measured "
                     f"here; the cause is open ({inside} takes a step apart).")
    return text


def _val(x):
    return getattr(x, "value", x)


def _model_gain_pct(v: dict) -> float | None:
    """The gain from cap 64 to cap 256 that part 1's step model predicts at the running batches those caps allow."""
    fit = (v.get("part1") or {}).get("fit")
    if not fit:
        return None
    b_lo, b_hi = _batch_at(v, float(MID_CAP)).value, _batch_at(v, float(REF_CAP)).value
    return 100 * ((b_hi / (fit.intercept + fit.slope * b_hi)) / (b_lo / (fit.intercept + fit.slope * b_lo)) - 1)


def _past_ceiling(views: dict[str, dict]) -> list[tuple[str, dict]]:
    """Rigs whose top cap, past the series' 256, made less than their ceiling cap."""
    return [(r, v) for r, v in views.items() if v.get("caps") and v["caps"][-1] > REF_CAP
            and v.get("ceiling_cap") is not None and v["ceiling_cap"] < v["caps"][-1]]


def _phase(frame: pd.DataFrame, cap: float, col: str) -> float:
    """A polled flood's steady.flood_phases figure at `cap` in a view's sweep frame; NaN where not polled."""
    if frame is None or col not in frame or not len(frame):
        return math.nan
    row = frame[frame["max_num_seqs"] == cap]
    return float(row[col].iloc[0]) if len(row) else math.nan


def _inside_top(v: dict) -> str:
    """The findings' past-ceiling clause from the top cap's polled flood: where its engine's working time went."""
    top = v["caps"][-1]
    mixed, still, active = (_phase(v["sweep"], top, c) for c in ("phase_mixed_share", "phase_stalled_s", "phase_active_s"))
    if not (mixed == mixed and active == active and active > 0):
        return ""
    return (f"; polled, its engine spent {_pct(mixed)} of its working time in steps that carried a refill's prompt "
            f"tokens and {_pct(still / active)} with the step counter still")


def key_findings(views: dict[str, dict], facts: dict) -> list[str]:
    """The findings box of part 3: 3-5 sentences from the shown rigs' views."""
    out = []
    cliffs = [(r, v) for r, v in views.items() if v.get("cliff_ratio")]
    if cliffs:
        out.append("The cliff (the best cap's output over one request at a time): " + "; ".join(
            f"{r} {fmt(_val(v['tok_s'][v['caps'][0]]))} to {fmt(v['ceiling_tok_s'])} tok/s, {fmt(v['cliff_ratio'])}x"
            for r, v in cliffs) + ".")
    pub = views.get(PUBLISHED_RIG, {})
    adm = (pub.get("part1") or {}).get("admission")
    if adm is not None and facts.get("running_batch_plateau"):
        out.append(f"The post's plateau batch of about {facts['running_batch_plateau']:g} on the A10G is its KV pool's "
                   f"admission limit for this workload, {fmt(_val(adm))} requests (part 1 counts the pages), not a "
                   "batch the traffic chose.")
    model = _model_gain_pct(pub)
    if pub.get("gain_64_to_256_pct") is not None and model is not None:
        verdict = next(c for c in CLAIMS if c.id == "plateau-gain").evaluate(pub)["verdict"]
        flatter = verdict == DIFFERS and pub["gain_64_to_256_pct"] < model
        out.append(f"From cap {MID_CAP} to cap {REF_CAP} the A10G gained {fmt(pub['gain_64_to_256_pct'])}% where "
                   f"part 1's step model (the weight stream shared, a cost per sequence) predicts {fmt(model)}%"
                   + (": the flat top is not that model's per-sequence term alone." if flatter else
                      f" (claim plateau-gain: {verdict})."))
    past = _past_ceiling(views)
    if past:
        out.append("Past the batch that fills a step, a larger cap cost throughput: " + "; ".join(
            f"{r}'s cap {v['caps'][-1]:,.0f} completed {fmt(v['top_rps'])} req/s against {fmt(v['ceiling_rps'])} at "
            f"cap {v['ceiling_cap']:,.0f} ({100 * (v['top_rps'] / v['ceiling_rps'] - 1):+.0f}%)" + _inside_top(v)
            for r, v in past) + ".")
    small = [(r, v) for r, v in views.items()
             if r != PUBLISHED_RIG and v.get("small_cliff_ratio") and v.get("main_cliff_same_caps")]
    for r, v in small:
        lo, hi = v["small_caps"]
        s_add, m_add = added_sequence_ms(v["small"], MID_CAP, REF_CAP), added_sequence_ms(v["sweep"], MID_CAP, REF_CAP)
        starved = _phase(v["small"], REF_CAP, "phase_starved_share")
        top = float(v["small"]["max_num_seqs"].max())
        top_starved = _phase(v["small"], top, "phase_starved_share") if top > REF_CAP else math.nan
        why = (f": its flood at cap {REF_CAP} had free slots and nothing waiting in the engine for {_pct(starved)} of "
               "its working time" + (f" ({_pct(top_starved)} at cap {top:,.0f})" if top_starved == top_starved else "")
               + ", so the requests were not reaching the engine (Inside a step measures the same model behind two "
               "API servers and from two clients at once)" if starved == starved else ", and why is not yet measured")
        per = (f"; from cap {MID_CAP} to {REF_CAP} each added sequence cost it {fmt(s_add['ms_per_seq'] / m_add['ms_per_seq'])}x "
               f"what it cost the 4B{why}" if s_add and m_add and m_add["ms_per_seq"] > 0 else "")
        out.append(f"The post found a 0.5B model's cliff steeper ({facts.get('small_model_batching_lift', math.nan):g}x "
                   f"against {facts.get('batching_lift', math.nan):g}x). On {r} it was {fmt(v['small_cliff_ratio'])}x against "
                   f"the 4B's {fmt(v['main_cliff_same_caps'])}x over caps {lo:,.0f} to {hi:,.0f}{per}.")
    return out[:5]


def takeaways(views: dict[str, dict], facts: dict, verdicts: pd.Series | None = None) -> list[tuple[str, str]]:
    """The post's own 'what to take away' list, in our words, each with what the shown rigs' data say. `verdicts`:
    the claims' verdicts indexed by (claim, rig)."""
    def said(claim: str) -> str:
        if verdicts is None:
            return ""
        from ...measure.claims import NOT_MEASURED

        got = [f"{r}: {verdicts[(claim, r)]}" for r in views
               if (claim, r) in verdicts.index and verdicts[(claim, r)] != NOT_MEASURED]
        return f" (claim {claim}: {'; '.join(got)})" if got else ""

    cliffs = [(r, v) for r, v in views.items() if v.get("cliff_ratio")]
    out = [(f"Batching is what keeps a GPU busy: one request at a time against a full batch is about "
            f"{facts.get('batching_lift', math.nan):g}x on the A10G, from sharing each weight read.",
            "The cliff over the best cap: " + "; ".join(f"{r} {fmt(v['cliff_ratio'])}x" for r, v in cliffs) + "."
            if cliffs else "Not measured on the rigs shown.")]
    past = _past_ceiling(views)
    pub = views.get(PUBLISHED_RIG, {})
    model = _model_gain_pct(pub)
    flat = (f"On the A10G the climb from cap {MID_CAP} to {REF_CAP} was {fmt(pub['gain_64_to_256_pct'])}%, where part "
            f"1's step model predicts {fmt(model)}%{said('plateau-gain')}. "
            if pub.get("gain_64_to_256_pct") is not None and model is not None else "")
    more = ("; ".join(f"{r}'s cap {v['caps'][-1]:,.0f} made {100 * (1 - v['top_rps'] / v['ceiling_rps']):.0f}% less than "
                      f"its cap {v['ceiling_cap']:,.0f}" for r, v in past) + ": past the batch that fills a step, a "
            "larger cap cost throughput, where the post has it buy nothing." if past else "")
    out.append(("The win has a ceiling: throughput climbs to a batch of about 64 and then flattens, because per-sequence "
                "work, not the shared weight read, fills each step; a max_num_seqs past the batch that fills it buys "
                "nothing.", (flat + more) or "Not measured on the rigs shown."))
    small = [(r, v) for r, v in views.items()
             if r != PUBLISHED_RIG and v.get("small_cliff_ratio") and v.get("main_cliff_same_caps")]
    out.append((f"Bigger models get less from batching: the 0.5B's cliff was about "
                f"{facts.get('small_model_batching_lift', math.nan):g}x, the 4B's about "
                f"{facts.get('batching_lift', math.nan):g}x.",
                "; ".join(f"On {r} the 0.5B's cliff was {fmt(v['small_cliff_ratio'])}x against the 4B's "
                          f"{fmt(v['main_cliff_same_caps'])}x over the same caps: "
                          + cliff_comparison(v["small_cliff_ratio"], v["main_cliff_same_caps"])
                          for r, v in small) + f"{said('small-cliff')}." if small else
                "Only the post's own figures are shown; no rig shown ran the small model."))
    rows = []
    for r, v in views.items():
        s = v["sweep"].set_index("max_num_seqs")
        lo = v["caps"][0] if v.get("caps") else None
        if lo is None or REF_CAP not in s.index:
            continue
        rows.append(f"{r} median ITL {fmt(s.loc[lo, 'itl_p50_ms'])} ms at cap {lo:g} to {fmt(s.loc[REF_CAP, 'itl_p50_ms'])} "
                    f"ms at cap {REF_CAP} (p99 {fmt(s.loc[REF_CAP, 'itl_p99_ms'])} ms), median TTFT at cap {lo:g} "
                    f"{fmt(s.loc[lo, 'ttft_p50_ms'] / 1000)} s")
    out.append(("Batching costs smoothness, and without it fairness collapses: a stream's gaps grow with the batch, and "
                "one request at a time queues everyone behind it.", "; ".join(rows) + "." if rows else
                "Not measured on the rigs shown."))
    return out


def _pct(x: float) -> str:
    return words.percent(x, decimals=0)


def steady_words(table: pd.DataFrame, rig: str) -> list[str]:
    """What the polled floods of `rig` show, in sentences with their numbers: the rate over the time the engine had
    work against the whole pass, and past the series' top cap where the time went (steps that carry a refill's prompt
    tokens, intervals in which the step counter did not move); for the small model, whether requests reached the
    engine. Empty where the rig's floods were not polled."""
    t = table[(table["rig"] == rig) & table["steady_polled"].eq(True)] if "steady_polled" in table else table.iloc[0:0]
    out = []
    main = t[t["model"] == "main"].set_index("max_num_seqs")
    small = t[t["model"] == "small"].set_index("max_num_seqs")
    if len(main):
        polls = sorted({float(x) for x in main["poll_s"] if x == x and x}) if "poll_s" in main else []
        every = f"every {' or '.join(f'{x:g}' for x in polls)} s" if polls else "during the pass"
        out.append(f"Polled {every}, the floods at " + ", ".join(f"cap {c:,.0f}" for c in main.index) + " generated "
                   + ", ".join(f"{fmt(r.phase_active_tok_s)}" for r in main.itertuples()) + " tok/s over the time the "
                   "engine had work, against " + ", ".join(f"{fmt(r.output_tok_s)}" for r in main.itertuples())
                   + " over the client's whole pass: the pass's idle ends (the client starting and collecting) move "
                   f"the figure by at most {100 * max(abs(r.phase_active_tok_s / r.output_tok_s - 1) for r in main.itertuples()):.0f}%.")
        ref = REF_CAP if REF_CAP in main.index else None
        past = [c for c in main.index if ref is not None and c > ref]
        if ref is not None and past:
            r0, r1 = main.loc[ref], main.loc[past[-1]]
            words = (f"From cap {ref:,.0f} to {past[-1]:,.0f} that rate fell "
                     f"{100 * (1 - r1.phase_active_tok_s / r0.phase_active_tok_s):.0f}%. At cap {past[-1]:,.0f}, {_pct(r1.phase_mixed_share)} of that time went to intervals whose steps "
                     f"computed prompt tokens, a refill's prefill riding with the running batch: about "
                     f"{fmt(r1.phase_mixed_prompt_per_step)} prompt tokens a step, {fmt(r1.phase_mixed_step_ms)} ms a "
                     f"step, against {fmt(r0.phase_mixed_prompt_per_step)} and {fmt(r0.phase_mixed_step_ms)} ms at cap "
                     f"{ref:,.0f}; its pure-decode intervals stepped every {fmt(r1.phase_decode_step_ms)} ms "
                     f"({fmt(r0.phase_decode_step_ms)} at {ref:,.0f})")
            if r1.phase_stalled_s > 0.05 * r1.phase_active_s:
                words += (f", and for {fmt(r1.phase_stalled_s)} s ({_pct(r1.phase_stalled_s / r1.phase_active_s)} of "
                          "the time) the engine's step counter did not move while requests were in it (a step longer "
                          "than a poll interval, or counters the API server had not yet updated: the poll is answered "
                          "by the same process, and the two are not separated here)")
            out.append(words + ". The refill's large mixed steps are the measured candidate for the loss; Inside a "
                       "step measures mixed steps on their own (from part 2's traces).")
        held = main.dropna(subset=["steady_output_tok_s"])
        none = [c for c in main.index if c not in held.index]
        if len(held) or none:
            out.append("The steady window (the longest stretch with the running batch within "
                       f"{100 * (1 - STEADY_SHARE):.0f}% of the cap and the engine stepping) lasted "
                       + ", ".join(f"{fmt(r.steady_window_s)} s at cap {c:,.0f} ({fmt(r.steady_output_tok_s)} tok/s)"
                                   for c, r in held.iterrows())
                       + (("; " if len(held) else "") + "none held at cap " + ", ".join(f"{c:,.0f}" for c in none) if none else "")
                       + ". " + (("At cap " + ", ".join(f"{c:,.0f}" for c in brief) + " the window is under a third of "
                                 "the engine's working time: one cohort's decode between refills, not the flood's cycle. "
                                 ) if (brief := [c for c, r in held.iterrows() if r.steady_window_s < r.phase_active_s / 3]) else "")
                       + "The rate over the engine's working time is the figure this page compares across caps.")
    for c, r in small.iterrows():
        if r.phase_starved_share >= 0.5:
            out.append(f"The small model's flood at cap {c:,.0f} had free slots and nothing waiting in the engine for "
                       f"{_pct(r.phase_starved_share)} of its working time: the requests were not reaching the engine "
                       "fast enough to fill it (the API server and the client are upstream of it; Inside a step "
                       "runs the same model behind two API servers).")
    return out


def past_cap_words(v: dict, verdict: str) -> str | None:
    """The caps past the series' top cap on one rig: throughput and running batch at each, the fall from the top cap,
    and the CUDA-graph candidate where a full decode step ran outside the captured graphs. None where the rig ran no
    cap past it, or not the top cap itself (a partial run)."""
    caps = v["caps"]
    ref = REF_CAP
    if not caps or caps[-1] <= ref or ref not in caps:
        return None
    past = [c for c in caps if c >= ref]
    tok = {c: v["tok_s"][c].value for c in past}
    graphs = v.get("graph_max_batch") or {}
    run = v["running"]
    steps = ", ".join(f"cap {c:,.0f}: {fmt(tok[c])} tok/s with {run[c].value:.0f} running"
                      + (f" (CUDA graphs up to {graphs[c]:.0f} tokens)" if c in graphs and graphs[c] == graphs[c] else "")
                      for c in past if c in run)
    words = (f"On {v['rig']}, past the series' top cap: {steps}. Past cap {ref} the running batch still grew to the cap, "
             f"and throughput fell, by {100 * (1 - tok[past[-1]] / tok[ref]):.0f}% at cap {past[-1]:,.0f}, where part 1's "
             f"step model predicts a small gain ({verdict}, see the claims).")
    big = [c for c in past if c in graphs and graphs[c] == graphs[c] and run.get(c) and run[c].value > graphs[c]]
    if big:
        words += (f" vLLM captured CUDA graphs for steps of at most {graphs[big[0]]:.0f} tokens, so at cap {big[0]:,.0f}, "
                  f"with {run[big[0]].value:.0f} running, every full decode step ran outside the captured graphs: a "
                  f"candidate that the records establish as a fact but not as the cause (the drop begins at cap "
                  f"{past[1]:,.0f}, whose full decode steps still fit a graph).")
    return words


def rig_findings(view: dict) -> list[str]:
    """The protocol's findings: the findings box's sentences on this rig alone."""
    return key_findings({view["rig"]: view}, view[REFERENCE])


def page_box(views: dict[str, dict], tables: dict) -> list[str]:
    """The protocol's findings box: key_findings over the rigs shown, with the post's figures."""
    return key_findings(views, tables[REFERENCE])
