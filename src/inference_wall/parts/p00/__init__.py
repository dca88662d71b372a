"""Inside a step: what a decode step is made of, measured component by component on one server per model.

Every later part explains its numbers with one model of a step (a fixed part plus a part per sequence), fitted
through its own points. This chapter takes the step apart instead. One server per variant (a model preset with its
serve flags) runs closed loops of B streams of equal lengths; the engine's counters, polled during each pass, give
the step's period in the pure-decode window (steady.decode_window), not the client's per-token gaps. What each
point isolates:

- `decode-bNNNN`: the step against the batch, with the server's sampling defaults (the checkpoint's generation
  config: top-k and top-p);
- `nofilter-bNNNN` / `greedy-bNNNN`: the same batch with the client's sampling parameters set to no top-k/top-p, and
  to greedy: what the top-k/top-p filter costs, and what random sampling costs over an argmax;
- `ctxNNNNN-bNNNN`: the same batch at longer prompts: attention over the KV cache per token of context;
- `trace-bNNNN`: the torch profiler on for a fraction of a second of pure decode (trace.DecodeWindowTrace): GPU
  time by kernel family per step, and the GPU's idle share;
- a variant with `--no-async-scheduling`: what overlapping the host's work with the GPU's hides;
- `clientsN-bNNNN`: a flood at the server's cap from one `vllm bench serve` process, then the same flood shared by N
  processes at once (each its share of the prompts, its own seed): whether one client limits a flood (clients_table);
- `mixed-<part 2's point>`: part 2's sessions (a background at a fixed rate, one long prompt injected, and its
  profiler window last) on this variant's model: a step that carries prefill tokens beside decodes (mixed.py).

The bytes a step must move (weights of the language model, each sequence's recurrent state, its KV cache) come from
the shapes (weightbytes, analysis) over the bandwidth the run measured on its GPU.
"""
from __future__ import annotations

from ..protocol import (EVERY_PART, Part, ids_of, judged, measured_rigs, reading_data_dir, with_data_dir,
                        without_data_dir)
from .plan import (  # noqa: F401 (the part's names, as before the folder)
    API_FLAG, client_points, DEFAULT_VARIANTS, DEFAULTS, DENSE, label, LABELS, MAIN, MEASURES, MIXED_KINDS,
    mixed_parameters, mixed_points, NAME, NOTEBOOK, plan, point_name, profiler_args, served_presets, SYNC_FLAG,
    trace_dir, TRACED_KINDS, VARIANT_KEYS, variant_preset, _variants)
from .families import (  # noqa: F401 (the part's names, as before the folder)
    ATTENTION_MAIN, BAND, COMPONENTS, FILTER_KERNELS, LINEAR_KERNEL, QUANT_KERNELS, quant_matmul_ms,
    STEP_FAMILIES, step_family, trace_steps)
from .tables import (  # noqa: F401 (the part's names, as before the folder)
    after_trace, CLIENT_COLUMNS, client_runs, CLIENTS_COLUMNS, clients_table, _fmt, linear_kernel, page_tables,
    point_table, rig_plan, shape_bytes, trace_table, unmeasured, _window, window_rates)
from .view import (  # noqa: F401 (the part's names, as before the folder)
    api_servers, api_table, client_pair, clients_page_table, _comp_at, _component, component_long, components,
    context_cost, floors, _from_batch, host_overlap, _matmul_split, MODEL_COLUMNS, MODEL_ORDER, model_table,
    _of_rig, _per_seq, _quant_mm_at, rig_view, _row, sampling_cost, skipped_points, step_curve, _step_interval,
    _steps, _traced_pair)
from .claims import (  # noqa: F401 (the part's names, as before the folder)
    CLAIMS, judge_clients, judge_context, judge_filter, judge_kernels, judge_state, judge_weights, TEN,
    WITHIN_20)
from .words import (  # noqa: F401 (the part's names, as before the folder)
    api_words, clients_words, dense_words, findings, mixed_missing_words, model_finding, model_words, _n,
    _polled_flood_words, sampling_words)
from .answers import (  # noqa: F401 (the part's names, as before the folder)
    ANSWERS_READ, flood_gap, _growth, _mixed, nine_b_answers, open_answers, page_answers, _part5_variants,
    part_answers, per_seq_in_range, _sweep)

PART = Part(NAME, DEFAULTS, without_data_dir(plan), tables=with_data_dir(page_tables), view=reading_data_dir(rig_view),
            findings=findings, claims=judged(CLAIMS), claim_ids=ids_of(CLAIMS), shows=measured_rigs,
            served_presets=served_presets, answers=page_answers,
            # part 2's sessions and part 3's floods beside its own, part 1's and 5's points against its step model,
            # and every part's server logs (pools.block_size: the page a hybrid model's start logged)
            reads=EVERY_PART)
