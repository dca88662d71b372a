"""Part 3, the batching cliff: one server per max_num_seqs cap, each flooded after a warm-up."""
from __future__ import annotations

from ..protocol import EVERY_PART, Part, ids_of, judged, without_data_dir
from ...measure.analysis import Interval  # noqa: F401 (re-exported)
from ...measure import analysis  # noqa: F401 (re-exported)
from ...measure.claims import fmt_num as fmt  # noqa: F401 (re-exported)
from .plan import (  # noqa: F401 (the part's names, as before the folder)
    DEFAULTS, MID_CAP, NAME, NOTEBOOK, PLATEAU_GAIN, SERIES_CAPS, STEADY_SHARE, caps_for, plan, point_name,
    prompts_for_cap)
from .tables import (  # noqa: F401 (the part's names, as before the folder)
    graph_capture_limit, part1_rig, protocol_tables, reference_view, run_to_run, sweep_table)
from .view import (  # noqa: F401 (the part's names, as before the folder)
    MODEL_LABELS, STEADY_HEADERS, STEEPER, _polled, added_sequence_ms, ceiling_cap, cliff, cliff_comparison,
    flood_time_rows, predicted_rows, protocol_view, rig_table, rig_view, short_windows, steady_table)
from .claims import (  # noqa: F401 (the part's names, as before the folder)
    CLAIMS, REF_CAP, _at, _batch_at, _cap1, _cliff, _consistency, _itl_batch, _model_gain, _past_cap,
    _plateau_crossover, _plateau_gain, _running_cap, _single_tok_s, _small_cliff, _steady_tok_s)
from .words import (  # noqa: F401 (the part's names, as before the folder)
    _inside_top, _model_gain_pct, _past_ceiling, _pct, _phase, _val, key_findings, page_box, past_cap_words,
    rig_findings, short_window_words, small_model_words, steady_words, takeaways, unpolled_words)

PART = Part(NAME, DEFAULTS, without_data_dir(plan), tables=protocol_tables, view=protocol_view, findings=rig_findings,
            claims=judged(CLAIMS), claim_ids=ids_of(CLAIMS), box=page_box,
            reads=EVERY_PART)  # part 1's page (which reads every part's), part 0's answers and step model
