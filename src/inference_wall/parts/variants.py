"""The variant parts' common wing: one server per variant (parts 5 and 6).

A variant part serves one model several ways (part 5: weight formats; part 6: one GPU, tensor parallelism,
replicas), one server session per variant, each measured the same way: a single stream, decode at fixed
batches (the step fit: a fixed cost plus a cost per sequence), and a flood at the session's cap. What the two
parts share lives here: the points a variant's session runs, the tables of its passes and its server starts, a
variant's measurements (measure_variant), its price and cost per token, the words its numbers are said in,
and the closing note's line per variant. Each part keeps what is its own: its variants, claims and findings.
"""
from __future__ import annotations

import math
import re

import pandas as pd

from ..measure import analysis
from ..measure.analysis import Interval
from ..run.bench import PassSpec
from ..measure.claims import Missing, known_number, missing
from ..errors import UserError
from ..records.store import load_points, pass_summary
from ..run.sweep import PassPlan, PointPlan
from ..model.modelshape import preset_decode_bytes
from .. import words

# Agreement: measured / predicted within 20% either way (the fit's and the bandwidth's ranges come on top).
BAND = (1 / 1.2, 1.2)


def point_name(fmt: str, what: str) -> str:
    return f"{fmt}-{what}"


def prompts_for_cap(cap: int, p: dict) -> int:
    return int(max(p["min_prompts"], min(p["max_prompts"], p["waves"] * cap)))


def flood_point(key: str, cap: int, session: str, p: dict, preset: str, args: list[str], engines: int = 1,
                params: dict | None = None) -> PointPlan:
    """A flood at `cap` running sequences per engine (`engines` of them share the client's requests), on the
    server of `session`; its prompts keep p["seed"], the same for every cap, variant and rig; /metrics polled every
    p["poll_s"] seconds during it (its steady window)."""
    return PointPlan(name=point_name(key, f"mns-{cap:03d}"), session=session, max_num_seqs=cap,
                     passes=[PassPlan("bench", "measured", PassSpec(num_prompts=prompts_for_cap(cap * engines, p),
                                                                     seed=p["seed"]))],
                     params={"kind": "flood", "max_num_seqs": cap, **(params or {})}, preset=preset,
                     serve_args=list(args), min_window_s=p["min_window_s"], max_prompts=p["max_prompts"],
                     poll_metrics_s=float(p["poll_s"]))


def stream_points(key: str, p: dict, preset: str, args: list[str], params: dict | None = None,
                  most: int | None = None) -> list[PointPlan]:
    """A main server's single stream and decode at fixed concurrency (up to `most`, else max_num_seqs), a fresh
    seed per pass (prefix cache); every point carries `params`."""
    mns = int(p["max_num_seqs"])
    seed = iter(range(1, 10_000))

    def point(name, spec, extra):
        return PointPlan(name=point_name(key, name), session=f"{key}-main", max_num_seqs=mns,
                         passes=[PassPlan("bench", "measured", spec)], params={**(params or {}), **extra},
                         preset=preset, serve_args=list(args))

    out = [point("single", PassSpec(num_prompts=p["single_prompts"], max_concurrency=1, seed=next(seed)),
                 {"kind": "single"})]
    out += [point(f"decode-b{b:03d}", PassSpec(num_prompts=max(2 * b, p["decode_waves"] * b), max_concurrency=b,
                                              seed=next(seed)), {"kind": "decode", "batch": b})
            for b in p["decode_batches"] if b <= (most or mns)]
    return out


KERNEL_LINE = re.compile(r"(?:Using|Selected) (\w+Kernel) for (\w+Method)\b")


def kernels_in_log(text: str) -> list[str]:
    """The linear kernels vLLM says it chose ('Using MacheteLinearKernel for AutoGPTQLinearMethod', 'Selected
    CutlassFP8ScaledMMLinearKernel for Fp8OnlineLinearMethod'), in order, each once."""
    out: list[str] = []
    for kernel, method in KERNEL_LINE.findall(text):
        item = f"{kernel} for {method}"
        if item not in out:
            out.append(item)
    return out


def point_table(data_dir=None, rigs: list[str] | None = None, *, part: str, key: str = "format") -> pd.DataFrame:
    """One row per measured pass of `part` (a variant part: its variants named by its points' params[`key`]): the
    variant (format, preset), the kind of point, its numbers; a flood's row also its steady window beside its
    whole-pass figures (steady.STEADY_COLUMNS, from /metrics polled during the pass: the running batch at the cap of
    all its engines), NaN on the other kinds and where a flood was not polled or holds no such window."""
    from ..records.gpuclocks import point_summary
    from ..measure.steady import STEADY_COLUMNS, point_steady_row, steady_row

    rows = []
    for pt in load_points(part, data_dir, rigs):
        row = pass_summary(pt)
        clocks = point_summary(pt) or {}
        row.update(sm_mhz_median=clocks.get("sm_mhz_median", math.nan),
                   sw_power_cap_share=clocks.get("sw_power_cap_share", math.nan))
        row.update({key: pt.params.get(key)})
        row.update(kind=pt.params.get("kind"), model=pt.params.get("model"),
                   preset=pt.record.preset, batch=pt.params.get("batch"),
                   min_window_s=pt.record.parameters.get("min_window_s", 0.0),
                   bandwidth_gb_s=pt.record.bandwidth_gb_s,
                   gpu_name=pt.record.gpu_name)
        row.update(point_steady_row(pt) if row["kind"] == "flood" else steady_row(None, False))
        rows.append(row)
    cols = ["rig", "point", "kind", key, "model", "preset", "batch", "max_num_seqs", "num_prompts", "completed",
            "duration_s", "completed_rps", "output_tok_s", "ttft_p50_ms", "tpot_p50_ms", "itl_p50_ms", "itl_p99_ms",
            "running_max", "min_window_s", "bandwidth_gb_s", "gpu_name", "sm_mhz_median", "sw_power_cap_share",
            *STEADY_COLUMNS]
    return pd.DataFrame(rows, columns=cols if not rows else None)


def flood_steady_words(points: pd.DataFrame, rig: str, key: str = "format") -> str | None:
    """The floods of `rig` in point_table's rows: each one's steady window beside its whole pass, in one sentence
    (steady.flood_window_words), named by its variant and cap; None where the rig has no flood."""
    from ..measure.steady import flood_window_words

    f = points[(points["rig"] == rig) & (points["kind"] == "flood")].sort_values([key, "max_num_seqs"])
    return flood_window_words(f.assign(flood=f[key] + " at cap " + f["max_num_seqs"].map(lambda c: f"{c:,.0f}")),
                              "flood")


def short_windows(points: pd.DataFrame) -> pd.DataFrame:
    """Floods whose measured pass lasted less than the part's min_window_s: too short to call steady."""
    if not len(points):
        return points
    f = points[points["kind"] == "flood"]
    return f[f["duration_s"] < f["min_window_s"].fillna(0)]


def startup_table(data_dir=None, rigs: list[str] | None = None, *, part: str, key: str = "format") -> pd.DataFrame:
    """One row per server start of `part` (its variants named by params[`key`]): weights the log
    reports, the linear kernels it chose, the KV pool and the admission limit it leaves for the part's requests."""
    from ..model.pools import pool_of_point

    rows = []
    for pt in load_points(part, data_dir, rigs):
        rep = pt.startup()
        if rep is None:
            continue
        pool = pool_of_point(pt, data_dir)
        w = pt.record.workload
        tokens = int(w.get("input_len", 0)) + int(w.get("output_len", 0))
        rows.append({"rig": pt.rig, key: pt.params.get(key), "point": pt.name,
                     "preset": pt.record.preset,
                     "max_num_seqs": pt.record.max_num_seqs, "weights_gib": rep.weights_gib,
                     "kv_cache_gib": rep.kv_cache_gib, "kv_cache_tokens": rep.kv_cache_tokens,
                     "kv_pool_pages": pool.num_blocks if pool else math.nan,
                     "admission_limit": pool.admission_limit(tokens) if pool and tokens else math.nan,
                     "request_tokens": tokens,
                     "kernels": "; ".join(kernels_in_log(pt.server_log())) or "none logged",
                     "start_to_healthy_s": pt.record.start_to_healthy_s})
    cols = ["rig", key, "point", "preset", "max_num_seqs", "weights_gib", "kv_cache_gib", "kv_cache_tokens",
            "kv_pool_pages", "admission_limit", "request_tokens", "kernels", "start_to_healthy_s"]
    return pd.DataFrame(rows, columns=cols)


def measure_variant(points: pd.DataFrame, preset: str | None, fmt: str, bandwidth: Interval | None, data_dir,
                    top_cap: int | None = None, fit_max_batch: int | None = None, step: str = "itl_p50_ms",
                    other_step: bool = True) -> dict:
    """A variant's measurements: its fixed cost is the step at batch 1 (the single stream's and the batch-1 decode
    point's median ITL, over both: a fixed cost plus one sequence's), its per-sequence cost the slope of the step
    fit over the decode batches up to fit_max_batch (a line through a curve that bends at large batches would
    leave both coefficients too uncertain to judge). `step`: the column a step is read from (the median ITL, or
    part 6's median TPOT, which tokens streamed in bunches cannot shorten)."""
    v: dict = {"format": fmt, "preset": preset}
    if preset:
        try:
            v["bytes"] = preset_decode_bytes(preset, fmt, data_dir)
            v["decode_gb"] = v["bytes"].gb
        except UserError:
            pass
    single = points[points["kind"] == "single"]
    if len(single):
        v["single_itl_ms"] = Interval.spread(single["itl_p50_ms"])
    dec = points[points["kind"] == "decode"].sort_values("batch")
    if len(dec):
        dec = dec.assign(step_ms=dec[step], decode_tok_s=dec["batch"] * 1000.0 / dec[step])
        v["decode"] = dec
    one = [*single[step], *(dec[dec["batch"] == 1]["step_ms"] if len(dec) else [])]
    if one:
        v["fixed"] = Interval.spread(one)
    bound = dec[dec["batch"] <= fit_max_batch] if fit_max_batch and len(dec) else dec
    if len(bound) >= 2:
        fit = analysis.linear_fit(bound["batch"], bound["step_ms"])
        v.update(fit=fit, fit_max_batch=int(bound["batch"].max()))
        if fit.dof > 0:  # two batches give a line but no range: its slope stays out of the claims
            v["slope"] = fit.interval(lambda a, b: b + 0 * a)
        beyond = dec[dec["batch"] > v["fit_max_batch"]]
        if len(beyond):  # the largest batch against the line through the smaller ones: > 1 where the step bends up
            last = beyond.iloc[-1]
            line = float(fit.predict([last["batch"]])[0])
            if line > 0:
                v.update(bend_batch=int(last["batch"]), bend_step_ms=float(last["step_ms"]),
                         bend_ratio=float(last["step_ms"]) / line, bend_sm_mhz=last.get("sm_mhz_median", math.nan),
                         bend_power_cap=last.get("sw_power_cap_share", math.nan))
    floods = points[points["kind"] == "flood"].sort_values("max_num_seqs")
    if len(floods):
        v["sweep"] = floods
        within = floods[floods["max_num_seqs"] <= top_cap] if top_cap else floods
        top = (within if len(within) else floods).iloc[-1]  # the ceiling at the part's cap where measured
        v.update(ceiling_tok_s=Interval.exact(top["output_tok_s"]), top_cap=int(top["max_num_seqs"]),
                 ceiling_running=top["running_max"], ceiling_sm_mhz=top.get("sm_mhz_median", math.nan),
                 ceiling_power_cap=top.get("sw_power_cap_share", math.nan))
    if bandwidth is not None and "bytes" in v:
        v["floor_ms"] = bandwidth.map(lambda bw: v["bytes"].floor_ms(bw))
    other = OTHER_STEP.get(step) if other_step else None
    if other and len(dec) and other in dec and dec[other].notna().all():
        alt = measure_variant(points, None, fmt, None, data_dir, top_cap, fit_max_batch, step=other, other_step=False)
        if "slope" in alt:
            v["slope_other"], v["other_step"] = alt["slope"], other
    return v


# The step estimators a per-sequence cost can be read with: the median gap between tokens (ITL) and the median time
# per output token after the first (TPOT); each variant's fit is made with the other too, so that a statement that
# depends on the slope can say whether both agree.
OTHER_STEP = {"itl_p50_ms": "tpot_p50_ms", "tpot_p50_ms": "itl_p50_ms"}


STEP_NAMES = {"itl_p50_ms": "median ITL", "tpot_p50_ms": "median TPOT"}


def rig_bandwidth(*frames: pd.DataFrame) -> Interval | None:
    values = [x for f in frames if len(f) and "bandwidth_gb_s" in f for x in f["bandwidth_gb_s"]
              if not missing(x)]
    return Interval.spread(values) if values else None


def apply_start(v: dict, starts: pd.DataFrame) -> None:
    """A variant's weights, kernels, KV cache and pool from the start of its main server (the largest cap) in
    `starts` (startup_table's rows of that variant); the logged GiB with their printed rounding."""
    if not len(starts):
        return
    top = starts.sort_values("max_num_seqs").iloc[-1]
    v.update(weights_gib=top["weights_gib"], kernels=top["kernels"], kv_cache_gib=top["kv_cache_gib"],
             admission_limit=top["admission_limit"], kv_pool_pages=top["kv_pool_pages"])
    for col, key in (("weights_gib", "weights_logged"), ("kv_cache_gib", "kv_logged")):
        if known_number(top[col]):  # the log prints both to 2 decimals
            v[key] = Interval.printed(round(float(top[col]), 2))


def rig_price(prices: pd.DataFrame, points: pd.DataFrame) -> dict | None:
    """The listed price of the GPU a rig's points ran on (reference.price_for_gpu), None where not listed."""
    from ..records.reference import price_for_gpu

    names = [n for n in points["gpu_name"].dropna().unique()] if "gpu_name" in points else []
    return price_for_gpu(prices, names[0] if names else None)


def usd_per_million(price_per_hour: float | None, tok_s: float) -> float:
    """USD per million output tokens at `price_per_hour` for a server emitting `tok_s` tokens a second."""
    if price_per_hour is None or not tok_s > 0:
        return math.nan
    return price_per_hour / (tok_s * 3600.0) * 1e6


def default_price(views: dict[str, dict], prices: pd.DataFrame, fallback_gpu: str = "H200") -> dict:
    """Where the price slider starts: the listed middle of the first shown rig's GPU, else of `fallback_gpu` (the
    book's own GPU), with where that number comes from."""
    from ..records.reference import price_for_gpu

    for rig, view in views.items():
        if view.get("price"):
            return {**view["price"], "rig": rig}
    got = price_for_gpu(prices, fallback_gpu)
    if got is None:
        raise UserError(f"the GPU price listing has no {fallback_gpu} row to start the price slider at")
    return {**got, "rig": None}


def decode_rows(views: dict[str, dict], key: str = "format", x: str = "batch") -> pd.DataFrame:
    """Step time (median ITL at a fixed batch) per variant, measured and as its fit predicts (long form); the
    variant's `key` goes into `format` (the colour), the decode column `x` into `batch` (part 6: the client's)."""
    rows = []
    for rig, view in views.items():
        for v in view["variants"].values():
            if "decode" not in v:
                continue
            for r in v["decode"].to_dict("records"):
                fit_ms = float(v["fit"].predict([r["batch"]])[0]) if "fit" in v else math.nan
                rows.append({"rig": rig, "variant": v["label"], "format": v[key], "batch": float(r[x]),
                             "step_ms": float(r["step_ms"]), "fit_ms": fit_ms})
    return pd.DataFrame(rows, columns=["rig", "variant", "format", "batch", "step_ms", "fit_ms"])


def sweep_rows(views: dict[str, dict]) -> pd.DataFrame:
    frames = [v["sweep"].assign(rig=rig, variant=v["label"]) for rig, view in views.items()
              for v in view["variants"].values() if "sweep" in v]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["rig", "variant", "max_num_seqs", "output_tok_s"])


num = words.number  # the book's number words: three significant figures, every whole digit, thousands separated


def positive_prediction(i: Interval) -> Interval:
    """A prediction whose range reaches zero or below (a fit of few, noisy points) allows any ratio: keep its
    value, cut its range just above zero, so the verdict comes out inconclusive rather than failing."""
    if not i.value > 0:
        raise Missing("a positive prediction (the predicting fit's value is not above zero)")
    return Interval(i.value, max(i.low, i.value * 1e-6), i.high)


def interval_words(x, unit: str = "") -> str:
    if not isinstance(x, Interval):
        return "not measured"
    body = num(x.value) if x.low == x.high else f"{num(x.value)} ({num(x.low)} to {num(x.high)})"
    return f"{body}{' ' + unit if unit else ''}"


def device_minutes(device: pd.DataFrame | None, part: str, rig: str) -> str:
    """' Machine time: N min over K server sessions.' for a part on a rig (devicebudget.device_table), or ''."""
    if device is None or not len(device):
        return ""
    d = device[(device["part"] == part) & (device["rig"] == rig)]
    if not len(d):
        return ""
    return f" Machine time: {num(float(d['device_min'].sum()))} min over {int(d['sessions'].sum())} server sessions."


def sig(x, digits: int = 3, exact_whole: bool = True) -> str:
    """At most `digits` significant digits (words.sig); a whole number (a count) exactly unless `exact_whole` is
    False (a measured clock)."""
    return words.sig(x, digits, whole=exact_whole)


def pct(x: float) -> str:
    """A signed percentage change for a reader: -0.029 -> '-2.9%'."""
    return words.percent(x, 2, signed=True)


def closing_note(views: dict[str, dict], device: pd.DataFrame | None, part: str, skip: tuple[str, ...] = (),
                 weights: bool = False) -> str:
    """The closing note's paragraph per rig: a line per variant (not those in `skip`): its weights from the log
    where `weights`, the single-stream ITL, the step fit and the flood ceiling; then the part's device minutes."""
    out = []
    for rig, view in views.items():
        items = []
        for key, v in view["variants"].items():
            if key in skip:
                continue
            w = v.get("weights_gib")
            said = f"weights {'not in the log' if missing(w) else num(w) + ' GiB'}, " if weights else ""
            items.append(f"`{key}`: {said}single ITL {interval_words(v.get('single_itl_ms'), 'ms')}, fit "
                         + (f"{num(v['fit'].intercept)} + {num(v['fit'].slope)} x batch ms" if "fit" in v else "none")
                         + f", ceiling {interval_words(v.get('ceiling_tok_s'), 'tok/s')}")
        if items:
            out.append(f"**{rig}**: " + "; ".join(items) + "." + device_minutes(device, part, rig))
    return "\n\n".join(out)
