"""Part 4, starving the KV cache: one server per KV pool size (set exactly with --num-gpu-blocks-override),
each flooded with short requests (that never outgrow the pages they are admitted with, on the hybrid model)
and long ones (that grow across page boundaries while they run), /metrics polled throughout.

The arithmetic (kvcache): a request of T tokens holds pages(T) = attention_groups x ceil(T / block) +
state_groups pages. vLLM admits a waiting request when the pages for its prompt fit in the free pool (one
page of which is the null block), so a flood runs at most

    admitted = min(max_num_seqs, (pool - 1) // pages(prompt))

requests at once. If that many can also grow to their full length, (admitted x pages(prompt + output) <=
pool - 1), nothing is ever evicted: a small pool shows up as a queue. If not, running requests that need
a new page find none and the scheduler preempts (recompute): the latest admitted request loses its pages
and goes back to the queue."""
from __future__ import annotations

from ..protocol import EVERY_PART, Part, ids_of, measured_rigs, one_paragraph
from ...measure.claims import DIFFERS  # noqa: F401 (re-exported)
from ...measure.claims import HOLDS  # noqa: F401 (re-exported)
from ...measure.claims import INCONCLUSIVE  # noqa: F401 (re-exported)
from ...measure.steady import MIN_FLOOD_STEPS  # noqa: F401 (re-exported)
from ...measure.claims import NOT_MEASURED  # noqa: F401 (re-exported)
from ...measure.steady import flood_steady  # noqa: F401 (re-exported)
from .plan import (  # noqa: F401 (the part's names, as before the folder)
    DEFAULTS, NAME, NOTEBOOK, admitted, block_size_for, fits, full_limit, longest_request, model_max_len, pages,
    plan, point_name, pool_for_limit, pool_max_model_len, pools_for, prompts, state_cap)
from .tables import (  # noqa: F401 (the part's names, as before the folder)
    GAP_FLOOR_MS, POINT_COLUMNS, _LOGGED_BLOCK, _nanmax, _polls, _session_start, _steady, add_stalls, arithmetic,
    calm_pool_stalls, earlier_runs, page_rigs, point_table, protocol_tables, published_running, reference_rows,
    rigs_not_run, server_steps, stalls_over, step_fit, stream_gaps, timeline)
from .view import (  # noqa: F401 (the part's names, as before the folder)
    SHORT_PASS_S, closing_table, decode_rate, floods, for_reader, pool_cost, prediction_pools, protocol_view,
    rig_view, short_passes)
from .claims import (  # noqa: F401 (the part's names, as before the folder)
    CLAIMS, LESSONS, PEAK_SAMPLING, PointClaim, STALL_SHARE, THROUGHPUT_TOLERANCE, _cost_applies, _flood, _format_safe,
    _preempting, _range_text, _ratio_over_ref, _stall_applies, _throughput_applies, claim_summary, evaluate_claims,
    sig, stall_doubt)
from .words import (  # noqa: F401 (the part's names, as before the folder)
    _faster_text, _n, _stall_text, findings, key_findings, pool_cost_text, short_pass_note, steady_words)

PART = Part(NAME, DEFAULTS, plan, tables=protocol_tables, view=protocol_view, findings=one_paragraph(findings),
            claims=evaluate_claims, claim_ids=ids_of(CLAIMS), shows=measured_rigs, box=key_findings,
            reads=EVERY_PART)  # part 1's view of the rig, and every start's log (pools.block_size)
