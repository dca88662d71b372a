"""Predict the A10G, then any GPU: a decode step rebuilt from what "Inside a step" measured on the h200.

Part 0 takes an h200 step apart per model (p00.rig_view): the weight matmuls and the rate at which they read the
weights, every other kernel family, the GPU's idle time (the untraced step less the traced kernels), at batches 1
and 256. This module puts the parts back together for another GPU, each part scaled by what should set it there:

    step(B, context) = at batch 1:  weights_bytes / (f x BW)                  f: the h200 matmuls' read rate at 1
                                    + sampling, norms and copies at 1           h200, not scaled
                                    + state and attention kernels at 1 beyond
                                      their bytes                               h200, not scaled
                                    + one sequence's state and KV bytes / BW    shapes
                                    + GPU idle at 1                             h200, not scaled
                       + (B - 1) x [ 2 x state bytes / BW + KV bytes x context / BW          shapes
                                     + sampling, norms and copies' growth x BW_h200 / BW   h200, scaled with BW
                                     + matmuls' growth x TFLOP/s_h200 / TFLOP/s            h200, scaled with compute
                                     + GPU idle's growth ]                                 h200, not scaled

BW is the target's datasheet bandwidth times the fraction of its datasheet figure the h200's copy reached (per model:
the copy bandwidth its own h200 servers measured, over the h200's datasheet figure): every bytes term reads at that
effective bandwidth, so on the h200 itself the step at batch 1 is the measured one. Which
parts scale how is a modelling choice, stated here and in every coefficient's `scale`:

- the weight matmuls at batch 1 read W bytes at the rate the h200's did (a fraction of the bandwidth); what the
  matmuls add per sequence is taken as arithmetic (each sequence is another row of every matmul) and scaled with
  the dense FP16 tensor TFLOP/s;
- the other kernels at batch 1 (sampling, norms, activations, copies; the recurrent-state and attention kernels
  beyond the bytes they move) are taken as launch- and latency-bound: at batch 1 they take far longer than their
  bytes need at the bandwidth (`latency_evidence`), so they are not scaled; what sampling, norms and copies add per
  sequence is taken as memory traffic and scaled with the bandwidth;
- the recurrent state (read and written once a step) and the KV cache (read once a step per token of context) are
  their bytes (p00.shape_bytes) over the bandwidth, in place of the state and attention kernels' measured growth;
- the GPU's idle time and its growth per sequence are the h200's host work as measured (another host's CPU and
  another vLLM version are not modelled).

A flood (every request `input` prompt tokens, `output` generated) adds each request's prefill: 2 x the language
model's matmul parameters x prompt tokens over the target's tensor TFLOP/s times the fraction of the h200's peak that
part 2's solo prefill reached (injections.roofline_table, its shortest prompt). Its throughput at a cap is
output / (output x step(B) / B + prefill), B = min(cap, the KV admission limit), and the prefill is added to the
decode (not overlapped with it): a model choice.

The KV admission limit counts vLLM's pages as kvcache.KVPool does: the pool is the target's memory (its datasheet
GB, times the h200's driver-reported total over its datasheet GB) x gpu_memory_utilization, less the weights and the
non-KV overhead an h200 start of the same model and max_num_seqs logged (util x total - weights - KV pool), in pages
of the model's block size (8 layers x 528 tokens x 4 KiB for Qwen3.5), each request holding its attention pages and
its state pages.

The GPUs' table gives, per GPU and model, the single stream (step at 1), the decode ceiling at the running batch a
flood reaches (min(max_num_seqs, the admission limit)), the admission limit, and the batch where an added sequence
stops paying: where the step's growth per added sequence reaches STOP_PAYING_X of the step per sequence (step / B).
`step_model(..., sync=True)` adds the host work that asynchronous scheduling hid on the h200 (4b-sync against 4b).

Every coefficient keeps its source ("measured on h200 ...", "datasheet ...", "shapes ..."): coefficient_table.
Published numbers are read through inference_wall.records.reference, never typed: a10g_table.
"""
from __future__ import annotations

import pandas as pd

from ...errors import UserError
from .stepmodel import (  # noqa: F401 (predict's names, as before the split)
    FIT_BAND_PCT, Gpu, gpus, H200_KEY, MODEL_LABELS, MODELS, OTHER_FAMILIES, RIG, STATE_FAMILIES, StepModel,
    STOP_PAYING_X, Term, TRACE_BATCHES, VALIDATION_BATCHES)
from .stepinputs import (  # noqa: F401 (predict's names, as before the split)
    api_step, _gib, _h200_starts, latency_evidence, measured_steps, memory_ratio, overhead, prefill_rate,
    PROFILE_FLAGS, _row, start_memory, _starts, step_model, step_models, _trace_context)
from .othergpus import (  # noqa: F401 (predict's names, as before the split)
    a10g_table, _carried, coefficient_table, _flood_parts, gpu_table, h200_table, _n, prefill_sensitivity,
    prefill_sensitivity_words, _top_term, unfit, _workload)
from .predictwords import (  # noqa: F401 (predict's names, as before the split)
    A10G_HEADERS, GPU_HEADERS, H200_HEADERS, known, notes, _pct, _pub, sentences, shown, validation)
from ...words import join_and  # noqa: F401 (predict's name for it stays: notebooks and tests use it)


def page(view: dict, data_dir=None) -> dict:
    """Everything the page shows: the A10G against the posts, the GPUs' table, the h200 check, the sentences, the
    coefficients, and the models that do not fit where. None when the rig has no fitted step of the 4B (the
    series' model, which every prediction of the posts' figures starts from): a run that measured other variants
    only, as a partial `make reproduce --points` does."""
    gpus_ = gpus(data_dir)
    models = step_models(view, data_dir, gpus_)
    if "4b" not in models:
        return None
    ratio = memory_ratio(view, gpus_, data_dir)
    a10g = a10g_table(models, gpus_, ratio, data_dir)
    table = gpu_table(models, gpus_, ratio, data_dir)
    h200 = h200_table(models, view, gpus_)
    sens = prefill_sensitivity(models, gpus_, ratio, data_dir)
    return {"a10g": a10g, "gpus": table, "h200": h200, "sentences": sentences(a10g, table, h200),
            "prefill_sensitivity": sens, "prefill_words": prefill_sensitivity_words(sens),
            "validation": validation(a10g, h200),
            "coefficients": coefficient_table(models), "unfit": unfit(models, gpus_, ratio, data_dir),
            "models": models, "memory_ratio": ratio, "stop_paying_x": STOP_PAYING_X, "notes": notes(view, models, data_dir)}


def build(data_dir=None, rig: str = RIG) -> dict:
    """page() from the stored runs of part 0 on `rig`."""
    from .tables import page_tables
    from .view import rig_view

    tables = page_tables(data_dir, [rig])
    return page(rig_view(rig, tables, None, data_dir), data_dir)


# ---------------------------------------------------------------------------------------------
# A prediction frozen before a GPU is measured (data/predictions/<gpu>.csv)
# ---------------------------------------------------------------------------------------------

FROZEN_BATCHES = (1, 8, 64, 256, 1024)  # the decode steps a frozen prediction states (part 0's decode points)


FROZEN_CAPS = (1, 4, 16, 64, 256)  # the floods it states (part 3's series caps)


FROZEN_COLUMNS = ["gpu", "model", "quantity", "batch", "cap", "context_tokens", "utilization", "predicted", "unit",
                  "how"]


def prediction_rows(gpu_key: str, data_dir=None, rig: str = RIG) -> pd.DataFrame:
    """Everything the step model says today about the datasheet GPU `gpu_key`, one row per quantity and series
    model whose weights fit: the your-GPU table's row (single stream, decode ceiling at the batch a flood reaches,
    KV admission at the series' gpu_memory_utilization, the batch where an added sequence stops paying); the KV
    admission at the utilization the rig's own starts logged (what a start of the same stack on that GPU will use);
    the decode step at FROZEN_BATCHES at part 0's decode context (its decode points' mean context), with and without
    asynchronous scheduling (the 4B); the flood's output at FROZEN_CAPS at the series' lengths and its
    pure-decode ceiling. `how` says which function of this module gave the number. Nothing here is measured on the
    target: the model reads the h200's runs and the target's datasheet row only."""
    from .tables import page_tables
    from .view import rig_view

    gpus_ = gpus(data_dir)
    if gpu_key not in gpus_:
        raise UserError(f"no datasheet row {gpu_key!r} in data/reference/gpus/datasheets.csv; rows: "
                        f"{', '.join(gpus_)}")
    g = gpus_[gpu_key]
    view = rig_view(rig, page_tables(data_dir, [rig]), None, data_dir)
    models = step_models(view, data_dir, gpus_)
    ratio = memory_ratio(view, gpus_, data_dir)
    w = _workload(data_dir)
    n_in, n_out = w["input_len"], w["output_len"]
    ctx, tokens = n_in + n_out / 2, n_in + n_out
    pts = view["points"]
    rows: list[dict] = []

    def add(v, quantity, predicted, unit, how, batch=None, cap=None, context=None, util=None):
        rows.append({"gpu": g.key, "model": MODEL_LABELS.get(v, v), "quantity": quantity, "batch": batch, "cap": cap,
                     "context_tokens": context, "utilization": util, "predicted": float(predicted), "unit": unit,
                     "how": how})

    table = gpu_table(models, {g.key: g}, ratio, data_dir).set_index("model")
    for v, m in models.items():
        label = MODEL_LABELS.get(v, v)
        if label not in table.index:
            add(v, "fits (1 = yes)", 0, "", "gpu_table: no KV page left after the weights and overhead")
            continue
        r = table.loc[label]
        add(v, "single stream", r.itl_ms, "ms per token", "gpu_table itl_ms", batch=1, context=ctx)
        add(v, "decode ceiling", r.decode_ceiling_tok_s, "tok/s", "gpu_table decode_ceiling_tok_s",
            batch=int(r.ceiling_batch), context=ctx)
        add(v, "KV admission", r.kv_admission, "sequences", f"gpu_table kv_admission ({n_in}+{n_out} tokens)",
            util=w["utilization"])
        add(v, "added sequence stops paying", r.stop_paying_batch, "batch", "gpu_table stop_paying_batch",
            context=ctx)
        start = start_memory(m.preset, w["max_num_seqs"], data_dir, rig)
        if start["utilization"] == start["utilization"]:
            add(v, "KV admission", m.admission(m.usable_gib(g, ratio), start["utilization"], tokens), "sequences",
                f"StepModel.admission ({n_in}+{n_out} tokens) at the utilization {rig}'s start logged",
                util=start["utilization"])
        dctx = float(pts[(pts["variant"] == v) & (pts["kind"] == "decode")]["context"].iloc[0])
        sync = step_model(view, v, gpus_, data_dir, w["max_num_seqs"], (m.prefill_rate, m.prefill_source),
                          sync=True) if v == "4b" else None
        for b in FROZEN_BATCHES:
            add(v, "decode step", m.step(g, b, dctx), "ms", "StepModel.step", batch=b, context=dctx)
            if sync is not None:
                add(v, "decode step, async scheduling off", sync.step(g, b, dctx), "ms", "StepModel.step (sync=True)",
                    batch=b, context=dctx)
        adm = int(r.kv_admission)
        for cap in FROZEN_CAPS:
            bb = min(cap, adm)
            add(v, "flood output", m.flood(g, bb, n_in, n_out)["tok_s"], "tok/s",
                f"StepModel.flood at min(cap, KV admission) = {bb}", batch=bb, cap=cap, context=ctx)
    return pd.DataFrame(rows, columns=FROZEN_COLUMNS)
