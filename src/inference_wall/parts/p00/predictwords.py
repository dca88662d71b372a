"""What the chapter says of the prediction: its sentences, the validation summary, the tables as shown, the notes."""
from __future__ import annotations

import math

import pandas as pd

from .tables import reference
from ... import words
from ...words import join_and
from .othergpus import _n
from .stepinputs import _h200_starts, latency_evidence
from .stepmodel import FIT_BAND_PCT, MODEL_LABELS, StepModel


def _pct(x: float) -> str:
    """A signed error in percent: 3 significant figures, "0%" under a hundredth of a percent."""
    if x == x and abs(x) < 0.01:
        return "0%"
    return words.percent(x, signed=True, whole=False, points=True)


def _pub(x: float) -> str:
    """A published figure as the post printed it (its own digits); a ratio derived from its table at 3 significant
    figures."""
    text = f"{x:g}"
    return f"{x:,g}" if len(text.replace(".", "").replace("-", "").lstrip("0")) <= 4 else _n(x)


def sentences(a10g: pd.DataFrame, table: pd.DataFrame, h200: pd.DataFrame) -> list[str]:
    """2-4 sentences for the page, each number from the tables (3 significant figures; a published figure as the
    post printed it), each with "predicted"; the second names the largest term of the largest A10G error."""
    out = []
    t = a10g.set_index("quantity")
    single = t.loc["single stream (ms per token)"]
    serving = a10g[a10g["quantity"].str.startswith("serving ceiling")].iloc[0]
    out.append(f"Built from the h200's measured step, the predicted A10G single stream takes {_n(single.predicted)} "
               f"ms a token against the post's {_pub(single.published)} ms ({_pct(single.error_pct)}), and the "
               f"predicted serving ceiling is {_n(serving.predicted)} tok/s against the post's "
               f"{_pub(serving.published)} ({_pct(serving.error_pct)}).")
    worst = a10g.loc[a10g["error_pct"].abs().idxmax()]
    name = worst.quantity.split(" (")[0]
    carried = (f"its largest predicted term is the {worst.top_term} ({_n(worst.top_share_pct)}% of the predicted "
               "value)") if worst.top_term else f"it is carried by {worst.carried_by}"
    out.append(f"The largest predicted A10G error is the {name}: {_n(worst.predicted)} against the post's "
               f"{_pub(worst.published)} ({_pct(worst.error_pct)}); {carried}.")
    fit = a10g[a10g["quantity"].str.startswith("step fit")]
    if len(fit) == 2:
        miss = fit[fit["error_pct"].abs() > FIT_BAND_PCT]
        said = " and ".join(f"{r.quantity.split(': ')[1].split(' (')[0]} {_n(r.predicted)} ms against the "
                            f"post's {_pub(r.published)} ({_pct(r.error_pct)})" for r in fit.itertuples())
        verdict = (f"both within {FIT_BAND_PCT:g}%" if not len(miss) else
                   " ".join(f"the {r.quantity.split(': ')[1].split(' (')[0]} term misses the {FIT_BAND_PCT:g}% band "
                            f"at {_pct(r.error_pct)} (its largest share: {r.carried_by.split(';')[0]}); the bandwidth "
                            "the model gives the A10G and its H200-measured idle growth are the candidates, not "
                            "measured on an A10G" for r in miss.itertuples()))
        out.append(f"The predicted step fit on the A10G: {said}; {verdict}.")
    main = h200[(h200["model"] == MODEL_LABELS["4b"])].dropna(subset=["error_pct"])
    if len(main):
        stated = h200.groupby("model")["stated_error_pct"].first().dropna()
        out.append(f"In sample, on the h200 whose traces it was built from, the predicted 4B steps at batches "
                   + join_and([f"{int(b):,}" for b in main["batch"]])
                   + f" lie within {_n(main['error_pct'].abs().max())}% of the measured; over every measured batch "
                   "outside the two the coefficients come from, the largest predicted error is "
                   + join_and([f"{_n(v)}% on the {k}" for k, v in stated.items()])
                   + ". Its out-of-sample errors are those of the GPUs measured after its prediction for them was "
                     "frozen (above).")
    four = table[table["model"] == MODEL_LABELS["4b"]]
    if len(four) >= 2:
        fast, slow = four.loc[four["itl_ms"].idxmin()], four.loc[four["itl_ms"].idxmax()]
        out.append(f"Across the datasheet GPUs the predicted 4B single stream ranges from {_n(fast.itl_ms)} ms a "
                   f"token on the {fast.gpu} to {_n(slow.itl_ms)} ms on the {slow.gpu}, and its predicted decode "
                   f"ceiling from {_n(four['decode_ceiling_tok_s'].min())} to "
                   f"{_n(four['decode_ceiling_tok_s'].max())} tok/s.")
    return out[:5]


def validation(a10g: pd.DataFrame, h200: pd.DataFrame) -> dict:
    """The errors the GPUs' table carries: the A10G's (the 4B's single stream, decode ceiling and admission against
    the posts) and the h200's stated error per model."""
    t = a10g.set_index("quantity")
    pick = lambda prefix: float(a10g[a10g["quantity"].str.startswith(prefix)]["error_pct"].iloc[0])
    return {"a10g_itl_error_pct": float(t.loc["single stream (ms per token)", "error_pct"]),
            "a10g_decode_ceiling_error_pct": pick("pure-decode ceiling"),
            "a10g_admission_error_pct": pick("KV admission, "),
            "h200_stated_error_pct": h200.groupby("model")["stated_error_pct"].first().to_dict()}


A10G_HEADERS = {"quantity": "quantity", "predicted": "predicted", "published": "published", "error_pct": "error %",
                "carried_by": "terms that carry it (share of the predicted value)"}


GPU_HEADERS = {"gpu": "GPU", "model": "model", "itl_ms": "single-stream ITL (ms)",
               "ceiling_batch": "running batch (min of max_num_seqs, admission)",
               "decode_ceiling_tok_s": "decode ceiling (tok/s)", "kv_admission": "KV admission (sequences)",
               "stop_paying_batch": "added sequence stops paying at batch"}


H200_HEADERS = {"model": "model", "batch": "batch", "measured_ms": "measured step (ms)", "measured_on": "measured on",
                "predicted_ms": "predicted step (ms)", "error_pct": "error %", "in_sample": "coefficients read here",
                "stated_error_pct": "stated error %"}


def shown(table: pd.DataFrame, headers: dict[str, str]) -> pd.DataFrame:
    """A table as a reader reads it: its columns renamed, numbers at 3 significant figures (an error with its sign,
    a published figure as printed), a dash for a missing value."""
    out = pd.DataFrame(index=table.index)
    for col, head in headers.items():
        v = table[col]
        if col == "published":
            out[head] = [_pub(x) if x == x else words.MISSING for x in v]
        elif col == "stated_error_pct":
            out[head] = [_n(x) + "%" if x == x else words.MISSING for x in v]
        elif col.endswith("error_pct"):
            out[head] = [_pct(x) if x == x else words.MISSING for x in v]
        elif v.dtype == bool:
            out[head] = ["yes" if x else "" for x in v]
        elif pd.api.types.is_integer_dtype(v):
            out[head] = [f"{int(x):,}" for x in v]
        elif pd.api.types.is_numeric_dtype(v):
            out[head] = [_n(float(x)) for x in v]
        else:
            out[head] = v
    return out.reset_index(drop=True)


def notes(view: dict, models: dict[str, StepModel], data_dir=None) -> list[str]:
    """What the model leaves out, each named as a candidate, with the numbers the h200 data give."""
    out = []
    if "4b" in models:
        e = latency_evidence(view, "4b")
        out.append(f"At batch 1 the 4B's recurrent-state and attention kernels take {_n(e['kernels_ms'])} ms on the "
                   f"h200 where their bytes need {_n(e['bytes_ms'])} ms at its measured bandwidth: the model does not "
                   "scale that part with the bandwidth.")
    m = view["models"].set_index("variant")
    if "9b-int4" in m.index and m.loc["9b-int4", "linear_kernel"]:
        out.append(f"The 4-bit layers ran vLLM's {m.loc['9b-int4', 'linear_kernel']} on the h200 (its start's log); "
                   "another GPU may run another kernel, whose read rate is not measured here (a candidate error of "
                   "the 9B int4 rows).")
    c = view.get("context")
    if c and known(c.get("slope_ms_per_k")) and known(c.get("kv_predicted_ms_per_k")):
        out.append(f"On the h200 the 4B's step at batch {c['batch']} grows {_n(c['slope_ms_per_k'])} ms per 1,000 "
                   f"tokens of context where the KV bytes predict {_n(c['kv_predicted_ms_per_k'])} ms: the KV term "
                   "is the bytes, not that slope.")
    setup = reference(1, data_dir)["server_setup"].set_index("setting")["stated"]
    ours = sorted({s["vllm"] for s in _h200_starts(data_dir, view["rig"])
                   if s["vllm"] and s["dir"].parent.parent.name == "00-inside-a-step"})
    if ours and "vllm_version" in setup.index:
        out.append(f"The GPU's idle time is the {view['rig']} host's under vLLM {', '.join(ours)}; the A10G's post ran "
                   f"vLLM {setup['vllm_version']} on another host: both are candidates for the idle terms' error, "
                   "not measured.")
    return out


def known(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(float(x))
