"""The series at a glance (book/glance.md): every claim of every part against every rig its page shows, and one
chart of throughput per GPU against tokens per second per user over part 3's caps, part 5's formats and part 6's
layouts.

Nothing here judges anything of its own: one loop over the parts' protocol pages (pages: the page each notebook
computes) gives every claim's rows (part 4's point claims summed per claim and rig) and the chart's points (the
pages' own pass tables). What this module adds is the arithmetic of the chart (a server's tokens a second over the
GPUs it ran on, one stream's tokens a second, the cost per million tokens at the listed price of the rig's GPU,
the energy per token where nvidia-smi sampled the GPU's power) and the page's HTML.
"""
from __future__ import annotations

import html
import math
import re

import pandas as pd

from ..measure.claims import DIFFERS, HOLDS, INCONCLUSIVE, NOT_MEASURED, known_number, missing, points_text
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


def pages(data_dir=None) -> dict[int, object]:
    """Every part's page (protocol.page) on the rigs its notebook shows: the one place this page reads the parts."""
    from .. import parts
    from ..parts import protocol
    from ..schema import PARTS

    return {n: protocol.page(parts.protocol_of(n), data_dir, parts.page_rigs(n, data_dir)) for n in sorted(PARTS)}


def headline(page) -> str:
    """A part's headline in one line, with its number: the lead of its findings box's first bullet (findingsbox.split,
    the sentence a reader sees first on the part's page), '' where the box is empty."""
    from .findingsbox import split

    bullets = [b for b in page.box if b and b.strip()]
    return split(bullets[0].strip().removeprefix("- "))[0].rstrip(" .:;") + "." if bullets else ""


def point_verdict(verdicts: list[str]) -> tuple[str, str]:
    """One verdict for a claim that part 4 judges on every point it applies to, and the count behind it: differs
    where any point differs, else inconclusive where any is, else holds where every point holds; not measured
    where no point was measured."""
    judged = [v for v in verdicts if v != NOT_MEASURED]
    if not judged:
        return word(NOT_MEASURED), ""
    worst = next((v for v in (DIFFERS, INCONCLUSIVE) if v in judged), HOLDS)
    return word(worst), points_text(judged)


def part4_summary(claims: pd.DataFrame, ids: list[str], rigs: list[str], part: int = 4) -> pd.DataFrame:
    """A part's point verdicts (part 4's claims table: a row per claim, rig and point) as one row per (claim, rig)
    (point_verdict)."""
    rows = []
    for cid in ids:
        for rig in rigs:
            g = claims[(claims["claim"] == cid) & (claims["rig"] == rig)]
            verdict, detail = point_verdict(list(g["verdict"]))
            rows.append({"part": part, "claim": cid, "post": "", "rig": rig, "verdict": verdict, "detail": detail})
    return pd.DataFrame(rows, columns=["part", "claim", "post", "rig", "verdict", "detail"])


def claim_rows(data_dir=None, shown: dict[int, object] | None = None) -> tuple[pd.DataFrame, dict[int, list[str]]]:
    """Every part's (part, claim, post, rig, verdict, detail) rows, from its page's claims table (`shown`: the
    parts' pages, read here where not given), and each part's claim ids in its own order (a part whose page shows no
    rig still lists its claims). A claims table judged point by point (part 4's) reads one row per claim and rig
    (part4_summary)."""
    from .. import parts

    shown = shown if shown is not None else pages(data_dir)
    frames, ids = [], {}
    for n, page in shown.items():
        ids[n] = parts.protocol_of(n).claim_ids(page.views) or list(dict.fromkeys(page.claims["claim"]))
        table = page.claims
        frames.append(part4_summary(table, ids[n], list(page.views), n) if "point" in table else _rows(n, table))
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


def matrix_html(m: pd.DataFrame, rigs: list[str], bands: bool = True) -> str:
    """The matrix as a compact HTML table: a band per part linking to its page, each claim linking to the part's
    claims, one coloured cell per rig (classes iw-v-holds, iw-v-differs, iw-v-inconclusive, iw-v-not-measured in
    _static/inference-wall.css); the post's sentence under the claim's name. `bands`: False on a part's own page
    (one part, no band naming it)."""
    head = "".join(f'<th class="iw-v-rig">{html.escape(r)}</th>' for r in rigs)
    body = []
    for part in sorted(m["part"].unique()):
        page = part_page(int(part))
        if bands:
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


def part_matrix_html(part: int, claims: pd.DataFrame) -> str:
    """A part's own claims table (claims.evaluate's rows) as the glance page draws it: a row per claim with the post's
    sentence under its name, a coloured verdict per rig; the same cells as the glance page's rows of that part. A rig
    on which none of the part's claims was judged (part 2's published A10G, whose post gives no freeze inputs) has no
    column: a column of "not measured" says nothing the rig key does not."""
    rows = _rows(part, claims)
    judged = rows[rows["verdict"] != word(NOT_MEASURED)]
    if not len(judged):
        return ""
    rigs = shown_rigs(judged)  # a rig on which no claim was judged gets no column of "not measured"
    return matrix_html(matrix(rows, {part: list(dict.fromkeys(rows["claim"]))}, rigs), rigs, bands=False)


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


def part3_points(data_dir=None, page=None, published_preset: str | None = None) -> pd.DataFrame:
    """Part 3's floods of the series' model, one per cap (the published A10G's one GPU where the post ran it), from
    its page's sweep (`page`: part 3's page; `published_preset`: the model the post served, part 1's published view's)."""
    shown_pages = None if page is not None else pages(data_dir)
    page = page if page is not None else shown_pages[3]
    published_preset = published_preset or _published_preset(shown_pages[1])
    t = page.tables["sweep"]
    t = t[t["model"] == "main"]
    facts = point_facts(3, data_dir, page.rigs)
    t = t.merge(facts, on=["rig", "point"], how="left") if len(facts) else t.assign(
        gpus=math.nan, gpu_name=None, served=None, power_w=math.nan)
    pub = t["rig"] == PUBLISHED_RIG
    t.loc[pub, "gpus"] = 1  # the post's one A10G
    t.loc[pub, "gpu_name"] = "NVIDIA A10G"
    t.loc[pub, "served"] = published_preset
    t.loc[pub, "point"] = [f"mns-{int(c):03d}" for c in t.loc[pub, "max_num_seqs"]]
    return t.assign(part=3, kind="flood", series=[str(m) for m in t["served"]],
                    setting=[f"cap {int(c):,}" for c in t["max_num_seqs"]])


def _published_preset(page) -> str:
    """The model the posts served: part 1's view of the published rig says."""
    return page.views[PUBLISHED_RIG]["preset"]


def layout_points(page, part: int, key: str, data_dir=None) -> pd.DataFrame:
    """A variant part's floods and decode batches (part 5's formats, part 6's layouts), from its page's points."""
    t = page.tables["points"]
    t = t[t["kind"].isin(["flood", "decode"])] if len(t) else t
    return _layout_points(t, point_facts(part, data_dir, list(page.views)), part, key)


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


def chart_data(data_dir=None, shown: dict[int, object] | None = None) -> pd.DataFrame:
    """chart_rows over parts 3, 5 and 6 (`shown`: the parts' pages, read here where not given)."""
    from ..records.reference import gpu_prices

    shown = shown if shown is not None else pages(data_dir)
    frames = [f for f in (part3_points(data_dir, shown[3], _published_preset(shown[1])),
                          layout_points(shown[5], 5, "format", data_dir), layout_points(shown[6], 6, "config", data_dir))
              if len(f)]
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
