"""Inside a step's step model against the parts' own measurements on the same rig.

Part 0 builds a decode step from its own points (predict.step_model: the traces at batches 1 and 256, the shapes,
the measured copy bandwidth and prefill rate). None of parts 1, 3 and 5's points go into it, so each of their
measurements is an out-of-sample test of it on the rig that measured both:
- a decode step at a fixed batch (parts 1 and 5's decode points: the median ITL with the batch held) against
  step(batch, context), context = the prompt plus half the output;
- a flood's steady window (the engine's counters polled during the pass: the running batch held at the cap), its
  step period (the window's seconds over its steps) against step(the window's mean running batch, context): the
  model's pure-decode step, where the window's steps may also carry a refill's prompt tokens (part 3 shows the
  share of a flood's time in such steps). A flood without a steady window is left out and counted.
`error_pct` = 100 x (predicted - measured) / measured. The table is the model's, not a fit through the part's points:
where the two disagree the part's page says by how much, and at which batch.
"""
from __future__ import annotations

import math

import pandas as pd

from . import predict
from .tables import rigs_measured
from ...measure.analysis import round_sig

# per part: (step-model variant, the part's own name for the model in its tables; part 1 has one model)
PART_MODELS = {1: [("4b", None)], 3: [("4b", "main"), ("0.5b", "small")], 5: [("9b-fp16", "fp16"), ("9b-int4", "int4")]}
COLUMNS = ["model", "kind", "batch", "measured", "predicted", "error_pct"]  # measured, predicted: ms
# beside a flood's row (not shown in the table; the words split its miss): its steady window's prompt tokens per step
# (refills' prefills riding along), and part 0's own pure-decode step at the nearest measured batch at or above the
# window's running batch (`decode_batch`) over the model's prediction there (`decode_over_line`): the line's own miss
EXTRA = ["prompt_per_step", "decode_batch", "decode_over_line"]


def _models(data_dir, rig: str) -> tuple[dict | None, dict | None]:
    """(the step models, part 0's view of the rig) — predict.build's, with the view kept for its measured steps."""
    from .tables import page_tables
    from .view import rig_view

    view = rig_view(rig, page_tables(data_dir, [rig]), None, data_dir)
    page = predict.page(view, data_dir)  # None where the rig has no step model of the 4B
    return (page["models"] if page else None), view


def _pure_decode(m, gpu, view: dict | None, variant: str, batch: float) -> dict:
    """Part 0's own pure-decode step of `variant` at the smallest measured batch at or above `batch` (else the
    largest) over the model's prediction there, at the decode points' context: how far the line itself misses."""
    out = {"decode_batch": math.nan, "decode_over_line": math.nan}
    if view is None or not len(view.get("curve", [])):
        return out
    c, _ = predict.measured_steps(view, variant)
    pts = view["points"]
    d = pts[(pts["variant"] == variant) & (pts["kind"] == "decode")]
    if not len(c) or not len(d):
        return out
    above = [b for b in c.index if b >= batch]
    b = min(above) if above else max(c.index)
    out.update(decode_batch=float(b), decode_over_line=float(c[b]) / m.step(gpu, b, float(d["context"].iloc[0])))
    return out


def _row(variant: str, kind: str, batch: float, measured: float, predicted: float) -> dict:
    return {"model": predict.MODEL_LABELS.get(variant, variant), "kind": kind, "batch": float(batch),
            "measured": float(measured), "predicted": float(predicted),
            "error_pct": 100 * (predicted - measured) / measured}


def _decode_rows(m, gpu, variant: str, frame: pd.DataFrame, step_col: str, ctx: float) -> list[dict]:
    return [_row(variant, "decode step", r.batch, getattr(r, step_col), m.step(gpu, r.batch, ctx))
            for r in frame.sort_values("batch").itertuples() if r.batch == r.batch and getattr(r, step_col) > 0]


def _flood_rows(m, gpu, variant: str, floods: pd.DataFrame, ctx: float, view: dict | None = None
                ) -> tuple[list[dict], int]:
    rows, none = [], 0
    for r in floods.itertuples():
        step, run = getattr(r, "steady_step_ms", math.nan), getattr(r, "steady_running_mean", math.nan)
        if not (step == step and run == run and step > 0):
            none += 1
            continue
        rows.append({**_row(variant, "flood step, steady window", run, step, m.step(gpu, run, ctx)),
                     "prompt_per_step": float(getattr(r, "steady_prompt_per_step", math.nan)),
                     **_pure_decode(m, gpu, view, variant, run)})
    return rows, none


def _context(part, rig: str, data_dir) -> float:
    """The mean context of a decode step of the asking part's workload on the rig (its PART's parameters there):
    the prompt plus half the output."""
    from ..protocol import rig_parameters

    p = rig_parameters(part, rig, data_dir)
    return int(p["input_len"]) + int(p["output_len"]) / 2


def _part1_rows(models: dict, gpu, data_dir, rig: str, view: dict | None) -> tuple[list[dict], int]:
    """Part 1's decode points and its flood (its tables, through its PART)."""
    from ..p01 import PART as PART1

    ctx = _context(PART1, rig, data_dir)
    (variant, _), = PART_MODELS[1]
    if variant not in models:
        return [], 0
    m, t = models[variant], PART1.tables(data_dir, [rig])
    rows = _decode_rows(m, gpu, variant, t["decode"], "step_ms", ctx)
    rates = t["rates"]
    got, none = _flood_rows(m, gpu, variant, rates[rates["offered_rate_rps"] == math.inf], ctx, view)
    return rows + got, none


def _part3_rows(models: dict, gpu, data_dir, rig: str, view: dict | None) -> tuple[list[dict], int]:
    """Part 3's floods of each model (its tables, through its PART)."""
    from ..p03 import PART as PART3

    ctx = _context(PART3, rig, data_dir)
    sweep = PART3.tables(data_dir, [rig])["sweep"]
    rows, none = [], 0
    for variant, name in PART_MODELS[3]:
        if variant in models:
            got, n = _flood_rows(models[variant], gpu, variant,
                                 sweep[sweep["model"] == name].sort_values("max_num_seqs"), ctx, view)
            rows, none = rows + got, none + n
    return rows, none


def _part5_rows(models: dict, gpu, data_dir, rig: str, view: dict | None) -> tuple[list[dict], int]:
    """Part 5's decode points and floods of each format (variants.point_table, the wing parts 5 and 6 share)."""
    from ..p05 import PART as PART5
    from ..variants import point_table

    ctx = _context(PART5, rig, data_dir)
    pts = point_table(data_dir, [rig], part="05-four-bits")
    rows, none = [], 0
    for variant, fmt in PART_MODELS[5]:
        if variant not in models or not len(pts):
            continue
        mine = pts[pts["format"] == fmt]
        rows += _decode_rows(models[variant], gpu, variant, mine[mine["kind"] == "decode"], "itl_p50_ms", ctx)
        got, n = _flood_rows(models[variant], gpu, variant,
                             mine[mine["kind"] == "flood"].sort_values("max_num_seqs"), ctx, view)
        rows, none = rows + got, none + n
    return rows, none


PART_ROWS = {1: _part1_rows, 3: _part3_rows, 5: _part5_rows}  # the parts whose measurements the model predicts


def part_table(part: int | str, data_dir=None, rig: str = predict.RIG) -> tuple[pd.DataFrame, int]:
    """(rows, floods without a steady window) of part `part`'s measurements (its number or name) on `rig` against
    the step model that part 0's points on `rig` give; no rows where the rig has no step model or the part has no
    points there."""
    from ...schema import part_number

    number = part_number(part)
    if number not in PART_ROWS:
        raise ValueError(f"part {part} has no measurements the step model predicts (parts 1, 3, 5 do)")
    empty = pd.DataFrame(columns=COLUMNS + EXTRA), 0
    models, view = _models(data_dir, rig)
    if not models:
        return empty
    gpu = predict.gpus(data_dir)[predict.H200_KEY]
    rows, none = PART_ROWS[number](models, gpu, data_dir, rig, view)
    return pd.DataFrame(rows, columns=COLUMNS + EXTRA), none


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The table as the page prints it (every row a step, in ms): three significant figures, the error whole."""
    out = table[COLUMNS].copy()
    for c in ("measured", "predicted", "batch"):
        out[c] = out[c].map(round_sig)
    out["error_pct"] = out["error_pct"].round(0) + 0.0  # no "-0"
    return out.rename(columns={"batch": "running batch", "measured": "measured_ms", "predicted": "predicted_ms"})


def _signed(pct: float) -> str:
    """A whole signed percentage; "0%" (not "-0%") where it rounds to zero."""
    r = int(round(pct))
    return f"{r:+d}%" if r else "0%"


def words(table: pd.DataFrame, none: int, rig: str = predict.RIG) -> str:
    """One paragraph: per model and kind, how far the step model's predictions fell from the part's measurements
    (the range of errors, the largest with its batch); the floods left out for want of a steady window."""
    if not len(table):
        return (f"No step model of this part's models on {rig} yet: `make reproduce PART=0 RIG={rig}` measures it."
                if none == 0 else "")
    out = []
    for (model, kind), g in table.groupby(["model", "kind"], sort=False):
        worst = g.loc[g["error_pct"].abs().idxmax()]
        lo, hi = g["error_pct"].min(), g["error_pct"].max()
        span = _signed(lo) if len(g) == 1 else f"{_signed(lo)} to {_signed(hi)}"
        what = "decode steps" if kind == "decode step" else "flood steps in steady windows"
        out.append(f"the {model}'s {len(g)} {what if len(g) > 1 else what.replace('steps', 'step', 1)} {span}"
                   + (f" (largest at a running batch of {worst['batch']:,.0f})" if len(g) > 1 else
                      f" (running batch {worst['batch']:,.0f})"))
    text = ("Inside a step's step model, built from part 0's own points on " + rig + " (none of this part's), "
            "predicts this part's measurements on the same rig: " + "; ".join(out) + ". A positive error is a "
            "prediction above the measurement.")
    lo, hi = predict.TRACE_BATCHES
    past = table[table["batch"] > hi * 1.05]
    if len(past):
        worst = past.loc[past["error_pct"].abs().idxmax()]
        total = worst["measured"] / worst["predicted"]
        text += (f" The model reads each step's growth between its traces at batches {lo} and {hi}: past {hi} it is a "
                 f"straight line carried on, and at a running batch of {worst['batch']:,.0f} the {worst['model']}'s "
                 f"measured step is {total:.2f}x its prediction.")
        line, prompt = worst.get("decode_over_line", math.nan), worst.get("prompt_per_step", math.nan)
        if worst["kind"] != "decode step" and pd.notna(line) and line > 0:
            text += (f" Of that, the line's own miss: the chapter's pure decode at {worst['decode_batch']:,.0f} (no "
                     f"prompt token in its steps) is {line:.2f}x the line there; the rest, {total / line:.2f}x, is the "
                     "flood's own")
            text += (f": its window's steps also carried {prompt:,.0f} prompt tokens each (refills' prefills), which "
                     "pure decode does not, the candidate for it." if pd.notna(prompt) and prompt > 0 else ".")
    if none:
        text += f" {none} flood{'s' if none > 1 else ''} had no steady window to compare with."
    return text


def sections(part: int | str, data_dir=None, shown: list[str] | None = None) -> list[tuple[str, pd.DataFrame, str]]:
    """(rig, table as shown, paragraph) for each rig the part's page shows that also ran part 0: what the page's
    section "What the step chapter measured" prints under the chapter's answers; none for a part whose
    measurements the step model does not predict (PART_ROWS)."""
    from ..protocol import page_rigs
    from ...schema import part_number

    if part_number(part) not in PART_ROWS:
        return []
    have0 = set(rigs_measured(data_dir))
    out = []
    for rig in [r for r in (shown or page_rigs(part, data_dir)) if r in have0]:
        table, none = part_table(part, data_dir, rig)
        if len(table) or none:
            out.append((rig, shown_table(table), words(table, none, rig)))
    return out
