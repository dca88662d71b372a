"""Part 5's tables: the only file of the part that reads the disk (its points and server starts, the rig's
part-1 and part-3 measurements of its own model, the GPU prices, the model's shapes, the repeats' spread)."""
from __future__ import annotations

import math
import pandas as pd

from ...model.modelshape import preset_decode_bytes
from ...model.weightbytes import FORMATS
from ...records.store import load_points, pass_summary
from ...schema import PARTS
from ..variants import point_table, startup_table
from .plan import DEFAULTS, NAME, variant_preset


def reference_tables(data_dir=None, rigs: list[str] | None = None) -> dict:
    """The rig's part-1 and part-3 measurements of its own model (16-bit): single stream, decode batches, the
    floods per cap and the server's weights, as rows shaped like part 5's."""
    from ...records.gpuclocks import point_summary

    rows, starts = [], []
    for part in (1, 3):
        for pt in load_points(PARTS[part], data_dir, rigs):
            kind = pt.params.get("kind")
            if part == 3:
                if pt.params.get("model", "main") != "main":
                    continue
                kind = "flood"
            elif kind == "rate" and math.isinf(float(pt.params.get("offered_rate_rps", 0))):
                kind = "flood-part1"  # part 3's floods make the reference's sweep; this one is on its table only
            if kind not in ("single", "decode", "flood"):
                continue
            row = pass_summary(pt)
            clocks = point_summary(pt) or {}
            row.update(sm_mhz_median=clocks.get("sm_mhz_median", math.nan),
                       sw_power_cap_share=clocks.get("sw_power_cap_share", math.nan))
            row.update(kind=kind, format="fp16", source_part=part, batch=pt.params.get("batch"),
                       preset=pt.record.preset,
                       bandwidth_gb_s=pt.record.bandwidth_gb_s)
            rows.append(row)
            rep = pt.startup()
            if rep is not None and rep.weights_gib is not None:
                starts.append({"rig": pt.rig, "weights_gib": rep.weights_gib, "part": part,
                               "started": pt.record.server_started or 0})
    return {"points": pd.DataFrame(rows), "starts": pd.DataFrame(starts)}


def page_tables(data_dir=None, rigs: list[str] | None = None) -> dict:
    """The rigs' points and server starts, their reference server's (parts 1 and 3), the GPU prices, the bytes each
    format reads (`predicted`, from the shapes) and each rig's run-to-run spread of floods (`spread`)."""
    from ...records.reference import gpu_prices

    return {"points": point_table(data_dir, rigs, part=NAME), "starts": startup_table(data_dir, rigs, part=NAME),
            "reference": reference_tables(data_dir, rigs), "prices": gpu_prices(data_dir),
            "predicted": predicted_bytes(DEFAULTS["model"], data_dir),
            "spread": {rig: repeat_spread(rig, data_dir) for rig in rigs or []}}


def predicted_bytes(model: str, data_dir=None, formats=FORMATS) -> pd.DataFrame:
    """What each format of `model` must read per decode step, by component (no run needed)."""
    rows = []
    for fmt in formats:
        b = preset_decode_bytes(variant_preset(model, fmt), fmt, data_dir)
        rows.append({"format": fmt, "preset": variant_preset(model, fmt), "decode_gb": b.gb,
                     "quantized_gb": b.quantized / 1e9, "unquantized_matrices_gb": b.unquantized_linear / 1e9,
                     "head_gb": b.head / 1e9, "other_gb": b.small / 1e9, "head_share_pct": 100 * b.head / b.total})
    return pd.DataFrame(rows)


def repeat_spread(rig: str, data_dir=None) -> pd.DataFrame:
    """The run-to-run spread of floods on one rig: every flood measured on `rig` and on one of its repeats (rigs
    named `<rig>-run...`) with the same point (part 3's caps, part 1's flood), as the repeat's output throughput
    over the rig's, minus one. Empty where the rig has no repeat."""
    rows = []
    for part, floods_only in ((PARTS[3], lambda pt: pt.params.get("model", "main") == "main"),
                              (PARTS[1], lambda pt: pt.params.get("kind") == "rate"
                               and math.isinf(float(pt.params.get("offered_rate_rps", 0))))):
        mine, repeats = {}, []
        for pt in load_points(part, data_dir):
            if not floods_only(pt):
                continue
            if pt.rig == rig:
                mine[pt.name] = pass_summary(pt)["output_tok_s"]
            elif pt.rig.startswith(f"{rig}-run"):
                repeats.append((pt.rig, pt.name, pass_summary(pt)["output_tok_s"]))
        for other, name, tok in repeats:
            if name in mine and mine[name] > 0:
                rows.append({"part": part, "rig": rig, "repeat": other, "point": name,
                             "change": tok / mine[name] - 1})
    return pd.DataFrame(rows, columns=["part", "rig", "repeat", "point", "change"])
