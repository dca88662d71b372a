"""Part 3, the batching cliff: one server per max_num_seqs cap, each flooded after a warm-up."""
from __future__ import annotations

import math

import pandas as pd

from ..measure import analysis
from ..run.bench import PassSpec
from ..measure.analysis import Interval, combine
from ..measure.claims import Claim, Judgement, Missing, fmt_num as fmt, need
from ..records.reference import load_reference
from ..schema import PUBLISHED_RIG
from ..records.store import load_points, pass_summary
from ..run.sweep import PassPlan, PointPlan
from .. import words
from .protocol import DATA_DIR, EVERY_PART, REFERENCE, Part, judged, without_data_dir

NAME = "03-batching-cliff"
NOTEBOOK = "notebooks/03-batching-cliff.md"

SERIES_CAPS = [1, 4, 16, 64, 256]  # the series' caps

DEFAULTS = {
    "caps": None,  # None: the series' caps, extended by doublings up to the rig's KV admission limit (caps_for)
    "max_cap": 4096,  # the largest cap an automatic list may reach
    "input_len": 256,
    "output_len": 128,
    "waves": 4,  # prompts per pass = waves x cap, clamped: each slot turns over `waves` times, and raised so
    # that the pass lasts min_window_s at the warm-up flood's throughput (at most max_prompts)
    "min_prompts": 32,
    "max_prompts": 4096,
    "seed": 0,  # the same prompts for every cap and every rig
    "small_preset": None,  # e.g. "qwen2.5-0.5b": the same sweep on a small model, for the cliff's height
    "small_caps": None,  # caps for the small model (default: caps)
    "min_window_s": 10.0,  # a measured pass shorter than this is flagged as too short to trust
    "poll_s": 0.25,  # /metrics during every flood's measured pass (its steady window, steady.flood_steady)
}


# A flood's steady window (steady.flood_steady): the running batch within 10% of the cap. Past cap 256 on h200 the
# batch holds at 92-100% of its cap while the refill admits about 30 prompts a step (polls of the cap-512 and
# cap-1,024 floods), under the 95% of the steady module's default.
STEADY_SHARE = 0.9

# The post's "most of the lift comes by cap 64": the middle cap its claims compare against.
MID_CAP = 64
PLATEAU_GAIN = 0.05  # the plateau: the first cap after which a doubling adds less than this fraction


def prompts_for_cap(cap: int, p: dict) -> int:
    return int(max(p["min_prompts"], min(p["max_prompts"], p["waves"] * cap)))


def point_name(cap: int, small: bool = False) -> str:
    return f"{'small-' if small else ''}mns-{cap:03d}"


def caps_for(p: dict, pool=None) -> list[int]:
    """The caps to run: `caps` if given; else the series' caps below the rig's admission limit (requests of
    input+output tokens its KV pool holds at once), doubling past the series' top cap while under it, and
    ending with the first cap at or over it (where the pool, not the cap, bounds the batch). Without a
    known pool (no server started on the rig yet), the series' caps."""
    if p["caps"]:
        return [int(c) for c in p["caps"]]
    if pool is None:
        return list(SERIES_CAPS)
    limit = pool.admission_limit(p["input_len"] + p["output_len"])
    caps = [c for c in SERIES_CAPS if c < limit]
    cap = SERIES_CAPS[-1]
    while caps[-1:] == [cap] and cap < limit and cap * 2 <= p["max_cap"]:
        cap *= 2
        caps.append(cap)
    over = next((c for c in [*SERIES_CAPS, cap] if c >= limit), None)
    if over is not None and over not in caps and over <= p["max_cap"]:
        caps.append(over)
    return caps


def plan(p: dict, profile, pools: dict | None = None) -> list[PointPlan]:
    """`pools`: the rig's KV pool per model preset where known (pools.rig_pool), for the automatic caps."""
    pools = pools or {}
    plans = []
    main_caps = caps_for(p, pools.get(profile.model_preset))
    small_caps = (p["small_caps"] or caps_for(p, pools.get(p["small_preset"]))) if p["small_preset"] else []
    for small, caps in ((False, main_caps), (True, small_caps)):
        for cap in caps:
            name = point_name(cap, small)
            spec = PassSpec(num_prompts=prompts_for_cap(cap, p), seed=p["seed"])
            plans.append(PointPlan(name=name, session=name, max_num_seqs=cap,
                                   passes=[PassPlan("bench", "measured", spec)],
                                   params={"max_num_seqs": cap, "model": "small" if small else "main"},
                                   preset=p["small_preset"] if small else None,
                                   min_window_s=p["min_window_s"], max_prompts=p["max_prompts"],
                                   poll_metrics_s=float(p["poll_s"])))
    return plans


# ---------------------------------------------------------------------------------------------
# Replay: tables, per-rig views and claims
# ---------------------------------------------------------------------------------------------


def sweep_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Published rows (rig a10g-published) and measured rows, one per (rig, model, cap); measured rows also
    carry the largest batch vLLM captured a CUDA graph for (`graph_max_batch`, from /server_info) and, beside the
    whole-pass figures, the flood's steady window (steady.STEADY_COLUMNS, from /metrics polled during the pass: the
    running batch at the cap; NaN where the pass was not polled or holds no such window)."""
    from ..measure.steady import point_flood_row, steady_row

    ref = load_reference(3, data_dir)["mns_sweep"].assign(model="main", source="published")
    rows = []
    for pt in load_points(NAME, data_dir, rigs):
        row = pass_summary(pt)
        row.update(model=pt.params.get("model", "main"), source="measured",
                   window_s=row["duration_s"], min_window_s=pt.record.parameters.get("min_window_s", 0),
                   graph_max_batch=graph_capture_limit(pt), poll_s=pt.record.parameters.get("poll_s", math.nan),
                   **point_flood_row(pt, share=STEADY_SHARE))
        if row["model"] == "small" and pt.record.has_startup:
            row["weights_gib"] = pt.startup().weights_gib  # the small model's weight stream (few, small logs)
        rows.append(row)
    measured = pd.DataFrame(rows)
    table = pd.concat([ref, measured], ignore_index=True) if len(measured) else ref.assign(**steady_row(None, False))
    table = table.assign(steady_polled=table["steady_polled"].eq(True))  # published rows: not polled
    if rigs is not None:
        table = table[table["rig"].isin(rigs)]
    return table.sort_values(["rig", "model", "max_num_seqs"]).reset_index(drop=True)


def short_windows(table: pd.DataFrame) -> pd.DataFrame:
    """Measured passes shorter than the part's min_window_s: too short to call steady."""
    if "window_s" not in table:
        return table.iloc[0:0]
    m = table[table["source"] == "measured"]
    return m[m["window_s"] < m["min_window_s"]]


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


def part1_rig(rig: str, data_dir=None) -> str:
    """The rig whose part 1 this rig's part 3 is judged against: itself, or the rig it repeats."""
    if rig == PUBLISHED_RIG:
        return rig
    from ..run.rig import load_profile

    return load_profile(rig, data_dir).repeat_of or rig


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


def graph_capture_limit(point) -> float:
    """The largest batch (in tokens per step) vLLM captured a CUDA graph for on this point's server: the
    `max_cudagraph_capture_size` of the server's config as /server_info reported it (else its log's config
    line); NaN where neither says. A step of more tokens runs without the captured graphs."""
    import re

    from ..records.store import read_artefact

    pattern = re.compile(r"max_cudagraph_capture_size'?\"?:\s*(\d+)")
    for name in ("server_info.json", "server.log"):
        try:
            text = read_artefact(point.path, name)
        except FileNotFoundError:
            continue
        if m := pattern.search(text):
            return float(m[1])
    return math.nan


def ceiling_cap(sweep: pd.DataFrame) -> float:
    """The cap whose flood made the most output tokens a second: the sweep's ceiling (not always its top cap:
    past the batch that fills a step, a larger cap can make less)."""
    s = sweep.dropna(subset=["output_tok_s"])
    return float(s.loc[s["output_tok_s"].idxmax(), "max_num_seqs"])


def cliff(sweep: pd.DataFrame, lo: float | None = None, hi: float | None = None) -> float:
    """The batching cliff: the ceiling (the most output tok/s of any cap from `lo` to `hi`) over the throughput
    at `lo` (default: the sweep's smallest cap, one request at a time). The one computation behind the per-rig
    table, the prose and the small model's claim, for either model."""
    s = sweep.sort_values("max_num_seqs")
    lo = float(s["max_num_seqs"].iloc[0]) if lo is None else lo
    hi = float(s["max_num_seqs"].iloc[-1]) if hi is None else hi
    s = s[(s["max_num_seqs"] >= lo) & (s["max_num_seqs"] <= hi)].set_index("max_num_seqs")
    if lo not in s.index:
        raise Missing(f"cap {lo:g}")
    return float(s["output_tok_s"].max() / s.loc[lo, "output_tok_s"])


STEEPER = 1.1  # the small-cliff claim: "steeper" from this many times the 4B's cliff


def cliff_comparison(small_x: float, main_x: float, band: float = STEEPER) -> str:
    """The small model's cliff against the 4B's in words, with the small-cliff claim's band: steeper only from
    `band` times the 4B's, shallower only below its inverse, else about as steep."""
    if small_x >= band * main_x:
        return "steeper, as the post found"
    if small_x * band <= main_x:
        return "shallower, not steeper"
    return f"about as steep (within {100 * (band - 1):.0f}%), not steeper"


def added_sequence_ms(sweep: pd.DataFrame, lo: float = 64.0, hi: float = 256.0) -> dict | None:
    """What one more running sequence adds to a step, read from the median ITL between two caps: (ITL at `hi` -
    ITL at `lo`) / (running batch at `hi` - at `lo`), the running batch being the stats lines' largest where
    measured, else the cap. None where either cap is missing."""
    s = sweep.set_index("max_num_seqs")
    if lo not in s.index or hi not in s.index:
        return None

    def batch(cap):
        run = s.loc[cap, "running_max"] if "running_max" in s else math.nan
        return float(run) if run is not None and run == run else float(cap)

    b_lo, b_hi = batch(lo), batch(hi)
    itl_lo, itl_hi = float(s.loc[lo, "itl_p50_ms"]), float(s.loc[hi, "itl_p50_ms"])
    if b_hi <= b_lo:
        return None
    return {"lo": lo, "hi": hi, "itl_lo": itl_lo, "itl_hi": itl_hi, "batch_lo": b_lo, "batch_hi": b_hi,
            "ms_per_seq": (itl_hi - itl_lo) / (b_hi - b_lo)}


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


def run_to_run(table: pd.DataFrame) -> dict[str, dict[float, float]]:
    """For each rig that has a repeat (its profile's `repeat_of`, or another rig's), the relative difference
    of output throughput between the two runs at each cap both measured: rig -> {cap: |a - b| / b}."""
    from ..run.rig import load_profile

    main = table[(table["model"] == "main") & (table["source"] == "measured")]
    out: dict[str, dict[float, float]] = {}
    for repeat in main["rig"].unique():
        try:
            of = load_profile(repeat).repeat_of
        except Exception:  # a rig without a profile has no repeat
            of = None
        if not of or of not in set(main["rig"]):
            continue
        a = main[main["rig"] == repeat].set_index("max_num_seqs")["output_tok_s"]
        b = main[main["rig"] == of].set_index("max_num_seqs")["output_tok_s"]
        both = a.index.intersection(b.index)
        rel = {float(c): abs(a[c] - b[c]) / b[c] for c in both}
        out.setdefault(repeat, {}).update(rel)
        out.setdefault(of, {}).update(rel)
    return out


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


def reference_view(data_dir=None) -> dict:
    """The post's scattered facts for part 3 (statements and prose), with part 1's step fit."""
    f3 = load_reference(3, data_dir)["facts"]
    facts = dict(zip(f3["key"], f3["value"]))
    fit = load_reference(1, data_dir)["step_time_fit"].iloc[0]
    facts.update(mid_cap=MID_CAP, top_cap=SERIES_CAPS[-1], plateau_gain_pct=100 * PLATEAU_GAIN,
                 fit_a=fit["intercept_ms"], fit_b=fit["slope_ms_per_seq"],
                 crossover=fit["intercept_ms"] / fit["slope_ms_per_seq"])
    sweep = load_reference(3, data_dir)["mns_sweep"].set_index("max_num_seqs")
    facts["itl_top"] = float(sweep.loc[SERIES_CAPS[-1], "itl_p50_ms"])
    return facts


# ---------------------------------------------------------------------------------------------
# Claims: part 3's measurements predicted from part 1's on the same rig
# ---------------------------------------------------------------------------------------------
REF_CAP = SERIES_CAPS[-1]  # the series' default cap, part 1's max_num_seqs: where parts 1 and 3 meet


def _at(v: dict, key: str, cap: float) -> Interval:
    table = v.get(key) or {}
    if cap not in table:
        raise Missing(f"cap {cap:g}")
    return table[cap]


def _batch_at(v: dict, cap: float) -> Interval:
    """The running batch a flood reaches at a cap: min(cap, the KV pool's admission limit), from part 1's pool."""
    adm = v["part1"].get("admission")
    if adm is None:
        return Interval.exact(cap)
    return Interval(min(cap, adm.value), min(cap, adm.low), min(cap, adm.high))


def _single_tok_s(p1: dict) -> tuple[Interval, str]:
    ttft, itl, out = need(p1, "single_ttft_ms"), need(p1, "single_itl_ms"), p1["output_len"]
    pred = combine(lambda t, i: out * 1000 / (t + (out - 1) * i), ttft, itl)
    return pred, (f"{out} tokens / ({fmt(ttft.value)} ms {p1.get('single_ttft_source', 'TTFT')} + {out - 1} x "
                  f"{fmt(itl.value)} ms) = {fmt(pred.value)} tok/s")


def _cap1(v: dict) -> Judgement:
    pred, how = _single_tok_s(v["part1"])
    return Judgement(pred, _at(v, "tok_s", 1.0), how)


def _cliff(v: dict) -> Judgement:
    p1 = v["part1"]
    single, how = _single_tok_s(p1)
    flood = need(p1, "flood_tok_s")
    if int(p1.get("max_num_seqs") or 0) != REF_CAP:
        raise Missing(f"part 1 flood at cap {REF_CAP}")
    pred = combine(lambda f, s: f / s, flood, single)
    meas = combine(lambda hi, lo: hi / lo, _at(v, "tok_s", float(REF_CAP)), _at(v, "tok_s", 1.0))
    how = f"part 1's flood {fmt(flood.value)} tok/s / one request at a time ({how}) = {fmt(pred.value)}x"
    top, one = _steady_tok_s(v.get("sweep"), float(REF_CAP)), _steady_tok_s(v.get("sweep"), 1.0)
    steady = top / one if one > 0 else math.nan
    if steady == steady:  # judged on the client's whole passes, as the post measured; the polled windows beside it
        how += f"; in the engine's steady windows cap {REF_CAP} over cap 1 is {fmt(steady)}x"
    return Judgement(pred, meas, how)


def _steady_tok_s(sweep: pd.DataFrame | None, cap: float) -> float:
    """A flood's output tok/s in the engine's steady window (polled); NaN where it has none."""
    if sweep is None or "steady_output_tok_s" not in sweep:
        return math.nan
    row = sweep[sweep["max_num_seqs"] == cap]
    return float(row["steady_output_tok_s"].iloc[0]) if len(row) else math.nan


def _consistency(v: dict) -> Judgement:
    p1 = v["part1"]
    flood = need(p1, "flood_rps")
    if int(p1.get("max_num_seqs") or 0) != REF_CAP:
        raise Missing(f"part 1 flood at cap {REF_CAP}")
    return Judgement(flood, _at(v, "rps", float(REF_CAP)),
                     f"part 1's flood at max_num_seqs {REF_CAP}: {fmt(flood.value)} req/s (another server start)")


def _running_cap(v: dict) -> Judgement:
    from .p01 import running_limit

    caps = need(v, "caps")
    top = caps[-1]
    pred, how = running_limit({**v["part1"], "max_num_seqs": top})
    return Judgement(pred, _at(v, "running", top), f"at the top cap: {how}")


def _plateau_crossover(v: dict) -> Judgement:
    fit = need(v["part1"], "fit")
    caps = need(v, "caps")
    plateau = need(v, "plateau_cap")
    if not math.isfinite(plateau):
        raise Missing("plateau within the caps measured")
    i = caps.index(plateau)
    low = caps[i - 1] if i else 0.0
    pred = fit.interval(lambda a, b: a / b)
    return Judgement(pred, Interval((low + plateau) / 2, low, plateau),
                     f"crossover {fmt(fit.intercept)} / {fmt(fit.slope)} = {fmt(pred.value)}; the plateau (under "
                     f"{PLATEAU_GAIN:.0%} per doubling after it) starts between caps {low:g} and {plateau:g}")


def _model_gain(v: dict, lo_cap: float, hi_cap: float) -> Judgement:
    fit = need(v["part1"], "fit")
    b_lo, b_hi = _batch_at(v, lo_cap), _batch_at(v, hi_cap)
    meas = combine(lambda hi, lo: hi / lo, _at(v, "tok_s", hi_cap), _at(v, "tok_s", lo_cap))
    pred = fit.interval(lambda a, b: analysis.step_model_tok_s(a, b, b_hi.value)
                               / analysis.step_model_tok_s(a, b, b_lo.value))
    return Judgement(pred, meas, f"step model at running batches {b_lo.value:g} and {b_hi.value:g}: "
                                 f"{fmt(pred.value)}x; measured {fmt(meas.value)}x")


def _plateau_gain(v: dict) -> Judgement:
    return _model_gain(v, float(MID_CAP), float(REF_CAP))


def _past_cap(v: dict) -> Judgement:
    caps = need(v, "caps")
    if caps[-1] <= REF_CAP:
        raise Missing(f"caps past {REF_CAP}")
    j = _model_gain(v, float(REF_CAP), caps[-1])
    graphs = v.get("graph_max_batch") or {}
    note = f"; largest CUDA graph {graphs[caps[-1]]:g} tokens" if graphs.get(caps[-1]) == graphs.get(caps[-1]) and caps[-1] in graphs else ""
    return Judgement(j.predicted, j.measured, j.how + f" (cap {REF_CAP} to {caps[-1]:g}{note})")


def _itl_batch(v: dict) -> Judgement:
    fit = need(v["part1"], "fit")
    batch = _batch_at(v, float(REF_CAP))
    pred = fit.interval(lambda a, b: a + b * batch.value)
    return Judgement(pred, _at(v, "itl_p50", float(REF_CAP)),
                     f"{fmt(fit.intercept)} + {fmt(fit.slope)} x running batch {batch.value:g} = {fmt(pred.value)} ms")


def _small_cliff(v: dict) -> Judgement:
    small = need(v, "small_cliff")
    lo, hi = v["small_caps"]
    caps = {c: i.value for c, i in (v.get("tok_s") or {}).items() if lo <= c <= hi}
    if not caps:
        raise Missing(f"caps {lo:g} to {hi:g}")
    best = max(caps, key=caps.get)  # the main model's best cap, as `cliff` reads it
    main = combine(lambda a, b: a / b, _at(v, "tok_s", best), _at(v, "tok_s", lo))
    return Judgement(main, small, f"the main model's cliff, its best cap from {lo:,.0f} to {hi:,.0f} ({best:,.0f}) over cap "
                                  f"{lo:g}: {fmt(main.value)}x; the small model's, likewise: {fmt(small.value)}x")


CLAIMS = [
    Claim("cap1", "One request at a time, the server makes about {single_stream_ceiling_tok_s:g} tok/s: one token "
          "per ~{single_request_ms_per_token:g} ms.",
          "throughput at cap 1 = output tokens / (TTFT + (output - 1) x ITL) of part 1's single stream", "tok/s",
          _cap1, (0.85, 1.15),
          "a flooded cap-1 server also pays the scheduler's and the API server's time between requests"),
    Claim("cliff", "Going from cap 1 to a full batch lifts throughput about {batching_lift:g}x.",
          "the cliff (cap 256 over cap 1) = part 1's flood throughput / part 1's single-stream throughput", "x",
          _cliff, (0.85, 1.15),
          "part 1's flood and part 3's cap-256 flood ran on different server starts; where they differ (see the "
          "consistency row) the cliff inherits it"),
    Claim("consistency", "The flood ceiling here matches part 1's: {part1_knee_completed_rate_low:g} to "
          "{part1_knee_completed_rate_high:g} req/s, reached two ways.",
          "completed req/s at cap 256 = part 1's flood at max_num_seqs 256 (another server start)", "req/s",
          _consistency, (0.9, 1.1),
          "two floods of the same server configuration that disagree mean at least one is not steady (a short "
          "window, a different prompt count, or a server that warmed differently)"),
    Claim("running-cap", "At the plateau the server runs a batch of about {running_batch_plateau:g}.",
          "running batch at the top cap = min(cap, the KV pool's admission limit) (part 1's startup log)", "seqs",
          _running_cap, (0.95, 1.05),
          "a pool read wrongly from the log, or a flood too short for the batch to fill"),
    Claim("plateau-crossover", "The batch stops buying throughput around {plateau_batch:g}: where per-sequence work "
          "overtakes the shared weight stream (the fit's crossover, {crossover:.0f}).",
          "the plateau (the first cap after which a doubling gains under 5%) lies between the caps around the "
          "fit's crossover a/b; verdict: the crossover's interval inside the measured bracket", "seqs",
          _plateau_crossover, (0.0, math.inf),
          "the crossover is where the per-sequence term equals the fixed one: the step model's throughput there is "
          "half its asymptote and still rising by a third per doubling; the model's own 5% plateau is at 9.5 a/b",
          rule="contains"),
    Claim("plateau-gain", "From cap {mid_cap} to cap {top_cap} throughput grows under {gain_cap64_to_cap256_max:g}%.",
          "gain from cap 64 to cap 256 = the step model's throughput ratio at the running batches those caps allow",
          "x", _plateau_gain, (0.9, 1.1),
          "past the crossover the linear step model still gains (at batch a/b it gives half its asymptote); a "
          "flatter curve means something other than the step model's per-sequence term limits the flood, e.g. "
          "prefill's share of the steps growing with the batch"),
    Claim("past-cap", "Setting max_num_seqs past the batch that fills the step buys nothing: throughput stays flat.",
          "gain from cap 256 to the top cap = the step model's ratio at those running batches", "x", _past_cap,
          (0.9, 1.1),
          "a batch larger than the largest captured CUDA graph runs its decode steps without one, and a larger "
          "batch stretches every step; the step model fitted at batches up to 256 knows neither"),
    Claim("itl-batch", "At cap {top_cap} a stream's median ITL rises to ~{itl_top:g} ms: each step advances the whole batch.",
          "median ITL at cap 256 = part 1's step fit at the running batch that cap allows", "ms", _itl_batch,
          (0.85, 1.15),
          "under a flood some steps also prefill newcomers, which lengthens them beyond pure decode"),
    Claim("small-cliff", "A {small_model_params:g}B model's cliff is steeper, ~{small_model_batching_lift:g}x against "
          "~{batching_lift:g}x.",
          "the small model's cliff at least 1.1x the 4B's, over the same caps on the same rig", "x", _small_cliff,
          (STEEPER, math.inf),
          "a cliff is the single stream's step over what each added sequence costs at a large batch: where the "
          "small model's added sequences cost it no less than the 4B's, its faster single stream leaves it the "
          "shallower cliff (which part of a step each sequence adds is not measured: a candidate, not a cause)"),
]


# ---------------------------------------------------------------------------------------------
# The findings box and the post's take-aways, from the data
# ---------------------------------------------------------------------------------------------


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
        out.append(f"From cap {MID_CAP} to cap {REF_CAP} the A10G gained {fmt(pub['gain_64_to_256_pct'])}% where "
                   f"part 1's step model (the weight stream shared, a cost per sequence) predicts {fmt(model)}%: "
                   "the flat top is not that model's per-sequence term alone.")
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
        from ..measure.claims import NOT_MEASURED

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
            "larger cap bought less, not nothing." if past else "")
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


def protocol_tables(data_dir, rigs: list[str]) -> dict:
    """The protocol's tables: the sweep, part 1's view of each rig (of the rig it repeats), the run-to-run spread,
    the post's figures (reference_view) and the data dir."""
    from . import p01

    table = sweep_table(data_dir, rigs)
    rigs1 = {rig: part1_rig(rig, data_dir) for rig in rigs}
    tables1 = p01.page_tables(data_dir, sorted(set(rigs1.values())))
    views1 = {r: p01.rig_view(r, data_dir, tables1) for r in sorted(set(rigs1.values()))}
    return {"sweep": table, "part1": {rig: views1[r] for rig, r in rigs1.items()}, "spread": run_to_run(table),
            REFERENCE: reference_view(data_dir), DATA_DIR: data_dir}


def protocol_view(rig: str, tables: dict, params: dict) -> dict:
    """The protocol's view: rig_view, carrying the post's figures its claims quote."""
    view = rig_view(tables["sweep"], rig, tables["part1"][rig], tables[REFERENCE], tables["spread"])
    return {**view, REFERENCE: tables[REFERENCE]}


def rig_findings(view: dict) -> list[str]:
    """The protocol's findings: the findings box's sentences on this rig alone."""
    return key_findings({view["rig"]: view}, view[REFERENCE])


PART = Part(NAME, DEFAULTS, without_data_dir(plan), tables=protocol_tables, view=protocol_view, findings=rig_findings,
            claims=judged(CLAIMS),
            reads=EVERY_PART)  # part 1's page (which reads every part's), part 0's answers and step model
