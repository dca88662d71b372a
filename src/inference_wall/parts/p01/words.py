"""Part 1's sentences, pure over its views and tables: the findings box, the takeaways, and the texts beside
the figures."""
from __future__ import annotations

import math

import pandas as pd

from ...measure.claims import fmt_num
from ...schema import PUBLISHED_RIG
from ...words import join_and, known_number
from .view import _span, _v, batch_limit


def steadiness_words(steady: dict[str, dict], views: dict[str, dict]) -> str:
    """Per rig family (steadiness), in sentences: how far its sessions of this configuration lay apart (flood, one
    stream's ITL, the step fit), which rigs' part-1 floods lie within part 3's run-to-run spread, and the knee of
    those that do."""
    lines = []
    for fam, r in steady.items():
        parts_ = [f"On the {fam} family, {r['sessions']} sessions of this configuration"]
        if "flood_tok_s" in r:
            lo, hi, rel = r["flood_tok_s"]
            parts_.append(f"flooded at {lo:,.0f} to {hi:,.0f} output tok/s ({100 * rel:.0f}% apart)")
        if "single_itl_ms" in r:
            lo, hi, rel = r["single_itl_ms"]
            parts_.append(f"gave one stream a median ITL of {lo:.2f} to {hi:.2f} ms ({100 * rel:.0f}% apart)")
        if "fit_intercept_ms" in r:
            (a0, a1, _), (b0, b1, _) = r["fit_intercept_ms"], r["fit_slope_ms"]
            parts_.append(f"and fitted {a0:.2f} to {a1:.2f} ms + {b0:.3f} to {b1:.3f} ms x batch")
        line = ", ".join(parts_) + "."
        if "tolerance" in r:
            ok = r["agreeing_rigs"]
            line += (f" Two runs of the same part-3 point have differed by up to {100 * r['tolerance']:.1f}%; within that "
                     f"of part 3's median flood ({r['part3_flood']:,.0f} tok/s) lie the part-1 sessions of "
                     f"{', '.join(ok) if ok else 'no rig'}")
            slow = [k for k, v in r["agree"].items() if not v]
            line += f"; not {', '.join(slow)}." if slow else "."
            for rig in ok:
                if rig in views and known_number(views[rig].get("knee_rps")):
                    line += (f" The knee from {rig}, whose flood agrees: {views[rig]['knee_rps']:.1f} req/s, kept up at "
                             f"{views[rig]['last_kept_up_rps']:.1f}.")
        lines.append(line)
    return " ".join(lines)


def knee_words(views: dict[str, dict], mixed: pd.DataFrame) -> str:
    """Inside the knee, per rig: where the knee came against the flood, what the knee rate needed, what intervals
    that also prefilled and intervals of decode alone made there (in words where a pass had no interval of one kind,
    marked where a figure is one interval), and the median running batch."""
    def made(value: float, n: int, some: str, none: str) -> str:
        if n == 0 or value != value:
            return none
        return f"{some} {fmt_num(value)}" + (" (one interval)" if n == 1 else "")

    lines = []
    for r, v in views.items():
        m = mixed[mixed["rig"] == r].set_index("offered_rate_rps")
        if not len(m) or not known_number(v.get("knee_rps")) or v["knee_rps"] not in m.index:
            continue
        row = m.loc[v["knee_rps"]]
        n_alone = int(row.decode_only_intervals)
        with_p = made(row.gen_with_prefill_tok_s, int(row.intervals) - n_alone, "intervals that also prefilled made",
                      "no interval of the pass also prefilled")
        alone = made(row.gen_decode_only_tok_s, n_alone, "intervals of decode alone",
                     "no interval of the pass decoded alone")
        lines.append(f"On {r} the knee came at {v['knee_rps'] / v['ceiling_rps']:.0%} of the flood ceiling. At the "
                     f"knee the offered rate needed {fmt_num(row.needed_gen_tok_s)} generated tokens a second; "
                     f"{with_p}, {alone}, and the median running batch was {row.running_median:.0f} of "
                     f"{row.max_num_seqs:.0f}.")
    return " ".join(lines)


def single_interval_note(mixed: pd.DataFrame) -> str:
    """The passes of figure 1c whose decode-alone (or with-prefill) figure is a single stats interval of one
    second, named: '' when none is."""
    said = []
    for r in mixed.itertuples():
        kinds = [k for k, n in (("decode alone", r.decode_only_intervals),
                                ("with prefill", r.intervals - r.decode_only_intervals)) if n == 1]
        if kinds:
            said.append(f"{r.rig} at {fmt_num(r.offered_rate_rps)} req/s ({' and '.join(kinds)})")
    if not said:
        return ""
    return ("Drawn from a single one-second stats interval, so one sample, not a median: " + "; ".join(said) + ".")


def flood_steady_words(rates: pd.DataFrame) -> str | None:
    """Each measured rig's flood (rate_table's rows of infinite offered rate): its steady window beside its whole
    pass, in one sentence (steady.flood_window_words); None where no measured rig is shown."""
    from ...measure.steady import flood_window_words

    floods = rates[(rates["source"] == "measured") & rates["offered_rate_rps"].astype(float).map(math.isinf)]
    return flood_window_words(floods.assign(flood=floods["rig"] + "'s flood"), "flood")


def above_flood_words(rates: pd.DataFrame, points: dict[str, dict]) -> str:
    """Figure 1a's rate passes that completed more than the rig's flood (its dashed line), with whether each ran in
    the flood's server session: '' where none did."""
    def session(pt) -> str | None:
        return pt.record.session_id

    lines = []
    for rig, g in rates[rates["source"] == "measured"].groupby("rig", sort=True):
        flood = g[~g["offered_rate_rps"].apply(math.isfinite)]
        if not len(flood):
            continue
        ceiling = float(flood["completed_rps"].iloc[0])
        over = g[g["offered_rate_rps"].apply(math.isfinite) & (g["completed_rps"] > ceiling)]
        if not len(over):
            continue
        pts = points.get(rig, {})
        flood_pt = next((p for p in pts.values() if p.params.get("kind") == "rate"
                         and not math.isfinite(float(p.params.get("offered_rate_rps", 0)))), None)
        by_rate = {float(p.params["offered_rate_rps"]): p for p in pts.values() if p.params.get("kind") == "rate"}
        other = [r for r in over.itertuples() if flood_pt is not None and r.offered_rate_rps in by_rate
                 and session(by_rate[r.offered_rate_rps]) != session(flood_pt)]
        said = ", ".join(f"{fmt_num(r.completed_rps)} req/s at an offered {fmt_num(r.offered_rate_rps)} req/s"
                         for r in over.itertuples())
        one = len(over) == 1
        line = (f"On {rig} {'one rate pass' if one else f'{len(over)} rate passes'} completed more than the flood's "
                f"{fmt_num(ceiling)} req/s (the dashed line): {said}.")
        if len(other) == len(over):
            line += (f" {'It' if one else 'Each'} ran in another server session than the flood, and sessions of this "
                     "configuration do not measure the same ceiling (see Server to server).")
        elif other:
            line += (f" {len(other)} of them ran in another server session than the flood (see Server to server).")
        else:
            line += " They ran in the flood's own server session."
        lines.append(line)
    return " ".join(lines)


def goodput_words(goodput: pd.DataFrame, ttft_ms: float, tpot_ms: float, points: dict[str, dict] | None = None) -> str:
    """Where the share of requests within one target pair rises with the offered rate (the chart is not
    monotonic), per rig: the rise, and, where the passes at and past it sent the same number of requests, that
    share against the server's max_num_seqs over that number (the requests admitted at once). '' where it never
    rises by a point or more."""
    sel = goodput[(goodput["ttft_target_ms"] == ttft_ms) & (goodput["tpot_target_ms"] == tpot_ms)]
    cap = {}
    for rig, pts in (points or {}).items():
        caps = {p.record.max_num_seqs for p in pts.values() if p.params.get("kind") == "rate"}
        if len(caps) == 1:
            cap[rig] = next(iter(caps))
    lines = []
    for rig, g in sel.groupby("rig", sort=True):
        g = g.sort_values("offered_rate_rps").reset_index(drop=True)
        rises = [(g.loc[i - 1], g.loc[i]) for i in range(1, len(g)) if g.loc[i, "share_ok"] >= g.loc[i - 1, "share_ok"] + 0.01]
        if not rises:
            continue
        a, b = max(rises, key=lambda ab: ab[1]["share_ok"] - ab[0]["share_ok"])
        line = (f"On {rig} the share within {ttft_ms:g} ms and {tpot_ms:g} ms rises from "
                f"{100 * a['share_ok']:.1f}% at {fmt_num(a['offered_rate_rps'])} req/s to {100 * b['share_ok']:.1f}% at "
                f"{fmt_num(b['offered_rate_rps'])} req/s")
        same = g[g["offered_rate_rps"] >= b["offered_rate_rps"]]
        n = int(b["requests"])
        if rig in cap and cap[rig] and (same["requests"] == n).all() and len(same) > 1:
            line += (f"; every pass from there on sent {n:,} requests, and {fmt_num(cap[rig])} of {n:,} (the "
                     f"max_num_seqs over the requests) is {100 * cap[rig] / n:.1f}%: the share of the requests the "
                     "server could run at once, so past the knee it follows how many requests a pass sent, not the "
                     "rate")
        lines.append(line + ".")
    return " ".join(lines)


def key_findings(views: dict[str, dict]) -> list[str]:
    """The findings box of part 1: 3-5 sentences from the shown rigs' views (published and measured)."""
    pub = views.get(PUBLISHED_RIG, {})
    measured = {r: v for r, v in views.items() if r != PUBLISHED_RIG}
    out = []
    if pub.get("admission") is not None and pub.get("running_flood") is not None:
        pool = pub.get("pool")
        pages = (f" ({pool.num_blocks:,} KV pages at {pool.pages_per_request(pub['request_tokens'])} a request)"
                 if pool is not None else "")
        same = [r for r, v in measured.items() if batch_limit(v) == "the KV pool"]
        out.append(f"The post reads the A10G's flooded batch of about {fmt_num(_v(pub['running_flood']))} as set by the "
                   f"load. It is the KV pool's admission limit for this workload, {fmt_num(_v(pub['admission']))} "
                   f"requests{pages}" + (f"; {', '.join(same)}, given a pool of that size, ran "
                                         f"{_span(_v(measured[r]['running_flood']) for r in same)}." if same else "."))
    rows = [(r, v) for r, v in views.items() if v.get("floor_ms") and v.get("single_itl_ms") is not None]
    if rows:
        out.append("One request alone: " + "; ".join(
            f"{r} {fmt_num(_v(v['single_itl_ms']))} ms a token, of which streaming the weights once is "
            f"{fmt_num(v['floor_ms'])} ms ({v['floor_ms'] / _v(v['single_itl_ms']):.0%})" for r, v in rows) + ".")
    flood = [(r, v) for r, v in views.items() if v.get("ceiling_rps")]
    if flood:
        out.append("The flood's ceiling: " + "; ".join(f"{r} {fmt_num(v['ceiling_rps'])} req/s "
                                                      f"({fmt_num(v['ceiling_tok_s'])} output tok/s)" for r, v in flood) + ".")
    knee = [(r, v) for r, v in views.items() if known_number(v.get("knee_rps")) and known_number(v.get("ceiling_rps"))]
    if knee:
        below = all(v["knee_rps"] < v["ceiling_rps"] for _, v in knee)
        out.append("Offered a steady rate, each server fell behind (completed under "
                   f"{100 * knee[0][1]['keep_up']:.0f}% of the offered rate) "
                   + ("below its flood's ceiling: " if below else "against its flood's ceiling: ") + "; ".join(
                       f"{r} kept up at {v['last_kept_up_rps'] / v['ceiling_rps']:.0%} of it and fell behind at "
                       f"{v['knee_rps'] / v['ceiling_rps']:.0%}" for r, v in knee) + no_sweep(views) + ".")
    return out[:5]


def no_sweep(views: dict[str, dict]) -> str:
    """The rigs shown whose rate sweep has no knee yet (not run, or cut by a time budget), as a clause: "" where every
    rig has one. A rig without it is named, never given a figure it does not have."""
    missing = [r for r, v in views.items() if not known_number(v.get("knee_rps"))]
    return f" ({join_and(missing)}: no rate sweep with a knee yet)" if missing else ""


def takeaways(views: dict[str, dict]) -> list[tuple[str, str]]:
    """The post's own 'what to take away' list, in our words, each with what the shown rigs' data say."""
    pub = views.get(PUBLISHED_RIG, {})
    facts = pub.get("post", {})
    limits = {r: batch_limit(v) for r, v in views.items() if batch_limit(v)}
    bounded = "; ".join(f"{r}: {lim}" for r, lim in limits.items())
    pool_pub = batch_limit(pub) == "the KV pool"
    out = []
    said = (f"The A10G's flood made {fmt_num(pub['ceiling_rps'])} req/s with the weights taking "
            f"{fmt_num(_v(pub['weights_gib']))} GiB" if pub.get("ceiling_rps") and pub.get("weights_gib") else "")
    if pool_pub:
        said += (f"{'; but' if said else 'But'} memory was not idle: the KV pool admitted at most "
                 f"{fmt_num(_v(pub['admission']))} requests of this workload, and the flooded batch stopped there")
    out.append(("A model that fits in memory with room to spare can still cap the server's throughput: memory "
                "headroom and serving capacity are different resources.", (said or "Not measured on the rigs shown") + "."))
    knee = [(r, v) for r, v in views.items() if known_number(v.get("knee_rps"))]
    out.append(("Load-test for the knee and serve below it: past it more load buys only queue, and no single-request "
                "benchmark shows it.",
                (("Every rig shown has a knee: " if len(knee) == len(views) else "Every rig with a rate sweep has a knee: ")
                 + "; ".join(f"{r} kept up at {fmt_num(v['last_kept_up_rps'])} req/s and "
                             f"fell behind at {fmt_num(v['knee_rps'])}" for r, v in knee)
                 + no_sweep(views) + ".") if knee else "Not measured on the rigs shown."))
    out.append(("Know which limit you hit first: on a small model usually memory, on this 4B generation speed.",
                (f"On the A10G the 4B's flooded batch stopped at the KV pool's admission limit "
                 f"({fmt_num(_v(pub['admission']))}): the KV pool, which the post reads as far from full, is what "
                 "stopped its batch. "
                 if pool_pub else "") + (f"What bounded each flood's batch: {bounded}." if limits else "")))
    ratio = facts.get("cold_over_warm_ttft_p99")
    cold = [(r, v) for r, v in views.items() if v.get("cold_over_warm_p99")]
    out.append(("Warm the server before believing any number" + (f": the cold p99 TTFT was about {ratio:g}x the warm one."
                                                                 if ratio else "."),
                ("; ".join(f"{r}: cold p99 {fmt_num(_v(v['cold_over_warm_p99']))}x warm, cold median "
                           f"{fmt_num(_v(v['cold_p50_ms']))} ms against {fmt_num(_v(v['warm_p50_ms']))} ms warm"
                           for r, v in cold) + ".") if cold else "Not measured on the rigs shown."))
    return out


def bullets(items: list[str]) -> str:
    """Markdown bullets, one per item (the findings box's body)."""
    return "\n".join(f"- {t}" for t in items)


def takeaways_markdown(items: list[tuple[str, str]]) -> str:
    """The post's take-aways as a numbered list, each followed by what the data say."""
    return "\n".join(f"{i}. {post} **What the data say:** {data}" for i, (post, data) in enumerate(items, 1))


def rig_findings(view: dict) -> list[str]:
    """The protocol's findings: the findings box's sentences on this rig alone."""
    return key_findings({view["rig"]: view})


def page_box(views: dict[str, dict], tables: dict) -> list[str]:
    """The protocol's findings box: key_findings over the rigs shown."""
    return key_findings(views)
