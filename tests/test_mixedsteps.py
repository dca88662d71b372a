"""Mixed steps (mixedsteps.py): part 0's family split of part 2's profiler windows, on synthetic trace summaries and on
the committed h200 traces, beside the untraced injections; the page's sentences."""
from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from inference_wall.parts.p00 import mixed as ms
from inference_wall.run import trace
from inference_wall.parts import p00, p02


# --- the family split on synthetic summaries ---------------------------------------------------------


def test_the_maps_cover_both_vocabularies():
    assert set(ms.FAMILY_KEYS) == {name for name, _ in p00.STEP_FAMILIES} == set(ms.FAMILIES)
    assert set(ms.TRACE_TO_STEP) == {name for name, _ in trace.FAMILIES} | {"other"}
    assert set(ms.TRACE_TO_STEP.values()) <= set(ms.FAMILIES)


def test_top_kernels_go_by_name_and_the_rest_by_the_family_map():
    summary = {"busy_ms": 21.0,
               "families_ms": {"matmul": 10.0, "linear attention (GDN)": 4.0, "other": 5.0, "memory": 2.0},
               "top_ms": [["nvjet_sm90_hsh_192x16", 6.0], ["merge_16x16_to_64x64_inverse_kernel", 3.0],
                          ["fused_recurrent_gated_delta_rule_packed_decode_kernel", 2.0]]}
    split = ms.family_split(summary)
    fam = split["families"]
    assert split["split_from"] == "families + top 12"
    # trace.py calls merge_16x16 "other"; part 0 files it as recurrent state, so 3 ms move there
    assert fam["recurrent state (GDN)"] == pytest.approx(3.0 + 2.0 + (4.0 - 2.0))
    assert fam["norms, activations, other"] == pytest.approx(5.0 - 3.0)
    assert fam["weights (matmul)"] == pytest.approx(10.0)
    assert fam["memory copies"] == pytest.approx(2.0)
    assert fam["attention"] == fam["sampling"] == 0.0
    assert sum(fam.values()) == pytest.approx(summary["busy_ms"])
    assert split["mapped_ms"] == pytest.approx((10 - 6) + (4 - 2) + (5 - 3) + 2)


def _chrome(kernels: list[tuple[str, float]]) -> dict:
    """A Chrome trace of GPU kernels run back to back (durations in ms)."""
    events, ts = [], 0.0
    for name, dur_ms in kernels:
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": 1000 * dur_ms, "pid": 0, "tid": 7})
        ts += 1000 * dur_ms + 10
    return {"traceEvents": events}


def test_every_kernel_by_name_where_the_raw_trace_is_kept_and_the_map_checked_against_it():
    names = [f"nvjet_sm90_hsh_{i}" for i in range(12)]  # the 12 longest: matmuls
    raw = _chrome([(n, 5.0 + i) for i, n in enumerate(names)] + [("solve_tril_16x16_kernel", 1.5)])
    summary = trace.summarise(raw)
    exact = ms.family_split(summary, trace.kernel_table(raw))
    assert exact["split_from"] == "every kernel" and exact["mapped_ms"] == 0.0
    assert exact["families"]["recurrent state (GDN)"] == pytest.approx(1.5)
    assert sum(exact["families"].values()) == pytest.approx(summary["busy_ms"])
    mapped = ms.family_split(summary)  # solve_tril is not among the top 12: trace.py's "other" takes it
    assert mapped["families"]["recurrent state (GDN)"] == 0.0
    assert mapped["mapped_ms"] == pytest.approx(1.5)
    assert ms.misplaced_ms(mapped["families"], exact["families"]) == pytest.approx(1.5)


def test_short_names_and_significant_figures():
    assert ms.short_name("void at::native::index_elementwise_kernel<128, 4>(long, int)") == "index_elementwise_kernel"
    assert ms.short_name("chunk_fwd_kernel_o") == "chunk_fwd_kernel_o"
    assert ms.sig(3639.35) == "3,640"
    assert ms.sig(0.712345) == "0.712"
    assert ms.sig(10.004) == "10.0"
    assert ms.sig(math.nan) == "–"  # words.MISSING


def test_no_table_no_words():
    assert ms.mixed_words(pd.DataFrame(columns=ms.COLUMNS)) == []


# --- the committed h200 traces -------------------------------------------------------------------


@pytest.fixture(scope="module")
def h200_all():
    return ms.mixed_table(None, ["h200"])


@pytest.fixture(scope="module")
def h200(h200_all):
    t = h200_all[h200_all["source"] == ms.PART2]
    if not len(t):
        pytest.fail("no traced part-2 point on h200 in data/runs")
    return t.reset_index(drop=True)


def test_one_row_per_traced_configuration(h200):
    assert sorted(h200["budget"]) == [p02.OFF, 512, 2048, 8192]
    assert list(h200.columns) == ms.COLUMNS
    assert h200["config"].iloc[0] == "chunking off"  # the page's order: off first, then budgets from the largest
    assert list(h200["budget"].iloc[1:]) == [8192, 2048, 512]


def test_families_add_up_to_the_busy_time_within_the_span(h200):
    fams = h200[[f"{k}_ms" for k in ms.FAMILY_KEYS.values()]]
    assert (fams >= 0).all().all()
    assert fams.sum(axis=1).to_numpy() == pytest.approx(h200["busy_ms"].to_numpy(), rel=1e-9)
    assert (h200["busy_ms"] <= h200["span_ms"]).all()
    assert ((h200["busy_pct"] > 0) & (h200["busy_pct"] <= 100)).all()
    assert (h200["top_gdn_ms"].fillna(0) <= h200["gdn_ms"]).all()
    assert (h200["gdn_chunk_kernels_ms"] <= h200["gdn_ms"]).all()
    assert (h200["mapped_ms"] <= h200["busy_ms"]).all()


def test_the_kept_raw_trace_checks_the_mapped_split(h200):
    exact = h200[h200["split_from"] == "every kernel"]
    assert len(exact)  # the point with chunking off kept its injection window's raw trace
    assert (exact["mapped_ms"] == 0).all() and (exact["kernels_known"] == "all").all()
    assert ((exact["map_misplaced_ms"] >= 0) & (exact["map_misplaced_ms"] <= exact["busy_ms"])).all()
    assert h200[h200["split_from"] != "every kernel"]["map_misplaced_ms"].isna().all()


def test_steps_and_values_per_step(h200):
    per_step = [c for c in ms.COLUMNS if c.endswith("_per_step_ms")] + ["busy_per_chunk_step_ms"]
    assert all(math.isfinite(v) and v >= 0 for v in h200[per_step].to_numpy().ravel())
    assert (h200["steps"] == h200["chunk_steps"] + h200["output_steps"]).all()
    assert (h200["busy_per_step_ms"] <= h200["busy_per_chunk_step_ms"]).all()
    logged = h200[h200["chunk_steps_from"] == "iteration log"]
    assert (logged["chunk_steps"] >= logged["chunk_steps_formula"]).all()  # a chunk holds at most the budget
    by = h200.set_index("budget")
    assert by.loc[512, "steps"] > by.loc[8192, "steps"]
    assert by.loc[512, "chunk_steps"] > by.loc[2048, "chunk_steps"] > by.loc[8192, "chunk_steps"]
    assert by.loc[p02.OFF, "chunk_steps"] == 1


def test_untraced_step_share_and_profiler_ratio(h200, h200_all):
    inj = p02.injection_table(None, ["h200"])
    _check_untraced(h200, p02.chunk_step_table(inj))
    assert h200["prefill_ms"].nunique() == 1  # one prompt length: one unchunked prefill
    untraced = next(u for source, _, u in p00.tables.mixed_sources(None, ["h200"]) if source == ms.PART0)
    for model, rows in h200_all[h200_all["source"] == ms.PART0].groupby("model"):  # part 0's models: their own sessions
        own = p02.injections_of([u for u in untraced if u.record.preset == model])
        _check_untraced(rows, p02.chunk_step_table(own))
        assert rows["prefill_ms"].nunique() == 1


def _check_untraced(table, steps):
    for r in table.itertuples():
        assert r.profiler_ratio == pytest.approx(r.traced_ttft_ms / r.untraced_ttft_ms)
        assert r.profiler_ratio > 0 and math.isfinite(r.profiler_ratio)
        if r.budget == p02.OFF:
            assert r.prefill_share_ms == pytest.approx(r.prefill_ms) == pytest.approx(r.solo_share_ms)
        assert r.non_kernel_ms_min == pytest.approx(max(r.chunk_step_ms - r.busy_per_chunk_step_ms, 0.0))
        if r.budget != p02.OFF:
            at = steps[(steps["budget"] == r.budget) & (steps["prompt_len"] == r.prompt_len)]
            assert r.chunk_step_ms == pytest.approx(float(at["mean_step_ms"].iloc[0]))
            assert r.solo_chunk_step_ms == pytest.approx(float(at["solo_chunk_step_ms"].iloc[0]))
            # each share over the steps of the step it is set against: the stream's steps and the solo run's
            assert r.prefill_share_ms == pytest.approx(r.prefill_ms / float(at["steps"].iloc[0]))
            assert r.solo_share_ms == pytest.approx(r.prefill_ms / float(at["solo_steps"].iloc[0]))
        else:
            assert r.solo_chunk_step_ms == pytest.approx(r.prefill_ms)  # alone, unchunked: one step, the prefill


NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def test_words_use_only_table_numbers_at_three_figures(h200):
    words = ms.mixed_words(h200)
    assert 1 <= len(words) <= 3
    cells = set()
    for v in h200.select_dtypes("number").to_numpy().ravel():
        if math.isfinite(v):
            cells.add(ms.sig(float(v)))
            if float(v).is_integer():
                cells.add(f"{int(v):,}")
    text = " ".join(words)
    found = [m.group(0).rstrip(",") for m in NUMBER.finditer(re.sub(r"\b[A-Za-z_]\w*", " ", text))]
    assert found
    for num in found:
        assert num in cells, num
        digits = num.replace(",", "")
        digits = digits.replace(".", "").lstrip("0") if "." in digits else digits.strip("0")  # 3,640: three
        assert len(digits) <= 3, num
    for sentence in words:  # a causal word is backed by a number in its own sentence
        if re.search(r"\b(so|because|lengthen\w*|candidate)\b", sentence):
            assert NUMBER.search(sentence)
    assert "candidate" in text
    assert "GDN" in text and "memory ops" in text


def test_a_model_without_recurrent_layers_gets_words_without_them(h200_all):
    dense = h200_all[h200_all["source"] == ms.PART0]
    for model in ms.models_of(dense, "h200"):
        words = ms.mixed_words(dense, "h200", model)
        assert words and all(re.search(r"\bnan\b|NaN|None", w) is None for w in words), words
        assert "GDN" not in " ".join(words) and "memory ops" in " ".join(words)
        rows = dense[dense["model"] == model]
        assert (rows["gdn_ms"] == 0).all()  # the dense model's window has no recurrent-state kernel time


def test_the_floor_of_a_chunk_step_is_set_against_the_same_budgets_chunk_step_alone(h200_all):
    # h200: each model's smallest budget, its chunk step alone on the idle server against its share of the unchunked
    # prefill; whether the floor is chunked prefill's own is the data's to say: the words say it exactly where the
    # row does (its chunk step alone above its share by more than a decode step)
    floors = []
    for model in ms.models_of(h200_all, "h200"):
        r = h200_all[(h200_all["model"] == model) & (h200_all["budget"] == 512)].iloc[0]
        floor = r.solo_chunk_step_ms - r.solo_share_ms > r.decode_itl_ms
        floors.append(floor)
        words = ms.mixed_words(h200_all, "h200", model)[-1]
        assert f"a chunk step took {ms.sig(r.solo_chunk_step_ms)} ms" in words
        assert ("the floor belongs to chunked prefill itself on this rig" in words) == floor, words
    said = ms.sum_words(h200_all, "h200")
    assert floors and ("the floor belongs to chunked prefill itself" in said) == all(floors), said
    assert ("candidate that needs a trace" in said) == all(floors), said
