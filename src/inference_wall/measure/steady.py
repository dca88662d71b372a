"""Windows of a pass read from the engine's counters polled during it (poller.poll_frame).

A flood of equal lengths admitted at once runs in waves: the running batch fills, holds while the cohort decodes,
and empties as it finishes together; a closed loop of B streams does the same with B. The client's whole-pass figure
averages ramp, plateau and drain. Three windows are read here from the counters, never from the client:

- `decode_window(frame, batch)`: every poll interval in which (nearly) `batch` requests run and no prompt token is
  counted: pure decode. Its step period is the time over the engine's step counter (`vllm:iteration_tokens_total`
  counts one observation per engine step), its tokens per step the generated tokens over the steps.
- `steady_window(frame)`: the longest run in which the running batch stays within a tolerance of its plateau (the
  median of the running batch over the polls where it is at least half the pass's largest): a flood's steady state,
  prefills of refills included.
- `flood_steady(frame, cap)`: the longest run in which the running batch is at the server's cap (within 5%) and the
  engine steps: a flood's steady state (parts 1, 3, 5 and 6; `point_steady(pt)` reads a point's poll artefact).

Each returns None when no run of at least `min_intervals` poll intervals qualifies (flood_steady: and
MIN_FLOOD_STEPS engine steps): a pass without such a window says so rather than reporting its whole-pass average as
steady.
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
    f = _clean(frame)
    ok = _decode_intervals(f, batch, share, allow_prefill)
    if len(ok) < min_intervals:
        return None
    run, prompt = f["running"].to_numpy(), f["prompt_tokens_total"].to_numpy()
    steps, gen, t = f["steps_total"].to_numpy(), f["generation_tokens_total"].to_numpy(), f["t_s"].to_numpy()
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


def _decode_intervals(f: pd.DataFrame, batch: int, share: float, allow_prefill: bool) -> list[int]:
    """decode_window's intervals of a clean frame: (nearly) `batch` running at both ends, the step counter moving, and
    (unless `allow_prefill`) no prompt token counted."""
    if len(f) < 2:
        return []
    need = max(1, math.floor(share * batch))
    run, prompt, steps = f["running"].to_numpy(), f["prompt_tokens_total"].to_numpy(), f["steps_total"].to_numpy()
    return [i for i in range(len(f) - 1)
            if run[i] >= need and run[i + 1] >= need and steps[i + 1] > steps[i]
            and (allow_prefill or prompt[i + 1] == prompt[i])]


def no_decode_window(frame: pd.DataFrame, batch: int, min_intervals: int = MIN_INTERVALS, share: float = 0.95
                     ) -> str | None:
    """Why a pass has no decode window, even with refills' prefills allowed (decode_window is None both ways), in
    words a page shows: how many poll intervals held the batch with the engine stepping, without and with prompt
    tokens, against the `min_intervals` a window needs, and how long the polls spanned. None where it has one.

    A closed loop of a few short requests decodes for a few poll intervals only, and on a loaded machine the
    engine's counters reach /metrics in bursts (the API server's process waits for a core): the intervals between
    bursts show no step, the one holding a request's end shows its batch gone, and fewer than `min_intervals` may
    qualify."""
    f = _clean(frame)
    pure, mixed = (len(_decode_intervals(f, batch, share, allow)) for allow in (False, True))
    if mixed >= min_intervals:
        return None
    if len(f) < 2:
        return f"{len(f)} poll(s) answered during the pass: no interval to read"
    need = max(1, math.floor(share * batch))
    span = float(f["t_s"].iloc[-1] - f["t_s"].iloc[0])
    return (f"{pure} of the pass's {len(f) - 1} poll intervals ({span:.1f} s) held {need} running with the engine "
            f"stepping and no prompt token, {mixed} with prompt tokens allowed; a window needs {min_intervals}")


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


# ---------------------------------------------------------------------------------------------
# A flood's steady window (parts 1, 3, 5 and 6): the batch held at the server's cap
# ---------------------------------------------------------------------------------------------

# A flood's steady window must hold at least this many engine steps (per engine) and MIN_INTERVALS poll
# intervals. A poll's time is the middle of its request, off by up to half the request at each end of a window;
# over 100 steps that error is a hundredth of it per step. 100 is also most of one wave of the parts' 128-token
# outputs, so a window that short of it holds less than one cohort's decode.
MIN_FLOOD_STEPS = 100
FLOOD_SHARE = 0.95  # "at the cap": the running batch within 5% of it
# The columns a part puts beside a flood's whole-pass figures (point_steady_row); steady_polled: whether the pass was
# polled at all (not polled: every figure NaN; polled, no window: NaN with steady_polled True)
STEADY_COLUMNS = ["steady_polled", "steady_output_tok_s", "steady_step_ms", "steady_running_mean", "steady_window_s",
                  "steady_steps", "steady_prompt_per_step"]  # the last: refills' prompt tokens computed per step


def flood_steady(frame: pd.DataFrame, cap: int, engines: int = 1, share: float = FLOOD_SHARE,
                 min_steps: float = MIN_FLOOD_STEPS, min_intervals: int = MIN_INTERVALS) -> Window | None:
    """The steady window of a flood pass, from its poll frame (poller.poll_frame): the longest run of poll intervals
    in which the running batch is at the cap (at least `share` of `cap` x `engines` at both ends of the interval:
    the engine cannot run more than its cap) and the engine steps. The window's `output_tok_s` is its generated
    tokens over its seconds, `step_ms` its seconds over its steps, `running_mean` the mean running batch of its polls
    (all engines together). Refills' prefills inside the run are counted (its `prompt` says how many tokens).

    `engines`: a server of several engines (data parallel) whose /metrics sums their counters (poll_frame sums a
    name over its label sets): the cap is per engine, and the window's `steps` are per engine (the summed counter
    over `engines`), so `step_ms` is one engine's step period. None where no run holds at least `min_steps` steps
    (per engine) over at least `min_intervals` intervals: a pass whose batch never reaches the cap, or that leaves
    it before that long (waves that empty between cohorts, a pass too short), has no steady window."""
    f = _clean(frame)
    if len(f) < 2 or cap <= 0 or engines <= 0:
        return None
    need = share * cap * engines
    run, steps = f["running"].to_numpy(), f["steps_total"].to_numpy()
    ok = [bool(run[i] >= need and run[i + 1] >= need and steps[i + 1] > steps[i]) for i in range(len(f) - 1)]
    w = _window(f, _longest_run(ok), min_intervals)
    if w is None:
        return None
    if engines != 1:
        w = Window(**{**asdict(w), "steps": w.steps / engines})
    return w if w.steps >= min_steps else None


def point_steady(pt, label: str = "bench", engines: int | None = None, share: float = FLOOD_SHARE) -> Window | None:
    """flood_steady of a point's measured pass `label`, from its poll artefact (`<label>-metrics.jsonl.xz`), at the
    point's max_num_seqs and engines (params["engines"], else 1). None where the point was not polled (no artefact)
    and where its pass has no steady window; a poll file its manifest lists but the disk lacks is an error
    (store.open_artefact), never a missing value."""
    from ..records.poller import artefact_name, poll_table
    from ..records.store import open_artefact

    try:
        path = open_artefact(pt.path, artefact_name(label))
    except FileNotFoundError:
        return None
    if engines is None:
        engines = int(pt.params.get("engines") or 1)
    return flood_steady(poll_table(path), int(pt.record.max_num_seqs), engines=engines, share=share)


def polled(pt, label: str = "bench") -> bool:
    """Whether a point's pass `label` was polled (its poll artefact is on disk, plain or gzipped)."""
    from ..records.poller import artefact_name

    name = artefact_name(label)
    return (pt.path / name).exists() or (pt.path / (name + ".gz")).exists()


def steady_row(w: Window | None, was_polled: bool) -> dict:
    """STEADY_COLUMNS of a window (NaN each where there is none)."""
    if w is None:
        return {"steady_polled": bool(was_polled), **dict.fromkeys(STEADY_COLUMNS[1:], math.nan)}
    return {"steady_polled": bool(was_polled), "steady_output_tok_s": w.output_tok_s, "steady_step_ms": w.step_ms,
            "steady_running_mean": w.running_mean, "steady_window_s": w.duration_s, "steady_steps": w.steps,
            "steady_prompt_per_step": w.prompt / w.steps if w.steps else math.nan}


def point_steady_row(pt, label: str = "bench", share: float = FLOOD_SHARE) -> dict:
    """STEADY_COLUMNS of a flood point (point_steady): NaN figures where it was not polled or has no window."""
    return steady_row(point_steady(pt, label, share=share), polled(pt, label))


def flood_window_words(floods: pd.DataFrame, name: str) -> str | None:
    """One sentence for a part's floods: per flood (a row with `output_tok_s`, STEADY_COLUMNS and the column `name`
    that says which flood it is), its steady window's rate, length, step and running batch beside the client's
    whole-pass rate; a flood that was polled without such a window, or never polled, says so. None for no rows."""
    from .claims import fmt_num

    def one(r) -> str:
        whole = f"{fmt_num(r.output_tok_s)} tok/s over the client's whole pass"
        if not r.steady_polled:
            return f"{getattr(r, name)}: not polled ({whole} is all there is)"
        if not math.isfinite(r.steady_output_tok_s):
            return (f"{getattr(r, name)}: polled, but its running batch never held at the cap for "
                    f"{MIN_FLOOD_STEPS} steps ({whole} is all there is)")
        return (f"{getattr(r, name)}: {fmt_num(r.steady_output_tok_s)} tok/s in its steady window "
                f"({fmt_num(r.steady_window_s)} s, {fmt_num(r.steady_steps)} steps of {fmt_num(r.steady_step_ms)} ms, "
                f"{fmt_num(r.steady_running_mean)} running) against {whole}")

    if not len(floods):
        return None
    return ("The engine's counters, polled during each flood, give its steady window (the running batch within "
            f"{100 * (1 - FLOOD_SHARE):.0f}% of the cap for at least {MIN_FLOOD_STEPS} steps): "
            + "; ".join(one(r) for r in floods.itertuples()) + ".")


PHASE_COLUMNS = ["phase_active_s", "phase_mixed_share", "phase_mixed_step_ms", "phase_mixed_prompt_per_step",
                 "phase_decode_step_ms", "phase_stalled_s", "phase_starved_share", "phase_active_tok_s"]


def flood_phases(frame: pd.DataFrame, cap: int, share: float = FLOOD_SHARE) -> dict:
    """How a polled flood pass spent its time, interval by interval (poll i to poll i+1), from the counters alone:

    - `phase_active_s`: intervals in which requests were in the engine (running or waiting at the interval's start)
      or the step counter moved; `phase_active_tok_s` the tokens generated over them (the pass without its idle
      ends, where the client was starting or collecting);
    - `phase_mixed_share`: the share of the active time in intervals whose steps computed prompt tokens (a refill's
      prefill rode in them), `phase_mixed_step_ms` their seconds over their steps and `phase_mixed_prompt_per_step`
      their prompt tokens over their steps; `phase_decode_step_ms` the same period over the intervals without prompt
      tokens. An interval of the poll (the part's poll_s) can hold both kinds of step: the split is by interval,
      so at short steps the mixed period is a blend of the two;
    - `phase_stalled_s`: active intervals in which the step counter did not move (a step longer than the interval,
      or counters the API server had not yet updated: the poll is answered by the same API server);
    - `phase_starved_share`: the share of the active time in which the engine had free slots (running under `share`
      x `cap`) and nothing waiting: the requests had not reached the engine.

    NaN each where the pass has no such intervals."""
    f = _clean(frame)
    nan = dict.fromkeys(PHASE_COLUMNS, math.nan)
    if len(f) < 2:
        return nan
    d = f[["t_s", "steps_total", "prompt_tokens_total", "generation_tokens_total"]].diff().iloc[1:]
    run, wait = f["running"].to_numpy()[:-1], f["waiting"].to_numpy()[:-1]
    busy = (run > 0) | (wait > 0) | (d["steps_total"].to_numpy() > 0)
    act = d[busy]
    if not len(act) or act["t_s"].sum() <= 0:
        return nan
    total = float(act["t_s"].sum())
    stepping = act[act["steps_total"] > 0]
    mixed = stepping[stepping["prompt_tokens_total"] > 0]
    decode = stepping[stepping["prompt_tokens_total"] <= 0]
    starved = (run < share * cap) & (wait <= 0) & busy

    def period(x):
        return 1000 * float(x["t_s"].sum()) / float(x["steps_total"].sum()) if len(x) and x["steps_total"].sum() > 0 \
            else math.nan

    return {"phase_active_s": total,
            "phase_mixed_share": float(mixed["t_s"].sum()) / total,
            "phase_mixed_step_ms": period(mixed),
            "phase_mixed_prompt_per_step": (float(mixed["prompt_tokens_total"].sum()) / float(mixed["steps_total"].sum())
                                            if len(mixed) else math.nan),
            "phase_decode_step_ms": period(decode),
            "phase_stalled_s": float(act[act["steps_total"] <= 0]["t_s"].sum()),
            "phase_starved_share": float(d[starved]["t_s"].sum()) / total,
            "phase_active_tok_s": float(act["generation_tokens_total"].sum()) / total}


def point_flood_row(pt, label: str = "bench", share: float = FLOOD_SHARE) -> dict:
    """STEADY_COLUMNS and PHASE_COLUMNS of a flood point from one read of its poll artefact (point_steady_row and
    flood_phases at its max_num_seqs); NaN figures where it was not polled."""
    from ..records.poller import artefact_name, poll_table
    from ..records.store import open_artefact

    try:
        frame = poll_table(open_artefact(pt.path, artefact_name(label)))
    except FileNotFoundError:
        return {**steady_row(None, False), **dict.fromkeys(PHASE_COLUMNS, math.nan)}
    cap = int(pt.record.max_num_seqs)
    window = flood_steady(frame, cap, engines=int(pt.params.get("engines") or 1), share=share)
    return {**steady_row(window, True), **flood_phases(frame, cap, share=share)}


def window_rates(frame: pd.DataFrame, t0: float, t1: float) -> dict:
    """The engine's counters (poller.poll_frame) over the polls inside [t0, t1] (epoch seconds): steps and generated
    tokens per second between the first and the last of them, the step's period, the mean running batch, and the
    output rate over each half of the polls (low and high: the window's own spread). NaN each where fewer than three
    polls fall inside."""
    f = frame[(frame["t"] >= t0) & (frame["t"] <= t1)].dropna(subset=["steps_total", "generation_tokens_total"])
    out = dict.fromkeys(["window_s", "polls", "steps_per_s", "step_ms", "tok_s", "tok_s_lo", "tok_s_hi",
                         "running_mean"], math.nan)
    out["polls"] = len(f)
    if len(f) < 3:
        return out

    def rate(a, b, col):
        dt = float(b["t"] - a["t"])
        return float(b[col] - a[col]) / dt if dt > 0 else math.nan

    first, mid, last = f.iloc[0], f.iloc[len(f) // 2], f.iloc[-1]
    halves = [rate(first, mid, "generation_tokens_total"), rate(mid, last, "generation_tokens_total")]
    steps_per_s = rate(first, last, "steps_total")
    out.update(window_s=float(last["t"] - first["t"]), steps_per_s=steps_per_s,
               step_ms=1000 / steps_per_s if steps_per_s and steps_per_s > 0 else math.nan,
               tok_s=rate(first, last, "generation_tokens_total"), tok_s_lo=min(halves), tok_s_hi=max(halves),
               running_mean=float(f["running"].mean()))
    return out
