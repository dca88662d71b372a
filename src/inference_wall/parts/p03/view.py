"""Part 3's view of one rig, pure over its tables: the cliff, the plateau, what an added sequence costs, the
run-to-run spread, and the tables the page draws (predicted rows, the steady windows, where a flood's time went)."""
from __future__ import annotations

import math

import pandas as pd

from ...measure import analysis
from ...measure.analysis import Interval
from ...schema import PUBLISHED_RIG
from ..protocol import REFERENCE
from ..cliffs import STEEPER, added_sequence_ms, cliff, cliff_comparison  # noqa: F401 (part 3's names)
from .plan import MID_CAP, PLATEAU_GAIN, SERIES_CAPS


def short_windows(table: pd.DataFrame) -> pd.DataFrame:
    """Measured passes shorter than the part's min_window_s: too short to call steady."""
    if "window_s" not in table:
        return table.iloc[0:0]
    m = table[table["source"] == "measured"]
    return m[m["window_s"] < m["min_window_s"]]


def predicted_rows(fits: dict[str, dict], views: dict[str, dict],
                   caps: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)) -> pd.DataFrame:
    """figures.p03.throughput_vs_cap's dashed lines: what part 1's step fit of each rig predicts a flood makes at
    each of `caps` up to the rig's top cap (256 where it ran none)."""
    rows = []
    for rig, v in fits.items():
        a, b = v.get("fit_intercept_ms"), v.get("fit_slope_ms")
        if a and b:
            rows += [{"rig": rig, "max_num_seqs": cap, "output_tok_s": analysis.step_model_tok_s(a, b, cap)}
                     for cap in caps if cap <= max(views[rig]["caps"] or [256])]
    return pd.DataFrame(rows)


def ceiling_cap(sweep: pd.DataFrame) -> float:
    """The cap whose flood made the most output tokens a second: the sweep's ceiling (not always its top cap:
    past the batch that fills a step, a larger cap can make less)."""
    s = sweep.dropna(subset=["output_tok_s"])
    return float(s.loc[s["output_tok_s"].idxmax(), "max_num_seqs"])


def rig_table(views: dict[str, dict], part1: dict[str, dict]) -> pd.DataFrame:
    """The per-rig table: the cliff (ceiling over cap 1, `cliff`), the plateau, the ceiling (the cap with the
    most throughput, its req/s and the per-sequence cost there), the top cap and its flood (the
    same as the ceiling unless a larger cap made less), part 1's flood on the same rig and the small model's
    cliff. Columns empty for every rig are dropped."""
    rows = []
    for rig, v in views.items():
        rows.append({"rig": rig, "cliff_x": v.get("cliff_ratio"), "plateau_cap": v.get("plateau_cap"),
                     "ceiling_cap": v.get("ceiling_cap"), "ceiling_rps": v.get("ceiling_rps"),
                     "per_seq_ms": v.get("per_seq_ms_ceiling"),
                     "top_cap": v["caps"][-1] if v.get("caps") else None, "top_cap_rps": v.get("top_rps"),
                     "part1_flood_rps": (part1.get(rig) or {}).get("ceiling_rps"),
                     "small_model_cliff_x": v.get("small_cliff_ratio")})
    out = pd.DataFrame(rows)
    return out[[c for c in out if c == "rig" or out[c].notna().any()]]


def rig_view(table: pd.DataFrame, rig: str, part1: dict | None = None, facts: dict | None = None,
             spread: dict[str, dict[float, float]] | None = None) -> dict:
    """What part 3's claims and prose need about one rig. `part1`: part 1's view of the same rig (or of the rig
    it repeats), for its fit, single stream, flood and KV pool; `spread`: run_to_run(table)."""
    main = table[(table["rig"] == rig) & (table["model"] == "main")].sort_values("max_num_seqs")
    small = table[(table["rig"] == rig) & (table["model"] == "small")].sort_values("max_num_seqs")
    caps = [float(c) for c in main["max_num_seqs"]]
    by_cap = main.set_index("max_num_seqs")
    published = rig == PUBLISHED_RIG
    rel = (spread or {}).get(rig, {})

    def num(cap, col, frame=by_cap):
        x = float(frame.loc[cap, col])
        if published:
            return Interval.printed(x)
        return Interval.exact(x).widen(rel.get(cap, 0.0)) if col in ("output_tok_s", "completed_rps") else Interval.exact(x)

    view = {"rig": rig, "sweep": main, "small": small, "caps": caps, "part1": part1 or {}, "post": facts or {},
            "tok_s": {c: num(c, "output_tok_s") for c in caps}, "rps": {c: num(c, "completed_rps") for c in caps},
            "itl_p50": {c: num(c, "itl_p50_ms") for c in caps}, "run_to_run": rel}
    view["running"] = {c: Interval.exact(by_cap.loc[c, "running_max"]) for c in caps
                       if not published and by_cap.loc[c, "running_max"] == by_cap.loc[c, "running_max"]}
    if published and facts and caps:
        view["running"][caps[-1]] = Interval.printed(facts["running_batch_plateau"])
    if "graph_max_batch" in by_cap:
        view["graph_max_batch"] = {c: by_cap.loc[c, "graph_max_batch"] for c in caps}
    if len(main) >= 2:
        top = caps[-1]
        best = ceiling_cap(main)
        view.update(
            cliff_ratio=cliff(main),
            plateau_cap=analysis.plateau_cap(main, PLATEAU_GAIN),
            ceiling_cap=best,
            ceiling_rps=float(by_cap.loc[best, "completed_rps"]),
            ceiling_tok_s=float(by_cap.loc[best, "output_tok_s"]),
            top_rps=float(by_cap.loc[top, "completed_rps"]),
            per_seq_ms_top=analysis.per_sequence_ms(by_cap.loc[top, "output_tok_s"]),
            per_seq_ms_ceiling=analysis.per_sequence_ms(by_cap.loc[best, "output_tok_s"]),
            itl_p50_ratio=float(by_cap.loc[top, "itl_p50_ms"] / by_cap.loc[caps[0], "itl_p50_ms"]),
            ttft_p50_first_s=float(by_cap.loc[caps[0], "ttft_p50_ms"]) / 1000,
        )
        if 1 in caps and MID_CAP in caps:
            view["lift_1_to_64"] = float(by_cap.loc[MID_CAP, "output_tok_s"] / by_cap.loc[1, "output_tok_s"])
        if MID_CAP in caps and SERIES_CAPS[-1] in caps:
            view["gain_64_to_256_pct"] = 100 * analysis.gain_between(main, MID_CAP, SERIES_CAPS[-1])
        if math.isfinite(view["plateau_cap"]):
            view["per_seq_ms_plateau"] = analysis.per_sequence_ms(by_cap.loc[view["plateau_cap"], "output_tok_s"])
        if view["running"].get(top) is not None:
            view["running_top"] = view["running"][top].value
    if published and facts:
        view["small_cliff"] = Interval.printed(facts["small_model_batching_lift"])
        view["small_caps"] = (1.0, caps[-1]) if caps else None
    elif len(small) >= 2:
        s = small.set_index("max_num_seqs")
        lo, hi = float(s.index[0]), float(s.index[-1])
        shared = sorted(set(s.index) & {float(c) for c in caps})
        # the 4B's cliff over the same caps, or None where the two share fewer than two caps (a partial run's tree)
        view["main_cliff_same_caps"] = None
        if len(shared) >= 2:  # the caps both models ran: a cap only one model ran (4,096 on h200) is not compared
            lo, hi = shared[0], shared[-1]
            view["main_cliff_same_caps"] = cliff(main, lo, hi)
        view["small_cliff"] = Interval.exact(cliff(small, lo, hi))  # one definition for both models: the best cap
        view["small_caps"] = (lo, hi)
        view["small_cliff_ratio"] = view["small_cliff"].value
    if part1 and part1.get("ceiling_rps") and view.get("ceiling_rps"):
        view["ceiling_vs_part1"] = view["ceiling_rps"] / part1["ceiling_rps"]
    return view


STEADY_HEADERS = {"rig": "rig", "model": "model", "max_num_seqs": "cap", "output_tok_s": "whole pass (tok/s)",
                  "phase_active_tok_s": "while the engine had work (tok/s)",
                  "steady_output_tok_s": "steady window (tok/s)", "steady_window_s": "steady window (s)",
                  "phase_mixed_share": "time in steps with prompt tokens", "phase_mixed_step_ms": "such a step (ms)",
                  "phase_mixed_prompt_per_step": "prompt tokens a step", "phase_decode_step_ms": "decode step (ms)",
                  "phase_stalled_s": "step counter still (s)", "phase_starved_share": "free slots, none waiting"}


MODEL_LABELS = {"main": "4B", "small": "0.5B"}


def _polled(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["steady_polled"].eq(True)] if "steady_polled" in table else table.iloc[0:0]


def steady_table(table: pd.DataFrame) -> pd.DataFrame:
    """The polled floods of the measured rigs, one row per (rig, model, cap): the client's whole-pass rate beside what
    the engine's counters show inside the pass (steady.flood_phases, steady.flood_steady at STEADY_SHARE); shares
    in %, every figure to three significant digits, the model by name."""
    polled = _polled(table)
    cols = [c for c in STEADY_HEADERS if c in polled]
    out = polled[cols].copy()
    for c in ("phase_mixed_share", "phase_starved_share"):
        if c in out:
            out[c] = 100 * out[c]
    for c in cols[3:]:  # rates and token counts whole (as the prose prints them), the rest to three digits
        out[c] = out[c].round(0) if c.endswith("tok_s") or c.endswith("per_step") else out[c].map(analysis.round_sig)
    out["model"] = out["model"].map(MODEL_LABELS).fillna(out["model"])
    return out.reset_index(drop=True)


def flood_time_rows(table: pd.DataFrame) -> pd.DataFrame:
    """figures.p03.flood_time's rows: per polled flood (rig, model, cap), the seconds of the engine's working time in
    intervals whose steps carried prompt tokens, in pure-decode intervals, and with the step counter still."""
    rows = []
    for r in _polled(table).itertuples():
        if not (r.phase_active_s == r.phase_active_s and r.phase_active_s > 0):
            continue
        flood = f"{r.rig}, {MODEL_LABELS.get(r.model, r.model)}, cap {r.max_num_seqs:,.0f}"
        stepping = r.phase_active_s - r.phase_stalled_s
        mixed = r.phase_mixed_share * r.phase_active_s
        for what, sec in (("mixed", mixed), ("decode", stepping - mixed), ("still", r.phase_stalled_s)):
            rows.append({"rig": r.rig, "flood": flood, "what": what, "seconds": max(sec, 0.0),
                         "share": max(sec, 0.0) / r.phase_active_s})
    return pd.DataFrame(rows, columns=["rig", "flood", "what", "seconds", "share"])


def protocol_view(rig: str, tables: dict, params: dict) -> dict:
    """The protocol's view: rig_view, carrying the post's figures its claims quote."""
    view = rig_view(tables["sweep"], rig, tables["part1"][rig], tables[REFERENCE], tables["spread"])
    return {**view, REFERENCE: tables[REFERENCE]}
