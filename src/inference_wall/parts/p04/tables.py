"""Part 4's tables: the only file of the part that reads the disk (its points with their polls and gaps, the
/metrics timeline, part 1's step fit of each rig, the page arithmetic of the series' model, the posts' running
batches and part 3's floods on every rig)."""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from ...measure.claims import missing
from ...measure.steady import flood_steady
from ...model.modelshape import ModelShape
from ...records.store import load_points, pass_summary
from ..protocol import DATA_DIR
from .plan import DEFAULTS, NAME, admitted, block_size_for, fits, full_limit, pages


def _polls(pt) -> pd.DataFrame:
    from ...records.poller import artefact_name, poll_table
    from ...records.store import open_artefact

    try:
        return poll_table(open_artefact(pt.path, artefact_name("bench")))
    except FileNotFoundError:
        return pd.DataFrame()


_LOGGED_BLOCK = re.compile(r"Setting (?:kv cache|attention) block size to (\d+)")


def _session_start(pt, siblings: dict) -> tuple[int | None, int | None]:
    """(pool, block size) the point's server logged at its start (the session's first point): the override line,
    and the page size where vLLM changed it (a backend's preferred size, a hybrid model's aligned page)."""
    sid = pt.record.session_id
    for other in [pt, *siblings.get(sid, [])]:
        rep = other.startup()
        if rep is not None and rep.num_gpu_blocks_override:
            m = _LOGGED_BLOCK.findall(other.server_log())
            return int(rep.num_gpu_blocks_override), (int(m[-1]) if m else None)
    return None, None


def _nanmax(*values) -> float:
    finite = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    return max(finite) if finite else math.nan


POINT_COLUMNS = ["rig", "model", "workload", "offered_rate_rps", "pool_pages", "max_num_seqs", "input_len", "output_len", "block_size",
                 "pages_prompt", "pages_full", "admitted", "full_limit", "fits", "running_peak", "running_median",
                 "waiting_max", "kv_usage_max_pct", "preemptions", "preempted_per_request", "num_prompts",
                 "duration_s", "completed_rps", "output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms",
                 "itl_p99_ms", "e2el_p50_ms", "e2el_p99_ms", "max_gap_ms", "server_step_ms",
                 "server_tok_per_step", "server_gen_tok_s", "steady_output_tok_s", "steady_step_ms",
                 "steady_running_mean", "pool_logged", "point"]


GAP_FLOOR_MS = 20.0  # gaps kept per pass for the stall count (a stall is longer than any on a calm pool)


def stream_gaps(requests: pd.DataFrame | None) -> tuple[float, tuple[float, ...]]:
    """(the longest gap between two tokens of any stream in the pass, every gap over GAP_FLOOR_MS, longest first),
    from `vllm bench serve --save-detailed`'s per-request ITLs; (nan, ()) without them."""
    if requests is None or not len(requests):
        return math.nan, ()
    gaps = [g for itl in requests["itl_ms"] for g in itl]
    if not gaps:
        return math.nan, ()
    return float(max(gaps)), tuple(sorted((g for g in gaps if g > GAP_FLOOR_MS), reverse=True))


def server_steps(polls: pd.DataFrame) -> dict:
    """What the engine did while it ran requests, from its own counters between polls: the mean step
    (seconds over engine steps), output tokens per step and output tokens a second; intervals that start with
    nothing running are left out."""
    out = {"server_step_ms": math.nan, "server_tok_per_step": math.nan, "server_gen_tok_s": math.nan}
    if len(polls) < 2:
        return out
    busy = (polls["running"].shift() > 0) & (polls["steps_total"].diff() > 0)
    dt, steps = polls["t"].diff()[busy].sum(), polls["steps_total"].diff()[busy].sum()
    gen = polls["generation_tokens_total"].diff()[busy].sum()
    if steps > 0 and dt > 0:
        out.update(server_step_ms=1000.0 * dt / steps, server_tok_per_step=gen / steps, server_gen_tok_s=gen / dt)
    return out


def point_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """One row per measured point: the pool arithmetic (predictions) beside what the pass measured."""
    pts = load_points(NAME, data_dir, rigs)
    by_session: dict = {}
    for pt in pts:
        by_session.setdefault(pt.record.session_id, []).append(pt)
    rows, gaps = [], {}
    for pt in pts:
        prm = pt.params
        preset = pt.record.preset
        layout = ModelShape.of(preset, data_dir).layout
        pool_logged, block_logged = _session_start(pt, by_session)
        # the page vLLM logged, where it chose one (the plan's is what it expected)
        block = block_logged or int(prm["block_size"])
        pool, cap = int(prm["pool_pages"]), int(pt.record.max_num_seqs)
        wl = pt.record.workload
        inp, out = int(wl["input_len"]), int(wl["output_len"])
        s = pass_summary(pt)
        polls = _polls(pt)
        stats = pt.stats_during()
        # the polls cover the measured pass alone (the poller starts with it and samples once more at its end); the
        # snapshots around the point took in the session's warm-up too until the sweep snapshotted after it
        polled = (polls["preemptions_total"].iloc[-1] - polls["preemptions_total"].iloc[0]) if len(polls) else math.nan
        pre = polled if math.isfinite(polled) else s["preemptions"]
        busy = polls[polls["running"] > 0] if len(polls) else polls
        max_gap, gaps[(pt.rig, pt.name)] = stream_gaps(pt.bench("bench").requests)
        limit = admitted(pool, cap, layout, block, inp)
        rows.append({
            "rig": pt.rig, "model": prm.get("model", "main"), "workload": prm["workload"],
            "offered_rate_rps": float(prm.get("offered_rate_rps", math.inf)), "pool_pages": pool,
            "max_num_seqs": cap, "input_len": inp, "output_len": out, "block_size": block,
            "pages_prompt": pages(layout, inp, block), "pages_full": pages(layout, inp + out, block),
            "admitted": limit, "full_limit": full_limit(pool, layout, block, inp + out),
            "fits": fits(pool, cap, layout, block, inp, out),
            "running_peak": _nanmax(s["running_max"], polls["running"].max() if len(polls) else math.nan),
            "running_median": float(busy["running"].median()) if len(busy) else (float(stats["running"].median()) if len(stats) else math.nan),
            "waiting_max": _nanmax(polls["waiting"].max() if len(polls) else math.nan, s["waiting_max"]),
            "kv_usage_max_pct": float(polls["kv_usage_pct"].max()) if len(polls) else s["kv_usage_max_pct"],
            "preemptions": float(pre), "preempted_per_request": float(pre) / s["completed"] if s["completed"] else math.nan,
            "num_prompts": s["num_prompts"], "duration_s": s["duration_s"], "completed_rps": s["completed_rps"],
            "output_tok_s": s["output_tok_s"], "ttft_p50_ms": s["ttft_p50_ms"], "ttft_p99_ms": s["ttft_p99_ms"],
            "itl_p50_ms": s["itl_p50_ms"], "itl_p99_ms": s["itl_p99_ms"], "e2el_p50_ms": s["e2el_p50_ms"],
            "e2el_p99_ms": s["e2el_p99_ms"], "max_gap_ms": max_gap, **server_steps(polls),
            **_steady(polls, min(cap, limit), float(prm.get("offered_rate_rps", math.inf))),
            "pool_logged": pool_logged, "point": pt.name,
        })
    table = add_stalls(pd.DataFrame(rows, columns=POINT_COLUMNS), gaps)
    return table.sort_values(["rig", "model", "workload", "offered_rate_rps", "pool_pages"],
                             ascending=[True, True, False, False, False]).reset_index(drop=True)


def _steady(polls: pd.DataFrame, batch: int, rate: float) -> dict:
    """A flood's steady window at the batch it can run (steady.flood_steady over the pass's polls): the cap, or
    the requests the KV pool admits at once where that is fewer (a starved pool never runs its cap, and judged
    against the cap it would have no steady figure at all); output, step and running batch; NaN for a pass at a
    finite rate, an unpolled pass, and a flood whose batch never held that batch."""
    w = flood_steady(polls, batch) if len(polls) and math.isinf(rate) else None
    return {"steady_output_tok_s": w.output_tok_s if w else math.nan, "steady_step_ms": w.step_ms if w else math.nan,
            "steady_running_mean": w.running_mean if w else math.nan}


def timeline(data_dir=None, rigs: list[str] | None = None, max_rows: int = 4000) -> pd.DataFrame:
    """/metrics samples of every flooded pass: seconds since the pass started, running, waiting, KV usage and
    preemptions so far; thinned evenly per point when the whole frame would exceed `max_rows`."""
    frames = []
    pts = load_points(NAME, data_dir, rigs)
    for pt in pts:
        polls = _polls(pt) if "offered_rate_rps" not in pt.params else pd.DataFrame()
        if not len(polls):
            continue
        rec = next(r for r in pt.passes("measured") if r["label"] == "bench")
        f = polls.assign(t_s=polls["t"] - rec["started"],
                         preempted=polls["preemptions_total"] - polls["preemptions_total"].iloc[0])
        frames.append(f.assign(rig=pt.rig, model=pt.params.get("model", "main"), workload=pt.params["workload"],
                               pool_pages=int(pt.params["pool_pages"]), point=pt.name))
    if not frames:
        return pd.DataFrame(columns=["rig", "model", "workload", "pool_pages", "point", "t_s", "running", "waiting",
                                     "kv_usage_pct", "preempted"])
    per_point = max(2, max_rows // len(frames))
    out = []
    for f in frames:
        if len(f) > per_point:
            f = f.iloc[[round(i * (len(f) - 1) / (per_point - 1)) for i in range(per_point)]]
        out.append(f)
    return pd.concat(out, ignore_index=True)[["rig", "model", "workload", "pool_pages", "point", "t_s", "running",
                                              "waiting", "kv_usage_pct", "preempted"]]


def reference_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Each row's reference: the same rig, model, workload and offered rate on the largest pool that preempted
    nothing."""
    table = table if "offered_rate_rps" in table else table.assign(offered_rate_rps=math.inf)
    keys = ["rig", "model", "workload", "offered_rate_rps"]
    ref = {}
    for key, g in table.groupby(keys):
        calm = g[g["preemptions"] == 0]
        if len(calm):
            ref[key] = calm.sort_values("pool_pages").iloc[-1]
    cols = {"ref_pool_pages": "pool_pages", "ref_itl_p99_ms": "itl_p99_ms", "ref_output_tok_s": "output_tok_s",
            "ref_running_median": "running_median", "ref_max_gap_ms": "max_gap_ms"}
    out = table.copy()
    for new, old in cols.items():
        out[new] = [ref[k].get(old, math.nan) if (k := (r.rig, r.model, r.workload, r.offered_rate_rps)) in ref else math.nan
                    for r in table.itertuples()]
    return out


def step_fit(rig: str, data_dir=None) -> tuple[float, float] | None:
    """Part 1's decode step fit on the rig, step = a + b x batch (ms), or None where the rig has none."""
    from .. import protocol
    from ..p01 import PART as PART1

    try:
        v = protocol.rig_view(PART1, data_dir, rig)
        a, b = float(v["fit_intercept_ms"]), float(v["fit_slope_ms"])
    except (KeyError, TypeError, ValueError, FileNotFoundError):
        return None
    return (a, b) if math.isfinite(a) and math.isfinite(b) and a > 0 and b >= 0 else None


def stalls_over(gaps_ms, threshold_ms: float) -> tuple[float, float]:
    """(how many of a pass's gaps are longer than `threshold_ms`, their median in seconds); nan where either is
    unknown. The threshold is the longest gap of the same workload on the rig's largest calm pool: a gap longer
    than any a pass without preemptions showed is a stall. A line under GAP_FLOOR_MS cannot be counted from the
    gaps kept (only those over the floor): unknown, not too few."""
    if gaps_ms is None or missing(threshold_ms) or threshold_ms < GAP_FLOOR_MS:
        return math.nan, math.nan
    over = [g for g in gaps_ms if g > threshold_ms]
    return float(len(over)), (float(np.median(over)) / 1000.0 if over else math.nan)


def add_stalls(table: pd.DataFrame, gaps: dict) -> pd.DataFrame:
    """The table with each pass's stalls and their median (stalls_over), from its gaps over GAP_FLOOR_MS
    (`gaps[(rig, point)]`, stream_gaps) and the longest gap of its reference pass (reference_rows)."""
    lines = reference_rows(table)["ref_max_gap_ms"] if len(table) else []
    stalls = [stalls_over(gaps.get((r.rig, r.point)), line) for r, line in zip(table.itertuples(), lines)]
    out = table.assign(stalls=[n for n, _ in stalls], stall_median_s=[m for _, m in stalls])
    return out.assign(calm_pool_stalls=calm_pool_stalls(out))


def calm_pool_stalls(table: pd.DataFrame) -> list[float]:
    """Per row: the most stalls (gaps over its own line, add_stalls) that another pass of the same rig, model and
    pool counted while it preempted nothing; nan where the pool has no such pass. A calm pass has no preemption to
    cause a stall, so what it counts is how often this pool's own prefill stalls cross a line drawn on another pool:
    the count's false alarms on that pool."""
    if not len(table) or "stalls" not in table:
        return []
    out = []
    for r in table.itertuples():
        same = table[(table["rig"] == r.rig) & (table["model"] == r.model) & (table["pool_pages"] == r.pool_pages)
                     & (table["point"] != r.point) & (table["preemptions"] == 0)]
        counts = [float(x) for x in same["stalls"] if not missing(x)]
        out.append(max(counts) if counts else math.nan)
    return out


def page_rigs(data_dir=None, rigs: list[str] | None = None) -> list[str]:
    """Measured rigs with part 4 data, except test rigs (`method_only`), unless `rigs` names them. The series
    never published part 4, so no published rig."""
    from ...run.rig import load_profile
    from ...records.store import rigs_with_data

    if rigs:
        return list(rigs)
    return [r for r in rigs_with_data(NAME, data_dir) if not load_profile(r, data_dir).method_only]


def rigs_not_run(data_dir=None) -> list[str]:
    """Rigs with data for another part (and not test rigs) that have not run this part yet."""
    from ...run.rig import load_profile
    from ...schema import PARTS
    from ...records.store import rigs_with_data

    here = set(rigs_with_data(NAME, data_dir))
    other = {r for part in PARTS.values() if part != NAME for r in rigs_with_data(part, data_dir)}
    return sorted(r for r in other - here if not load_profile(r, data_dir).method_only)


def arithmetic(preset: str | None = None, p: dict | None = None, data_dir=None, a10g_pool: int | None = None) -> dict:
    """The page arithmetic for a model preset (default: the series' model), from its config and its logged page size
    (no measurement): pages per request of each workload and what the A10G's pool (default: part 1's view of the
    published rig, the post's log read by kvcache) admits."""
    from .. import protocol
    from ..p01 import PART as PART1
    from ...schema import PUBLISHED_RIG

    if preset is None or a10g_pool is None:
        published = protocol.rig_view(PART1, data_dir, PUBLISHED_RIG)
        preset, a10g_pool = preset or published["preset"], a10g_pool or published["pool"].num_blocks
    p = {**DEFAULTS, **(p or {})}
    layout = ModelShape.of(preset, data_dir).layout
    block = block_size_for(preset, p, data_dir)
    inp, short, long_ = p["input_len"], p["output_len"], p["long_output_len"]
    from ...model.kvcache import DEFAULT_BLOCK_SIZE, RECURRENT_LAYER_TYPES

    types = ModelShape.of(preset, data_dir).layer_types
    return {"layers": len(types), "attention_layers": sum(t not in RECURRENT_LAYER_TYPES for t in types),
            "dense_block": DEFAULT_BLOCK_SIZE, "poll_s": p["poll_interval_s"],
            "block": block, "attention_groups": layout.attention_groups, "state_groups": layout.state_groups,
            "input_len": inp, "short_out": short, "long_out": long_, "short_tokens": inp + short,
            "long_tokens": inp + long_, "pages_prompt": pages(layout, inp, block),
            "pages_short": pages(layout, inp + short, block), "pages_long": pages(layout, inp + long_, block),
            "cap": p["max_num_seqs"], "a10g_pool": a10g_pool,
            "a10g_short": full_limit(a10g_pool, layout, block, inp + short),
            "a10g_long": full_limit(a10g_pool, layout, block, inp + long_),
            "a10g_admitted": admitted(a10g_pool, p["max_num_seqs"], layout, block, inp)}


def published_running(data_dir=None) -> dict:
    """The running batches the series reported (data/reference): part 1's flood, part 3's cap 256."""
    from ...records.reference import load_reference

    def fact(part: int, key: str) -> float:
        f = load_reference(part, data_dir)["facts"]
        return float(f.loc[f["key"] == key, "value"].iloc[0])

    return {"part1_flood": fact(1, "running_batch_flood"), "part3_cap256": fact(3, "running_batch_plateau")}


def earlier_runs(data_dir=None) -> pd.DataFrame:
    """Part 3's floods on every measured rig (test rigs aside) and the published A10G: the cap, the pool the
    server started with (kvcache, from its log), the batch that pool admits at the series' lengths, and the
    running batch measured (published: reported). Where the admitted batch is below the cap, the pool set it."""
    from ...model.pools import pool_of_point
    from ...records.reference import load_reference
    from ...run.rig import load_profile
    from ...schema import PUBLISHED_RIG
    from ...records.store import load_points

    rows = []
    a = arithmetic(data_dir=data_dir)
    facts = load_reference(3, data_dir)["facts"]
    reported = float(facts.loc[facts["key"] == "running_batch_plateau", "value"].iloc[0])
    rows.append({"rig": PUBLISHED_RIG, "max_num_seqs": a["cap"], "pool_pages": a["a10g_pool"],
                 "admitted": a["a10g_admitted"], "running_max": reported})
    for pt in load_points("03-batching-cliff", data_dir):
        if pt.params.get("model", "main") != "main" or load_profile(pt.rig, data_dir).method_only:
            continue
        pool = pool_of_point(pt, data_dir)
        if pool is None:
            continue
        wl = pt.record.workload
        cap = int(pt.record.max_num_seqs)
        summary = pass_summary(pt)
        rows.append({"rig": pt.rig, "max_num_seqs": cap, "pool_pages": pool.num_blocks,
                     "admitted": min(cap, pool.admission_limit(int(wl.get("input_len", 256)) + int(wl.get("output_len", 128)))),
                     "running_max": summary["running_max"]})
    table = pd.DataFrame(rows, columns=["rig", "max_num_seqs", "pool_pages", "admitted", "running_max"])
    table["kv_limited"] = table["admitted"] < table["max_num_seqs"]
    return table.sort_values(["rig", "max_num_seqs"]).reset_index(drop=True)


def protocol_tables(data_dir, rigs: list[str]) -> dict:
    """The protocol's tables: the points, part 1's step fit of each rig (step_fit), the page arithmetic of the
    series' model (arithmetic), the running batches the posts reported (published_running) and the data dir."""
    return {"points": point_table(data_dir, rigs), "fits": {rig: step_fit(rig, data_dir) for rig in rigs},
            "arithmetic": arithmetic(data_dir=data_dir), "published": published_running(data_dir), DATA_DIR: data_dir}
