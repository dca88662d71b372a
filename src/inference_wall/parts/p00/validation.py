"""A frozen prediction against what its GPU then measured: data/predictions/<gpu>.csv beside the rig's runs.

A rig whose profile names its datasheet row (`datasheet`) and whose row has a frozen prediction (written by
scripts/freeze-prediction.py before the rig's first run, never edited) is tested here, quantity by quantity:

- decode step (ms) at a batch, with and without asynchronous scheduling: part 0's untraced decode point of that
  batch (the step's period from the engine's step counter over its pure-decode intervals, p00.step_curve);
- single stream (ms per token): part 1's `single` point, the median inter-token latency of one request at a time;
- decode ceiling (tok/s): batch / part 0's step at the batch the prediction names;
- flood output (tok/s) at a cap: part 3's flood of that cap (`mns-*` for the 4B, `small-mns-*` for the 0.5B), two
  rows: the whole pass as `vllm bench serve` reports it, and the steady window where the pass was polled and holds
  one (the prediction adds each request's prefill to its decode, so it sits between the two when the model holds);
- KV admission (sequences of the series' length): the pool a start of the model logged, at the utilization it ran
  (the prediction's row of that utilization), from the start at the series' max_num_seqs where there is one (a
  larger max_num_seqs captures more CUDA graphs and leaves a smaller pool; `source` names the start).

The error is (predicted - measured) / measured. A quantity the rig has not measured yet has no row: nothing here
guesses it. The frozen file is read as written; a later model's prediction is another column, named as such.
"""
from __future__ import annotations

import math

import pandas as pd

from .tables import frozen_name, frozen_predictions as frozen, rig_datasheet, single_pass, start_report

FROZEN_NAME = "frozen before the first run"
COLUMNS = ["rig", "gpu", "model", "quantity", "batch", "cap", "predicted", "measured", "error_pct", "unit",
           "measure", "source"]
VARIANT_MODEL = {"4b": ("4B", "decode step"), "4b-sync": ("4B", "decode step, async scheduling off"),
                 "0.5b": ("0.5B", "decode step"), "0.5b-api2": ("0.5B", "decode step, 2 API servers"),
                 "9b-fp16": ("9B fp16", "decode step"),
                 "9b-int4": ("9B int4", "decode step")}
WHOLE, STEADY = "whole pass (vllm bench serve)", "steady window (polled /metrics)"  # a flood's two measures
FLOOD_MODELS = {"main": ("4B", "qwen3.5-4b"), "small": ("0.5B", "qwen2.5-0.5b")}


def _today(gpu_key: str, data_dir=None, model: str | None = None) -> pd.DataFrame:
    if model == "refit":
        from . import refit

        return refit.prediction_rows(gpu_key, data_dir=data_dir)
    from . import predict

    return predict.prediction_rows(gpu_key, data_dir)


def _joinable(pred: pd.DataFrame) -> pd.DataFrame:
    """A prediction's rows keyed as the measurements are: a flood by its cap (its batch is min(cap, admission)), an
    admission by its utilization, a single stream at batch 1."""
    pred = pred.assign(batch=pred["batch"].where(pred["quantity"] != "flood output"),
                       utilization=pred["utilization"].where(pred["quantity"] == "KV admission"))
    return pd.concat([pred[pred["quantity"] != "single stream"],
                      pred[pred["quantity"] == "single stream"].assign(batch=1.0)])


def _decode_rows(rig: str, data_dir=None) -> list[dict]:
    from .plan import point_name
    from .tables import page_tables
    from .view import rig_view

    try:
        view = rig_view(rig, page_tables(data_dir, [rig]), None, data_dir)
    except (KeyError, ValueError, FileNotFoundError):
        return []
    curve = view.get("curve")
    if curve is None or not len(curve):
        return []
    rows = []
    for r in curve.itertuples():
        if r.variant in VARIANT_MODEL and r.step_ms == r.step_ms:
            model, quantity = VARIANT_MODEL[r.variant]
            where = f"00-inside-a-step/{rig}/{point_name(r.variant, 'decode', int(r.batch))}"
            rows.append({"model": model, "quantity": quantity, "batch": int(r.batch), "measured": float(r.step_ms),
                         "measure": "engine step counter, pure-decode intervals", "source": where})
            if quantity == "decode step":
                rows.append({"model": model, "quantity": "decode ceiling", "batch": int(r.batch),
                             "measured": 1000 * r.batch / r.step_ms,
                             "measure": "batch / the decode step", "source": where})
    return rows


def _single_rows(rig: str, data_dir=None) -> list[dict]:
    s = single_pass(rig, data_dir)
    if s is None or s["itl_p50_ms"] != s["itl_p50_ms"]:
        return []
    return [{"model": "4B", "quantity": "single stream", "batch": 1, "measured": s["itl_p50_ms"],
             "measure": "median inter-token latency, one request at a time", "source": f"01-hit-the-wall/{rig}/single"}]


def _flood_rows(rig: str, data_dir=None) -> list[dict]:
    from ..p03 import PART as PART3

    try:
        table = PART3.tables(data_dir, [rig])["sweep"]
    except (KeyError, ValueError, FileNotFoundError):
        return []
    rows = []
    for r in table[table["source"] == "measured"].itertuples():
        if r.model not in FLOOD_MODELS:
            continue
        steady = getattr(r, "steady_output_tok_s", math.nan)
        for value, how in ((r.output_tok_s, WHOLE), (steady, STEADY)):
            if value == value:
                rows.append({"model": FLOOD_MODELS[r.model][0], "quantity": "flood output",
                             "cap": int(r.max_num_seqs), "measured": float(value), "measure": how,
                             "source": f"03-batching-cliff/{rig}/{r.point}"})
    return rows


def _admission_rows(rig: str, frozen_rows: pd.DataFrame, data_dir=None) -> list[dict]:
    """The admission a start of each model logged, at the utilization it ran, at the series' lengths and
    max_num_seqs (predict._workload) where such a start exists."""
    from ...model.kvcache import pool_from_report
    from ...model.modelshape import ModelShape
    from . import predict

    w = predict._workload(data_dir)
    tokens = w["input_len"] + w["output_len"]
    presets = {"4B": "qwen3.5-4b", "0.5B": "qwen2.5-0.5b", "9B fp16": "qwen3.5-9b", "9B int4": "qwen3.5-9b-gptq-int4"}
    rows = []
    for model, preset in presets.items():
        if model not in set(frozen_rows["model"]):
            continue
        start = predict.start_memory(preset, w["max_num_seqs"], data_dir, rig)
        if start.get("dir") is None or start["utilization"] != start["utilization"]:
            continue
        pool = pool_from_report(start_report(start["dir"]), ModelShape.of(preset, data_dir).layout)
        if pool is None:
            continue
        rows.append({"model": model, "quantity": "KV admission", "utilization": start["utilization"],
                     "measured": float(pool.admission_limit(tokens)),
                     "measure": f"the logged KV pool in pages, requests of {tokens} tokens",
                     "source": start["source"].removeprefix(f"measured on {rig}: ")})
    return rows


def measured_rows(rig: str, frozen_rows: pd.DataFrame, data_dir=None) -> pd.DataFrame:
    """What `rig` measured of the quantities a frozen prediction states (see the module's docstring)."""
    rows = (_decode_rows(rig, data_dir) + _single_rows(rig, data_dir) + _flood_rows(rig, data_dir)
            + _admission_rows(rig, frozen_rows, data_dir))
    return pd.DataFrame(rows, columns=["model", "quantity", "batch", "cap", "utilization", "measured", "measure",
                                       "source"])


def _key(frame: pd.DataFrame) -> pd.Series:
    """The join key of a quantity: model, quantity, and the batch, cap or utilization that names it."""
    def part(col):
        return frame[col].map(lambda x: "" if x is None or x != x else f"{float(x):g}") if col in frame else ""
    return frame["model"] + "|" + frame["quantity"] + "|" + part("batch") + "|" + part("cap") + "|" + part(
        "utilization")


def table(rig: str, data_dir=None, today: bool = False, model: str | None = None) -> pd.DataFrame:
    """A frozen prediction of `rig`'s GPU (`model`: None for parts/p00/predict.py's, "refit") beside what the rig
    measured: one row per quantity measured, with the signed error. Empty where the rig names no datasheet row, its
    row has no such frozen prediction, or nothing of it is measured yet. `today`: also what the model says now
    (`today`, `today_error_pct`), a later model than the frozen one wherever the two differ: shown beside the frozen
    prediction under its own name, never in its place."""
    key = rig_datasheet(rig, data_dir)
    pred = frozen(key, data_dir, model) if key else None
    if pred is None:
        return pd.DataFrame(columns=COLUMNS)
    if "utilization" not in pred:
        pred = pred.assign(utilization=math.nan)
    meas = measured_rows(rig, pred, data_dir)
    if not len(meas):
        return pd.DataFrame(columns=COLUMNS)
    pred = _joinable(pred)
    meas = meas.assign(utilization=meas["utilization"].where(meas["quantity"] == "KV admission"))
    joined = meas.assign(k=_key(meas)).merge(pred.assign(k=_key(pred))[["k", "predicted", "unit", "gpu"]], on="k")
    if not len(joined):
        return pd.DataFrame(columns=COLUMNS)
    joined["error_pct"] = 100 * (joined["predicted"] - joined["measured"]) / joined["measured"]
    joined["rig"] = rig
    if today:
        now = _joinable(_today(key, data_dir, model))
        joined = joined.merge(now.assign(k=_key(now))[["k", "predicted"]].rename(columns={"predicted": "today"}),
                              on="k", how="left")
        joined["today_error_pct"] = 100 * (joined["today"] - joined["measured"]) / joined["measured"]
    cols = COLUMNS + (["today", "today_error_pct"] if today else [])
    return joined[cols].sort_values(["model", "quantity", "batch", "cap"]).reset_index(drop=True)


HEADERS = {"model": "model", "quantity": "quantity", "at": "at", "predicted": "predicted (frozen)",
           "measured": "measured", "error_pct": "error %", "today": "today's model (changed since the freeze)",
           "today_error_pct": "its error %", "measure": "measured as", "source": "run"}
SAME = 1e-5  # relative: today's model says what the frozen one said (the file keeps 6 significant figures)


def _at(r) -> str:
    if r.quantity == "flood output":
        return f"cap {int(r.cap):,}"
    if r.quantity == "KV admission":
        return "requests of the series' length"
    return f"batch {int(r.batch):,}" if r.batch == r.batch else ""


def shown(val: pd.DataFrame) -> pd.DataFrame:
    """The validation table as a reader reads it: predicted and measured at 3 significant figures with their unit,
    the error signed."""
    from .predict import _n, _pct

    out = pd.DataFrame({
        HEADERS["model"]: val["model"], HEADERS["quantity"]: val["quantity"],
        HEADERS["at"]: [_at(r) for r in val.itertuples()],
        HEADERS["predicted"]: [f"{_n(p)} {u}" for p, u in zip(val["predicted"], val["unit"])],
        HEADERS["measured"]: [f"{_n(m)} {u}" for m, u in zip(val["measured"], val["unit"])],
        HEADERS["error_pct"]: [_pct(e) for e in val["error_pct"]]})
    if "today" in val and ((val["today"] - val["predicted"]).abs() > SAME * val["predicted"].abs()).any():
        out[HEADERS["today"]] = [f"{_n(t)} {u}" if t == t else "-" for t, u in zip(val["today"], val["unit"])]
        out[HEADERS["today_error_pct"]] = [_pct(e) if e == e else "-" for e in val["today_error_pct"]]
    out[HEADERS["measure"]], out[HEADERS["source"]] = val["measure"].values, val["source"].values
    return out.reset_index(drop=True)


def sentences(val: pd.DataFrame, frozen_rows: pd.DataFrame | None = None, model: str | None = None) -> list[str]:
    """What a reader takes from the validation table: what was frozen when (`model`: None for the first model's file,
    "refit" for the refit's), the 4B's errors on the quantities the chapter names (single stream, steps at 8, 64 and
    256, the flood at cap 256, the KV admission), where each flood's prediction sits against its two measures, and
    the largest error of all with its measure, each number from the table."""
    from .predict import _n, _pct, join_and

    if not len(val):
        return []
    rig, gpu = val["rig"].iloc[0], val["gpu"].iloc[0]
    out = []
    if frozen_rows is not None and len(frozen_rows):
        commit = str(frozen_rows["model_commit"].iloc[0])[:12]
        out.append((f"Before {rig}'s first run, the step model's prediction for the {gpu} datasheet row was frozen "
                    if not model else
                    f"After {rig}'s first runs, the refit's prediction of what the {rig} had not run yet (each row "
                    f"naming the run that would measure it) was frozen for the {gpu} datasheet row ")
                   + f"(`data/{frozen_name(gpu, model)}`, made by commit {commit} and never edited since): what follows is "
                   "that prediction against what the rig then measured, a test of the model on measurements it was "
                   "not fitted on.")
    four = val[val["model"] == "4B"]
    picks = []
    for quantity, key, value, label in (("single stream", "batch", 1, "the single stream"),
                                        ("decode step", "batch", 8, "the step at batch 8"),
                                        ("decode step", "batch", 64, "at 64"),
                                        ("decode step", "batch", 256, "at 256"),
                                        ("flood output", "cap", 256, "the flood at cap 256")):
        r = four[(four["quantity"] == quantity) & (four[key] == value)]
        if len(r):
            r = r.iloc[0]
            picks.append(f"{label}, {_n(r.predicted)} {r.unit} predicted and {_n(r.measured)} measured "
                         f"({_pct(r.error_pct)}{'; ' + r.measure if quantity == 'flood output' else ''})")
    adm = four[four["quantity"] == "KV admission"]
    if len(adm):
        r = adm.iloc[0]
        picks.append(f"the KV admission, {_n(r.predicted)} sequences predicted and {_n(r.measured)} measured "
                     f"({_pct(r.error_pct)})")
    if picks:
        out.append(f"The 4B on the {rig}: {join_and(picks)}.")
    floods = val[val["quantity"] == "flood output"]
    placed = []
    for (m, cap), g in floods.groupby(["model", "cap"], sort=True):
        whole, steady = g[g["measure"] == WHOLE], g[g["measure"] == STEADY]
        if len(whole) and len(steady):
            lo, hi = sorted([float(whole["measured"].iloc[0]), float(steady["measured"].iloc[0])])
            p = float(g["predicted"].iloc[0])
            placed.append(f"{m} cap {int(cap):,} " + ("between them" if lo <= p <= hi else
                                                      "below both" if p < lo else "above both"))
    if placed:
        out.append("The flood prediction adds each request's prefill to its decode, so where the model holds it sits "
                   "between the whole pass (ramp and tail included) and the steady window: " + join_and(placed) + ".")
    worst = val.loc[val["error_pct"].abs().idxmax()]
    how = f", against its {worst.measure}" if worst.quantity == "flood output" else ""
    out.append(f"The largest error of the {len(val)} quantities measured so far is the {worst.model} "
               f"{worst.quantity} at {_at(worst)}{how}: {_pct(worst.error_pct)}.")
    return out


# What the chapter page shows of a tested prediction: the quantities the H100 issue names, in the reader's words.
HEADLINE = (("single stream", "batch", 1, None, "single stream, ms a token"),
            ("decode step", "batch", 8, None, "step at batch 8, ms"),
            ("decode step", "batch", 64, None, "step at batch 64, ms"),
            ("decode step", "batch", 256, None, "step at batch 256, ms"),
            ("flood output", "cap", 256, "whole", "flood at cap 256, whole pass, tok/s"),
            ("flood output", "cap", 256, "steady", "flood at cap 256, steady window, tok/s"),
            ("KV admission", None, None, None, "KV admission, requests"))


def headline(rig: str, data_dir=None) -> pd.DataFrame:
    """The 4B's tested quantities on `rig` (HEADLINE): what the rig measured, the prediction of the model frozen before
    its first run and its signed error (%), and the refit's, frozen before the run that measured it (NaN where that
    file states no such quantity), with the run. Empty where nothing of either is measured yet."""
    tables = {m: table(rig, data_dir, model=m) for m in (None, "refit")}
    rows = []
    for quantity, key, value, measure, label in HEADLINE:
        got = {}
        for m, t in tables.items():
            t = t[(t["model"] == "4B") & (t["quantity"] == quantity)]
            if key is not None:
                t = t[t[key] == value]
            if measure is not None:
                t = t[t["measure"] == (WHOLE if measure == "whole" else STEADY)]
            if len(t):
                got[m] = t.iloc[0]
        if not got:
            continue
        first = got.get(None, got.get("refit"))
        rows.append({"quantity": label, "measured": float(first.measured),
                     "frozen": float(got[None].predicted) if None in got else math.nan,
                     "frozen_error_pct": float(got[None].error_pct) if None in got else math.nan,
                     "refit": float(got["refit"].predicted) if "refit" in got else math.nan,
                     "refit_error_pct": float(got["refit"].error_pct) if "refit" in got else math.nan,
                     "run": _short_run(str(first.source))})
    return pd.DataFrame(rows, columns=["quantity", "measured", "frozen", "frozen_error_pct", "refit", "refit_error_pct",
                                       "run"])


def _short_run(source: str) -> str:
    """'01-hit-the-wall/h100/single' -> 'part 1: single'; a start's log keeps its words up to the first comma."""
    head = source.split(",")[0]
    folder, _, rest = head.partition("/")
    point = rest.split("/")[-1] if "/" in rest else rest
    return f"part {int(folder[:2])}: {point}" if folder[:2].isdigit() else head


def headline_shown(frame: pd.DataFrame) -> pd.DataFrame:
    """`headline` as the page prints it: three figures, signed errors, '–' where a file states no such quantity."""
    from .predict import _n, _pct

    def n(x):
        return _n(x) if x == x else "–"

    def pct(x):
        return _pct(x) if x == x else "–"

    return pd.DataFrame({"quantity": frame["quantity"], "measured": frame["measured"].map(n),
                         "first model": frame["frozen"].map(n), "its error": frame["frozen_error_pct"].map(pct),
                         "refit": frame["refit"].map(n), "its error ": frame["refit_error_pct"].map(pct),
                         "run": frame["run"]})


def headline_words(frame: pd.DataFrame, rig: str) -> str | None:
    """One sentence over `headline(rig)`: per prediction, how many of the rows it states and the range of its signed
    errors; None where no row is measured."""
    from .predict import _pct

    parts = []
    for name, col in (("the model frozen before its first run", "frozen_error_pct"),
                      ("the refit frozen before the runs it names", "refit_error_pct")):
        errs = frame[col].dropna() if len(frame) else pd.Series(dtype=float)
        if len(errs) == 1:
            parts.append(f"{name} states one of them, off by {_pct(errs.iloc[0])}")
        elif len(errs):
            parts.append(f"{name} states {len(errs)}, off by {_pct(errs.min())} to {_pct(errs.max())}")
    return (f"On the {rig}, of the {len(frame)} quantities below, " + "; ".join(parts)
            + " (the error is the prediction less the measurement, over the measurement).") if parts else None


def section(rig: str, data_dir=None, model: str | None = None) -> dict | None:
    """What the chapter shows of one of `rig`'s frozen predictions: its sentences and its table as read (None where
    the rig has no such frozen prediction or has measured none of it yet)."""
    val = table(rig, data_dir, today=True, model=model)
    if not len(val):
        return None
    key = rig_datasheet(rig, data_dir)
    return {"table": val, "shown": shown(val), "sentences": sentences(val, frozen(key, data_dir, model), model),
            "gpu": key,
            "file": f"data/{frozen_name(key, model)}"}
