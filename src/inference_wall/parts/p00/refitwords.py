"""What the chapter says of the refit (parts/p00/refit.py): which resource each part of the step follows, and how far the
model carries when it is fitted on one measured GPU and asked about another, every number from the tables."""
from __future__ import annotations

import pandas as pd

from ...words import join_and, percent, sig

LOO_HEADERS = {"quantity": "quantity", "at": "at", "fit": "fitted on", "target": "predicted for",
               "predicted": "predicted", "measured": "measured", "error_pct": "error",
               "frozen_error_pct": "the frozen model's error", "carried_by": "largest parts of the prediction"}
RESOURCE_HEADERS = {"component": "part of the step", "ratio": "time on the h100 / on the h200",
                    "bandwidth_ratio": "copy bandwidth h200 / h100", "resource": "follows"}


def _pct(x) -> str:
    return percent(x, signed=True, whole=False, points=True)


def loo_shown(loo: pd.DataFrame) -> pd.DataFrame:
    """The leave-one-GPU-out table as a reader reads it: 3 significant figures with units, errors signed, a dash
    where the frozen model stated no such quantity."""
    out = pd.DataFrame({
        LOO_HEADERS["quantity"]: loo["model"] + " " + loo["quantity"], LOO_HEADERS["at"]: loo["at"],
        LOO_HEADERS["fit"]: loo["fit"], LOO_HEADERS["target"]: loo["target"],
        LOO_HEADERS["predicted"]: [f"{sig(p)} {u}" for p, u in zip(loo["predicted"], loo["unit"])],
        LOO_HEADERS["measured"]: [f"{sig(m)} {u}" for m, u in zip(loo["measured"], loo["unit"])],
        LOO_HEADERS["error_pct"]: [_pct(e) for e in loo["error_pct"]],
        LOO_HEADERS["frozen_error_pct"]: [_pct(e) for e in loo["frozen_error_pct"]],
        LOO_HEADERS["carried_by"]: loo["carried_by"].replace("", "–")})
    return out.reset_index(drop=True)


def resources_shown(cls: pd.DataFrame) -> pd.DataFrame:
    """Each part of the step, its measured time ratio between the two GPUs and the resource it is carried by."""
    if not len(cls):
        return pd.DataFrame(columns=list(RESOURCE_HEADERS.values()))
    fit, other = cls["fit"].iloc[0], cls["other"].iloc[0]
    heads = {**RESOURCE_HEADERS, "ratio": f"time on the {other} / on the {fit}",
             "bandwidth_ratio": f"copy bandwidth {fit} / {other}"}
    return pd.DataFrame({heads["component"]: cls["component"], heads["ratio"]: [sig(x) for x in cls["ratio"]],
                         heads["bandwidth_ratio"]: [sig(x) for x in cls["bandwidth_ratio"]],
                         heads["resource"]: cls["resource"].replace({"not bandwidth": "neither (not scaled)"})})


def _host_wait(fits: dict, fit: str, target: str) -> str:
    """Where the target's GPU waited on its host at a traced batch and the fit GPU's did not: that wait, in words
    (the one part of a step the fit GPU cannot show); '' where there is none."""
    from .refitmodel import HOST_BOUND

    if fit not in fits or target not in fits:
        return ""
    a, b = fits[fit].table, fits[target].table
    for batch in sorted(set(a.index) & set(b.index), reverse=True):
        share_t = b.loc[batch, "GPU idle"] / b.loc[batch, "step_ms"]
        share_f = a.loc[batch, "GPU idle"] / a.loc[batch, "step_ms"]
        if share_t > HOST_BOUND >= share_f:
            return (f"; at {batch:,} the {target}'s GPU idled {sig(b.loc[batch, 'GPU idle'])} ms of its "
                    f"{sig(b.loc[batch, 'step_ms'])} ms step (its untraced step less its traced kernels), where the "
                    f"{fit}'s idled {sig(a.loc[batch, 'GPU idle'])} ms: an idle the {fit} does not show cannot be "
                    "carried from it (a wait on the host is the candidate, not measured: the profiler, whose cost "
                    f"is host work, slows the {target}'s steps far more than the {fit}'s)")
    return ""


def sentences(loo: pd.DataFrame, cls: pd.DataFrame, fits: dict | None = None) -> list[str]:
    """3-4 sentences: what the two GPUs say each part follows, then per direction the range of the decode steps'
    errors beside the frozen model's, and what carries the largest miss (`fits`: rig -> refit.Fit, for the waits
    on the host each GPU's own traces show)."""
    if not len(loo):
        return []
    out = []
    if len(cls):
        bw = cls[cls["resource"] == "bandwidth"]["component"]
        at_one = [c.split(":")[0] for c in bw if c.endswith("at batch 1")]
        growth = [c.split(":")[0] for c in bw if c.endswith("growth past batch 1")]
        fit, other = cls["fit"].iloc[0], cls["other"].iloc[0]
        said = join_and(([f"the {join_and(at_one)} at batch 1"] if at_one else [])
                        + ([f"what the {join_and(growth)} add as the batch grows"] if growth else []))
        out.append(f"Measured on two GPUs of equal tensor throughput and different copy bandwidth ({fit} and {other}), "
                   f"only {said or 'nothing'} take longer on the {other} by about its lower bandwidth; every other "
                   "part of the step takes about as long on both, so the refit carries those parts unscaled and the "
                   "rest by the bandwidth ratio.")
    steps = loo[loo["quantity"] == "decode step"]
    for (fit, target), g in steps.groupby(["fit", "target"], sort=False):
        worst = g.loc[g["error_pct"].abs().idxmax()]
        frozen = g["frozen_error_pct"].dropna()
        was = (f", where the model frozen before the {target}'s runs missed by {_pct(frozen.min())} to "
               f"{_pct(frozen.max())}") if len(frozen) else ""
        out.append(f"Fitted on the {fit} and asked about the {target}, the refit's decode steps at "
                   f"{join_and([a.split()[-1] for a in g['at']])} miss by {_pct(g['error_pct'].min())} to "
                   f"{_pct(g['error_pct'].max())}{was}; the largest predicted part at the largest miss ({worst['at']}) "
                   f"is {worst.carried_by.split(';')[0].rsplit(' ', 1)[0]}{_host_wait(fits or {}, fit, target)}.")
    a10 = loo[loo["target"] == "a10g-published"]
    if len(a10):
        best = a10.groupby("fit")["error_pct"].apply(lambda e: e.abs().max()).idxmin()
        g = a10[a10["fit"] == best]
        out.append(f"Asked about the posts' A10G from the {best}: "
                   + join_and([f"{r.quantity} {_pct(r.error_pct)} (the frozen model: {_pct(r.frozen_error_pct)})"
                               for r in g.itertuples()]) + ".")
    return out


def error_matrix(loo: pd.DataFrame) -> pd.DataFrame:
    """One row per direction (fitted on -> predicted for), one column per quantity: the refit's signed error, and in
    brackets the frozen model's where it stated the same quantity; a dash where the direction has no such row."""
    if not len(loo):
        return pd.DataFrame()
    col = loo.apply(lambda r: r["quantity"].replace("decode step", "step") + (
        f" at {r['at'].split()[-1]}" if r["quantity"] == "decode step" else ""), axis=1)
    cell = [_pct(e) + (f" ({_pct(f)})" if f == f else "") for e, f in zip(loo["error_pct"], loo["frozen_error_pct"])]
    t = loo.assign(column=col, cell=cell, direction=loo["fit"] + " → " + loo["target"])
    m = t.pivot_table(index="direction", columns="column", values="cell", aggfunc="first", sort=False)
    order = [c for c in dict.fromkeys(col) if c in m.columns]
    m.columns.name = None
    return m[order].fillna("–").reset_index().rename(columns={"direction": "fitted on → predicted for"})
