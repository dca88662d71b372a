"""Windows of a pass read from the engine's counters polled during it (poller.poll_frame).

A flood of equal lengths admitted at once runs in waves: the running batch fills, holds while the cohort decodes,
and empties as it finishes together; a closed loop of B streams does the same with B. The client's whole-pass figure
averages ramp, plateau and drain. Two windows are read here from the counters, never from the client:

- `decode_window(frame, batch)`: every poll interval in which (nearly) `batch` requests run and no prompt token is
  counted: pure decode. Its step period is the time over the engine's step counter (`vllm:iteration_tokens_total`
  counts one observation per engine step), its tokens per step the generated tokens over the steps.
- `steady_window(frame)`: the longest run in which the running batch stays within a tolerance of its plateau (the
  median of the running batch over the polls where it is at least half the pass's largest): a flood's steady state,
  prefills of refills included.

Each returns None when no run of at least `min_intervals` poll intervals qualifies: a pass without such a window
says so rather than reporting its whole-pass average as steady.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import pandas as pd

MIN_INTERVALS = 4  # poll intervals a window must span (at 0.1 s: 0.4 s)


@dataclass(frozen=True)
class Window:
    t0_s: float  # seconds since the pass's first poll (where the window starts)
    t1_s: float  # t0_s plus the window's duration (decode_window: the sum of its intervals, which need not touch)
    steps: float  # engine steps counted in the window
    generated: float  # tokens generated in it
    prompt: float  # prompt tokens computed in it
    running_min: float
    running_max: float
    running_mean: float
    halves_ms: tuple = ()  # the step over the first and over the second half of the window's intervals (its spread)

    @property
    def duration_s(self) -> float:
        return self.t1_s - self.t0_s

    @property
    def step_ms(self) -> float:
        return 1000 * self.duration_s / self.steps if self.steps > 0 else math.nan

    @property
    def tokens_per_step(self) -> float:
        return self.generated / self.steps if self.steps > 0 else math.nan

    @property
    def output_tok_s(self) -> float:
        return self.generated / self.duration_s if self.duration_s > 0 else math.nan

    def to_dict(self) -> dict:
        return {**asdict(self), "duration_s": self.duration_s, "step_ms": self.step_ms,
                "tokens_per_step": self.tokens_per_step, "output_tok_s": self.output_tok_s}


def _longest_run(ok: list[bool]) -> tuple[int, int] | None:
    """(first, last) indices of the longest run of True in `ok` (interval i joins poll i to poll i+1)."""
    best, start = None, None
    for i, flag in enumerate([*ok, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if best is None or i - start > best[1] - best[0] + 1:
                best = (start, i - 1)
            start = None
    return best


def _window(frame: pd.DataFrame, run: tuple[int, int] | None, min_intervals: int) -> Window | None:
    if run is None or run[1] - run[0] + 1 < min_intervals:
        return None
    a, b = frame.iloc[run[0]], frame.iloc[run[1] + 1]
    inside = frame.iloc[run[0]:run[1] + 2]["running"]
    return Window(t0_s=float(a["t_s"]), t1_s=float(b["t_s"]), steps=float(b["steps_total"] - a["steps_total"]),
                  generated=float(b["generation_tokens_total"] - a["generation_tokens_total"]),
                  prompt=float(b["prompt_tokens_total"] - a["prompt_tokens_total"]),
                  running_min=float(inside.min()), running_max=float(inside.max()), running_mean=float(inside.mean()))


def _clean(frame: pd.DataFrame) -> pd.DataFrame:
    need = ["t_s", "running", "prompt_tokens_total", "generation_tokens_total", "steps_total"]
    return frame.dropna(subset=need).reset_index(drop=True) if len(frame) else frame


def decode_window(frame: pd.DataFrame, batch: int, min_intervals: int = MIN_INTERVALS, share: float = 0.95,
                  allow_prefill: bool = False) -> Window | None:
    """Every poll interval in which at least `share` of `batch` requests run at both ends and no prompt token is
    counted (pure decode), taken together: the steps and seconds of all of them (a closed loop's cohorts split and
    refill, so pure decode comes in several runs; one interval's single step is too coarse to time alone). A closed
    loop of B streams need not hold all B at once (the client's readiness request, or a split cohort, can leave one
    out): the window's tokens per step say how many ran. `allow_prefill`: intervals with prompt tokens count too
    (steps that carry a refill's prefill): the window's `prompt` says how many. None when fewer than
    `min_intervals` intervals qualify."""
    need = max(1, math.floor(share * batch))
    f = _clean(frame)
    if len(f) < 2:
        return None
    run, prompt = f["running"].to_numpy(), f["prompt_tokens_total"].to_numpy()
    steps, gen, t = f["steps_total"].to_numpy(), f["generation_tokens_total"].to_numpy(), f["t_s"].to_numpy()
    ok = [i for i in range(len(f) - 1)
          if run[i] >= need and run[i + 1] >= need and steps[i + 1] > steps[i]
          and (allow_prefill or prompt[i + 1] == prompt[i])]
    if len(ok) < min_intervals:
        return None
    inside = pd.Series([run[i] for i in ok] + [run[ok[-1] + 1]])
    dur = float(sum(t[i + 1] - t[i] for i in ok))
    half = len(ok) // 2
    halves = tuple(1000 * sum(t[i + 1] - t[i] for i in part) / sum(steps[i + 1] - steps[i] for i in part)
                   for part in (ok[:half], ok[half:]) if part) if half else ()
    return Window(t0_s=float(t[ok[0]]), t1_s=float(t[ok[0]]) + dur, steps=float(sum(steps[i + 1] - steps[i] for i in ok)),
                  generated=float(sum(gen[i + 1] - gen[i] for i in ok)),
                  prompt=float(sum(prompt[i + 1] - prompt[i] for i in ok)),
                  running_min=float(inside.min()), running_max=float(inside.max()), running_mean=float(inside.mean()),
                  halves_ms=halves)


def steady_window(frame: pd.DataFrame, tolerance: float = 0.05, min_intervals: int = MIN_INTERVALS) -> Window | None:
    """The longest run whose running batch stays within `tolerance` of the plateau (see the module's doc)."""
    f = _clean(frame)
    if len(f) < 2 or not (f["running"] > 0).any():
        return None
    top = f["running"].max()
    plateau = f.loc[f["running"] >= top / 2, "running"].median()
    near = (f["running"] - plateau).abs() <= max(1.0, tolerance * plateau)
    steps = f["steps_total"].to_numpy()
    ok = [bool(near.iloc[i] and near.iloc[i + 1] and steps[i + 1] > steps[i]) for i in range(len(f) - 1)]
    return _window(f, _longest_run(ok), min_intervals)
