"""Part 1, hit the wall: on one server, the cold vs warm pass, a single stream, the flood, the rate
sweep (relative to the flood's measured capacity unless absolute rates are given), and decode at fixed
batch sizes for the step-time model."""
from __future__ import annotations

from ..protocol import EVERY_PART, Part, ids_of, judged, without_data_dir
from ...measure.analysis import GIB  # noqa: F401 (re-exported)
from ...measure.analysis import Interval  # noqa: F401 (re-exported)
from ...measure.analysis import KEEP_UP  # noqa: F401 (re-exported)
from ...measure.ratepass import MIXED_COLUMNS  # noqa: F401 (re-exported)
from ...measure import analysis  # noqa: F401 (re-exported)
from ...measure.claims import fmt_num  # noqa: F401 (re-exported)
from ...measure.ratepass import mixed_split  # noqa: F401 (re-exported)
from ...measure.admission import running_limit  # noqa: F401 (re-exported)
from .plan import (  # noqa: F401 (the part's names, as before the folder)
    DEFAULTS, NAME, NOTEBOOK, PUBLISHED_PRESET, flood_capacity_rps, plan, rate_point_name)
from .tables import (  # noqa: F401 (the part's names, as before the folder)
    CLOCK_KINDS, SETUP_FIELDS, _facts, _family, _setup, claim_facts, clock_table, cold_warm_table, decode_table,
    measured_points, memory_table, mixed_step_table, page_tables, part1_knee, protocol_tables, published_pool,
    rate_table, reference_view, server_sessions, vision_tower_gib)
from .view import (  # noqa: F401 (the part's names, as before the folder)
    _span, _v, batch_limit, fit_at, flood_spread, floor_rows, floor_table, fmt, knee_table, memory_budget_table,
    mixed_step_rows, protocol_view, rig_view, running_series, running_table, steadiness, step_fit_rows,
    step_fit_table, top_cap_table)
from .claims import (  # noqa: F401 (the part's names, as before the folder)
    CLAIMS, _ceiling, _cold, _knee, _littles_law, _roofline, _running_flood, _step_linear)
from .words import (  # noqa: F401 (the part's names, as before the folder)
    above_flood_words, bullets, flood_steady_words, goodput_words, key_findings, knee_words, page_box,
    rig_findings, single_interval_note, steadiness_words, takeaways, takeaways_markdown)

PART = Part(NAME, DEFAULTS, without_data_dir(plan), tables=protocol_tables, view=protocol_view, findings=rig_findings,
            claims=judged(CLAIMS), claim_ids=ids_of(CLAIMS), box=page_box,
            # every part's: a repeat rig's points of every part (rig.run_to_run), every start's log
            # (pools.block_size), the step chapter's answers and step model (part 0's Part.answers)
            reads=EVERY_PART)
