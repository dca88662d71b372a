"""What the chapter says on other parts' pages: the paragraphs that answer a part's open questions, from a rig's view."""
from __future__ import annotations

import pandas as pd

from ...measure.claims import Missing, known_number
from ..protocol import Answers
from .plan import DENSE
from .tables import page_tables
from .view import _comp_at, _component, _step_interval, client_pair, flood_gap, rig_view, sampling_cost
from .words import _n, _polled_flood_words, api_words, clients_words


def _growth(view: dict, variant: str, name: str, a: int = 1, b: int = 256) -> float:
    """A traced component's growth per added sequence between two traced batches (us)."""
    return 1000 * (_comp_at(view, variant, b, name) - _comp_at(view, variant, a, name)) / (b - a)


def _sweep(data_dir, rigs: list[str]) -> pd.DataFrame:
    """Part 3's floods of the rigs (its tables, through its PART)."""
    from ..p03 import PART as PART3

    return PART3.tables(data_dir, rigs)["sweep"]


def _mixed(data_dir, rigs: list[str]) -> pd.DataFrame:
    from .mixed import mixed_table

    return mixed_table(data_dir, rigs)


# What the answers to a part read besides this chapter's tables (open_answers' `part3` and `mixed`), by the asking
# part's number: only what its questions need is loaded.
ANSWERS_READ = {3: ("part3", _sweep), 2: ("mixed", _mixed)}


def part_answers(part: int | str, data_dir=None, rigs: list[str] | None = None) -> list[str]:
    """The paragraphs of this chapter that answer part `part`'s open questions (its number or name), for that part's
    page: each rig that measured this chapter, its answers whose heading names the part ("(part N)"), the rig named
    where several."""
    from ...run.rig import load_profile
    from ...schema import PUBLISHED_RIG
    from ..protocol import page_rigs, parameters_for
    from .plan import DEFAULTS, NAME

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
        view = rig_view(rig, tables, parameters_for(NAME, DEFAULTS, load_profile(rig, data_dir)), data_dir)
        for words in open_answers(view, extra.get("part3"), extra.get("mixed")):
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


def nine_b_answers(view: dict) -> list[str]:
    """Part 5's two questions from the models' table: the 9B's cost per added sequence against the 4B's, in pure
    decode and by component; the 4-bit single stream against its weight floor."""
    m = view.get("models")
    out = []
    if m is None or not len(m):
        return out
    t = m.set_index("variant")
    if {"4b", "9b-fp16"} <= set(t.index) and known_number(t.loc["9b-fp16", "per_seq_to_256_us"]):
        a, b = t.loc["4b"], t.loc["9b-fp16"]
        rel = "more" if b.per_seq_to_256_us > a.per_seq_to_256_us else "less"
        words = (f"**Why the 9B's per-sequence cost comes out below the 4B's (part 5).** In pure decode it does not: "
                 f"each sequence added from {int(b.from_batch)} to 256 costs the 9B's step {_n(b.per_seq_to_256_us)} us "
                 f"and the 4B's {_n(a.per_seq_to_256_us)} us ({rel} on the 9B)")
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
        out.append(f"**Why the 4-bit step at batch 1 sits far above its weight floor (part 5).** The 4-bit 9B's "
                   f"single stream steps every {_n(q.step_b1_ms)} ms against a floor of {_n(q.floor_ms)} ms "
                   f"({_n(q.weights_gb)} GB): its weight matmuls{kernel} take {_n(q.matmul_b1_ms)} ms, reading "
                   f"the weights at {_n(q.matmul_pct_bw, 2)}% of the measured bandwidth where the fp16 9B's "
                   f"matmuls read at {_n(f.matmul_pct_bw, 2)}%; the other kernels ({_n(q.other_kernels_b1_ms)} ms) "
                   f"and the GPU's idle time ({_n(q.idle_b1_ms)} ms) are about the fp16 model's "
                   f"({_n(f.other_kernels_b1_ms)} and {_n(f.idle_b1_ms)} ms). What holds the 4-bit matmuls to that "
                   "rate (dequantising in the kernel, its tile shapes at one row) is a candidate, not measured here.")
    return out


def open_answers(view: dict, part3: pd.DataFrame | None, mixed: pd.DataFrame | None = None) -> list[str]:
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
        out.append(f"**Why a single stream runs above its weight floor (part 1).** {_n(s1)} ms against a floor of "
                   f"{_n(f['weights_ms'])} ms: the weight matmuls alone take {_n(mm)} ms, "
                   f"{_n(mm / f['weights_ms'])}x the floor; the other {_n(s1 - mm)} ms are the other kernels and "
                   "the GPU's idle time (the findings above).")
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
    out += nine_b_answers(view)
    if mixed is not None and len(mixed):
        from .mixed import mixed_words
        words = mixed_words(mixed, view["rig"]) if view["rig"] in set(mixed["rig"]) else []
        if words:
            out.append("**Why a step that carries a prefill chunk has a floor at small budgets (part 2).** "
                       + " ".join(words))
    missing_variants = [v for v in ("9b-fp16", "9b-int4") if v not in set(pts["variant"])]
    if missing_variants:
        out.append("**Still open.** Why the 9B's per-sequence cost comes out below the 4B's, and why int4's step at "
                   "batch 1 sits far above its weight floor (part 5): the 9B servers of this chapter's plan ("
                   + ", ".join(missing_variants) + ") have not run on this rig.")
    return out
