"""Inside a step's step model against parts 1, 3 and 5's own measurements (parts/stepcheck.py), on the committed
h200 runs: each row's prediction is the model's step at the row's running batch, its measurement the part's own
figure, and the words carry every model and the floods left out."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from inference_wall.parts import p01, p03
from inference_wall.parts.p00 import predict, stepcheck

RIG = "h200"


@pytest.fixture(scope="module")
def models():
    page = predict.build(None, RIG)
    if page is None:
        pytest.skip("no step model on h200 in data/runs")
    return page["models"], predict.gpus()[predict.H200_KEY]


def test_part_1s_decode_steps_are_the_models_step_at_their_batch(models):
    ms, gpu = models
    table, none = stepcheck.part_table(1, None, RIG)
    decode = table[table["kind"] == "decode step"].set_index("batch")
    measured = p01.decode_table(None, [RIG]).set_index("batch")["step_ms"]
    assert set(decode.index) == {float(b) for b in measured.index}
    for b, r in decode.iterrows():
        assert r["measured"] == pytest.approx(measured[b])
        assert r["predicted"] == pytest.approx(ms["4b"].step(gpu, b, 256 + 128 / 2))
        assert r["error_pct"] == pytest.approx(100 * (r["predicted"] - r["measured"]) / r["measured"])
    assert none == 0 and (table["kind"] == "flood step, steady window").sum() == 1


def test_part_3s_floods_use_their_steady_windows_and_count_the_rest(models):
    ms, gpu = models
    table, none = stepcheck.part_table(3, None, RIG)
    sweep = p03.sweep_table(None, [RIG])
    windows = sweep["steady_step_ms"].notna()
    assert len(table) == windows.sum() and none == (~windows).sum()
    assert set(table["model"]) == {"4B", "0.5B"} and set(table["kind"]) == {"flood step, steady window"}
    small = sweep[(sweep["model"] == "small") & windows].sort_values("max_num_seqs")
    got = table[table["model"] == "0.5B"]
    assert list(got["measured"]) == pytest.approx(list(small["steady_step_ms"]))
    assert list(got["predicted"]) == pytest.approx([ms["0.5b"].step(gpu, b, 320.0) for b in small["steady_running_mean"]])


def test_the_words_name_each_model_and_kind_with_signed_errors():
    for part in (1, 3, 5):
        table, none = stepcheck.part_table(part, None, RIG)
        text = stepcheck.words(table, none, RIG)
        assert "nan" not in text.lower() and "-0%" not in text
        for (model, kind), g in table.groupby(["model", "kind"]):
            assert f"the {model}'s {len(g)} " in text
            assert stepcheck._signed(g["error_pct"].min()) in text
        assert (f"{none} flood" in text) == bool(none)


def test_only_rigs_that_ran_part_0_get_a_section():
    shown = ["a10g", "h200", "h200-a10g-kv"]
    got = stepcheck.sections(1, None, shown)
    assert [r for r, _, _ in got] == ["h200"]
    (_, table, _), = got
    assert {"measured_ms", "predicted_ms", "error_pct", "running batch"} <= set(table.columns)
    assert not table.isna().any().any()


def test_a_rig_without_a_step_model_gives_no_rows_and_says_how_to_get_one(tmp_path):
    from inference_wall.records.reference import DEFAULT_DATA_DIR

    for name in ("models", "rigs", "reference"):  # everything but the runs
        (tmp_path / name).symlink_to(DEFAULT_DATA_DIR / name)
    table, none = stepcheck.part_table(1, tmp_path, RIG)
    assert table.empty and none == 0
    assert "make reproduce PART=0" in stepcheck.words(table, none, RIG)
    with pytest.raises(ValueError, match="part 2"):
        stepcheck.part_table(2, None, RIG)


def test_the_miss_past_the_traces_is_split_into_the_lines_and_the_floods_own():
    # a flood at a running batch past the traces: 1.5x its prediction, where pure decode at the next measured batch
    # is 1.2x the line: the line misses by 1.2x, the flood's own steps (refills' prompt tokens) by the rest, 1.25x
    row = {"model": "4B", "kind": "flood step, steady window", "batch": 498.0, "measured": 45.0, "predicted": 30.0,
           "error_pct": -100 / 3, "prompt_per_step": 700.0, "decode_batch": 512.0, "decode_over_line": 1.2}
    text = stepcheck.words(pd.DataFrame([row], columns=stepcheck.COLUMNS + stepcheck.EXTRA), 0, RIG)
    assert "measured step is 1.50x its prediction" in text
    assert "pure decode at 512 (no prompt token in its steps) is 1.20x the line there; the rest, 1.25x" in text
    assert "carried 700 prompt tokens each" in text
    # the committed h200 floods: the split multiplies back to the whole miss, and the shown table keeps its columns
    table, none = stepcheck.part_table(3, None, RIG)
    past = table[table["batch"] > predict.TRACE_BATCHES[1] * 1.05]
    if not len(past):
        pytest.skip("no h200 flood past the traced batches")
    worst = past.loc[past["error_pct"].abs().idxmax()]
    line = worst["decode_over_line"]
    assert line > 1 and worst["prompt_per_step"] > 0  # pure decode alone misses the line, by less than the flood
    said = stepcheck.words(table, none, RIG)
    assert f"is {line:.2f}x the line there; the rest, {worst['measured'] / worst['predicted'] / line:.2f}x" in said
    assert list(stepcheck.shown_table(table).columns) == ["model", "kind", "running batch", "measured_ms",
                                                          "predicted_ms", "error_pct"]
