"""Part 5, four bits: one model in 16 bits, fp8 and 4-bit GPTQ, each on its own server, against the part-1/3
model of the same rig (the reference); does a decode step's fixed cost follow the bytes its weights take,
and what does the per-sequence cost follow?

A variant is one server session per (model, format): a single stream, decode at fixed batch sizes (the step
fit: fixed + per-sequence cost), and a flood at the session's cap; further caps of part 3's sweep each get a
server of their own. The KV pool each format leaves comes from the variant's startup log (kvcache)."""
from __future__ import annotations

from ..protocol import (EVERY_PART, Part, ids_of, judged, measured_rigs,
                        one_paragraph, reading_data_dir, with_data_dir, without_data_dir)
from ..variants import BAND  # noqa: F401 (re-exported)
from ...model.weightbytes import FORMATS  # noqa: F401 (re-exported)
from ...measure.analysis import Interval  # noqa: F401 (re-exported)
from ..variants import STEP_NAMES  # noqa: F401 (re-exported)
from ..variants import apply_start  # noqa: F401 (re-exported)
from ..variants import flood_point  # noqa: F401 (re-exported)
from ..variants import interval_words  # noqa: F401 (re-exported)
from ..variants import measure_variant  # noqa: F401 (re-exported)
from ..variants import num  # noqa: F401 (re-exported)
from ..variants import pct  # noqa: F401 (re-exported)
from ..variants import point_name  # noqa: F401 (re-exported)
from ..variants import point_table  # noqa: F401 (re-exported)
from ..variants import positive_prediction  # noqa: F401 (re-exported)
from ...model.modelshape import preset_decode_bytes  # noqa: F401 (re-exported)
from ...model.modelshape import preset_group_size  # noqa: F401 (re-exported)
from ..variants import rig_bandwidth  # noqa: F401 (re-exported)
from ..variants import rig_price  # noqa: F401 (re-exported)
from ..variants import sig  # noqa: F401 (re-exported)
from ..variants import startup_table  # noqa: F401 (re-exported)
from ..variants import stream_points  # noqa: F401 (re-exported)
from ..variants import usd_per_million  # noqa: F401 (re-exported)
from .plan import (  # noqa: F401 (the part's names, as before the folder)
    DEFAULTS, FORMAT_LABELS, FORMAT_SERVE_ARGS, NAME, NOTEBOOK, REFERENCE, plan, run_formats, served_presets,
    variant_preset)
from .tables import (  # noqa: F401 (the part's names, as before the folder)
    page_tables, predicted_bytes, reference_tables, repeat_spread)
from .view import (  # noqa: F401 (the part's names, as before the folder)
    ceiling_gaps, cost_points, cost_table, per_seq_estimators, rig_view, variant_summary)
from .claims import (  # noqa: F401 (the part's names, as before the folder)
    CLAIMS, LESSONS, WHY_FIXED, WHY_MODEL, WHY_POOL, WHY_SLOPE, _fixed_is_floor_plus_overhead, _fixed_scales_with_bytes,
    _pair, _per_seq, _per_seq_model, _pool_grows, _single_floor)
from .words import (  # noqa: F401 (the part's names, as before the folder)
    _apart, bend_text, bends_alike, clocks_text, closing_note, findings, key_findings, larger_model_text,
    series_summary, spread_text)

PART = Part(NAME, DEFAULTS, without_data_dir(plan), tables=with_data_dir(page_tables), view=reading_data_dir(rig_view),
            findings=one_paragraph(findings), claims=judged(CLAIMS), claim_ids=ids_of(CLAIMS), shows=measured_rigs,
            box=key_findings, closing=closing_note,
            served_presets=served_presets,
            reads=EVERY_PART)  # part 1's and 3's servers, part 0's answers and step model, every start's log
