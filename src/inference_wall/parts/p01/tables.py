"""Part 1's tables: the only file of the part that reads the disk (the rate sweep, the memory report, cold and
warm TTFT, the decode steps, the mixed steps, the run-to-run spread, the server sessions, the post's figures)."""
from __future__ import annotations

import functools
import math

import pandas as pd

from ...measure import analysis
from ...measure.analysis import GIB, KEEP_UP
from ...measure.ratepass import MIXED_COLUMNS, mixed_split
from ...model.kvcache import pool_from_report
from ...model.modelshape import ModelShape
from ...records.reference import load_reference
from ...records.store import load_points, pass_summary
from ...schema import PUBLISHED_RIG
from ..protocol import DATA_DIR, REFERENCE
from .plan import NAME, PUBLISHED_PRESET


# ---------------------------------------------------------------------------------------------
# Replay: tables, per-rig views and claims
# ---------------------------------------------------------------------------------------------
def rate_table(data_dir=None, rigs: list[str] | None = None, loaded: dict | None = None) -> pd.DataFrame:
    """Table 1 for every rig: published rows and measured rows (the rate points plus the flood). The flood's row
    also carries its steady window (steady.STEADY_COLUMNS, from /metrics polled during it: the running batch at the
    cap) beside its whole-pass figures; NaN on the rate rows and where the flood was not polled or has none."""
    from ...measure.steady import point_steady_row, steady_row

    ref = load_reference(1, data_dir)["rate_sweep"].assign(source="published")
    rows = []
    pts = ([p for by_name in loaded.values() for p in by_name.values()] if loaded is not None
           else load_points(NAME, data_dir, rigs))
    for pt in pts:
        if pt.params.get("kind") != "rate":
            continue
        row = pass_summary(pt)
        row.update(offered_rate_rps=float(pt.params["offered_rate_rps"]), source="measured",
                   rate_fraction=pt.params.get("rate_fraction"), e2el_mean_ms=pt.bench().ms("e2el", "mean"))
        flood = not math.isfinite(row["offered_rate_rps"])
        row.update(point_steady_row(pt) if flood else steady_row(None, False))
        rows.append(row)
    table = pd.concat([ref, pd.DataFrame(rows)], ignore_index=True) if rows else ref.assign(**steady_row(None, False))
    table = table.assign(steady_polled=table["steady_polled"].eq(True))  # published rows: not polled
    if rigs is not None:
        table = table[table["rig"].isin(rigs)]
    return table.sort_values(["rig", "offered_rate_rps"]).reset_index(drop=True)


CLOCK_KINDS = {"single": "single stream", "cold-warm": "cold and warm", "decode": "decode batches",
               "rate": "rates and flood"}


def clock_table(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """What the GPU ran at during each kind of point, per rig (records.gpuclocks: nvidia-smi once a second in each
    point's passes): the kind of point, how many kept samples, the lowest and the median busy SM clock, and the
    share of busy samples at the software power cap. Rigs none of whose points kept samples are left out (the
    published rig, CPU rigs)."""
    from ...records.gpuclocks import fold, points_table

    cols = ["rig", "points", "sampled", "sm_mhz_min", "sm_mhz_median", "sw_power_cap_pct"]
    pts = list(load_points(NAME, data_dir, rigs))
    kind = {(pt.rig, pt.name): CLOCK_KINDS.get(pt.params.get("kind"), pt.params.get("kind")) for pt in pts}
    t = points_table(pts)
    if not len(t):
        return pd.DataFrame(columns=cols)
    t["points"] = [kind[(r.rig, r.point)] for r in t.itertuples()]
    out = fold(t, ["rig", "points"], sort=False)
    order = {k: i for i, k in enumerate(CLOCK_KINDS.values())}
    return out.sort_values(["rig", "points"], key=lambda c: c.map(order) if c.name == "points" else c,
                           ignore_index=True)[cols]


def _facts(data_dir=None) -> dict:
    f = load_reference(1, data_dir)["facts"]
    return dict(zip(f["key"], f["value"]))


def measured_points(data_dir=None, rigs=None) -> dict[str, dict[str, object]]:
    out: dict[str, dict] = {}
    for pt in load_points(NAME, data_dir, rigs):
        out.setdefault(pt.rig, {})[pt.name] = pt
    return out


def memory_table(data_dir=None, rigs=None, loaded: dict | None = None) -> pd.DataFrame:
    """The startup memory report per rig: published, and parsed from each measured rig's latest start, with
    the KV pool it describes (`kv_pool`, see kvcache; the published pool from the post's own log line)."""
    pub = load_reference(1, data_dir)["memory_report"].assign(source="published").iloc[0].to_dict()
    pub.update(kv_pool=published_pool(data_dir), preset=PUBLISHED_PRESET, language_model_only=False)
    rows = [pub]
    for rig, points in (loaded if loaded is not None else measured_points(data_dir, rigs)).items():
        starts = [p for p in points.values() if p.record.has_startup]
        if not starts:
            continue
        latest = max(starts, key=lambda p: p.record.server_started or 0)
        rep = latest.startup()
        preset = latest.record.preset
        pool = pool_from_report(rep, ModelShape.of(preset, data_dir).layout) if preset else None
        rows.append({"kv_pool": pool, "preset": preset,
                     "language_model_only": "--language-model-only" in (latest.record.server_command or []),"rig": rig, "model_weights_gib": rep.weights_gib, "kv_cache_gib": rep.kv_cache_gib,
                     "kv_cache_tokens": rep.kv_cache_tokens, "max_concurrency_x": rep.max_concurrency,
                     "max_concurrency_tokens_per_request": rep.max_concurrency_tokens_per_request,
                     "kv_cache_device": rep.kv_cache_device, "start_to_healthy_s":
                     latest.record.start_to_healthy_s, "vllm_version": rep.vllm_version,
                     "source": "measured"})
    table = pd.DataFrame(rows)
    if rigs is not None:
        table = table[table["rig"].isin(rigs)]
    table["concurrency_discount_x"] = (table["max_concurrency_x"] * table["max_concurrency_tokens_per_request"]
                                       / table["kv_cache_tokens"])
    return table.reset_index(drop=True)


def cold_warm_table(data_dir=None, rigs=None, loaded: dict | None = None) -> pd.DataFrame:
    rows = [load_reference(1, data_dir)["cold_warm"].assign(source="published")]
    for rig, points in (loaded if loaded is not None else measured_points(data_dir, rigs)).items():
        if "cold-warm" in points:
            pt = points["cold-warm"]
            for label, state in (("cold", "cold"), ("bench", "warm")):
                b = pt.bench(label)
                rows.append(pd.DataFrame([{"rig": rig, "server_state": state,
                                           "offered_rate_rps": pt.params.get("offered_rate_rps"),
                                           "ttft_p50_ms": b.ms("ttft", "p50"), "ttft_p99_ms": b.ms("ttft", "p99"),
                                           "source": "measured"}]))
    table = pd.concat(rows, ignore_index=True)
    return table[table["rig"].isin(rigs)] if rigs is not None else table


def decode_table(data_dir=None, rigs=None, loaded: dict | None = None) -> pd.DataFrame:
    """Decode at fixed concurrency: median ITL is the step time at that running batch."""
    rows = []
    for rig, points in (loaded if loaded is not None else measured_points(data_dir, rigs)).items():
        for pt in points.values():
            if pt.params.get("kind") == "decode":
                row = pass_summary(pt)
                row["batch"] = pt.params["batch"]
                row["step_ms"] = row["itl_p50_ms"]
                row["decode_tok_s"] = row["batch"] * 1000.0 / row["step_ms"]
                rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else ["rig", "batch", "step_ms", "decode_tok_s"])


def mixed_step_table(data_dir=None, rigs: list[str] | None = None, loaded: dict | None = None) -> pd.DataFrame:
    """mixed_split of every measured rate pass."""
    rows = []
    for rig, points in (loaded if loaded is not None else measured_points(data_dir, rigs)).items():
        for name, pt in points.items():
            rate = float(pt.params.get("offered_rate_rps", math.nan)) if pt.params.get("kind") == "rate" else math.nan
            if math.isfinite(rate) and (row := mixed_split(pt, rate)) is not None:
                rows.append(row)
    return pd.DataFrame(rows, columns=MIXED_COLUMNS).sort_values(["rig", "offered_rate_rps"]).reset_index(drop=True)


def part1_knee(rig: str, data_dir=None) -> float | None:
    """The knee of part 1's rate sweep on a rig (the first offered rate completed at under KEEP_UP of it), None
    where part 1 has no such rate there."""
    rates = rate_table(data_dir, [rig])
    rates = rates[rates["rig"] == rig]
    if not len(rates):
        return None
    knee = analysis.knee(rates, KEEP_UP).get("knee_rps")
    return float(knee) if knee is not None and math.isfinite(knee) else None


def published_pool(data_dir=None):
    """The A10G's KV pool from the post's own log line ('Maximum concurrency for 2,048 tokens per request:
    83.7x'), with the attention page vLLM gives this model (analysis.hybrid_block_size: 528 tokens):
    pools.published_pool of the posts' model."""
    from ...model.pools import published_pool as pool

    return pool(PUBLISHED_PRESET, data_dir)


def vision_tower_gib(preset: str, data_dir=None, dtype_bytes: int = 2) -> float:
    from ...model.modelshape import ModelShape

    return ModelShape.of(preset, data_dir).vision_tower_params * dtype_bytes / GIB


def page_tables(data_dir=None, rigs: list[str] | None = None) -> dict:
    """Every table part 1's page (and part 3's, for part 1's side of its claims) needs, each loaded once."""
    from ...run.rig import run_to_run

    loaded = measured_points(data_dir, [r for r in rigs if r != PUBLISHED_RIG] if rigs is not None else None)
    repeats = run_to_run(data_dir)
    return {"points": loaded, "rates": rate_table(data_dir, rigs, loaded),
            "memory": memory_table(data_dir, rigs, loaded), "cold_warm": cold_warm_table(data_dir, rigs, loaded),
            "decode": decode_table(data_dir, rigs, loaded), "run_to_run": repeats}


def reference_view(data_dir=None) -> dict:
    """The post's scattered facts (for the claims' statements and the page's prose)."""
    return _facts(data_dir)


def claim_facts(data_dir=None) -> dict:
    """The post's figures that the claims' statements quote."""
    f = _facts(data_dir)
    fit = load_reference(1, data_dir)["step_time_fit"].iloc[0]
    return {**f, "fit_a": fit["intercept_ms"], "fit_b": fit["slope_ms_per_seq"]}


# ---------------------------------------------------------------------------------------------
# Server to server: sessions of one configuration, their spread, and which agree with part 3
# ---------------------------------------------------------------------------------------------
SETUP_FIELDS = ("command", "environment", "gpu", "vllm", "torch", "cuda")


def _family(rig: str, data_dir=None) -> str:
    """The rig a run repeats (its profile's `repeat_of`), else the rig itself: runs of one family share the
    host and stack, so their differences are run to run."""
    from ...run.rig import load_profile

    try:
        return load_profile(rig, data_dir).repeat_of or rig
    except Exception:  # a rig with runs but no profile is its own family
        return rig


def _setup(rec) -> dict:
    """What makes two server sessions the same configuration, from a point's record: the serve command less its
    interpreter, host and port; the server's environment; the GPU nvidia-smi reported; the versions."""
    cmd = list(rec.server_command or [])[1:]
    for flag in ("--host", "--port"):
        while flag in cmd:
            i = cmd.index(flag)
            del cmd[i:i + 2]
    info = rec.rig_info
    env = (rec.session.server_env if rec.session is not None else None) or {}
    return {"command": " ".join(cmd), "environment": sorted(env.items()),
            "gpu": sorted((info.get("gpu") or {}).items()), "vllm": rec.vllm_version,
            "torch": info.get("torch"), "cuda": info.get("cuda")}


def server_sessions(data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Every server session of part 1's configuration on the measured rigs, one row each, across parts 1
    and 3: a part-3 session counts when its serve command and environment equal a part-1 session's of the
    same family (part 3's cap equal to part 1's, so its pass is the same flood). Per session: the flood's
    output tok/s, the median ITL of one stream (part 1's `single` and `decode-b001`), the step-time fit of
    its fixed-batch decode points (three or more), the start time, and which setup fields differ from the
    family's first session (`differs`: empty when command, environment, GPU and versions all match)."""
    from ...schema import PARTS

    part3 = PARTS[3]
    # part 3's sessions of a shown rig's family count even where that run has no part 1 (a repeat of part 3)
    family = functools.lru_cache(maxsize=None)(lambda rig: _family(rig, data_dir))
    families = None if rigs is None else {family(r) for r in rigs}
    points = [pt for pt in load_points(NAME, data_dir, rigs)] + [
        pt for pt in load_points(part3, data_dir) if families is None or family(pt.rig) in families]
    points = [pt for pt in points if pt.rig != PUBLISHED_RIG]
    sessions: dict[tuple, dict] = {}
    for pt in points:
        rec = pt.record
        key = (pt.rig, pt.part, rec.session_id or rec.server_started)
        row = sessions.setdefault(key, {"family": family(pt.rig), "rig": pt.rig, "part": pt.part,
                                        "started": rec.server_started, "setup": _setup(rec),
                                        "start_to_healthy_s": rec.start_to_healthy_s, "points": [],
                                        "flood": [], "single": [], "decode": []})
        row["points"].append(pt.name)
        kind = pt.params.get("kind")
        summary = pass_summary(pt)
        if pt.part == NAME and pt.name == "flood" or pt.part == part3:
            row["flood"].append(summary["output_tok_s"])
        if pt.part == NAME and (pt.name == "single" or kind == "decode" and pt.params.get("batch") == 1):
            row["single"].append(summary["itl_p50_ms"])
        if pt.part == NAME and kind == "decode":
            row["decode"].append((float(pt.params["batch"]), summary["itl_p50_ms"]))
    part1_setups = {(r["family"], r["setup"]["command"], str(r["setup"]["environment"]))
                    for r in sessions.values() if r["part"] == NAME}
    rows = []
    for r in sorted(sessions.values(), key=lambda r: (r["family"], r["started"] or 0)):
        if r["part"] == part3 and (r["family"], r["setup"]["command"], str(r["setup"]["environment"])) not in part1_setups:
            continue  # another cap: another configuration
        fit = analysis.linear_fit(*zip(*r["decode"])) if len(r["decode"]) >= 3 else None
        rows.append({"family": r["family"], "rig": r["rig"], "part": r["part"], "started": r["started"],
                     "points": len(r["points"]), "flood_tok_s": r["flood"][0] if r["flood"] else math.nan,
                     "single_itl_ms": float(pd.Series(r["single"]).median()) if r["single"] else math.nan,
                     "fit_intercept_ms": fit.intercept if fit else math.nan, "fit_slope_ms": fit.slope if fit else math.nan,
                     "start_to_healthy_s": r["start_to_healthy_s"], "setup": r["setup"]})
    for family in {r["family"] for r in rows}:
        first = next(r for r in rows if r["family"] == family)["setup"]
        for r in rows:
            if r["family"] == family:
                r["differs"] = ", ".join(f for f in SETUP_FIELDS if r["setup"].get(f) != first.get(f))
    table = pd.DataFrame(rows, columns=["family", "rig", "part", "started", "points", "flood_tok_s", "single_itl_ms",
                                        "fit_intercept_ms", "fit_slope_ms", "start_to_healthy_s", "setup", "differs"])
    table["started"] = pd.to_datetime(table["started"], unit="s", utc=True).dt.strftime("%Y-%m-%d %H:%M")
    return table.drop(columns=["setup"])


def protocol_tables(data_dir, rigs: list[str]) -> dict:
    """The protocol's tables: page_tables, the data dir and the post's figures the claims quote (claim_facts)."""
    return {**page_tables(data_dir, rigs), DATA_DIR: data_dir, REFERENCE: claim_facts(data_dir)}
