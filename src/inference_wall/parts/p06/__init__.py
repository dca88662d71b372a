"""Part 6, past one GPU: one model on one GPU, split over two by tensor parallelism, and run twice as two
replicas (vLLM's data parallelism); what does the second GPU buy, and in which currency?

Part 5 cut the bytes a decode step reads by storing the weights in fewer bits. Tensor parallelism cuts the bytes
each GPU reads by splitting every weight matrix over two GPUs, at the price of two all-reduces per layer per
step; replicas cut nothing per step but run two engines, each with half the requests. A configuration is one
server session: a single stream, decode at fixed concurrency (the step fit), a flood at the cap. The predictions
come from the one-GPU server of the same rig: its fixed cost, its weight stream (bytes / measured bandwidth), its
per-sequence cost, its weights and KV pool from the log, and its ceiling."""
from __future__ import annotations

from ..protocol import (Part, ids_of, judged, measured_rigs, one_paragraph,
                        reading_data_dir, with_data_dir, without_data_dir)
from .plan import (  # noqa: F401 (the part's names, as before the folder)
    BAND, BASE, BUNCHED, CONFIGS, CONFIG_LABELS, CONFIG_SERVE_ARGS, DEFAULTS, ENGINES, GPUS, NAME, NOTEBOOK,
    SHARDS, STEP, TWO_GPU_RIG, gpus_needed, plan, run_configs, serve_args, served_presets)
from .tables import (  # noqa: F401 (the part's names, as before the folder)
    page_tables, predicted_bytes, sharded_heads)
from .view import (  # noqa: F401 (the part's names, as before the folder)
    cost_table, decode_rows, engine_batch, rig_view, summary)
from .claims import (  # noqa: F401 (the part's names, as before the folder)
    CLAIMS, WHY_DP, WHY_POOL, WHY_TP, _dp_ceiling, _dp_single, _dp_split, _halved, _pair, _tp_halves_stream,
    _tp_pool, _tp_tokens, num)
from .words import (  # noqa: F401 (the part's names, as before the folder)
    awaiting_note, closing_note, findings, key_findings)

PART = Part(NAME, DEFAULTS, without_data_dir(plan), tables=with_data_dir(page_tables), view=reading_data_dir(rig_view),
            findings=one_paragraph(findings), claims=judged(CLAIMS), claim_ids=ids_of(CLAIMS), shows=measured_rigs,
            box=key_findings, closing=closing_note,
            served_presets=served_presets, gpus_needed=gpus_needed)
