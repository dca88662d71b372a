"""Part 2, the prefill freeze: a steady stream of short requests, one long prompt injected into it, with chunked
prefill off and on at several token budgets. One server session per configuration; one point per prompt length.

Each point: a mixed warm-up (the background with one long prompt of the point's length, so every shape the
measurement meets is compiled first), then the measured pass: `solo` long prompts alone on the idle server (the
prefill time without a batch), then the background stream at a fixed rate with `injections` long prompts sent
into it one after another (the repeats). See inject.py for the client and freeze.py for the definitions."""
from __future__ import annotations

from ...schema import PARTS
from ..protocol import Part, ids_of, judged
from ...measure.analysis import Interval  # noqa: F401 (re-exported)
from ...model.weightbytes import config_matmul_params  # noqa: F401 (re-exported)
from ...measure.claims import fmt_num  # noqa: F401 (re-exported)
from ...measure import freeze  # noqa: F401 (re-exported)
from .plan import (  # noqa: F401 (the part's names, as before the folder)
    A10G_BUDGET, BIG_GPU_GIB, DEFAULTS, H200_BUDGET, NAME, NOTEBOOK, OFF, check, config_name, knee_budgets,
    knee_points, max_model_len, part1_knee, plan, point_name, session_args, token_range, trace_dir,
    trace_length, trace_point)
from .tables import (  # noqa: F401 (the part's names, as before the folder)
    INJECTION_COLUMNS, _async_by_session, _by_config, _injections, _steps, _ttft_ms, a10g_inputs, clock_table,
    config_label, floor_freeze_ms, floor_table, freeze_table, injection_table, injections_of, knee_table,
    matmul_params, measured_points, point_injections, protocol_tables, reference_view, roofline_table,
    step_chart, steps_timed, timeline_table, token_timeline, trace_note, trace_table, trace_unsupported)
from .view import (  # noqa: F401 (the part's names, as before the folder)
    chunk_step_table, comparable_length, fullest_rig, has_freezes, implied_prompt_len, protocol_view, rig_view,
    with_reference)
from .claims import (  # noqa: F401 (the part's names, as before the folder)
    CLAIMS, NOT_COMPARABLE, OTHER_CLAIMS, _LengthFreeClaim, _chunk_step, _fmt, _freeze_chunked, _freeze_off_at,
    _freeze_off_side, _published_shrink, _shrink, claims_for, freeze_is_prefill, length_id, lessons, page_claims,
    predicted_freeze)
from .words import (  # noqa: F401 (the part's names, as before the folder)
    chunk_step_note, clock_note, findings, key_findings, knee_findings, no_data_note, page_box, rig_findings,
    trade_words, unrun_note, untimed_steps_note)

# its knee points read part 1's knee from the data dir
PART = Part(NAME, DEFAULTS, plan, tables=protocol_tables, view=protocol_view, findings=rig_findings,
            claims=judged(page_claims), claim_ids=ids_of(page_claims), shows=has_freezes, box=page_box,
            reads=(PARTS[0], PARTS[1]))  # the step chapter's answers (part 0's Part.answers); part 1's knee and points
