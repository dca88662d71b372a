"""Small pure functions over tidy frames: the knee, the step-time fit, the cliff, the plateau, the roofline."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..words import round_sig  # noqa: F401 (a table cell's rounding: the words module's)

GIB = 2**30
KEEP_UP = 0.9  # the knee: the first offered rate at which less than this fraction is completed


def knee(rate_sweep: pd.DataFrame, keep_up: float = KEEP_UP) -> dict:
    """The knee of a rate sweep, operationally: the first finite offered rate at which the server
    completes less than `keep_up` of what is offered (completed/offered < keep_up). Also the last rate
    below it that the server kept up with (on a loaded machine a higher rate can keep up again after a lower one
    fell behind: the knee stays the first that fell behind, and the range below it stays a range), and the
    flood's completed rate (the ceiling)."""
    df = rate_sweep.sort_values("offered_rate_rps")
    finite = df[np.isfinite(df["offered_rate_rps"])]
    ratio = finite["completed_rps"] / finite["offered_rate_rps"]
    behind = finite[ratio < keep_up]
    kept = finite[ratio >= keep_up]
    if len(behind):
        kept = kept[kept["offered_rate_rps"] < behind["offered_rate_rps"].iloc[0]]
    flood = df[~np.isfinite(df["offered_rate_rps"])]
    return {
        "knee_rps": float(behind["offered_rate_rps"].iloc[0]) if len(behind) else math.nan,
        "last_kept_up_rps": float(kept["offered_rate_rps"].iloc[-1]) if len(kept) else math.nan,
        "ceiling_rps": float(flood["completed_rps"].iloc[0]) if len(flood) else float(df["completed_rps"].max()),
        "ceiling_tok_s": float(flood["output_tok_s"].iloc[0]) if len(flood) else float(df["output_tok_s"].max()),
        "keep_up": keep_up,
    }


@dataclass(frozen=True)
class Interval:
    """A value with the range its inputs allow (a confidence interval, a printed figure's rounding, or the
    spread of repeated measurements): low <= value <= high."""

    value: float
    low: float
    high: float

    def __post_init__(self):
        if not (self.low <= self.value <= self.high):
            raise ValueError(f"interval {self.low} .. {self.high} does not hold its value {self.value}")

    @classmethod
    def exact(cls, value: float) -> "Interval":
        return cls(float(value), float(value), float(value))

    @classmethod
    def printed(cls, value: float) -> "Interval":
        """A published figure: what its printed digits allow (half a unit of the last digit shown)."""
        value = float(value)
        text = f"{value:.10g}"
        decimals = len(text.split(".")[1]) if "." in text and "e" not in text else 0
        half = 0.5 * 10 ** -decimals
        return cls(value, value - half, value + half)

    @classmethod
    def spread(cls, values) -> "Interval":
        """Repeated measurements of one quantity: their mean, from the least to the largest."""
        v = [float(x) for x in values if x is not None and math.isfinite(float(x))]
        if not v:
            raise ValueError("no finite values")
        return cls(min(max(float(np.mean(v)), min(v)), max(v)), min(v), max(v))

    def widen(self, rel: float) -> "Interval":
        """The same value with its range widened by a relative spread either way (run-to-run)."""
        return Interval(self.value, min(self.low, self.value * (1 - rel)), max(self.high, self.value * (1 + rel)))

    def map(self, fn) -> "Interval":
        """A monotone function of the interval."""
        ends = sorted((fn(self.low), fn(self.high)))
        return Interval(fn(self.value), min(ends[0], fn(self.value)), max(ends[1], fn(self.value)))


def combine(fn, *intervals: Interval) -> Interval:
    """fn of several independent intervals: the value at the central values, the range from the extremes of
    fn over every corner of the intervals' box (exact for functions monotone in each argument)."""
    from itertools import product

    value = fn(*(i.value for i in intervals))
    corners = [fn(*c) for c in product(*((i.low, i.high) for i in intervals))]
    corners = [c for c in corners if not math.isnan(c)]
    return Interval(value, min([value, *corners]), max([value, *corners]))


@dataclass
class LinearFit:
    intercept: float
    slope: float
    intercept_ci: tuple[float, float]
    slope_ci: tuple[float, float]
    r2: float
    n: int
    cov: np.ndarray | None = None  # covariance of (intercept, slope); None for a published fit (no points)
    dof: int = 0

    @classmethod
    def published(cls, intercept: float, slope: float) -> "LinearFit":
        """A fit known only by its printed coefficients: the range is their rounding."""
        a, b = Interval.printed(intercept), Interval.printed(slope)
        return cls(a.value, b.value, (a.low, a.high), (b.low, b.high), math.nan, 0)

    def draws(self, n: int = 4000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Plausible (intercept, slope) pairs: from the fit's t distribution (points), or uniform over the
        printed coefficients' rounding (a published fit)."""
        rng = np.random.default_rng(seed)
        if self.cov is not None and self.dof > 0 and np.all(np.isfinite(self.cov)):
            z = rng.multivariate_normal([0.0, 0.0], self.cov, size=n)
            z *= np.sqrt(self.dof / rng.chisquare(self.dof, size=n))[:, None]
            return self.intercept + z[:, 0], self.slope + z[:, 1]
        return (rng.uniform(*self.intercept_ci, size=n), rng.uniform(*self.slope_ci, size=n))

    def interval(self, fn, confidence: float = 0.95) -> Interval:
        """fn(intercept, slope) with the range the fit's uncertainty allows (central `confidence`)."""
        a, b = self.draws()
        values = np.asarray(fn(a, b), float)
        values = values[np.isfinite(values)]
        value = float(fn(self.intercept, self.slope))
        if not len(values):
            return Interval.exact(value)
        lo, hi = np.quantile(values, [0.5 - confidence / 2, 0.5 + confidence / 2])
        return Interval(value, min(value, float(lo)), max(value, float(hi)))

    def step_ms(self, batch) -> Interval:
        return self.interval(lambda a, b: a + b * batch)

    def decode_tok_s(self, batch) -> Interval:
        """Pure decode throughput at a running batch: batch / step time."""
        return self.interval(lambda a, b: step_model_tok_s(a, b, batch))

    @property
    def crossover(self) -> float:
        """The batch at which the per-sequence term equals the fixed term: intercept / slope."""
        return self.intercept / self.slope if self.slope > 0 else math.inf

    def predict(self, x):
        return self.intercept + self.slope * np.asarray(x, dtype=float)


def linear_fit(x, y, confidence: float = 0.95) -> LinearFit:
    """Ordinary least squares y = a + b x with t-based confidence intervals (Student's t quantile from
    scipy.special.stdtrit, the function scipy.stats.t.ppf calls, without importing scipy.stats: half a second of
    every page's start)."""
    from scipy.special import stdtrit

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
    cov = None
    if dof > 0:
        sigma2 = ss_res / dof
        cov = sigma2 * np.linalg.inv(X.T @ X)
        t = float(stdtrit(dof, 0.5 + confidence / 2))
        half = t * np.sqrt(np.diag(cov))
    else:
        half = np.array([math.nan, math.nan])
    a, b = float(coef[0]), float(coef[1])
    return LinearFit(a, b, (a - half[0], a + half[0]), (b - half[1], b + half[1]),
                     1 - ss_res / ss_tot if ss_tot > 0 else 1.0, n, cov if dof > 0 else None, dof)


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


def step_model_tok_s(intercept_ms, slope_ms, batch):
    """The series' step model's decode rate, in tokens a second: a step of `batch` sequences takes intercept + slope x
    batch milliseconds and gives each sequence one token (numbers or arrays alike). The one place the book writes it."""
    return batch / (intercept_ms + slope_ms * batch) * 1000.0


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


def plateau_batch_of_fit(intercept: float, slope: float, gain_per_doubling: float = 0.05) -> float:
    """The batch past which the step model (step = a + b x batch, throughput = batch / step) gains less than
    `gain_per_doubling` per doubling of the batch: T(2B) / T(B) = 2 (a + bB) / (a + 2bB) < 1 + g, i.e.
    B > a/b x (1 - g) / (2g). For a 5% gain that is 9.5 x a/b: far past the crossover a/b, where the model
    gives half its asymptotic throughput (B / (a + bB) = 1 / (2b) at B = a/b) and still gains a third per
    doubling."""
    g = gain_per_doubling
    return intercept / slope * (1 - g) / (2 * g)


def gdn_state_bytes(text_config: dict, dtype_bytes: int = 2) -> int:
    """One Gated DeltaNet layer's per-request state: the recurrent state (value heads x key dim x value dim,
    in `mamba_ssm_dtype`) plus the convolution's last (kernel - 1) inputs of the q, k, v channels."""
    ssm_bytes = 4 if text_config.get("mamba_ssm_dtype", "float32") == "float32" else 2
    kh, vh = text_config["linear_num_key_heads"], text_config["linear_num_value_heads"]
    kd, vd = text_config["linear_key_head_dim"], text_config["linear_value_head_dim"]
    ssm = vh * kd * vd * ssm_bytes
    conv = (2 * kh * kd + vh * vd) * (text_config["linear_conv_kernel_dim"] - 1) * dtype_bytes
    return ssm + conv


def hybrid_block_size(text_config: dict, dtype_bytes: int = 2, multiple: int = 16) -> int:
    """The attention page of a hybrid model in vLLM: enough tokens that one attention layer's page (K and V
    per token) is at least one recurrent layer's state, rounded up to a multiple of 16 tokens. For
    Qwen3.5-4B: a 2.05 MiB state over 4 KiB per token -> 528 tokens, as vLLM logs it."""
    per_token = kv_bytes_per_token_per_layer(text_config, dtype_bytes)
    tokens = math.ceil(gdn_state_bytes(text_config, dtype_bytes) / per_token)
    return math.ceil(tokens / multiple) * multiple


def vision_tower_params(config: dict) -> int:
    """Parameters of a Qwen-VL style vision tower (patch embedding, position embedding, transformer blocks,
    patch merger) from its vision_config; 0 when the model has none. Text decode never reads them."""
    v = config.get("vision_config")
    if not v:
        return 0
    h, i, depth = v["hidden_size"], v["intermediate_size"], v["depth"]
    patch = v["in_channels"] * v.get("temporal_patch_size", 1) * v["patch_size"] ** 2 * h + h
    pos = v.get("num_position_embeddings", 0) * h
    block = (3 * h * h + 3 * h) + (h * h + h) + (2 * h * i + i + h) + 4 * h  # qkv, proj, mlp, two norms
    merged = h * v.get("spatial_merge_size", 1) ** 2
    merger = 2 * h + (merged * merged + merged) + (merged * v["out_hidden_size"] + v["out_hidden_size"])
    return patch + pos + depth * block + merger
