"""What the chapter says on other parts' pages: the paragraphs that answer a part's open questions, from a rig's view."""
from __future__ import annotations

import math

import pandas as pd

from ...measure.analysis import Interval
from ...measure.claims import Missing, known_number
from ...words import join_and
from ..protocol import Answers
from .plan import DENSE
from .tables import page_tables, rig_parameters
from .view import _comp_at, _component, _step_interval, client_pair, rig_view, sampling_cost
from .words import _n, _polled_flood_words, api_words, clients_words


def _growth(view: dict, variant: str, name: str, a: int = 1, b: int = 256) -> float:
    """A traced component's growth per added sequence between two traced batches (us)."""
    return 1000 * (_comp_at(view, variant, b, name) - _comp_at(view, variant, a, name)) / (b - a)


def _sweep(data_dir, rigs: list[str]) -> pd.DataFrame:
    """Part 3's floods of the rigs (its tables, through its PART)."""
    from ..p03 import PART as PART3

    return PART3.tables(data_dir, rigs)["sweep"]


def _mixed(data_dir, rigs: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Part 2's question: the mixed steps' table and the chunk steps alone (chunkalone)."""
    from .chunkalone import chunk_table
    from .mixed import mixed_table

    return mixed_table(data_dir, rigs), chunk_table(data_dir, rigs)


def part_answers(part: int | str, data_dir=None, rigs: list[str] | None = None) -> list[str]:
    """The paragraphs of this chapter that answer part `part`'s open questions (its number or name), for that part's
    page: each rig that measured this chapter, its answers whose heading names the part ("(part N)"), the rig named
    where several."""
    from ...schema import PUBLISHED_RIG
    from ..protocol import page_rigs
    from .plan import NAME

    from ...schema import part_number

    part = part_number(part)
    shown = [r for r in page_rigs(NAME, data_dir, rigs) if r != PUBLISHED_RIG]
    if not shown:
        return []
    tables = page_tables(data_dir, shown)
    key, read = ANSWERS_READ.get(part, (None, None))
    extra = {key: read(data_dir, shown)} if read else {}
    out = []
    for rig in shown:
        view = rig_view(rig, tables, rig_parameters(rig, data_dir), data_dir)
        mixed, alone = extra.get("mixed", (None, None))
        for words in open_answers(view, extra.get("part3"), mixed, extra.get("part5", {}).get(rig), alone):
            if f"(part {part})" in words.split("**")[1] if words.startswith("**") else False:
                words = words.replace(f" (part {part}).**", ".**", 1)  # on the part's own page
                out.append(words if len(shown) == 1 else f"*{rig}:* {words}")
    return out


def page_answers(asking: str, data_dir, shown: list[str]) -> Answers:
    """The protocol's answers (Part.answers) of this chapter on part `asking`'s page: the paragraphs answering its
    open questions (every rig that ran this chapter), and its measurements against the step model on the rigs shown
    there (stepcheck.sections)."""
    from .stepcheck import sections

    return Answers(part_answers(asking, data_dir), sections(asking, data_dir, shown))


def per_seq_in_range(view: dict, variants: tuple[str, ...] = ("9b-fp16", "4b"), upto: int | None = None) -> dict:
    """Per variant, the step fit's slope (analysis.linear_fit, us per added sequence, with its 95% range) over this
    chapter's decode steps from 1 to the largest batch that every variant measured within part 5's fit range
    (p05's fit_max_batch), so that the models compare over the batches part 5's question is about. Empty where a
    variant has fewer than two points there."""
    from ...measure.analysis import linear_fit
    from ..p05 import PART as PART5

    upto = upto or int(PART5.defaults["fit_max_batch"])
    curve = view.get("curve")
    if curve is None or not len(curve):
        return {}
    have = [set(curve[curve["variant"] == v]["batch"]) for v in variants]
    common = [int(b) for b in set.intersection(*have) if b <= upto] if have else []
    if not common:
        return {}
    top = max(common)
    out = {"upto": upto, "top": top, "variants": {}}
    for v in variants:
        c = curve[(curve["variant"] == v) & (curve["batch"] <= top)].sort_values("batch")
        if len(c) < 2:
            return {}
        fit = linear_fit(c["batch"], c["step_ms"])
        out["variants"][v] = {"us": 1000 * fit.slope, "low": 1000 * fit.slope_ci[0], "high": 1000 * fit.slope_ci[1],
                              "batches": [int(b) for b in c["batch"]],
                              "has_upto": upto in set(curve[curve["variant"] == v]["batch"])}
    return out


def _part5_variants(data_dir, rigs: list[str]) -> dict:
    """Per rig, part 5's variants (its rig_view's `variants`: the 4B reference and each format of the 9B), for its
    page's answers to set its own fits beside this chapter's steps."""
    from ..p05 import PART as PART5
    from ..protocol import views

    return {rig: view["variants"] for rig, view in views(PART5, data_dir, rigs).items()}


# What the answers to a part read besides this chapter's tables (open_answers' `part3`, `mixed` and `part5`), by
# the asking part's number: only what its questions need is loaded.
ANSWERS_READ = {3: ("part3", _sweep), 2: ("mixed", _mixed), 5: ("part5", _part5_variants)}


def nine_b_answers(view: dict, part5: dict | None = None) -> list[str]:
    """Part 5's two questions from the models' table: the 9B's cost per added sequence against the 4B's, over the
    batches part 5 fits (per_seq_in_range) and then past them in pure decode and by component, with part 5's own
    slopes and its 4B server's step beside this chapter's where `part5` (part 5's variants on this rig, its
    rig_view's `variants`) is given; the 4-bit single stream against its weight floor, its matmuls by kernel."""
    m = view.get("models")
    out = []
    if m is None or not len(m):
        return out
    t = m.set_index("variant")
    if {"4b", "9b-fp16"} <= set(t.index) and known_number(t.loc["9b-fp16", "per_seq_to_256_us"]):
        a, b = t.loc["4b"], t.loc["9b-fp16"]
        rel = "more" if b.per_seq_to_256_us > a.per_seq_to_256_us else "less"
        head = "**Why the 9B's per-sequence cost comes out below the 4B's (part 5).** "
        rng = per_seq_in_range(view)
        if rng:
            n, f = rng["variants"]["9b-fp16"], rng["variants"]["4b"]
            overlap = n["low"] <= f["high"] and f["low"] <= n["high"]
            verdict = ("about the same cost per added sequence to both (ranges that overlap)" if overlap else
                       f"the 9B {'more' if n['us'] > f['us'] else 'less'} per added sequence than the 4B")
            words = (head + f"Over the batches part 5 fits (up to {rng['upto']:,}), this chapter's engine steps give "
                     f"{verdict}: the line through the decode steps from 1 to {rng['top']:,} gives "
                     f"{_n(n['us'])} us on the 9B (at {join_and([f'{x:,}' for x in n['batches']])}; 95% range "
                     f"{_n(n['low'])} to {_n(n['high'])}) and {_n(f['us'])} us on the 4B (at "
                     f"{join_and([f'{x:,}' for x in f['batches']])}; {_n(f['low'])} to {_n(f['high'])})")
            if not n["has_upto"]:
                words += (f". This chapter has no 9B point at {rng['upto']:,} (a device run, left for later)")
            ref, x = (part5 or {}).get("ref"), (part5 or {}).get("fp16")
            if ref and x and isinstance(ref.get("slope"), Interval) and isinstance(x.get("slope"), Interval):
                words += (f". Part 5's own fits (its clients' gaps between tokens, up to {ref.get('fit_max_batch')}) "
                          f"give the 9B {_n(1000 * x['slope'].value)} us and its 4B reference "
                          f"{_n(1000 * ref['slope'].value)} us")
                dec = ref.get("decode")
                c4 = view["curve"][view["curve"]["variant"] == "4b"].set_index("batch")
                if dec is not None and len(dec) and "itl_p50_ms" in c4:
                    d = dec.set_index("batch")
                    both = sorted(int(x) for x in set(d.index) & set(c4.index) if x <= rng["top"])
                    if both:
                        theirs = [float(d.loc[x, "itl_p50_ms"]) for x in both]
                        here = [float(c4.loc[x, "itl_p50_ms"]) for x in both]
                        slower = all(x > y for x, y in zip(theirs, here))
                        faster = all(x < y for x, y in zip(theirs, here))
                        words += ("; part 5's 4B server is " + ("slower than" if slower else "faster than" if faster
                                                               else "not uniformly apart from")
                                  + f" this chapter's (at {join_and([f'{x:,}' for x in both])} sequences its median "
                                  f"gaps between tokens are {join_and([_n(x) for x in theirs])} ms against "
                                  f"{join_and([_n(x) for x in here])} ms here: another server and start)")
            words += (f". Beyond {rng['top']:,}, each sequence added from {int(b.from_batch)} to 256 costs the 9B's step "
                      f"{_n(b.per_seq_to_256_us)} us and the 4B's {_n(a.per_seq_to_256_us)} us ({rel} on the 9B)")
        else:
            words = (head + f"In pure decode it does not: each sequence added from {int(b.from_batch)} to 256 costs "
                     f"the 9B's step {_n(b.per_seq_to_256_us)} us and the 4B's {_n(a.per_seq_to_256_us)} us ({rel} on "
                     "the 9B)")
        if known_number(b.per_seq_256_1024_us) and known_number(a.per_seq_256_1024_us):
            words += (f", and from 256 to 1,024 {_n(b.per_seq_256_1024_us)} against {_n(a.per_seq_256_1024_us)} us")
        names = [("recurrent state (GDN)", "the recurrent-state kernels"), ("weights (matmul)", "the matmuls"),
                 ("GPU idle", "the GPU's idle time")]
        grow = [(w, _growth(view, "9b-fp16", n), _growth(view, "4b", n)) for n, w in names]
        if all(known_number(x) and known_number(y) for _, x, y in grow):
            words += (". Between the traces at 1 and 256 sequences, per added sequence: " + "; ".join(
                f"{w} {_n(x)} us on the 9B against {_n(y)} on the 4B" for w, x, y in grow)
                + f" (both models carry {_n(b.state_mb_per_seq)} MB of recurrent state per sequence)")
        out.append(words + ". Part 5 fits its per-sequence cost to the client's gaps between tokens (ITL and "
                   "TPOT) over its own passes, where its page says whether the two estimators agree; the engine's "
                   "step here is a third estimator, free of the client.")
    if {"9b-fp16", "9b-int4"} <= set(t.index) and known_number(t.loc["9b-int4", "matmul_b1_ms"]):
        q, f = t.loc["9b-int4"], t.loc["9b-fp16"]
        kernel = f" ({q.linear_kernel}, the kernel vLLM's start logged for the 4-bit layers)" if q.linear_kernel else ""
        if known_number(q.quant_mm_b1_ms):  # the trace's kernels split the matmuls: the 4-bit layers', the 16-bit GEMMs
            fq = view["floors"].get("9b-int4") or {}
            reads = (f"take {_n(q.matmul_b1_ms)} ms: the 4-bit layers' kernels{kernel} {_n(q.quant_mm_b1_ms)} ms, "
                     f"reading their {_n(fq['quantized_bytes'] / 1e9)} GB at {_n(q.quant_mm_pct_bw, 2)}% of the "
                     f"measured bandwidth, and the 16-bit GEMMs (the output head and the layers left in 16 bits, "
                     f"{_n(fq['gemm16_bytes'] / 1e9)} GB) {_n(q.gemm16_b1_ms)} ms, at {_n(q.gemm16_pct_bw, 2)}%; the "
                     f"fp16 9B's matmuls read at {_n(f.matmul_pct_bw, 2)}%")
        else:
            reads = (f"take {_n(q.matmul_b1_ms)} ms, reading the weights at {_n(q.matmul_pct_bw, 2)}% of the "
                     f"measured bandwidth where the fp16 9B's matmuls read at {_n(f.matmul_pct_bw, 2)}%")
        out.append(f"**Why the 4-bit step at batch 1 sits far above its weight floor (part 5).** The 4-bit 9B's "
                   f"single stream steps every {_n(q.step_b1_ms)} ms against a floor of {_n(q.floor_ms)} ms "
                   f"({_n(q.weights_gb)} GB): its weight matmuls{'' if known_number(q.quant_mm_b1_ms) else kernel} "
                   f"{reads}; the other kernels ({_n(q.other_kernels_b1_ms)} ms) "
                   f"and the GPU's idle time ({_n(q.idle_b1_ms)} ms) are about the fp16 model's "
                   f"({_n(f.other_kernels_b1_ms)} and {_n(f.idle_b1_ms)} ms). What holds the 4-bit kernels to that "
                   "rate (dequantising in the kernel, its tile shapes at one row) is a candidate, not measured here.")
    return out


def flood_gap(view: dict, part3: pd.DataFrame) -> pd.DataFrame:
    """Part 3's floods of the same rig and model (the client's whole-pass output) beside the pure-decode output at
    the same batch: where the floods lose throughput past 256, the decode step does or does not."""
    if part3 is None or not len(part3) or "variant" not in view["curve"]:  # no decode point here (a partial run)
        return pd.DataFrame()
    f = part3[(part3["rig"] == view["rig"]) & (part3["model"] == "main")]
    mc = view["curve"][view["curve"]["variant"] == view["main"]].set_index("batch")
    rows = []
    for r in f.itertuples():
        b = int(r.max_num_seqs)
        if b not in mc.index:  # a cap this chapter did not decode at
            continue
        row = {"batch": b, "flood_tok_s": r.output_tok_s, "decode_tok_s": mc.loc[b, "tok_s"],
               "flood_over_decode": r.output_tok_s / mc.loc[b, "tok_s"],
               "flood_itl_ms": r.itl_p50_ms, "decode_step_ms": mc.loc[b, "step_ms"]}
        for k in ("phase_active_tok_s", "phase_mixed_share", "phase_mixed_step_ms", "phase_mixed_prompt_per_step",
                  "phase_stalled_s", "phase_active_s"):  # the flood's polled counters (p03.sweep_table), NaN unpolled
            row[k] = getattr(r, k, math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def open_answers(view: dict, part3: pd.DataFrame | None, mixed: pd.DataFrame | None = None,
                 part5: dict | None = None, alone: pd.DataFrame | None = None) -> list[str]:
    """The parts' open questions that this rig's data answer, each with its numbers; the rest named as open."""
    out = []
    pts, main = view["points"], view["main"]
    gap = flood_gap(view, part3)
    if len(gap) and {256, 1024} <= set(gap["batch"]):
        g = gap.set_index("batch")
        out.append(f"**Why the flood loses throughput past 256 (part 3).** Part 3's flood gave {_n(g.loc[256, 'flood_tok_s'])}"
                   f" tok/s at cap 256 and {_n(g.loc[1024, 'flood_tok_s'])} at 1,024; pure decode here gives "
                   f"{_n(g.loc[256, 'decode_tok_s'])} and {_n(g.loc[1024, 'decode_tok_s'])} at those batches, and the "
                   f"flood's median ITL ({_n(g.loc[256, 'flood_itl_ms'])} and {_n(g.loc[1024, 'flood_itl_ms'])} ms) "
                   f"tracks the decode step ({_n(g.loc[256, 'decode_step_ms'])} and {_n(g.loc[1024, 'decode_step_ms'])}"
                   f" ms). The flood's whole pass reaches {_n(g.loc[256, 'flood_over_decode'], 2)} of the decode rate "
                   f"at 256 and {_n(g.loc[1024, 'flood_over_decode'], 2)} at 1,024: the loss is not in the decode step."
                   + _polled_flood_words(g))
    try:
        s1 = _step_interval(pts, main, 1).value
        f = view["floors"][main]
        mm = _component(view, 1, "weights (matmul)")
        out.append(f"**Why a single stream runs above its weight floor (part 1).** On this chapter's own server, the "
                   f"engine's step at batch 1: {_n(s1)} ms against a floor of {_n(f['weights_ms'])} ms (the language "
                   f"model's {_n(f['weights_bytes'] / 1e9)} GB by its shapes at {_n(f['bandwidth_gb_s'])} GB/s, the "
                   "median bandwidth this chapter's starts measured). Part 1's single stream, where part 1 ran the rig, is another "
                   "server and start, timed by the client's gaps between tokens, its floor the logged weights less "
                   "the vision tower at its own start's bandwidth. Here the weight matmuls alone take "
                   f"{_n(mm)} ms, "
                   f"{_n(mm / f['weights_ms'])}x the floor; the other {_n(s1 - mm)} ms are the other kernels and "
                   "the GPU's idle time (this chapter's findings).")
    except (Missing, KeyError):
        pass
    dense = pts[(pts["variant"] == DENSE) & (pts["kind"] == "decode")].dropna(subset=["step_ms"]).set_index("batch")
    hyb = pts[(pts["variant"] == main) & (pts["kind"] == "decode")].dropna(subset=["step_ms"]).set_index("batch")
    common = sorted(set(dense.index) & set(hyb.index))
    if len(common) >= 2:
        a, b = common[-2], common[-1]
        dd = (dense.loc[b, "step_ms"] - dense.loc[a, "step_ms"]) / (b - a)
        dh = (hyb.loc[b, "step_ms"] - hyb.loc[a, "step_ms"]) / (b - a)
        p3, cliffs = None, ""
        if part3 is not None and len(part3):
            # the series' data dependency: part 3's floods of the same rig
            from ..cliffs import added_sequence_ms, cliff, cliff_comparison
            r3 = part3[part3["rig"] == view["rig"]]
            s3, m3 = (r3[r3["model"] == m] for m in ("small", "main"))
            small, big = added_sequence_ms(s3), added_sequence_ms(m3)
            if small and big:
                p3 = (small, big)
            caps = sorted(set(s3["max_num_seqs"]) & set(m3["max_num_seqs"]))
            if len(caps) >= 2:
                cs, cm = cliff(s3, caps[0], caps[-1]), cliff(m3, caps[0], caps[-1])
                cliffs = (f"Part 3's floods on this rig put the 0.5B's cliff at {_n(cs)}x and the 4B's at {_n(cm)}x "
                          f"(best cap over cap {caps[0]:,.0f}, caps up to {caps[-1]:,.0f}): "
                          f"{cliff_comparison(cs, cm)}. ")
        words = (f"**The 0.5B's cliff against the 4B's (part 3).** {cliffs}In pure decode here each sequence added from "
                 f"{a} to {b} costs the dense 0.5B {_n(1000 * dd)} us a step and the hybrid 4B {_n(1000 * dh)} us")
        if p3:
            key = next((k for k in p3[0] if k.endswith("_ms") or "per" in k), None)
            if key:
                words += (f"; part 3's floods gave {_n(1000 * p3[0][key])} and {_n(1000 * p3[1][key])} us from the "
                          "median ITL between caps 64 and 256")
        lost = pts[(pts["variant"] == DENSE) & (pts["kind"] == "decode") & pts["step_ms"].isna()]
        api = api_words(view, name_untimed=False)
        if len(lost):
            words += (". The 0.5B's passes at " + ", ".join(str(int(x)) for x in lost["batch"]) + " never held their "
                      "batch long enough to time (at most " + ", ".join(
                          f"{int(r.running_max_pass)} of {int(r.batch)}" for r in lost.itertuples()) + " running)")
            if api is None:
                words += (": at its short steps the load the client and the API server keep in flight is a candidate "
                          "for what part 3's floods of the small model measured, to be tested with two clients and "
                          "--api-server-count (planned, not run)")
        if api is not None:
            words += (". " + api + ": one API server, not the GPU, held the small model's batch back and lengthened "
                      "its step" + ("" if clients_words(view) else " (two clients at once against one server were not run)"))
        try:
            one, more = client_pair(view)
            words += (f". Flooded at cap {int(one.cap):,} from one client, the server generated {_n(one.tok_s)} tok/s "
                      f"with {_n(one.running_mean)} requests running on average; from {int(more.clients)} clients at "
                      f"once, {_n(more.tok_s)} tok/s ({_n(more.tok_s / one.tok_s)}x) with {_n(more.running_mean)} "
                      "running (claim one-client below)")
        except Missing:
            pass
        m = view.get("models")
        d = m.set_index("variant").loc[DENSE] if m is not None and len(m) and DENSE in set(m["variant"]) else None
        if d is not None and known_number(d.idle_b256_pct):
            words += (f". At 256 sequences the GPU is idle for {_n(d.idle_b256_pct, 2)}% of the 0.5B's "
                      f"{_n(d.step_b256_ms)} ms step (its kernels take {_n(d.kernels_b256_ms)} ms): most of the "
                      "small model's step at that batch is not GPU work")
        sam = sampling_cost(pts, view["rig"], DENSE) if len(pts) else pd.DataFrame()
        if len(sam) and 256 in set(sam["batch"]):
            r = sam.set_index("batch").loc[256]
            if known_number(r["nofilter"]) and known_number(r["greedy"]):
                words += (f", and it is not steady from pass to pass: {_n(r['server'])} ms with the server's "
                          f"sampling defaults, {_n(r['nofilter'])} without the filter and {_n(r['greedy'])} greedy "
                          "(the two on a later start of the same server)")
        out.append(words + ".")
    out += nine_b_answers(view, part5)
    if mixed is not None and len(mixed):
        from .mixed import mixed_words
        from .chunkalone import chunk_words
        told = chunk_words(alone, view["rig"]) if alone is not None else None
        words = mixed_words(mixed, view["rig"], alone=told) if view["rig"] in set(mixed["rig"]) else []
        if words:
            out.append("**Why a step that carries a prefill chunk has a floor at small budgets (part 2).** "
                       + " ".join(words))
    missing_variants = [v for v in ("9b-fp16", "9b-int4") if v not in set(pts["variant"])]
    if missing_variants:
        out.append("**Still open.** Why the 9B's per-sequence cost comes out below the 4B's, and why int4's step at "
                   "batch 1 sits far above its weight floor (part 5): the 9B servers of this chapter's plan ("
                   + ", ".join(missing_variants) + ") have not run on this rig.")
    return out
