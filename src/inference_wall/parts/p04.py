"""Part 4, starving the KV cache: one server per KV pool size (set exactly with --num-gpu-blocks-override),
each flooded with short requests (that never outgrow the pages they are admitted with, on the hybrid model)
and long ones (that grow across page boundaries while they run), /metrics polled throughout.

The arithmetic (kvcache): a request of T tokens holds pages(T) = attention_groups x ceil(T / block) +
state_groups pages. vLLM admits a waiting request when the pages for its prompt fit in the free pool (one
page of which is the null block), so a flood runs at most

    admitted = min(max_num_seqs, (pool - 1) // pages(prompt))

requests at once. If that many can also grow to their full length, (admitted x pages(prompt + output) <=
pool - 1), nothing is ever evicted: a small pool shows up as a queue. If not, running requests that need
a new page find none and the scheduler preempts (recompute): the latest admitted request loses its pages
and goes back to the queue.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..measure import analysis
from ..run.bench import PassSpec, Workload
from ..measure.claims import DIFFERS, HOLDS, INCONCLUSIVE, NOT_MEASURED, fmt_num, missing
from ..errors import UserError
from ..model.kvcache import NULL_BLOCKS, ModelLayout
from ..model.modelshape import ModelShape
from ..records.store import load_points, pass_summary
from ..run.sweep import PassPlan, PointPlan
from .. import words
from .protocol import DATA_DIR, EVERY_PART, Part, one_paragraph

NAME = "04-kv-starvation"
NOTEBOOK = "notebooks/04-kv-starvation.md"

DEFAULTS = {
    "max_num_seqs": 256,  # the series' cap: large pools are bounded by it, small ones by their pages
    "input_len": 256,
    "output_len": 128,  # the short workload (the series' 256 in / 128 out)
    "long_output_len": 1024,  # the long workload: 256 in / 1,024 out
    # The pools, in pages: sized so that this many short requests fit at once (admission limit), plus `pools`.
    "pool_limits": [512, 256, 64, 16],
    "pools": None,  # extra pools given in pages (e.g. the A10G's 586)
    "max_model_len": 4096,  # per pool: the smaller of this, the model's own limit, and what the pool holds
    "block_size": None,  # --block-size for every server (None: vLLM's choice; a dense model's default is 16)
    "waves": 4,  # short prompts per pass = waves x the running batch the pool admits (clamped)
    "long_waves": 2,  # the same for the long workload
    "min_prompts": 32,
    "max_prompts": 2048,
    "seed": 0,
    "small_preset": None,  # a dense model beside the hybrid one (its requests grow with every token)
    "small_pool_limits": None,  # its pools (default: pool_limits)
    "small_pools": None,  # extra pools for it, in pages
    "poll_interval_s": 0.5,  # /metrics polled this often during every measured pass
    # Fixed-rate passes of the short workload on every pool, beside the floods (None: floods only): requests a
    # second, each pass about rate_window_s long.
    "rates_rps": None,
    "rate_window_s": 20.0,
}


# ---------------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------------

def pages(layout: ModelLayout, tokens: int, block: int) -> int:
    return layout.pages_per_request(tokens, block)


def admitted(pool: int, cap: int, layout: ModelLayout, block: int, prompt: int) -> int:
    """Requests a flood runs at once: the cap, or what the pool admits at their prompt's pages."""
    return min(cap, (pool - NULL_BLOCKS) // pages(layout, prompt, block))


def full_limit(pool: int, layout: ModelLayout, block: int, tokens: int) -> int:
    """Requests that fit at once at their full length (prompt + output)."""
    return (pool - NULL_BLOCKS) // pages(layout, tokens, block)


def fits(pool: int, cap: int, layout: ModelLayout, block: int, prompt: int, output: int) -> bool:
    """Whether every request the pool admits can grow to its full length without evicting another."""
    return admitted(pool, cap, layout, block, prompt) * pages(layout, prompt + output, block) <= pool - NULL_BLOCKS


def pool_for_limit(limit: int, layout: ModelLayout, block: int, tokens: int) -> int:
    """The smallest pool (pages) that holds `limit` requests of `tokens` at once."""
    return limit * pages(layout, tokens, block) + NULL_BLOCKS


def longest_request(pool: int, layout: ModelLayout, block: int) -> int:
    """The longest request (tokens) one pool can hold: vLLM refuses to start with a max_model_len above it
    (0.32 counts the null block, 0.22 does not: the smaller of the two is safe on both)."""
    per_attention = (pool - NULL_BLOCKS - layout.state_groups) // max(1, layout.attention_groups)
    return max(0, per_attention * block)


def block_size_for(preset: str, p: dict, data_dir=None) -> int:
    """The attention page size the pools are counted in: the parameter, else pools.block_size (a dense
    model's default; for a hybrid model, whose page vLLM derives from the state size, what a start of it
    logged, else the same derivation from its config)."""
    from ..model.pools import block_size

    if p["block_size"]:
        return int(p["block_size"])
    return block_size(preset, data_dir=data_dir)


def model_max_len(preset: str, data_dir=None) -> int:
    from ..model.modelshape import ModelShape

    return int(ModelShape.of(preset, data_dir).text.get("max_position_embeddings", 1 << 30))


def pool_max_model_len(pool: int, layout: ModelLayout, block: int, p: dict, model_limit: int, preset: str) -> int:
    """The max_model_len a pool's server gets; an error naming the pool when it cannot hold a long request."""
    need = p["input_len"] + max(p["output_len"], p["long_output_len"])
    holds = longest_request(pool, layout, block)
    length = min(int(p["max_model_len"]), model_limit, holds)
    if length < need:
        want = pages(layout, need, block) + NULL_BLOCKS
        raise UserError(f"a pool of {pool} pages holds requests of at most {holds:,} tokens ({preset}, {block}-token "
                        f"pages), but the long workload needs {need:,} (max_model_len >= {need:,}, which needs at "
                        f"least {want} pages); drop that pool or shorten long_output_len")
    return length


# ---------------------------------------------------------------------------------------------
# Plan
# ---------------------------------------------------------------------------------------------

def point_name(pool: int, workload: str, small: bool = False) -> str:
    return f"{'small-' if small else ''}pool-{pool:05d}-{workload}"


def pools_for(p: dict, layout: ModelLayout, block: int, limits, extra) -> list[int]:
    """Pool sizes in pages, largest first: one per admission limit for the short workload, plus extras."""
    tokens = p["input_len"] + p["output_len"]
    sizes = {pool_for_limit(int(n), layout, block, tokens) for n in (limits or [])} | {int(n) for n in (extra or [])}
    if any(s <= NULL_BLOCKS for s in sizes):
        raise UserError(f"pool sizes must exceed {NULL_BLOCKS} page: {sorted(sizes)}")
    return sorted(sizes, reverse=True)


def prompts(p: dict, running: int, waves: int) -> int:
    return int(max(p["min_prompts"], min(p["max_prompts"], waves * running)))


def state_cap(cap: int, pool: int, layout: ModelLayout) -> int:
    """The max_num_seqs a pool's server gets. vLLM 0.22.1 refuses to start a model with recurrent (Mamba-style)
    layers whose decode runs in full CUDA graphs when max_num_seqs exceeds the pool's pages, since each decoding
    sequence holds a state page (config/compilation.py, "exceeds available Mamba cache blocks"): such a pool's
    server gets the pool as its cap. Every request holds two pages or more there, so the pool admits fewer than
    that anyway and the running batch is the same."""
    return min(cap, pool) if layout.state_groups else cap


def plan(p: dict, profile, pools: dict | None = None, data_dir=None) -> list[PointPlan]:
    for key in ("input_len", "output_len", "long_output_len", "max_num_seqs"):
        if int(p[key]) < 1:
            raise UserError(f"{key} must be at least 1, got {p[key]}")
    plans = []
    models = [(False, profile.model_preset, p["pool_limits"], p["pools"])]
    if p["small_preset"]:
        models.append((True, p["small_preset"], p["small_pool_limits"] or p["pool_limits"], p["small_pools"]))
    cap = int(p["max_num_seqs"])
    for small, preset, limits, extra in models:
        layout = ModelShape.of(preset, data_dir).layout
        block = block_size_for(preset, p, data_dir)
        model_limit = model_max_len(preset, data_dir)
        for pool in pools_for(p, layout, block, limits, extra):
            length = pool_max_model_len(pool, layout, block, p, model_limit, preset)
            mns = state_cap(cap, pool, layout)
            args = ["--num-gpu-blocks-override", str(pool), "--max-model-len", str(length)]
            if p["block_size"]:
                args += ["--block-size", str(int(p["block_size"]))]
            session = point_name(pool, "session", small)
            for workload, out, waves in (("short", p["output_len"], p["waves"]), ("long", p["long_output_len"], p["long_waves"])):
                running = admitted(pool, mns, layout, block, p["input_len"])
                spec = PassSpec(num_prompts=prompts(p, running, waves), seed=p["seed"])
                plans.append(PointPlan(
                    name=point_name(pool, workload, small), session=session, max_num_seqs=mns,
                    passes=[PassPlan("bench", "measured", spec)],
                    params={"pool_pages": pool, "workload": workload, "model": "small" if small else "main",
                            "block_size": block, "max_model_len": length, "input_len": p["input_len"],
                            "output_len": out},
                    preset=preset if small else None, serve_args=args, poll_metrics_s=p["poll_interval_s"],
                    workload=Workload(p["input_len"], out)))
            for rate in p["rates_rps"] or []:
                n = int(max(p["min_prompts"], min(p["max_prompts"], math.ceil(float(rate) * p["rate_window_s"]))))
                plans.append(PointPlan(
                    name=point_name(pool, f"short-r{float(rate):g}", small), session=session, max_num_seqs=mns,
                    passes=[PassPlan("bench", "measured", PassSpec(num_prompts=n, request_rate=float(rate),
                                                                   seed=p["seed"] + 1))],
                    params={"pool_pages": pool, "workload": "short", "model": "small" if small else "main",
                            "block_size": block, "max_model_len": length, "input_len": p["input_len"],
                            "output_len": p["output_len"], "offered_rate_rps": float(rate)},
                    preset=preset if small else None, serve_args=args, poll_metrics_s=p["poll_interval_s"],
                    workload=Workload(p["input_len"], p["output_len"])))
    return plans


# ---------------------------------------------------------------------------------------------
# Replay: tables, per-rig views and claims
# ---------------------------------------------------------------------------------------------

def _polls(pt) -> pd.DataFrame:
    from ..records.poller import artefact_name, poll_table
    from ..records.store import open_artefact

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
        rows.append({
            "rig": pt.rig, "model": prm.get("model", "main"), "workload": prm["workload"],
            "offered_rate_rps": float(prm.get("offered_rate_rps", math.inf)), "pool_pages": pool,
            "max_num_seqs": cap, "input_len": inp, "output_len": out, "block_size": block,
            "pages_prompt": pages(layout, inp, block), "pages_full": pages(layout, inp + out, block),
            "admitted": admitted(pool, cap, layout, block, inp), "full_limit": full_limit(pool, layout, block, inp + out),
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
            **_steady(polls, cap, float(prm.get("offered_rate_rps", math.inf))),
            "pool_logged": pool_logged, "point": pt.name,
        })
    table = add_stalls(pd.DataFrame(rows, columns=POINT_COLUMNS), gaps)
    return table.sort_values(["rig", "model", "workload", "offered_rate_rps", "pool_pages"],
                             ascending=[True, True, False, False, False]).reset_index(drop=True)


from ..measure.steady import MIN_FLOOD_STEPS, flood_steady  # noqa: E402  (the flood's steady window, shared with parts 1, 3, 5)


def _steady(polls: pd.DataFrame, cap: int, rate: float) -> dict:
    """A flood's steady window at its cap (steady.flood_steady over the pass's polls): output, step and running
    batch; NaN for a pass at a finite rate, an unpolled pass, and a flood whose batch never held the cap."""
    w = flood_steady(polls, cap) if len(polls) and math.isinf(rate) else None
    return {"steady_output_tok_s": w.output_tok_s if w else math.nan, "steady_step_ms": w.step_ms if w else math.nan,
            "steady_running_mean": w.running_mean if w else math.nan}


def steady_words(table: pd.DataFrame) -> str | None:
    """Per rig: each flood's steady window beside its whole pass (client), and the floods whose batch never held the
    cap long enough for one: a whole pass of a synchronised flood holds its ramp and drain too."""
    f = table[np.isinf(table["offered_rate_rps"].astype(float))] if len(table) else table
    if not len(f):
        return None
    out = []
    for rig, g in f.groupby("rig", sort=True):
        held = g.dropna(subset=["steady_output_tok_s"])
        lost = g[g["steady_output_tok_s"].isna()]
        words = []
        if len(held):
            words.append("output in the steady window against the whole pass, for the floods that held their cap: "
                         + ", ".join(f"{r.model}/{r.workload} at {int(r.pool_pages):,} pages {r.steady_output_tok_s:,.0f}"
                                     f" against {r.output_tok_s:,.0f} tok/s" for r in held.itertuples()))
        if len(lost):
            words.append(f"{len(lost)} of {len(g)} floods never kept the batch at the cap for {MIN_FLOOD_STEPS} "
                         "steps, so their whole-pass figures are all there is")
        out.append(f"On {rig}, " + "; ".join(words) + ".")
    return " ".join(out)


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


def floods(table: pd.DataFrame) -> pd.DataFrame:
    """The flooded passes only (fixed-rate passes aside)."""
    return table[table["offered_rate_rps"].apply(math.isinf)] if "offered_rate_rps" in table else table


def step_fit(rig: str, data_dir=None) -> tuple[float, float] | None:
    """Part 1's decode step fit on the rig, step = a + b x batch (ms), or None where the rig has none."""
    from . import p01

    try:
        v = p01.rig_view(rig, data_dir)
        a, b = float(v["fit_intercept_ms"]), float(v["fit_slope_ms"])
    except (KeyError, TypeError, ValueError, FileNotFoundError):
        return None
    return (a, b) if math.isfinite(a) and math.isfinite(b) and a > 0 and b >= 0 else None


def decode_rate(batch: float, fit: tuple[float, float]) -> float:
    """Tokens a second at a running batch, from the step fit: batch / (a + b x batch)."""
    return analysis.step_model_tok_s(*fit, batch)


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


def rig_view(table: pd.DataFrame, rig: str, fit: tuple[float, float] | None = None) -> dict:
    """Per rig: the points (with their references and, given part 1's step fit, the throughput their running
    batch predicts relative to the reference pool) and a few summary numbers for the prose."""
    t = reference_rows(table[table["rig"] == rig])
    if fit is not None and len(t):
        t["pred_tok_ratio"] = [decode_rate(r.running_median, fit) / decode_rate(r.ref_running_median, fit)
                               if r.model == "main" and r.running_median > 0 and r.ref_running_median > 0 else math.nan
                               for r in t.itertuples()]  # part 1's fit is the main model's: no prediction for the dense one
        t["tok_ratio"] = t["output_tok_s"] / t["ref_output_tok_s"]
    view = {"rig": rig, "points": t, "fit": fit}
    if len(t):
        view["pools"] = sorted(t["pool_pages"].unique().tolist(), reverse=True)
        view["preemptions_total"] = float(t["preemptions"].sum())
        short = floods(t)[(floods(t)["workload"] == "short") & (floods(t)["model"] == "main")]
        if len(short) >= 2:
            big, small = short.sort_values("pool_pages").iloc[-1], short.sort_values("pool_pages").iloc[0]
            view.update(short_big_pool=big["pool_pages"], short_small_pool=small["pool_pages"],
                        ttft_ratio_short=small["ttft_p50_ms"] / big["ttft_p50_ms"],
                        tok_ratio_short=small["output_tok_s"] / big["output_tok_s"])
    return view


# verdicts: claims.HOLDS, DIFFERS, NOT_MEASURED, and INCONCLUSIVE where a claim's doubt says its count
# cannot be evidence on that pool (preemption-stall: the pool's calm pass crosses the line as often)


@dataclass(frozen=True)
class PointClaim:
    """A mechanism claim judged on every point it applies to: `predict` turns the point's own inputs (its pool,
    its lengths, its cap; for the cost, the same rig's calm pool) into the range the measurement must fall in,
    `measure` reads the measurement; either returns None where the claim does not apply to the point.

    Part 4's predictions are exact counts (a running batch, zero preemptions), so the range is absolute, not a
    ratio band."""

    id: str
    statement: str  # the mechanism with the point's numbers plugged in (a template over the point's row)
    unit: str
    predict: Callable[[dict], tuple[float, float] | None]
    measure: Callable[[dict], float | None]
    why: str = ""  # shown where it differs: what can make it differ
    # where the measurement cannot be evidence for this point: the reason (the verdict is then inconclusive)
    doubt: Callable[[dict], str | None] | None = None

    def evaluate(self, r: dict) -> dict | None:
        """One row for a point, or None where the claim does not apply to it."""
        expected = self.predict(r)
        if expected is None:
            return None
        lo, hi = expected
        value = self.measure(r)
        absent = missing(value)
        verdict = NOT_MEASURED if absent else (HOLDS if lo <= value <= hi else DIFFERS)
        doubt = self.doubt(r) if self.doubt is not None and not absent else None
        if doubt:
            verdict = INCONCLUSIVE
        return {"claim": self.id, "rig": r.get("rig"), "statement": self.statement.format(**_format_safe(r)),
                "expected": _range_text(lo, hi, self.unit), "measured": "" if absent else f"{fmt_num(value)} {self.unit}",
                "value": math.nan if absent else float(value), "low": lo, "high": hi, "verdict": verdict,
                "note": doubt or (self.why if verdict == DIFFERS else "")}


def _range_text(lo: float, hi: float, unit: str) -> str:
    if lo == hi:
        return f"{fmt_num(lo)} {unit}"
    if hi == math.inf:
        return f"at least {fmt_num(lo)} {unit}"
    return f"{fmt_num(lo)} to {fmt_num(hi)} {unit}"


def _format_safe(r: dict) -> dict:
    return {k: (math.nan if v is None else v) for k, v in r.items()}


def _flood(r: dict) -> bool:
    return math.isinf(r.get("offered_rate_rps", math.inf))


def _preempting(r: dict) -> bool:
    return bool(r.get("preemptions")) and r.get("preemptions") > 0


def _ratio_over_ref(key: str):
    def measure(r: dict):
        ref = r.get(f"ref_{key}")
        if missing(ref) or not ref:
            return None
        return r[key] / ref
    return measure


def _cost_applies(r: dict):
    if not _preempting(r) or missing(r.get("ref_pool_pages")):
        return None
    return (1.0, math.inf)


def _stall_applies(r: dict):
    if not _preempting(r) or missing(r.get("ref_max_gap_ms")):
        return None
    return (math.ceil(STALL_SHARE * r["preemptions"]), float(r["preemptions"]))


def stall_doubt(r: dict) -> str | None:
    """The stall count is no evidence where a pass of the same pool that preempted nothing crossed its line more
    often than the claim lets stalls go missing (the preemptions' tenth, STALL_SHARE): false alarms of that size
    could fill the band without one stall per preemption."""
    calm, pre = r.get("calm_pool_stalls"), r.get("preemptions")
    if missing(calm) or missing(pre) or not pre:
        return None
    slack = pre - math.ceil(STALL_SHARE * pre)
    if calm <= slack:
        return None
    return (f"not evidence on this pool: a pass of the same {int(r['pool_pages']):,} pages that preempted nothing crossed "
            f"its line {sig(calm)} times, more than the {sig(slack)} stalls this claim lets go missing of "
            f"{sig(pre)} preemptions, so the line cannot tell a preemption's stall from this pool's own")


PEAK_SAMPLING = 0.9  # a sampled peak may fall this far under the batch the pool admits and still count
STALL_SHARE = 0.9  # the share of preemptions a pass's stalls must reach (repeats on one request merge into one gap)
THROUGHPUT_TOLERANCE = 0.15  # the throughput ratio's band around its prediction (run-to-run spread, prefill share)


def _throughput_applies(r: dict):
    pred = r.get("pred_tok_ratio")
    if _preempting(r) or missing(pred) or r.get("ref_pool_pages") == r.get("pool_pages"):
        return None
    return (pred * (1 - THROUGHPUT_TOLERANCE), pred * (1 + THROUGHPUT_TOLERANCE))


CLAIMS = [
    PointClaim("pool-override", "vLLM ran the pool it was given: its log says num_gpu_blocks_override={pool_pages:.0f}.",
               "pages", lambda r: (float(r["pool_pages"]), float(r["pool_pages"])), lambda r: r.get("pool_logged"),
               "vLLM ignored or changed --num-gpu-blocks-override: every prediction on this pool is off"),
    PointClaim("running-batch", "The running batch peaks at min(max_num_seqs, (pool - 1) // pages per prompt) = "
               "min({max_num_seqs:.0f}, ({pool_pages:.0f} - 1) // {pages_prompt:.0f}) = {admitted:.0f}.", "reqs",
               lambda r: (math.floor(PEAK_SAMPLING * r["admitted"]), r["admitted"]) if _flood(r) else None,
               lambda r: r.get("running_peak"),
               "the peak is sampled (a stats line each second, /metrics each poll): a batch that stays at its peak for "
               "less than one sample is missed; a peak above the prediction would mean the page arithmetic is wrong"),
    PointClaim("no-preemption-fit", "{admitted:.0f} admitted requests x {pages_full:.0f} pages at full length fit in "
               "{pool_pages:.0f} - 1 pages: none is ever preempted.", "preemptions",
               lambda r: (0.0, 0.0) if r.get("fits") else None, lambda r: r.get("preemptions"),
               "requests took more pages than their lengths need (a different page layout or prefix-cache copies)"),
    PointClaim("preemption-outgrow", "{admitted:.0f} admitted requests x {pages_full:.0f} pages at full length exceed "
               "{pool_pages:.0f} - 1 pages: the server preempts.", "preemptions",
               lambda r: (1.0, math.inf) if r.get("fits") is False and _flood(r) else None, lambda r: r.get("preemptions"),
               "the requests did not all grow at once (they were admitted or finished at different times), or the "
               "scheduler reserved pages for the whole output up front"),
    PointClaim("preemption-itl", "Preemption costs the stream: p99 ITL at {pool_pages:.0f} pages is above its value on "
               "the rig's largest pool without preemptions ({ref_pool_pages:.0f} pages), although the batch is smaller.",
               "x", _cost_applies, _ratio_over_ref("itl_p99_ms"),
               "a smaller batch shortens every step; where that outweighs the victims' wait for recompute, the tail "
               "does not grow"),
    PointClaim("preemption-stall", "Each preemption stalls one stream while its request waits for pages and is "
               "recomputed: the pass has as many gaps between tokens longer than any on the rig's largest pool without "
               "preemptions ({ref_max_gap_ms:,.0f} ms at {ref_pool_pages:.0f} pages) as it counted preemptions "
               "({preemptions:.0f}), never more; a request preempted again before its next token merges two into one gap.",
               "stalls", _stall_applies, lambda r: r.get("stalls"),
               "requests were preempted again before they resumed (likelier the more preemptions per request), or before "
               "their first token, where the wait lands in TTFT, not between tokens", doubt=stall_doubt),
    PointClaim("throughput-batch", "Without preemptions a smaller pool costs only its smaller batch: throughput here over "
               "throughput at {ref_pool_pages:.0f} pages = decode rate at a batch of {running_median:.0f} over that at "
               "{ref_running_median:.0f}, from part 1's step fit on this rig ({pred_tok_ratio:.2f}).", "x",
               _throughput_applies, lambda r: r.get("tok_ratio"),
               "prefill takes a different share of the steps at a different batch, or the runs' speed drifted between "
               "server starts (run-to-run spread)"),
]


def evaluate_claims(views: dict[str, dict]) -> pd.DataFrame:
    """One row per (claim, rig, point) the claim applies to."""
    rows = []
    for view in views.values():
        for r in view["points"].to_dict("records"):
            for c in CLAIMS:
                row = c.evaluate({**r, "rig": view["rig"]})
                if row is not None:
                    rows.append({**row, "point": r["point"], "model": r["model"], "workload": r["workload"],
                                 "pool_pages": r["pool_pages"]})
    cols = ["claim", "rig", "model", "workload", "pool_pages", "statement", "expected", "measured", "verdict", "note",
            "value", "low", "high", "point"]
    return pd.DataFrame(rows, columns=cols)


def claim_summary(claims: pd.DataFrame, rigs: list[str]) -> pd.DataFrame:
    """Per claim and rig: on how many points it holds, of those it applies to."""
    rows = []
    for cid in [c.id for c in CLAIMS]:
        row = {"claim": cid}
        for rig in rigs:
            g = claims[(claims["claim"] == cid) & (claims["rig"] == rig)]
            judged = g[~g["verdict"].isin([NOT_MEASURED, INCONCLUSIVE])]
            unsure = int((g["verdict"] == INCONCLUSIVE).sum())
            text = (f"holds on {int((judged['verdict'] == HOLDS).sum())} of {len(judged)} points" if len(judged)
                    else ("" if unsure else "not measured on this rig"))
            if unsure:
                text += ("; " if text else "") + f"inconclusive on {unsure}"
            row[rig] = text
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# The page: which rigs, the arithmetic for the prose, and sentences from each rig's data
# ---------------------------------------------------------------------------------------------

def page_rigs(data_dir=None, rigs: list[str] | None = None) -> list[str]:
    """Measured rigs with part 4 data, except test rigs (`method_only`), unless `rigs` names them. The series
    never published part 4, so no published rig."""
    from ..run.rig import load_profile
    from ..records.store import rigs_with_data

    if rigs:
        return list(rigs)
    return [r for r in rigs_with_data(NAME, data_dir) if not load_profile(r, data_dir).method_only]


def rigs_not_run(data_dir=None) -> list[str]:
    """Rigs with data for another part (and not test rigs) that have not run this part yet."""
    from ..run.rig import load_profile
    from ..schema import PARTS
    from ..records.store import rigs_with_data

    here = set(rigs_with_data(NAME, data_dir))
    other = {r for part in PARTS.values() if part != NAME for r in rigs_with_data(part, data_dir)}
    return sorted(r for r in other - here if not load_profile(r, data_dir).method_only)


def arithmetic(preset: str | None = None, p: dict | None = None, data_dir=None, a10g_pool: int | None = None) -> dict:
    """The page arithmetic for a model preset (default: the series' model), from its config and its logged page size
    (no measurement): pages per request of each workload and what the A10G's pool (default: p01.published_pool, the
    post's log read by kvcache) admits."""
    from . import p01

    preset = preset or p01.PUBLISHED_PRESET
    a10g_pool = a10g_pool or p01.published_pool(data_dir).num_blocks
    p = {**DEFAULTS, **(p or {})}
    layout = ModelShape.of(preset, data_dir).layout
    block = block_size_for(preset, p, data_dir)
    inp, short, long_ = p["input_len"], p["output_len"], p["long_output_len"]
    from ..model.kvcache import DEFAULT_BLOCK_SIZE, RECURRENT_LAYER_TYPES

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


def closing_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per point: the predicted and measured running batch, and the preemptions (the closing note)."""
    cols = {"rig": "rig", "model": "model", "workload": "workload", "pool_pages": "pool_pages",
            "admitted": "predicted_running", "running_peak": "measured_running_peak",
            "full_limit": "fit_at_full_length", "preemptions": "preemptions"}
    return table[list(cols)].rename(columns=cols)


def sig(x: float, digits: int = 3) -> str:
    """A number for a reader: at most `digits` significant digits (8,197.5 -> 8,200); a whole number (a count, a
    pool's pages) exactly (words.sig)."""
    return words.sig(x, digits, whole=True)


SHORT_PASS_S = 10.0  # a measured pass shorter than this is too short to call steady (parts 3 and 5 use the same window)


def short_passes(table: pd.DataFrame) -> pd.DataFrame:
    """The measured passes that lasted less than SHORT_PASS_S: a few polls, and the first wave's prefill a large
    share of the pass."""
    if not len(table):
        return table
    return table[table["duration_s"] < SHORT_PASS_S]


def short_pass_note(table: pd.DataFrame, poll_s: float = DEFAULTS["poll_interval_s"]) -> str:
    """One warning line naming every short pass (short_passes) with its length and the polls it holds; '' if none."""
    short = short_passes(table)
    if not len(short):
        return ""
    items = [f"{r.rig} {'dense model ' if r.model == 'small' else ''}{r.workload} at {int(r.pool_pages):,} pages "
             f"({sig(r.duration_s)} s, about {int(r.duration_s // poll_s)} polls)" for r in short.itertuples()]
    return (f"**Short window:** {len(short)} of {len(table)} passes lasted under {sig(SHORT_PASS_S)} s: "
            + "; ".join(items) + ". Their peaks, medians and throughput rest on few samples and include the first "
            "wave's prefill; read them as indications, not steady rates.")


def pool_cost(view: dict, model: str = "main") -> dict | None:
    """What the smallest pool cost against the largest for one model's short floods on one rig (none preempted or
    not): throughput and median TTFT at both, the requests each flood was given and the waves of its admitted batch
    they make. None without two pools."""
    t = floods(view["points"])
    short = t[(t["workload"] == "short") & (t["model"] == model)].sort_values("pool_pages")
    if len(short) < 2:
        return None
    small, big = short.iloc[0], short.iloc[-1]
    return {"rig": view["rig"], "model": model, "big_pool": big["pool_pages"], "small_pool": small["pool_pages"],
            "big_tok_s": big["output_tok_s"], "small_tok_s": small["output_tok_s"],
            "tok_fall": big["output_tok_s"] / small["output_tok_s"],
            "big_ttft_s": big["ttft_p50_ms"] / 1000, "small_ttft_s": small["ttft_p50_ms"] / 1000,
            "ttft_ratio": small["ttft_p50_ms"] / big["ttft_p50_ms"],
            "big_prompts": big["num_prompts"], "small_prompts": small["num_prompts"],
            "big_waves": big["num_prompts"] / big["admitted"], "small_waves": small["num_prompts"] / small["admitted"],
            "big_running": big["running_peak"], "small_running": small["running_peak"],
            "preemptions": float(short["preemptions"].sum()), "waiting_max": float(short["waiting_max"].max()),
            "pools": len(short)}


def pool_cost_text(c: dict | None) -> str:
    """The sentence the latency and throughput figures need: throughput and TTFT, both, with why TTFT moves the way
    it does (each flood is sized to its pool)."""
    if not c:
        return ""
    ttft = ("fell" if c["ttft_ratio"] < 1 else "rose") + f" from {sig(c['big_ttft_s'])} to {sig(c['small_ttft_s'])} s"
    text = (f"{c['rig']}{' (dense model)' if c['model'] == 'small' else ''}, short requests, from "
            f"{sig(c['big_pool'])} to {sig(c['small_pool'])} pages: output throughput fell {sig(c['tok_fall'])}x "
            f"({sig(c['big_tok_s'])} to {sig(c['small_tok_s'])} tok/s) and median TTFT {ttft}.")
    if c["ttft_ratio"] < 1:
        same = abs(c["big_waves"] - c["small_waves"]) < 0.5
        text += (f" TTFT fell because each flood is sized to its pool ({sig(c['big_prompts'])} and "
                 f"{sig(c['small_prompts'])} requests, "
                 + (f"{sig(c['big_waves'])} waves of the batch each pool admits" if same else
                    f"{sig(c['big_waves'])} and {sig(c['small_waves'])} waves of the batches the pools admit")
                 + "): a request waits behind as many waves on either pool, and a smaller batch's waves are shorter. "
                 "Starvation shows in throughput here, not in time to first token.")
    return text


def _n(x: float) -> str:
    return words.number(x, whole=True)


def findings(view: dict) -> str:
    """What one rig's points show, in sentences whose numbers come from its table."""
    t = floods(view["points"])
    if not len(t):
        return f"{view['rig']}: no complete points."
    out = []
    for model, g in t.groupby("model", sort=True):
        who = f"{view['rig']}" + (" (dense model)" if model == "small" else "")
        short, long_ = g[g["workload"] == "short"], g[g["workload"] == "long"]
        if len(short) >= 2:
            big, small = short.sort_values("pool_pages").iloc[-1], short.sort_values("pool_pages").iloc[0]
            c = pool_cost({**view, "points": t}, model)
            out.append(
                f"**{who}, short requests.** From {_n(big.pool_pages)} to {_n(small.pool_pages)} pages the running batch "
                f"peaks at {_n(big.running_peak)} and {_n(small.running_peak)} (predicted {_n(big.admitted)} and "
                f"{_n(small.admitted)}), preemptions total {_n(short.preemptions.sum())}; output throughput fell "
                f"{sig(c['tok_fall'])}x ({sig(big.output_tok_s)} to {sig(small.output_tok_s)} tok/s) while median TTFT "
                f"went from {sig(big.ttft_p50_ms / 1000)} to {sig(small.ttft_p50_ms / 1000)} s (each flood sized to its "
                f"pool).")
        if len(long_):
            pre = long_[long_["preemptions"] > 0]
            calm = long_[long_["preemptions"] == 0]
            text = f"**{who}, long requests.** "
            if len(pre):
                worst = pre.sort_values("pool_pages").iloc[0]
                text += (f"{len(pre)} of {len(long_)} pools preempt (at {_n(worst.pool_pages)} pages: "
                         f"{_n(worst.preemptions)} preemptions for {_n(worst.num_prompts)} requests, p99 ITL "
                         f"{worst.itl_p99_ms:,.0f} ms")
                if len(calm):
                    ref = calm.sort_values("pool_pages").iloc[-1]
                    text += f" against {ref.itl_p99_ms:,.0f} ms at {_n(ref.pool_pages)} pages, where none was preempted"
                text += ")."
                text += _stall_text(worst)
                for r in pre.sort_values("pool_pages").iloc[1:].itertuples():
                    doubt = stall_doubt(r._asdict())
                    if doubt:
                        text += f" At {_n(r.pool_pages)} pages its {_n(r.stalls)} stalls are {doubt}."
                text += _faster_text(pre, calm)
            else:
                text += f"no pool preempted ({len(long_)} pools)."
            out.append(text)
    return "\n\n".join(out)


def _stall_text(r) -> str:
    """Where a preempting pass's cost lands: the stalls in its streams (see stalls_over)."""
    stalls = getattr(r, "stalls", math.nan)
    if missing(stalls) or missing(r.ref_max_gap_ms):
        return ""
    text = (f" Its streams show {_n(stalls)} gaps longer than any at the calm pool's "
            f"{sig(r.ref_max_gap_ms)} ms")
    doubt = stall_doubt(r._asdict() if hasattr(r, "_asdict") else dict(r))
    if doubt:
        return text + f", but that count is {doubt}."
    if stalls > 0:
        pre = float(r.preemptions)
        text += f", {sig(r.stall_median_s)} s each at the median"
        text += (": that is where a preemption's cost lands" if math.ceil(STALL_SHARE * pre) <= stalls <= pre else
                 f", for {sig(pre)} preemptions (not one stall each: see claim `preemption-stall`)")
    return text + "."


def _faster_text(pre: pd.DataFrame, calm: pd.DataFrame) -> str:
    """A preempting pool that outran the calm one, with what the engine's own counters say it did per step."""
    if not len(calm):
        return ""
    ref = calm.sort_values("pool_pages").iloc[-1]
    fast = pre[pre["output_tok_s"] > ref["output_tok_s"]]
    if not len(fast):
        return ""
    f = fast.sort_values("output_tok_s").iloc[-1]
    return (f" At {_n(f.pool_pages)} pages, although it preempted, the flood ran {sig(f.output_tok_s)} tok/s against "
            f"{sig(ref.output_tok_s)} at {_n(ref.pool_pages)} pages: the engine's own counters give "
            f"{sig(f.server_tok_per_step)} output tokens a step at {sig(f.server_step_ms)} ms a step there, against "
            f"{sig(ref.server_tok_per_step)} at {sig(ref.server_step_ms)} ms, so a step of the full batch cost "
            f"{sig(ref.server_step_ms / f.server_step_ms, 2)}x one of the preempted batch for "
            f"{sig(ref.server_tok_per_step / f.server_tok_per_step, 2)}x the tokens.")


def published_running(data_dir=None) -> dict:
    """The running batches the series reported (data/reference): part 1's flood, part 3's cap 256."""
    from ..records.reference import load_reference

    def fact(part: int, key: str) -> float:
        f = load_reference(part, data_dir)["facts"]
        return float(f.loc[f["key"] == key, "value"].iloc[0])

    return {"part1_flood": fact(1, "running_batch_flood"), "part3_cap256": fact(3, "running_batch_plateau")}


def earlier_runs(data_dir=None) -> pd.DataFrame:
    """Part 3's floods on every measured rig (test rigs aside) and the published A10G: the cap, the pool the
    server started with (kvcache, from its log), the batch that pool admits at the series' lengths, and the
    running batch measured (published: reported). Where the admitted batch is below the cap, the pool set it."""
    from ..model.pools import pool_of_point
    from ..records.reference import load_reference
    from ..run.rig import load_profile
    from ..schema import PUBLISHED_RIG
    from ..records.store import load_points

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


def prediction_pools(a: dict) -> list[int]:
    """Pool sizes the page's before-any-run figure draws: a doubling range (plus vLLM's null page) and the A10G's."""
    return sorted({2 ** k + 1 for k in range(3, 12)} | {a["a10g_pool"]})


def key_findings(views: dict[str, dict], a: dict, published: dict) -> list[str]:
    """The page's findings box: 3-5 bullets (Markdown) from the data of the rigs shown, the post's correction first.
    `a`: arithmetic(); `published`: published_running()."""
    out = [f"**The series' flooded batch was the KV pool's admission limit:** the A10G's pool of {sig(a['a10g_pool'])} "
           f"pages admits {sig(a['a10g_admitted'])} requests of {sig(a['input_len'])} + {sig(a['short_out'])} tokens at "
           f"once ({sig(a['pages_prompt'])} pages each); the posts reported about {sig(published['part1_flood'])} "
           f"(part 1) and {sig(published['part3_cap256'])} (part 3)."]
    for rig, view in views.items():
        c = pool_cost(view, "main")
        who = rig if len(views) > 1 else ""
        if c:
            out.append(f"**{who + ': m' if who else 'M'}emory ran out as a queue, not as preemptions** (the post planned "
                       f"to make the server evict): short requests on the hybrid model met {sig(c['preemptions'])} "
                       f"preemptions on {c['pools']} pools from {sig(c['big_pool'])} to {sig(c['small_pool'])} pages; "
                       f"the pool set the running batch ({sig(c['big_running'])} to {sig(c['small_running'])}) and up "
                       f"to {sig(c['waiting_max'])} requests waited.")
            out.append(f"**Starving the pool cost throughput, not time to first token:** output fell "
                       f"{sig(c['tok_fall'])}x ({sig(c['big_tok_s'])} to {sig(c['small_tok_s'])} tok/s) while median "
                       f"TTFT went from {sig(c['big_ttft_s'])} to {sig(c['small_ttft_s'])} s, since each flood was sized "
                       f"to its pool ({sig(c['small_waves'])} waves of the admitted batch).")
        t = floods(view["points"])
        long_ = t[(t["workload"] == "long") & (t["model"] == "main")]
        pre = long_[long_["preemptions"] > 0]
        if len(pre):
            stalls = pre["stall_median_s"].dropna()
            out.append(f"**Long requests ({sig(a['long_out'])} tokens out) outgrow the pool:** {len(pre)} of "
                       f"{len(long_)} pools preempted, {sig(pre['preemptions'].sum())} times for "
                       f"{sig(pre['num_prompts'].sum())} requests; each preemption left one stall in its victim's "
                       f"stream" + (f" (median {sig(stalls.min())} to {sig(stalls.max())} s per pool)" if len(stalls)
                                    else "") + ".")
        dense = t[t["model"] == "small"]
        dense_short = dense[(dense["workload"] == "short") & (dense["preemptions"] > 0)]
        if len(dense_short):
            r = dense_short.sort_values("pool_pages").iloc[0]
            out.append(f"**A dense model preempts even short requests:** its pages hold {sig(r['block_size'])} tokens, "
                       f"so a request grows while it runs; at {sig(r['pool_pages'])} pages, {sig(r['preemptions'])} "
                       f"preemptions for {sig(r['num_prompts'])} requests.")
    return out[:5]


def for_reader(table: pd.DataFrame) -> pd.DataFrame:
    """The table with its yes/no columns (fits, kv_limited) as words: a reader sees "yes" or "no", not True/False."""
    out = table.copy()
    for col in out.columns:
        values = [v for v in out[col] if not missing(v)]
        if values and all(isinstance(v, (bool, np.bool_)) for v in values):
            out[col] = [v if missing(v) else ("yes" if v else "no") for v in out[col]]
    return out


def protocol_tables(data_dir, rigs: list[str]) -> dict:
    """The protocol's tables: the points, part 1's step fit of each rig (step_fit) and the data dir."""
    return {"points": point_table(data_dir, rigs), "fits": {rig: step_fit(rig, data_dir) for rig in rigs},
            DATA_DIR: data_dir}


def protocol_view(rig: str, tables: dict, params: dict) -> dict:
    """The protocol's view: rig_view with the rig's step fit."""
    return rig_view(tables["points"], rig, tables["fits"][rig])


PART = Part(NAME, DEFAULTS, plan, tables=protocol_tables, view=protocol_view, findings=one_paragraph(findings),
            claims=evaluate_claims,
            reads=EVERY_PART)  # part 1's view of the rig, and every start's log (pools.block_size)
