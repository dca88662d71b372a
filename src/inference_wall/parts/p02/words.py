"""Part 2's sentences, pure over its views and tables: each rig's findings, the findings box, and the texts
beside the knee, clock and chunk-step tables."""
from __future__ import annotations

import pandas as pd

from ...measure.claims import fmt_num
from ...words import join_and, per_rig
from ..injections import FLOOR_IS_CHUNKED_PREFILL, config_label, floor_is_chunked_prefill
from ..protocol import REFERENCE
from .plan import A10G_BUDGET, OFF
from .view import comparable_length


def knee_findings(knees: pd.DataFrame) -> str:
    """What the knee table says, per rig: each budget's completed share at part 1's knee rate, whether any budget
    kept up, and, where a knee point ran part 1's own budget (the same configuration in a new server session), how
    far the two sessions differ: a budget whose share differs from part 1's by less than that is within the spread
    between sessions, not an effect of the budget."""
    lines = []
    for rig, k in knees.groupby("rig", sort=True):
        rate = k["offered_rate_rps"].iloc[0]
        said = "; ".join(f"budget {int(r.budget):,}" + (" (part 1's server)" if r.server != "knee point" else "")
                         + f" completed {r.completed_share:.0%}" for r in k.dropna(subset=["budget"]).itertuples())
        moved = [int(r.budget) for r in k.itertuples() if r.server == "knee point" and r.kept_up]
        line = f"On {rig}, offered {rate:.1f} req/s: {said}. " + (
            f"Budget{'s' if len(moved) > 1 else ''} {', '.join(f'{b:,}' for b in moved)} kept up: the budget moved the "
            "knee." if moved else "No budget kept up: the budget did not move the knee on this rig.")
        part1 = k[k["server"] != "knee point"].dropna(subset=["budget"])
        if len(part1):
            default = part1.iloc[0]
            again = k[(k["server"] == "knee point") & (k["budget"] == default["budget"])]
            if len(again):
                gap = abs(float(again["completed_share"].iloc[0]) - float(default["completed_share"]))
                others = k[(k["server"] == "knee point") & (k["budget"] != default["budget"])]
                beyond = [int(r.budget) for r in others.itertuples()
                          if abs(r.completed_share - default["completed_share"]) > gap]
                line += (f" The knee point at budget {int(default['budget']):,} repeats part 1's configuration in a new "
                         f"server session: it completed {float(again['completed_share'].iloc[0]):.0%} against part 1's "
                         f"{float(default['completed_share']):.0%}, {100 * gap:.1f} points apart (one pair of sessions: one sample of "
                         "their spread). " + (
                             f"Budget{'s' if len(beyond) > 1 else ''} {', '.join(f'{b:,}' for b in beyond)} differ"
                             f"{'' if len(beyond) > 1 else 's'} from part 1's share by more than that."
                             if beyond else "No other budget differs from part 1's share by more than that."))
        lines.append(line)
    return " ".join(lines)


def no_data_note() -> str:
    return ("**Not measured yet.** No rig shown on this page has run part 2's freeze points. `make reproduce PART=2 RIG=<rig>` runs it "
            "(on the H200: see `gpu/README.md`); the CPU test rig's run is on the [method page](../book/method.md), "
            "where it only shows that the path works.")


def unrun_note(freezes: pd.DataFrame, budgets: dict[str, list[int]]) -> str | None:
    """The configurations of each rig's plan (`budgets`: rig -> its plan's budgets, 0 for chunking off) with no freeze
    point, so that a panel without a configuration says why; None where every rig ran all of its plan's."""
    left = [(rig, [config_label(b) for b in plan if not ((freezes["rig"] == rig) & (freezes["budget"] == b)).any()])
            for rig, plan in budgets.items()]
    said = [(rig, f"on {rig}: {join_and(configs)}") for rig, configs in left if configs]
    if not said:
        return None
    rig = said[0][0] if len(said) == 1 else "<rig>"
    return (f"*Not run yet {'; '.join(text for _, text in said)}. `make reproduce PART=2 RIG={rig}` runs what is "
            "left and keeps the points already complete.*")


def untimed_steps_note(rigs: list[str]) -> str:
    """Why the step chart is missing for `rigs` (servers that scheduled asynchronously), naming every one."""
    its = "its" if len(rigs) == 1 else "their"
    return (f"*No step chart for {join_and(rigs)}: {its} servers scheduled asynchronously, and there vLLM's iteration "
            "log times the engine's wait for a step's result, not the step, so no step here has a time to draw. The "
            "log still counts the steps that carried the prompt (on the evidence page).*")


def findings(freezes: pd.DataFrame, rig: str) -> str:
    """One paragraph per rig: the freeze off and at each budget for its longest prompt, against the prediction."""
    f = freezes[freezes["rig"] == rig]
    if not len(f):
        return f"**{rig}:** no complete point."
    longest = comparable_length(f, rig)
    if longest is None:
        return f"**{rig}:** no complete point with chunking off."
    at = f[f["prompt_len"] == longest].sort_values("budget", key=lambda b: b.where(b > 0, 10**9), ascending=False)
    parts_ = []
    for r in at.itertuples():
        parts_.append(f"{r.config}: {fmt_num(r.freeze_ms)} ms (range {fmt_num(r.freeze_min_ms)} to "
                      f"{fmt_num(r.freeze_max_ms)} over {r.repeats} repeat{'s' if r.repeats != 1 else ''}; predicted {fmt_num(r.predicted_low_ms)} to "
                      f"{fmt_num(r.predicted_high_ms)} ms), the long prompt's TTFT {fmt_num(r.ttft_ms)} ms")
    off = at[at["budget"] == OFF]
    solo = (f"; alone on the idle server its time to first token was {fmt_num(off['solo_ttft_ms'].iloc[0])} ms"
            if len(off) else "")
    longer = sorted(set(f[f["prompt_len"] > longest]["prompt_len"]))
    more = (f" Longer prompts ({', '.join(f'{int(n):,}' for n in longer)} tokens) were measured with chunking off only "
            "(the table above)." if longer else "")
    both = " (the longest measured both with chunking off and on)" if (at["budget"] != OFF).any() else ""
    return (f"**{rig}**, the {longest:,}-token prompt{both}{solo}. "
            "Freeze of the streams decoding beside it: " + "; ".join(parts_) + "." + more)


def trade_words(freezes: pd.DataFrame, rig: str) -> str:
    """What chunking did to the freeze and to the long prompt's own TTFT on one rig, per prompt length, against
    chunking off at the same length (medians over the repeats), from the budgets below the prompt: where every
    budget stalled the streams less, where some did not, and how the TTFT moved. '' without both sides."""
    f = freezes[freezes["rig"] == rig]
    off = f[f["budget"] == OFF].set_index("prompt_len")
    rows = f[(f["budget"] != OFF) & (f["budget"] < f["prompt_len"]) & f["prompt_len"].isin(off.index)]
    if not len(rows):
        return ""
    less, mixed, ttft = [], [], []
    for n, g in rows.groupby("prompt_len", sort=True):
        base = off.loc[n]
        longer = g[g["freeze_ms"] >= base["freeze_ms"]].sort_values("budget")
        ttft += list(g["ttft_ms"] / base["ttft_ms"])
        if not len(longer):
            less.append(f"{int(n):,}")
            continue
        shorter = g[g["freeze_ms"] < base["freeze_ms"]].sort_values("budget")
        said = ", ".join(f"budget {int(r.budget):,} froze them {fmt_num(r.freeze_ms)} ms" for r in longer.itertuples())
        also = (" (" + ", ".join(f"budget {int(r.budget):,}: {fmt_num(r.freeze_ms)} ms" for r in shorter.itertuples())
                + ")") if len(shorter) else ""
        mixed.append(f"At {int(n):,} tokens not every budget did: {said} against {fmt_num(base['freeze_ms'])} ms with "
                     f"chunking off{also}.")
    text = f"On {rig}"
    if less:
        names = less[0] if len(less) == 1 else ", ".join(less[:-1]) + " and " + less[-1]
        text += f" every budget below the prompt froze the streams less than chunking off at {names} tokens."
    else:
        text += ":"
    if mixed:
        text += " " + " ".join(mixed)
    lo, hi = min(ttft), max(ttft)
    verb = ("waited longer for its first token at every budget" if lo > 1 else
            "waited less for its first token at every budget" if hi < 1 else "waited longer at some budgets, less at others")
    return (text + f" The long prompt itself {verb} than with chunking off ({fmt_num(lo)}x to {fmt_num(hi)}x its "
            "TTFT there).")


def clock_note(clocks: pd.DataFrame) -> str:
    """Which configurations ran into the power cap, per rig ('' when none did or nothing was sampled)."""
    lines = []
    for rig, c in clocks.groupby("rig", sort=True):
        unsampled = ", ".join(c[c["sampled"] == 0]["config"])
        missing = (f" Not sampled: {unsampled} (points from before each point kept its GPU samples)."
                   if unsampled else "")
        c = c[c["sampled"] > 0]
        capped = c[c["sw_power_cap_pct"] > 0]
        if not len(capped):
            lines.append(f"On {rig} no sampled freeze point met the power cap.{missing}")
            continue
        said = "; ".join(f"{r.config}: {r.sw_power_cap_pct:.0f}% of busy samples, down to {r.sm_mhz_min:,.0f} MHz"
                         for r in capped.itertuples())
        clear = ", ".join(c[c["sw_power_cap_pct"] == 0]["config"])
        lines.append(f"On {rig} the GPU met its software power cap during {said}" +
                     (f"; never during {clear}" if clear else "") +
                     ". Those freezes were measured at the lower clocks, which lengthen a step." + missing)
    return " ".join(lines)


def chunk_step_note(steps: pd.DataFrame, injections: pd.DataFrame) -> str:
    """Per rig, at its comparable length: the mean chunk step per budget against its share of the unchunked prefill;
    at the smallest budget, where the point also timed the prompt alone (its solo chunk step), whether the floor is
    chunked prefill's own (the solo step far above its share) or the decodes' riding along (the step beside them less
    the solo one, against one decode step)."""
    lines = []
    for rig, t in steps.groupby("rig", sort=True):
        n = comparable_length(injections, rig)
        at = t[t["prompt_len"] == n].sort_values("budget")
        if not len(at):
            continue
        said = "; ".join(f"budget {int(r.budget):,}: {r.steps:.0f} steps of {fmt_num(r.mean_step_ms)} ms against a share "
                         f"of {fmt_num(r.share_ms)} ms" for r in at.itertuples())
        small = at.iloc[0]
        base = float(injections[injections["rig"] == rig]["baseline_itl_ms"].median())
        line = (f"On {rig}, the {n:,}-token prompt: {said}. At budget {int(small.budget):,} a step that carried a "
                f"chunk cost {fmt_num(small.extra_ms)} ms more than its share of the prefill")
        solo = small.get("solo_chunk_step_ms", float("nan"))
        known = pd.notna(solo) and solo > 0
        if known:
            riding = float(small.riding_ms)
            line += (f". Alone on the idle server at the same budget a chunk step took {fmt_num(solo)} ms (the "
                     f"prompt's solo TTFT over the {small.solo_steps:.0f} steps that carried it), "
                     f"{fmt_num(solo / small.solo_share_ms)}x the unchunked prefill over those steps "
                     f"({fmt_num(small.solo_share_ms)} ms)")
            if floor_is_chunked_prefill(solo, small.solo_share_ms, base):
                line += f": {FLOOR_IS_CHUNKED_PREFILL}, not to the decodes beside it"
            line += (f"; beside the background's decodes the step took {fmt_num(abs(riding))} ms "
                     f"{'more' if riding >= 0 else 'less'} than alone ({small.steps:.0f} steps there), against one "
                     f"decode step of {fmt_num(base)} ms (the background's ordinary gap between tokens)")
        else:
            line += f", {small.extra_ms / base:.1f}x the background's ordinary gap between tokens ({fmt_num(base)} ms)"
        said = ("most of such a step is not its share of the prompt, so a smaller budget no longer shrinks the freeze "
                "much, and the long prompt's TTFT grows with the number of steps." if small.extra_ms > small.share_ms
                else "most of such a step is its share of the prompt, so the freeze shrinks with the budget.")
        line += (". " + said[0].upper() + said[1:]) if known else (": " + said)
        if known:
            line += (" The profiler windows here hold the background's decodes beside every chunk, so they do not say "
                     "what part of the solo chunk step the recurrent-state (Gated DeltaNet) prefill kernels take: that "
                     "needs a trace of a chunk alone, which the chapter Inside a step gives where it ran on this rig.")
        lines.append(line)
    return " ".join(lines)


def key_findings(freezes: pd.DataFrame, views: dict[str, dict], facts: dict) -> list[str]:
    """The findings box of part 2: 3-5 sentences from the shown rigs' freezes and views, one a finding with every
    rig that has it (words.per_rig)."""
    frozen, shares, budgets, shrinks = [], [], [], []
    for rig in sorted(set(freezes["rig"])) if len(freezes) else []:
        f = freezes[freezes["rig"] == rig]
        off = f[f["budget"] == OFF].set_index("prompt_len").sort_index()
        if not len(off):
            continue
        lo, hi = off.index[0], off.index[-1]
        frozen.append((rig, f"{fmt_num(off.loc[lo, 'freeze_ms'])} ms at {lo:,} tokens and "
                            f"{fmt_num(off.loc[hi, 'freeze_ms'])} ms at {hi:,}"))
        v = views.get(rig, {})
        ratios = [(n, s["freeze"].value / s["solo"].value) for n, s in sorted((v.get("off_by_len") or {}).items())]
        if ratios:
            shares.append((rig, ", ".join(f"{r:.2f} at {n:,}" for n, r in ratios) + " tokens"))
        b = v.get("budget")
        at = f[(f["prompt_len"] == hi) & (f["budget"] == b)] if b is not None else f.iloc[0:0]
        if len(at):
            r = at.iloc[0]
            verb = "cut" if r.freeze_ms < off.loc[hi, "freeze_ms"] else "took"
            budgets.append((rig, f"at {hi:,} tokens a budget of {b:,} {verb} the freeze from "
                                 f"{fmt_num(off.loc[hi, 'freeze_ms'])} to {fmt_num(r.freeze_ms)} ms, and the long "
                                 f"prompt's own TTFT went from {fmt_num(off.loc[hi, 'ttft_ms'])} to "
                                 f"{fmt_num(r.ttft_ms)} ms"))
        by_len = v.get("shrink_by_len") or {}
        if by_len:
            (n0, s0), (n1, s1) = min(by_len.items()), max(by_len.items())
            shrinks.append((rig, f"{fmt_num(s0.value)}x at {n0:,} tokens to {fmt_num(s1.value)}x at {n1:,}"))
    out = []
    if frozen:
        out.append("With chunking off, a long prompt froze the streams decoding beside it (medians of the repeats): "
                   + per_rig(frozen, name_one=True) + ".")
    if shares:
        out.append("The freeze against the prompt's TTFT alone on the idle server, per length (the claims judge each "
                   "length): " + per_rig(shares, name_one=True) + ".")
    if budgets:
        out.append("A chunk budget at the longest prompt: " + per_rig(budgets, name_one=True) + ".")
    if shrinks and facts.get("freeze_shrink_chunked"):
        out.append(f"The post's {facts['freeze_shrink_chunked']:g}x shrink at budget {A10G_BUDGET:,} cannot be placed: "
                   "the post gives no prompt length, and the shrink measured at that budget depends on it ("
                   + per_rig(shrinks, name_one=True) + ").")
    return out[:5]


def rig_findings(view: dict) -> list[str]:
    """The protocol's findings: the rig's paragraph (findings)."""
    return [findings(view["freezes"], view["rig"])]


def page_box(views: dict[str, dict], tables: dict) -> list[str]:
    """The protocol's findings box: key_findings over the shown rigs' freezes and views, with the post's figures."""
    return key_findings(tables["freezes"], views, tables[REFERENCE])
