"""Small pure functions over tidy frames: the knee, the step-time fit, the cliff, the plateau, the roofline."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

GIB = 2**30


def knee(rate_sweep: pd.DataFrame, keep_up: float = 0.9) -> dict:
    """The knee of a rate sweep, operationally: the first finite offered rate at which the server
    completes less than `keep_up` of what is offered (completed/offered < keep_up). Also the last rate
    it kept up with, and the flood's completed rate (the ceiling)."""
    df = rate_sweep.sort_values("offered_rate_rps")
    finite = df[np.isfinite(df["offered_rate_rps"])]
    ratio = finite["completed_rps"] / finite["offered_rate_rps"]
    behind = finite[ratio < keep_up]
    kept = finite[ratio >= keep_up]
    flood = df[~np.isfinite(df["offered_rate_rps"])]
    return {
        "knee_rps": float(behind["offered_rate_rps"].iloc[0]) if len(behind) else math.nan,
        "last_kept_up_rps": float(kept["offered_rate_rps"].iloc[-1]) if len(kept) else math.nan,
        "ceiling_rps": float(flood["completed_rps"].iloc[0]) if len(flood) else float(df["completed_rps"].max()),
        "ceiling_tok_s": float(flood["output_tok_s"].iloc[0]) if len(flood) else float(df["output_tok_s"].max()),
        "keep_up": keep_up,
    }


@dataclass
class LinearFit:
    intercept: float
    slope: float
    intercept_ci: tuple[float, float]
    slope_ci: tuple[float, float]
    r2: float
    n: int

    @property
    def crossover(self) -> float:
        """The batch at which the per-sequence term equals the fixed term: intercept / slope."""
        return self.intercept / self.slope if self.slope > 0 else math.inf

    def predict(self, x):
        return self.intercept + self.slope * np.asarray(x, dtype=float)


def linear_fit(x, y, confidence: float = 0.95) -> LinearFit:
    """Ordinary least squares y = a + b x with t-based confidence intervals."""
    from scipy import stats

    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    if n < 2:
        raise ValueError("a line needs at least two points")
    X = np.column_stack([np.ones(n), x])
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ coef
    dof = n - 2
    ss_res = float(resid @ resid)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    if dof > 0:
        sigma2 = ss_res / dof
        cov = sigma2 * np.linalg.inv(X.T @ X)
        t = stats.t.ppf(0.5 + confidence / 2, dof)
        half = t * np.sqrt(np.diag(cov))
    else:
        half = np.array([math.nan, math.nan])
    a, b = float(coef[0]), float(coef[1])
    return LinearFit(a, b, (a - half[0], a + half[0]), (b - half[1], b + half[1]),
                     1 - ss_res / ss_tot if ss_tot > 0 else 1.0, n)


def cliff_ratio(mns_sweep: pd.DataFrame) -> float:
    """Output throughput at the largest cap over throughput at the smallest (one request at a time)."""
    df = mns_sweep.sort_values("max_num_seqs")
    return float(df["output_tok_s"].iloc[-1] / df["output_tok_s"].iloc[0])


def plateau_cap(mns_sweep: pd.DataFrame, gain_per_doubling: float = 0.05) -> float:
    """The smallest cap past which raising the cap gains less than `gain_per_doubling` of throughput per
    doubling of the cap (geometric mean gain between neighbouring caps); inf if it never flattens within
    the caps measured (still climbing at the top)."""
    df = mns_sweep.sort_values("max_num_seqs")
    caps, tok = df["max_num_seqs"].to_numpy(float), df["output_tok_s"].to_numpy(float)
    for i in range(len(caps) - 1):
        doublings = math.log2(caps[i + 1] / caps[i])
        if (tok[i + 1] / tok[i]) ** (1 / doublings) - 1 < gain_per_doubling:
            return float(caps[i])
    return math.inf


def gain_between(mns_sweep: pd.DataFrame, cap_a: float, cap_b: float) -> float:
    df = mns_sweep.set_index("max_num_seqs")
    return float(df.loc[cap_b, "output_tok_s"] / df.loc[cap_a, "output_tok_s"] - 1)


def per_sequence_ms(output_tok_s: float) -> float:
    """Step time over running batch: each step emits one token per running sequence, so the time each
    sequence costs per token is 1 / aggregate token rate, whatever the batch."""
    return 1000.0 / output_tok_s


def weight_stream_floor_ms(weights_gib: float, bandwidth_gb_s: float) -> float:
    """The least time one decode step can take: every weight byte read once at the measured bandwidth."""
    return weights_gib * GIB / (bandwidth_gb_s * 1e9) * 1000.0


def predict_throughput(fit: LinearFit, batch, output_len: int | None = None) -> np.ndarray:
    """Decode tokens per second at a running batch from a step-time fit (ms): batch / step time."""
    b = np.asarray(batch, float)
    return b / fit.predict(b) * 1000.0


def kv_bytes_per_token_per_layer(text_config: dict, dtype_bytes: int = 2) -> int:
    """K and V for one token in one full-attention layer: 2 x KV heads x head dim x bytes per value."""
    head_dim = text_config.get("head_dim") or text_config["hidden_size"] // text_config["num_attention_heads"]
    return 2 * text_config["num_key_value_heads"] * head_dim * dtype_bytes


def attention_layer_counts(text_config: dict) -> tuple[int, int]:
    """(layers that keep a growing KV cache, all layers) from a config's layer_types (dense: all)."""
    layers = text_config["num_hidden_layers"]
    types = text_config.get("layer_types")
    full = sum(1 for t in types if t == "full_attention") if types else layers
    return full, layers
