"""The series at a glance (book/glance.md): every claim of every part against every rig its page shows, and one
chart of throughput per GPU against tokens per second per user over part 3's caps, part 5's formats and part 6's
layouts.

Nothing here judges anything of its own: each part's rows come from the same functions its notebook calls
(page_tables, rig_view, its claims and claims.evaluate; part 4's point claims), and the chart's points from the
part's own pass tables. What this module adds is the arithmetic of the chart (a server's tokens a second over the
GPUs it ran on, one stream's tokens a second, the cost per million tokens at the listed price of the rig's GPU,
the energy per token where nvidia-smi sampled the GPU's power) and the page's HTML.
"""
from __future__ import annotations

import html
import math
import re

import pandas as pd

from ..measure.claims import DIFFERS, HOLDS, INCONCLUSIVE, NOT_MEASURED, evaluate, known_number, missing
from .. import words
from ..schema import PUBLISHED_RIG

# The words a cell of the matrix reads: claims' four verdicts (NOT_MEASURED says "on this rig"; a column is the rig)
# and part 2's own for a published figure whose prompt length the post never gives (p02.NOT_COMPARABLE).
NOT_COMPARABLE = "not comparable"
WORDS = {HOLDS: "holds", DIFFERS: "differs", INCONCLUSIVE: "inconclusive", NOT_MEASURED: "not measured",
         NOT_COMPARABLE: "not comparable"}
VERDICT_WORDS = tuple(WORDS.values())
PART_TITLES = {0: "Inside a step", 1: "Hit the wall", 2: "The prefill freeze", 3: "The batching cliff",
               4: "KV starvation", 5: "Four bits", 6: "Past one GPU"}


def part_label(part: int) -> str:
    """A part's name in the matrix: "Part 1: Hit the wall"; the chapter before the series by its title alone."""
    return f"Part {part}: {PART_TITLES[part]}" if part else PART_TITLES[part]


def part_page(part: int) -> str:
    """The built page of a part, relative to book/glance.html."""
    from ..schema import PARTS

    return f"../notebooks/{PARTS[part]}.html"


def word(verdict: str) -> str:
    """A claims verdict as the matrix's word; anything else is an error (a new verdict must be given a word)."""
    if verdict not in WORDS:
        raise ValueError(f"unknown verdict {verdict!r}; known: {', '.join(WORDS)}")
    return WORDS[verdict]


# ---------------------------------------------------------------------------------------------
# Each part's claims, as its notebook evaluates them
# ---------------------------------------------------------------------------------------------
def _rows(part: int, frame: pd.DataFrame) -> pd.DataFrame:
    """claims.evaluate's rows as (part, claim, post, rig, verdict, detail)."""
    if not len(frame):
        return pd.DataFrame(columns=["part", "claim", "post", "rig", "verdict", "detail"])
    return pd.DataFrame({"part": part, "claim": frame["claim"].astype(str), "post": frame["post"].astype(str),
                         "rig": frame["rig"].astype(str), "verdict": [word(v) for v in frame["verdict"]],
                         "detail": ""})


def part0_rows(data_dir=None) -> tuple[pd.DataFrame, list[str]]:
    """Inside a step's claims on every measured rig its page shows (the published series ran no such chapter)."""
    from .. import parts
    from ..parts import p00

    shown = [r for r in parts.page_rigs(0, data_dir) if r != PUBLISHED_RIG]
    tables = p00.page_tables(data_dir, shown)
    views = {rig: p00.rig_view(rig, tables, parts.parameters(0, rig, data_dir), data_dir) for rig in shown}
    return _rows(0, evaluate(p00.CLAIMS, views)), [c.id for c in p00.CLAIMS]


def part1_rows(data_dir=None) -> pd.DataFrame:
    from .. import parts
    from ..parts import p01

    shown = parts.page_rigs(1, data_dir)
    tables = p01.page_tables(data_dir, shown)
    views = {rig: p01.rig_view(rig, data_dir, tables) for rig in shown}
    return _rows(1, evaluate(p01.CLAIMS, views, p01.claim_facts(data_dir)))


def part2_rows(data_dir=None) -> pd.DataFrame:
    from .. import parts
    from ..parts import p02

    shown = parts.page_rigs(2, data_dir)
    measured = [r for r in shown if r != PUBLISHED_RIG]
    injections = p02.injection_table(data_dir, measured)
    freezes = p02.freeze_table(injections)
    frozen = [r for r in measured if (freezes["rig"] == r).any()]
    facts = p02.reference_view(data_dir)
    views = {rig: p02.with_reference(p02.rig_view(injections, rig), facts) for rig in shown
             if rig == PUBLISHED_RIG or rig in frozen}
    return _rows(2, evaluate(p02.page_claims(views), views, facts))


def part3_rows(data_dir=None) -> pd.DataFrame:
    from .. import parts
    from ..parts import p01, p03

    # a rig's part 3 is judged against the part 1 of its family: itself, or the rig it repeats (p01's _family,
    # the package's one reading of a profile's repeat_of; part 3's notebook reads the profile the same way)
    shown = parts.page_rigs(3, data_dir)
    table = p03.sweep_table(data_dir, shown)
    facts = p03.reference_view(data_dir)
    family = {r: p01._family(r, data_dir) for r in shown}
    rigs1 = sorted(set(family.values()))
    tables1 = p01.page_tables(data_dir, rigs1)
    views1 = {r: p01.rig_view(r, data_dir, tables1) for r in rigs1}
    spread = p03.run_to_run(table)
    views = {rig: p03.rig_view(table, rig, views1[family[rig]], facts, spread) for rig in shown}
    return _rows(3, evaluate(p03.CLAIMS, views, facts))


def point_verdict(verdicts: list[str]) -> tuple[str, str]:
    """One verdict for a claim that part 4 judges on every point it applies to, and the count behind it: differs
    where any point differs, else inconclusive where any is, else holds where every point holds; not measured
    where no point was measured."""
    judged = [v for v in verdicts if v != NOT_MEASURED]
    if not judged:
        return word(NOT_MEASURED), ""
    n = len(judged)
    for verdict in (DIFFERS, INCONCLUSIVE):
        k = judged.count(verdict)
        if k:
            return word(verdict), f"{k} of {n} points"
    return word(HOLDS), f"{n} of {n} points"


def part4_rows(data_dir=None) -> pd.DataFrame:
    from ..parts import p04

    shown = p04.page_rigs(data_dir)
    table = p04.point_table(data_dir, shown)
    views = {rig: p04.rig_view(table, rig, p04.step_fit(rig, data_dir)) for rig in shown}
    return part4_summary(p04.evaluate_claims(views), [c.id for c in p04.CLAIMS], shown)


def part4_summary(claims: pd.DataFrame, ids: list[str], rigs: list[str]) -> pd.DataFrame:
    """Part 4's point verdicts (p04.evaluate_claims) as one row per (claim, rig) (point_verdict)."""
    rows = []
    for cid in ids:
        for rig in rigs:
            g = claims[(claims["claim"] == cid) & (claims["rig"] == rig)]
            verdict, detail = point_verdict(list(g["verdict"]))
            rows.append({"part": 4, "claim": cid, "post": "", "rig": rig, "verdict": verdict, "detail": detail})
    return pd.DataFrame(rows, columns=["part", "claim", "post", "rig", "verdict", "detail"])


def part5_rows(data_dir=None) -> tuple[pd.DataFrame, list[str]]:
    from .. import parts
    from ..parts import p05

    shown = [r for r in parts.page_rigs(5, data_dir) if r != PUBLISHED_RIG]
    tables = p05.page_tables(data_dir, shown)
    views = {rig: p05.rig_view(rig, tables, parts.parameters(5, rig, data_dir), data_dir) for rig in shown}
    return _rows(5, evaluate(p05.CLAIMS, views)), [c.id for c in p05.CLAIMS]


def part6_rows(data_dir=None) -> tuple[pd.DataFrame, list[str]]:
    from .. import parts
    from ..parts import p06

    shown = [r for r in parts.page_rigs(6, data_dir) if r != PUBLISHED_RIG]
    tables = p06.page_tables(data_dir, shown)
    views = {rig: p06.rig_view(rig, tables, parts.parameters(6, rig, data_dir), data_dir) for rig in shown}
    return _rows(6, evaluate(p06.CLAIMS, views)), [c.id for c in p06.CLAIMS]


def claim_rows(data_dir=None) -> tuple[pd.DataFrame, dict[int, list[str]]]:
    """Every part's (part, claim, post, rig, verdict, detail) rows, and each part's claim ids in its own order
    (a part whose page shows no rig still lists its claims)."""
    from ..parts import p01, p03, p04

    frames, ids = [], {}
    rows0, ids[0] = part0_rows(data_dir)
    for part, fn in ((1, part1_rows), (2, part2_rows), (3, part3_rows), (4, part4_rows)):
        frames.append(fn(data_dir))
    ids[1] = [c.id for c in p01.CLAIMS]
    ids[2] = list(dict.fromkeys(frames[1]["claim"]))
    ids[3] = [c.id for c in p03.CLAIMS]
    ids[4] = [c.id for c in p04.CLAIMS]
    for part, fn in ((5, part5_rows), (6, part6_rows)):
        rows, part_ids = fn(data_dir)
        frames.append(rows)
        ids[part] = part_ids
    frames.append(rows0)
    rows = pd.concat([f for f in frames if len(f)], ignore_index=True)
    return rows, ids


def shown_rigs(rows: pd.DataFrame) -> list[str]:
    """The matrix's columns: every rig some part judged, the published rig first."""
    from ..figures import rig_order

    return rig_order(rows["rig"].unique())


def matrix(rows: pd.DataFrame, ids: dict[int, list[str]], rigs: list[str]) -> pd.DataFrame:
    """One row per claim of each part (in the part's order), one column per rig with its verdict word ('not
    measured' where the part's page does not judge the rig), `post` what the post says, `<rig> detail` part 4's
    count of points."""
    out = []
    for part in sorted(ids):
        for cid in ids[part]:
            mine = rows[(rows["part"] == part) & (rows["claim"] == cid)]
            posts = [p for p in mine["post"] if p]
            row = {"part": part, "claim": cid, "post": posts[0] if posts else ""}
            for rig in rigs:
                hit = mine[mine["rig"] == rig]
                row[rig] = hit.iloc[0]["verdict"] if len(hit) else word(NOT_MEASURED)
                row[f"{rig} detail"] = hit.iloc[0]["detail"] if len(hit) else ""
            out.append(row)
    return pd.DataFrame(out, columns=["part", "claim", "post", *[c for r in rigs for c in (r, f"{r} detail")]])


def tally(m: pd.DataFrame, rigs: list[str]) -> pd.DataFrame:
    """Per rig: how many claims hold, differ, are inconclusive or not measured."""
    return pd.DataFrame([{"rig": rig, **{w: int((m[rig] == w).sum()) for w in VERDICT_WORDS}} for rig in rigs])


def matrix_html(m: pd.DataFrame, rigs: list[str]) -> str:
    """The matrix as a compact HTML table: a band per part linking to its page, each claim linking to the part's
    claims, one coloured cell per rig (classes iw-v-holds, iw-v-differs, iw-v-inconclusive, iw-v-not-measured in
    _static/inference-wall.css); the post's sentence under the claim's name."""
    head = "".join(f'<th class="iw-v-rig">{html.escape(r)}</th>' for r in rigs)
    body = []
    for part in sorted(m["part"].unique()):
        page = part_page(int(part))
        body.append(f'<tr class="iw-v-part"><th colspan="{1 + len(rigs)}"><a href="{page}">'
                    f'{html.escape(part_label(int(part)))}</a></th></tr>')
        for r in m[m["part"] == part].to_dict("records"):
            post = f'<span class="iw-v-post">{html.escape(r["post"])}</span>' if r["post"] else ""
            cells = []
            for rig in rigs:
                w = r[rig]
                detail = r.get(f"{rig} detail") or ""
                extra = f'<span class="iw-v-detail">{html.escape(detail)}</span>' if detail else ""
                cells.append(f'<td class="iw-v iw-v-{w.replace(" ", "-")}">{html.escape(w)}{extra}</td>')
            title = f' title="{html.escape(r["post"])}"' if r["post"] else ""
            body.append(f'<tr><td class="iw-v-claim"><a href="{page}#claims"{title}>{html.escape(r["claim"])}</a>{post}</td>'
                        + "".join(cells) + "</tr>")
    return (f'<div class="iw-v-wrap"><table class="iw-verdicts"><thead><tr><th>Claim</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


# ---------------------------------------------------------------------------------------------
# The chart: throughput per GPU against tokens per second per user
# ---------------------------------------------------------------------------------------------
_TP = re.compile(r"^--(?:tensor-parallel-size|tp)(?:=(\d+))?$")
_DP = re.compile(r"^--(?:data-parallel-size|dp)(?:=(\d+))?$")


def server_gpus(command: list[str] | None) -> int:
    """The GPUs a `vllm serve` command takes: its tensor-parallel size times its data-parallel size (1 each
    where not given; the last flag wins, as in argparse)."""
    sizes = {"tp": 1, "dp": 1}
    args = [str(a) for a in (command or [])]
    for i, arg in enumerate(args):
        for key, pattern in (("tp", _TP), ("dp", _DP)):
            m = pattern.match(arg)
            if m:
                value = m.group(1) or (args[i + 1] if i + 1 < len(args) else "")
                if not value.isdigit() or int(value) < 1:
                    raise ValueError(f"{arg} {value!r}: not a whole number of GPUs")
                sizes[key] = int(value)
    return sizes["tp"] * sizes["dp"]


def mean_power_w(samples: pd.DataFrame, label: str = "bench") -> float:
    """The pass's mean power draw over the GPUs that worked in it (nvidia-smi's power.draw, per GPU then summed;
    a GPU never busy in the pass, an idle neighbour on the host, is left out); NaN without samples."""
    from ..records.gpuclocks import BUSY_UTIL_PCT

    if samples is None or not len(samples):
        return math.nan
    s = samples[samples["label"] == label] if "label" in samples else samples
    s = s[s["power_w"].notna()]
    if not len(s):
        return math.nan
    gpu = s["gpu"].fillna(0)
    busy = s.groupby(gpu)["util_pct"].max() >= BUSY_UTIL_PCT
    means = s.groupby(gpu)["power_w"].mean()
    means = means[busy.reindex(means.index, fill_value=False)] if busy.any() else means
    return float(means.sum())


def energy_per_token_j(power_w: float, output_tok_s: float) -> float:
    """Joules per output token: mean power x the pass's duration / its output tokens = power / output tok/s."""
    if not known_number(power_w) or not known_number(output_tok_s) or output_tok_s <= 0:
        return math.nan
    return power_w / output_tok_s


def point_facts(part: int, data_dir=None, rigs: list[str] | None = None) -> pd.DataFrame:
    """Per measured point of a part: the GPUs its server took (server_gpus of the command in its manifest), the
    GPU's name and the measured pass's mean power (where nvidia-smi sampled it)."""
    from ..records.gpuclocks import point_samples
    from ..records.store import load_points

    rows = []
    for pt in load_points(part, data_dir, rigs):
        command = pt.record.server_command
        rows.append({"rig": pt.rig, "point": pt.name, "gpus": server_gpus(command), "gpu_name": pt.record.gpu_name,
                     "served": pt.record.preset, "power_w": mean_power_w(point_samples(pt))})
    return pd.DataFrame(rows, columns=["rig", "point", "gpus", "gpu_name", "served", "power_w"])


CHART_COLUMNS = ["rig", "part", "series", "kind", "setting", "point", "gpus", "output_tok_s", "per_gpu_tok_s",
                 "per_user_tok_s", "usd_per_million", "energy_j_per_token"]


def chart_rows(points: pd.DataFrame, prices: pd.DataFrame | None = None) -> pd.DataFrame:
    """The chart's points from pass rows with rig, part, series (what was served), kind (flood or decode), setting
    (the cap or batch), point, gpus, output_tok_s, itl_p50_ms and, where known, gpu_name and power_w:

    - per_gpu_tok_s = output_tok_s / gpus (the server's tokens a second over the GPUs it ran on);
    - per_user_tok_s = 1000 / median ITL in ms (one stream's tokens a second while it decodes);
    - usd_per_million: a GPU-hour at the listed middle price of the rig's GPU (reference.price_for_gpu) over the
      tokens one GPU emits in an hour; missing where the listing has no such GPU;
    - energy_j_per_token: the GPUs' mean power over the server's output tok/s, where sampled.
    Points without a positive throughput, ITL or GPU count are left out (a log axis cannot draw them)."""
    from ..parts.variants import usd_per_million
    from ..records.reference import price_for_gpu

    if not len(points):
        return pd.DataFrame(columns=CHART_COLUMNS)
    p = points.copy()
    for col in ("gpu_name", "power_w"):
        if col not in p:
            p[col] = math.nan
    gpus = pd.to_numeric(p["gpus"], errors="coerce")
    tok = pd.to_numeric(p["output_tok_s"], errors="coerce")
    itl = pd.to_numeric(p["itl_p50_ms"], errors="coerce")
    p = p[(gpus >= 1) & (tok > 0) & (itl > 0)].copy()
    p["per_gpu_tok_s"] = p["output_tok_s"].astype(float) / p["gpus"].astype(float)
    p["per_user_tok_s"] = 1000.0 / p["itl_p50_ms"].astype(float)
    mids = [((price_for_gpu(prices, n) or {}).get("mid") if prices is not None and not missing(n) else None)
            for n in p["gpu_name"]]
    p["usd_per_million"] = [usd_per_million(m, t) for m, t in zip(mids, p["per_gpu_tok_s"])]
    p["energy_j_per_token"] = [energy_per_token_j(w, t) for w, t in zip(p["power_w"], p["output_tok_s"])]
    return p[CHART_COLUMNS].reset_index(drop=True)


def part3_points(data_dir=None) -> pd.DataFrame:
    """Part 3's floods of the series' model, one per cap (the published A10G's one GPU where the post ran it)."""
    from .. import parts
    from ..parts import p01, p03

    shown = parts.page_rigs(3, data_dir)
    t = p03.sweep_table(data_dir, shown)
    t = t[t["model"] == "main"]
    facts = point_facts(3, data_dir, shown)
    t = t.merge(facts, on=["rig", "point"], how="left") if len(facts) else t.assign(
        gpus=math.nan, gpu_name=None, served=None, power_w=math.nan)
    pub = t["rig"] == PUBLISHED_RIG
    t.loc[pub, "gpus"] = 1  # the post's one A10G
    t.loc[pub, "gpu_name"] = "NVIDIA A10G"
    t.loc[pub, "served"] = p01.PUBLISHED_PRESET
    t.loc[pub, "point"] = [f"mns-{int(c):03d}" for c in t.loc[pub, "max_num_seqs"]]
    return t.assign(part=3, kind="flood", series=[str(m) for m in t["served"]],
                    setting=[f"cap {int(c):,}" for c in t["max_num_seqs"]])


def part5_points(data_dir=None) -> pd.DataFrame:
    """Part 5's floods and decode batches, per format."""
    from .. import parts
    from ..parts import p05, variants

    shown = [r for r in parts.page_rigs(5, data_dir) if r != PUBLISHED_RIG]
    t = variants.point_table(data_dir, shown, part=p05.NAME)
    t = t[t["kind"].isin(["flood", "decode"])] if len(t) else t
    return _layout_points(t, point_facts(5, data_dir, shown), 5, "format")


def part6_points(data_dir=None) -> pd.DataFrame:
    """Part 6's floods and decode batches, per layout (one GPU, tensor parallel, two replicas)."""
    from .. import parts
    from ..parts import p06, variants

    shown = [r for r in parts.page_rigs(6, data_dir) if r != PUBLISHED_RIG]
    t = variants.point_table(data_dir, shown, part=p06.NAME, key="config")
    t = t[t["kind"].isin(["flood", "decode"])] if len(t) else t
    return _layout_points(t, point_facts(6, data_dir, shown), 6, "config")


def _layout_points(t: pd.DataFrame, facts: pd.DataFrame, part: int, key: str) -> pd.DataFrame:
    if not len(t):
        return pd.DataFrame(columns=["rig", "point", "part", "series", "kind", "setting", "gpus", "output_tok_s",
                                     "itl_p50_ms"])
    t = t.drop(columns=[c for c in ("gpu_name",) if c in facts]).merge(facts, on=["rig", "point"], how="left")
    series = [f"{model or preset} {LAYOUT_WORDS.get(v, v)}" for preset, model, v in zip(t["preset"], t["model"], t[key])]
    setting = [f"cap {int(c):,}" if k == "flood" else f"{int(b):,} stream{'' if int(b) == 1 else 's'}"
               for k, c, b in zip(t["kind"], t["max_num_seqs"], t["batch"])]
    return t.assign(part=part, series=series, setting=setting)


# What a part-5 format or part-6 layout key reads as in the chart ("ref": part 5's reference, the rig's own model)
LAYOUT_WORDS = {"ref": "fp16 (part 5's reference)", "fp16": "fp16", "fp8": "fp8", "int4": "int4 (GPTQ)",
                "tp1": "on one GPU", "tp2": "tensor parallel on 2 GPUs", "dp2": "2 replicas on 2 GPUs"}


def chart_data(data_dir=None) -> pd.DataFrame:
    """chart_rows over parts 3, 5 and 6."""
    from ..records.reference import gpu_prices

    frames = [f for f in (part3_points(data_dir), part5_points(data_dir), part6_points(data_dir)) if len(f)]
    if not frames:
        return pd.DataFrame(columns=CHART_COLUMNS)
    return chart_rows(pd.concat(frames, ignore_index=True), gpu_prices(data_dir))


_sig = words.number  # three significant figures, every whole digit


def tally_words(m: pd.DataFrame, rigs: list[str]) -> str:
    """One sentence per rig: of the claims its pages judge, how many hold, differ, are inconclusive or not
    comparable (the claims not measured on it left out)."""
    out = []
    for r in tally(m, rigs).to_dict("records"):
        judged = sum(r[w] for w in VERDICT_WORDS if w != "not measured")
        if not judged:
            continue
        parts_ = [f"{r[w]} {w}" for w in VERDICT_WORDS if w != "not measured" and r[w]]
        out.append(f"- **{r['rig']}**: {judged} claims judged: " + ", ".join(parts_) + ".")
    return "\n".join(out)


def chart_words(data: pd.DataFrame) -> str:
    """Per rig, from the chart's points: its highest throughput per GPU (which part, what was served, the setting)
    with the speed per user there and, where the listing prices the rig's GPU, the cost per million tokens; and
    its fastest stream with what that costs. Missing numbers are left out, never printed."""
    from ..figures import rig_order

    lines = []
    for rig in rig_order(data["rig"].unique()):
        d = data[data["rig"] == rig]
        top = d.loc[d["per_gpu_tok_s"].idxmax()]
        fast = d.loc[d["per_user_tok_s"].idxmax()]

        def cost(r) -> str:
            return f", {_sig(r['usd_per_million'])} USD per million tokens" if known_number(r["usd_per_million"]) else ""

        def energy(r) -> str:
            return f", {_sig(r['energy_j_per_token'])} J per token" if known_number(r["energy_j_per_token"]) else ""

        text = (f"- **{rig}**: most tokens per GPU {_sig(top['per_gpu_tok_s'])} tok/s (part {int(top['part'])}, "
                f"{top['series']}, {top['setting']}) at {_sig(top['per_user_tok_s'])} tok/s per user{cost(top)}"
                f"{energy(top)}")
        if fast["point"] != top["point"] or fast["part"] != top["part"]:
            text += (f"; the fastest stream {_sig(fast['per_user_tok_s'])} tok/s per user (part {int(fast['part'])}, "
                     f"{fast['series']}, {fast['setting']}) at {_sig(fast['per_gpu_tok_s'])} tok/s per GPU"
                     f"{cost(fast)}{energy(fast)}")
        lines.append(text + ".")
        e = d[[known_number(x) for x in d["energy_j_per_token"]]]
        if len(e) >= 2:
            lo, hi = e.loc[e["energy_j_per_token"].idxmin()], e.loc[e["energy_j_per_token"].idxmax()]
            lines.append(f"  Energy per token, on its {len(e)} points with power samples: from "
                         f"{_sig(hi['energy_j_per_token'])} J (part {int(hi['part'])}, {hi['series']}, {hi['setting']}) "
                         f"to {_sig(lo['energy_j_per_token'])} J (part {int(lo['part'])}, {lo['series']}, "
                         f"{lo['setting']}).")
    return "\n".join(lines)
