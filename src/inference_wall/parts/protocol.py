"""The part protocol: what every part module offers the runner, one signature per job. Each module ends with
`PART = Part(...)` built from its own functions; parts/__init__.py and the CLI call these fields and probe nothing.

The runner's jobs: planning (what to run), the presets its servers load, and the GPUs one of its servers takes.
The page's jobs: its tables (read once from the data dir), a view per rig, each view's findings, the claims table
of the views, the findings box and the closing words; `page` runs the first five in order, the one call of a
notebook's setup. Where
a part's own functions take other arguments, its module adapts them (thin functions next to its PART).

What a view reads besides its tables travels in them: the data dir they were read from (`DATA_DIR`: a rig's
model files, its logs) and, for a part whose claims quote the post's figures, those figures (`REFERENCE`), which
its views carry on so that its claims table is judged from the views alone."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from ..measure.claims import Claim, evaluate
from ..run.sweep import PointPlan
from ..schema import PARTS

DATA_DIR = "data_dir"  # a page's tables: the data dir they were read from
REFERENCE = "reference"  # a page's tables and each view: the post's figures the part's claims quote
EVERY_PART = tuple(PARTS.values())  # a page that reads every part's runs (Part.reads)


def parameters_for(name: str, defaults: dict, profile, overrides: dict | None = None) -> dict:
    """A part's parameters on a rig, from the part's name and defaults (no registry of parts): the defaults, then the
    rig profile's overrides, then the caller's; unknown keys are errors."""
    from ..errors import UserError

    params = dict(defaults)
    for source, extra in (("rig profile " + profile.name, profile.for_part(name)), ("parameters", overrides or {})):
        unknown = set(extra) - set(params)
        if unknown:
            raise UserError(f"{source}: unknown parameter(s) {sorted(unknown)} for part {name}; "
                            f"known: {', '.join(sorted(params))}")
        params.update({k: v for k, v in extra.items() if v is not None})
    return params


def pools_for(name: str, presets: list[str], profile, data_dir: Path | None = None) -> dict:
    """The rig's KV pool per model preset a part serves (`presets`, in the part's order), where known
    (pools.rig_pool)."""
    from ..model.pools import rig_pool
    from ..records.store import rig_dir

    where = rig_dir(name, profile.name, data_dir)
    return {pre: rig_pool(where, pre, data_dir, profile.serve_args) for pre in dict.fromkeys(presets)}


def page_rigs(part, data_dir: Path | None = None, rigs: list[str] | None = None) -> list[str]:
    """The rigs a part's page shows: the published one and every measured rig with data, except test rigs
    (profile `method_only`), unless `rigs` names them."""
    from ..records.store import rigs_with_data
    from ..run.rig import load_profile as profile
    from ..schema import PUBLISHED_RIG

    if rigs:
        return list(rigs)
    measured = [r for r in rigs_with_data(part, data_dir) if not profile(r, data_dir).method_only]
    return [PUBLISHED_RIG, *measured]


def rig_presets(params: dict, profile) -> list[str]:
    """The presets a part's servers load unless it says otherwise: the rig's model, and the part's small model
    (`small_preset`) where it has one."""
    return [pre for pre in dict.fromkeys([profile.model_preset, params.get("small_preset")]) if pre is not None]


def one_gpu(params: dict) -> int:
    """The GPUs one server takes unless the part says otherwise."""
    return 1


def without_data_dir(plan: Callable[..., list[PointPlan]]) -> Callable[..., list[PointPlan]]:
    """The protocol's plan for a part whose plan reads no earlier runs (it takes no data dir)."""
    def planned(params: dict, profile, pools: dict | None, data_dir: Path | None) -> list[PointPlan]:
        return plan(params, profile, pools=pools)
    return planned


def with_data_dir(page_tables: Callable[[Path | None, list[str]], dict]) -> Callable[[Path | None, list[str]], dict]:
    """The protocol's tables for a part whose page_tables(data_dir, rigs) gives them: those and the data dir."""
    def tables(data_dir: Path | None, rigs: list[str]) -> dict:
        return {**page_tables(data_dir, rigs), DATA_DIR: data_dir}
    return tables


def reading_data_dir(rig_view: Callable[[str, dict, dict, Path | None], dict]) -> Callable[[str, dict, dict], dict]:
    """The protocol's view for a part whose rig_view(rig, tables, params, data_dir) reads the data dir too."""
    def view(rig: str, tables: dict, params: dict) -> dict:
        return rig_view(rig, tables, params, tables[DATA_DIR])
    return view


def no_box(views: dict[str, dict], tables: dict) -> list[str]:
    """The findings box of a part whose page has none."""
    return []


def no_closing(views: dict[str, dict], device: pd.DataFrame | None) -> str:
    """The closing words of a part whose page has none."""
    return ""


def every_rig(rig: str, tables: dict) -> bool:
    """Whether a rig shown gets a view: every one, unless the part says otherwise."""
    return True


def measured_rigs(rig: str, tables: dict) -> bool:
    """Whether a rig shown gets a view, for a part the series never published: the measured rigs only."""
    from ..schema import PUBLISHED_RIG

    return rig != PUBLISHED_RIG


def ids_of(claims: list | Callable[[dict[str, dict]], list]) -> Callable[[dict[str, dict]], list[str]]:
    """The protocol's claim_ids for a part whose claims (or the callable that picks them for the views shown) have
    ids: their ids, in order."""
    def ids(views: dict[str, dict]) -> list[str]:
        return [c.id for c in (claims(views) if callable(claims) else claims)]
    return ids


def no_claim_ids(views: dict[str, dict]) -> list[str]:
    """The claim ids of a part that lists none: the claims table says which."""
    return []


def one_paragraph(findings: Callable[[dict], str]) -> Callable[[dict], list[str]]:
    """The protocol's findings for a part whose findings of a view are one paragraph."""
    def sentences(view: dict) -> list[str]:
        return [findings(view)]
    return sentences


def reference(views: dict[str, dict]) -> dict | None:
    """The post's figures the views carry (any view's: they are the same), None where they carry none."""
    return next((v[REFERENCE] for v in views.values() if REFERENCE in v), None)


def judged(claims: list[Claim] | Callable[[dict[str, dict]], list[Claim]]) -> Callable[[dict[str, dict]], pd.DataFrame]:
    """The protocol's claims for a part judged by the claims engine (claims.evaluate): its claims (or the claims
    for the views shown, where a callable picks them) on every view, with the post's figures the views carry."""
    def table(views: dict[str, dict]) -> pd.DataFrame:
        chosen = claims(views) if callable(claims) else claims
        return evaluate(chosen, views, reference(views))
    return table


@dataclass(frozen=True)
class Answers:
    """What one part's runs say on another part's page (Part.answers): `paragraphs`, each answering one of that
    part's open questions (markdown); `checks`, (rig, table, paragraph) per rig shown there: that part's own
    measurements against the answering part's model of them."""
    paragraphs: list[str]
    checks: list[tuple[str, pd.DataFrame, str]]


NO_ANSWERS = Answers([], [])


@dataclass(frozen=True)
class Part:
    """One part, as the runner sees it.

    name: the part's folder name (the module's NAME).
    defaults: its default parameters (the module's DEFAULTS, the same dict).
    plan(params, profile, pools, data_dir) -> the points to run, in order.
    served_presets(params, profile) -> the model presets its servers load (the rig's KV pool is read for each).
    gpus_needed(params) -> the GPUs one of its servers takes at the most (make reproduce refuses fewer).
    tables(data_dir, rigs) -> the page's tables of those rigs, by name (with DATA_DIR, and REFERENCE where used).
    view(rig, tables, params) -> what the page's claims, figures and prose need about one rig.
    findings(view) -> sentences on one rig's view.
    claims(views) -> the claims table: one row per claim judged on a rig (a part's own columns).
    box(views, tables) -> the page's findings box: 3-5 bullets over the rigs shown.
    claim_ids(views) -> the ids of the claims judged on those views, in the part's order (a page that shows no rig
    still lists them: the glance page's rows).
    closing(views, device) -> the page's closing words (device: the device-time table, or None).
    answers(asking, data_dir, shown) -> Answers: what this part's runs say on part `asking`'s page (its name;
    shown: the rigs that page shows), None for a part that answers no other; the asking page gathers every part's
    (answers_for), so neither imports the other's modules.
    reads: the other parts whose data/runs/ folders the part's page (its notebook) reads besides its own, by name
    (schema.PARTS; EVERY_PART where it reads them all). The book's rebuild keys the page on them
    (scripts/build-book.py), and every build checks them against what the page's kernel opened."""
    name: str
    defaults: dict
    plan: Callable[[dict, object, dict | None, Path | None], list[PointPlan]]
    tables: Callable[[Path | None, list[str]], dict]
    view: Callable[[str, dict, dict], dict]
    findings: Callable[[dict], list[str]]
    claims: Callable[[dict[str, dict]], pd.DataFrame]
    closing: Callable[[dict[str, dict], pd.DataFrame | None], str] = no_closing
    box: Callable[[dict[str, dict], dict], list[str]] = no_box
    claim_ids: Callable[[dict[str, dict]], list[str]] = no_claim_ids
    shows: Callable[[str, dict], bool] = every_rig
    served_presets: Callable[[dict, object], list[str]] = rig_presets
    gpus_needed: Callable[[dict], int] = one_gpu
    reads: tuple[str, ...] = ()
    answers: Callable[[str, Path | None, list[str]], Answers] | None = None


def answers_for(asking: str, answering: list[Part], data_dir: Path | None, shown: list[str]) -> Answers:
    """What the `answering` parts (every part, from the registry) say on part `asking`'s page: their Part.answers,
    in the order given, each asked once."""
    told = [part.answers(asking, data_dir, shown) for part in answering if part.answers is not None]
    return Answers([p for a in told for p in a.paragraphs], [c for a in told for c in a.checks])


def runs_read(part: Part) -> tuple[str, ...]:
    """The data/runs/ folders a part's page reads: its own, then those its `reads` names."""
    unknown = set(part.reads) - set(PARTS.values())
    if unknown:
        raise ValueError(f"part {part.name} reads unknown part(s) {sorted(unknown)}; known: {', '.join(PARTS.values())}")
    return tuple(dict.fromkeys([part.name, *part.reads]))


JOBS = ("plan", "served_presets", "gpus_needed", "tables", "shows", "view", "findings", "claims", "claim_ids", "box",
        "closing")


@dataclass(frozen=True)
class Page:
    """What a notebook's setup computes: the rigs shown, the tables, each rig's parameters, view and findings, the
    claims table and the findings box."""
    rigs: list[str]
    tables: dict
    params: dict[str, dict]
    views: dict[str, dict]
    findings: dict[str, list[str]]
    claims: pd.DataFrame
    box: list[str]


def rig_parameters(part: Part, rig: str, data_dir: Path | None) -> dict:
    """A rig's parameters for the part (parts.parameters); the published rig has no profile: the part's defaults."""
    from ..run.rig import load_profile
    from ..schema import PUBLISHED_RIG

    return (dict(part.defaults) if rig == PUBLISHED_RIG
            else parameters_for(part.name, part.defaults, load_profile(rig, data_dir)))


def views(part: Part, data_dir: Path | None, rigs: list[str], params: dict[str, dict] | None = None) -> dict[str, dict]:
    """The views of a part on `rigs` (its tables read once, then a view per rig it shows; `params`: each rig's
    parameters, None: the rig's own), without their findings and claims: how one part reads another's measurements
    of the same rigs, through the other's PART."""
    params = params if params is not None else {rig: rig_parameters(part, rig, data_dir) for rig in rigs}
    tables = part.tables(data_dir, rigs)
    return {rig: part.view(rig, tables, params[rig]) for rig in rigs if part.shows(rig, tables)}


def rig_view(part: Part, data_dir: Path | None, rig: str, params: dict | None = None) -> dict:
    """One rig's view of a part (views of that rig alone)."""
    return views(part, data_dir, [rig], None if params is None else {rig: params})[rig]


def page(part: Part, data_dir: Path | None, rigs: list[str], params: dict[str, dict] | None = None) -> Page:
    """A part's page on `rigs`: its tables, a view per rig (with `params`, each rig's parameters; None: the rig's
    own), each view's findings, the claims table and the findings box."""
    params = params if params is not None else {rig: rig_parameters(part, rig, data_dir) for rig in rigs}
    tables = part.tables(data_dir, rigs)
    shown = {rig: part.view(rig, tables, params[rig]) for rig in rigs if part.shows(rig, tables)}
    return Page(list(rigs), tables, params, shown, {rig: part.findings(v) for rig, v in shown.items()},
                part.claims(shown), part.box(shown, tables))
