"""Part 0's words: the sentences of its page, pure over a view."""
from __future__ import annotations

import pandas as pd

from ...measure.claims import Missing, known_number
from ...words import join_and, number
from .plan import DENSE, label
from .view import _component, _step_interval, _traced_pair, client_pair


def sampling_words(view: dict) -> str | None:
    """Where the filter's cost stands out of the step's own spread, and where it does not."""
    sam = view["sampling"]
    if not len(sam):
        return None
    known = sam.dropna(subset=["filter_ms", "spread_ms"])
    inside = known[known["filter_ms"].abs() <= known["spread_ms"]]
    outside = known[known["filter_ms"].abs() > known["spread_ms"]]
    words = []
    if len(outside):
        words.append("the filter's cost stands out of the step's own spread (between the two halves of its pass) at "
                     + ", ".join(f"{int(r.batch)} sequence{'' if r.batch == 1 else 's'} ({_n(r.filter_ms)} ms against "
                                 f"{_n(r.spread_ms)})"
                                 for r in outside.itertuples()))
    if len(inside):
        words.append("it does not at " + ", ".join(f"{int(r.batch)} ({_n(r.filter_ms)} ms against a spread of "
                                                    f"{_n(r.spread_ms)})" for r in inside.itertuples())
                     + ", where the table's difference is not a cost")
    return ("On " + view["rig"] + ", " + "; ".join(words) + ".") if words else None


def model_words(view: dict) -> list[str]:
    """What the models' table shows, each sentence with its numbers: the single stream against the floor and its
    matmuls' read rate, the GPU's idle share at 256, the per-sequence costs side by side."""
    m = view.get("models")
    if m is None or not len(m):
        return []
    t = m.set_index("variant")
    out = []
    traced = t.dropna(subset=["matmul_b1_ms"])
    if len(traced):
        rs = list(traced.itertuples())
        floors_ = [f"{_n(r.step_over_floor, 2)}x {'its weight floor ' if k == 0 else ''}on the {r.model} "
                   f"({_n(r.step_b1_ms)} against {_n(r.floor_ms)}{' ms' if k == 0 else ''})" for k, r in enumerate(rs)]
        rates = [f"{_n(r.matmul_pct_bw, 2)}%" for r in rs]
        kernels = [f"the {r.model}'s through vLLM's {r.linear_kernel}" for r in rs if r.linear_kernel]
        split = [f"the {r.model}'s 4-bit layers' kernels alone at {_n(r.quant_mm_pct_bw, 2)}% and its 16-bit GEMMs "
                 f"(the output head among them) at {_n(r.gemm16_pct_bw, 2)}%" for r in rs if known_number(r.quant_mm_pct_bw)]
        out.append("A single stream steps at " + join_and(floors_) + "; the weight matmuls read the weights at "
                   + join_and(rates) + " of the measured bandwidth, in that order"
                   + (f" ({join_and(kernels)}, as its start logged)" if kernels else "")
                   + (f"; by kernel, {join_and(split)}" if split else "") + ".")
    idle = t.dropna(subset=["idle_b256_pct"])
    if len(idle):
        out.append("At 256 sequences the GPU is idle for " + ", ".join(
            f"{_n(r.idle_b256_pct, 2)}% of the {r.model}'s {_n(r.step_b256_ms)} ms step" for r in idle.itertuples())
            + " (the untraced step less the traced kernels).")
    per = t.dropna(subset=["per_seq_to_256_us"])
    if len(per) >= 2:
        far = per.dropna(subset=["per_seq_256_1024_us"])
        out.append("Each sequence added up to 256 costs the step " + ", ".join(
            f"{_n(r.per_seq_to_256_us)} us on the {r.model} (from {int(r.from_batch)})" for r in per.itertuples())
            + ("; from 256 to 1,024, " + ", ".join(f"{_n(r.per_seq_256_1024_us)} us on the {r.model}"
                                                   for r in far.itertuples()) if len(far) else "") + ".")
    return out


_n = number  # a number as a reader reads it (words.number)


def findings(view: dict) -> list[str]:
    """The page's findings for one rig, each a sentence with its numbers (only where the data hold them)."""
    out = []
    pts, main = view["points"], view["main"]
    f = view["floors"].get(main) or {}
    comp = view.get("pure_components")
    curve = view["curve"]
    try:
        s1 = _step_interval(pts, main, 1).value
        mm, k1, idle = (_component(view, 1, "weights (matmul)"), _component(view, 1, "kernels_ms"),
                        _component(view, 1, "GPU idle"))
        out.append(f"A single stream of the {label(main)} steps every {_n(s1)} ms, {_n(s1 / f['weights_ms'])}x its weight "
                   f"floor ({_n(f['weights_bytes'] / 1e9)} GB at {_n(f['bandwidth_gb_s'])} GB/s = "
                   f"{_n(f['weights_ms'])} ms). The trace splits it into the weight matmuls ({_n(mm)} ms, reading at "
                   f"{_n(100 * f['weights_ms'] / mm, 2)}% of the measured bandwidth), every other kernel "
                   f"({_n(k1 - mm)} ms) and the GPU idle ({_n(idle)} ms).")
    except (Missing, KeyError, ZeroDivisionError):
        pass
    try:
        a, b = _traced_pair(view)
        grow = (_step_interval(pts, main, b).value - _step_interval(pts, main, a).value) / (b - a)
        gdn = (_component(view, b, "recurrent state (GDN)") - _component(view, a, "recurrent state (GDN)")) / (b - a)
        idle = (_component(view, b, "GPU idle") - _component(view, a, "GPU idle")) / (b - a)
        out.append(f"From {a} to {b} sequences each added sequence costs the step {_n(1000 * grow)} us: "
                   f"{_n(1000 * gdn)} us of it in the recurrent-state kernels (reading and writing its "
                   f"{_n(f['state_bytes_per_seq'] / 1e6)} MB state once at the measured bandwidth takes "
                   f"{_n(1000 * f['state_ms_per_seq'])} us) and {_n(1000 * idle)} us of GPU idle time, which "
                   + ("grows with the batch." if idle > 0 else "does not grow with the batch."))
    except (Missing, KeyError, ZeroDivisionError, TypeError):
        pass
    mc = curve[curve["variant"] == main].set_index("batch") if len(curve) else pd.DataFrame()
    if len(mc) and {256, 512, 1024} <= set(mc.index):
        lo_hi = _step_interval(pts, main, 1024)
        tok = [mc.loc[b, "tok_s"] for b in (256, 512, 1024)]
        shape = ("holds within a tenth" if min(tok) >= 0.9 * max(tok) else
                 "falls" if tok[2] < tok[0] else "rises")
        out.append(f"Past 256 sequences the pure-decode output {shape}: {_n(tok[0])} tok/s at 256, {_n(tok[1])} at "
                   f"512 and {_n(tok[2])} at 1,024 (the step at 1,024 ranges {_n(lo_hi.low)} to {_n(lo_hi.high)} ms "
                   f"between the halves of its pass).")
    sam = view["sampling"]
    if len(sam) and 256 in set(sam["batch"]):
        r = sam.set_index("batch").loc[256]
        out.append(f"The checkpoint's top-k/top-p filter, which the rig's server applies to every request, costs "
                   f"{_n(r['filter_ms'])} ms of a {_n(r['server'])} ms step at 256 sequences; below 64 it costs "
                   f"at most {_n(max(sam[sam['batch'] <= 64]['filter_ms'].max(), 0.0), 2)} ms.")
    host = view["host"]
    if len(host):
        h = host.set_index("batch")
        ends = [b for b in (1, 256) if b in h.index]
        if ends:
            out.append("Without asynchronous scheduling the step is " + " and ".join(
                f"{_n(h.loc[b, 'sync_ms'])} ms instead of {_n(h.loc[b, 'async_ms'])} at batch {b}" for b in ends)
                + ": the overlap of the host's work with the GPU's hides "
                + " and ".join(f"{_n(h.loc[b, 'hidden_ms'])} ms" for b in ends) + " of each step.")
    models = model_finding(view)
    if models:
        out.insert(min(3, len(out)), models)
    if len(out) > 5:  # the box holds five: the filter's cost has its own section (What sampling costs)
        out = [s for s in out if not s.startswith("The checkpoint's top-k/top-p filter")]
    return out[:5]


def model_finding(view: dict) -> str | None:
    """One findings bullet across the other models: the 9B's cost per added sequence against the 4B's, the 4-bit
    matmuls' read rate against fp16's, the dense model's idle share at 256 (each only where measured)."""
    m = view.get("models")
    if m is None or not len(m):
        return None
    t = m.set_index("variant")
    parts = []
    if {"4b", "9b-fp16"} <= set(t.index) and known_number(t.loc["9b-fp16", "per_seq_to_256_us"]):
        a, b = t.loc["4b", "per_seq_to_256_us"], t.loc["9b-fp16", "per_seq_to_256_us"]
        parts.append(f"the 9B in fp16 costs {_n(b)} us per added sequence up to 256 against the 4B's {_n(a)}")
    if {"9b-fp16", "9b-int4"} <= set(t.index) and known_number(t.loc["9b-int4", "quant_mm_pct_bw"]):
        parts.append(f"the 4-bit 9B's quantized matmul kernels read their weights at "
                     f"{_n(t.loc['9b-int4', 'quant_mm_pct_bw'], 2)}% of the bandwidth (its 16-bit GEMMs, the output "
                     f"head among them, at {_n(t.loc['9b-int4', 'gemm16_pct_bw'], 2)}%), the fp16 9B's matmuls at "
                     f"{_n(t.loc['9b-fp16', 'matmul_pct_bw'], 2)}%")
    elif {"9b-fp16", "9b-int4"} <= set(t.index) and known_number(t.loc["9b-int4", "matmul_pct_bw"]):
        parts.append(f"the 4-bit 9B's weight matmuls read at {_n(t.loc['9b-int4', 'matmul_pct_bw'], 2)}% of the "
                     f"bandwidth, the fp16 9B's at {_n(t.loc['9b-fp16', 'matmul_pct_bw'], 2)}%")
    if DENSE in t.index and known_number(t.loc[DENSE, "idle_b256_pct"]):
        idle = f"the dense 0.5B's GPU is idle for {_n(t.loc[DENSE, 'idle_b256_pct'], 2)}% of its step at 256"
        api = view.get("api")
        both = api.dropna(subset=["step_one_ms", "step_more_ms"]) if api is not None and len(api) else None
        if both is not None and 256 in set(both["batch"]):
            r = both.set_index("batch").loc[256]
            idle += (f", and behind {r.api_servers} API servers the same engine steps in {_n(r.step_more_ms)} ms instead "
                     f"of {_n(r.step_one_ms)}: one API server holds it back")
        parts.append(idle)
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def _polled_flood_words(g: pd.DataFrame) -> str:
    """The rest of the past-256 answer: what part 3's polled floods at 256 and 1,024 show inside the pass, or that
    they were not polled."""
    if not all(known_number(g.loc[b, "phase_active_tok_s"]) for b in (256, 1024)):
        return (" What else a whole pass holds (each wave's prefills, its ramp and drain) is the candidate; part 3's "
                "floods at these caps were not polled, so what happens inside them is still to be measured.")
    a, b = g.loc[256], g.loc[1024]
    return (f" Polled, the floods generated {_n(a.phase_active_tok_s)} and {_n(b.phase_active_tok_s)} tok/s over the "
            f"time the engine had work, so the pass's idle ends do not carry the loss either. At 1,024, "
            f"{_n(100 * b.phase_mixed_share, 2)}% of that time went to steps that carried a refill's prompt tokens "
            f"(about {_n(b.phase_mixed_prompt_per_step)} a step, {_n(b.phase_mixed_step_ms)} ms a step, against "
            f"{_n(a.phase_mixed_prompt_per_step)} and {_n(a.phase_mixed_step_ms)} ms at 256), and for "
            f"{_n(b.phase_stalled_s)} s ({_n(100 * b.phase_stalled_s / b.phase_active_s, 2)}%) its step counter did not "
            "move while requests were in it: the refills' mixed steps and those stalls are where the flood spends the "
            "time pure decode does not; which of the two costs more, and what the stalls are (steps longer than a "
            "poll, or the API server's counters lagging), is not separated here.")


def api_words(view: dict, name_untimed: bool = True) -> str | None:
    """What the server with more API servers in front of the same engine shows (view["api"]): at which batches it
    held the batch that one API server did not, and its step against one API server's at the batches both timed."""
    api = view.get("api")
    if api is None or not len(api) or not api["step_more_ms"].notna().any():
        return None
    count = api["api_servers"].iloc[0]
    held = api.dropna(subset=["step_more_ms"])
    only = held[held["step_one_ms"].isna() & held["running_one"].notna()]  # one API server ran there, never held
    unrun = held[held["running_one"].isna()]
    both = held.dropna(subset=["step_one_ms"])
    words = (f"With {count} API servers in front of the same engine the passes held their batch at "
             + ", ".join(f"{int(r.batch):,}" for r in held.itertuples()) + " (steps of "
             + ", ".join(f"{_n(r.step_more_ms)} ms" for r in held.itertuples()) + ")")
    if len(only) and name_untimed:
        words += ("; with one API server the passes at " + ", ".join(f"{int(b):,}" for b in only["batch"])
                  + " never held it long enough to time")
    if len(unrun):
        words += "; one API server did not run " + ", ".join(f"{int(b):,}" for b in unrun["batch"])
    if len(both):
        words += ("; where both timed a step, one API server's was " + ", ".join(
            f"{_n(r.step_one_ms)} against {_n(r.step_more_ms)} ms at {int(r.batch):,}" for r in both.itertuples()))
    return words


def clients_words(view: dict) -> str | None:
    """What one flood from one client and the same flood from several at once drew from the same server (engine
    counters over each pass's common window) and what each client reported; None where the rig has not run both."""
    try:
        one, more = client_pair(view)
    except Missing:
        return None
    runs = view["client_runs"]
    mine = runs[runs["point"] == more.point].sort_values("client")
    return (f"On {view['rig']}, the {label(one.variant)} flooded with {int(one.prompts):,} requests at its cap of "
            f"{int(one.cap):,}: from one client the server generated {_n(one.tok_s)} tok/s ({_n(one.steps_per_s)} "
            f"steps a second, a step every {_n(one.step_ms)} ms, {_n(one.running_mean)} requests running on average); "
            f"from {int(more.clients)} clients at once it generated {_n(more.tok_s)} tok/s over their common window of "
            f"{_n(more.window_s)} s ({_n(more.steps_per_s)} steps a second, a step every {_n(more.step_ms)} ms, "
            f"{_n(more.running_mean)} running), {_n(more.tok_s / one.tok_s)}x one client's. The clients themselves "
            "reported " + join_and([f"{_n(r.output_tok_s)} tok/s" for r in mine.itertuples()])
            + f" over their own passes, against {_n(one.clients_tok_s)} from the one client.")


def dense_words(view: dict) -> str | None:
    """What the dense 0.5B's passes show: its step where a window held the batch, and where the batch never ran."""
    pts = view["points"]
    d = pts[(pts["variant"] == DENSE) & (pts["kind"] == "decode")].sort_values("batch")
    if not len(d):
        return None
    held = d.dropna(subset=["step_ms"])
    lost = d[d["step_ms"].isna()]
    parts = []
    if len(held):
        parts.append("its pure-decode step is " + ", ".join(f"{_n(r.step_ms)} ms at {int(r.batch)}"
                                                            for r in held.itertuples()))
    if len(lost):
        parts.append("the passes at " + ", ".join(str(int(b)) for b in lost["batch"]) + " never held their batch in "
                     "a window (the most requests running at once: " + ", ".join(
                         f"{_n(r.running_max_pass)} of {int(r.batch)}" for r in lost.itertuples()) + ")")
    return "On the dense 0.5B " + "; ".join(parts) + "."


def mixed_missing_words(rig: str, mixed: pd.DataFrame, data_dir=None) -> str | None:
    """The variants whose mixed sessions the rig's plan holds and the mixed table has no row of, in words."""
    from .mixed import PART0
    from .tables import rig_plan

    traced = [pt for pt in rig_plan(rig, data_dir) if pt.params.get("kind") == "mixed-trace"]
    have = set(mixed[(mixed["rig"] == rig) & (mixed["source"] == PART0)]["model"]) if len(mixed) else set()
    left = [pt for pt in traced if pt.preset not in have]
    if not left:
        return None
    models = join_and(list(dict.fromkeys(f"the {label(pt.params['variant'])}" for pt in left)))
    return (f"Not measured on {rig}: the mixed steps of {models} (part 0's points "
            + ", ".join(f"`{pt.name}`" for pt in left) + f"; `make reproduce PART=0 RIG={rig}` runs them).")
