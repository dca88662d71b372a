"""The primer's measured figures: chunking-off prompts only, per rig and length; growth from the smallest to the
largest measured point."""
import math

import pandas as pd
import pytest

from inference_wall.pages import primer


def _inj(rows):
    cols = ["rig", "budget", "prompt_len", "solo_ttft_ms", "solo_ttft_min_ms", "solo_ttft_max_ms"]
    return pd.DataFrame(rows, columns=cols)


def test_prefill_takes_the_prompts_sent_alone_with_chunking_off():
    inj = _inj([("r", 0, 1024, 100.0, 90.0, 110.0), ("r", 0, 1024, 102.0, 95.0, 120.0),
                ("r", 0, 4096, 400.0, 380.0, 420.0), ("r", 2048, 4096, 999.0, 999.0, 999.0),
                ("r", 0, 8192, math.nan, math.nan, math.nan)])
    t = primer.prefill_table(inj).set_index("prompt_len")
    assert list(t.index) == [1024, 4096]  # the chunked row and the length without a solo time are not prefill
    assert t.loc[1024, "ttft_ms"] == pytest.approx(101.0)
    assert (t.loc[1024, "ttft_min_ms"], t.loc[1024, "ttft_max_ms"]) == (90.0, 120.0)
    assert t.loc[4096, "ttft_ms"] == 400.0
    g = primer.growth(t.reset_index(), "prompt_len", "ttft_ms").iloc[0]
    assert (g["x_factor"], g["y_factor"]) == pytest.approx((4.0, 400.0 / 101.0))


def test_growth_needs_two_points_per_rig_and_no_data_is_an_empty_table():
    decode = pd.DataFrame({"rig": ["a", "a", "b"], "batch": [1, 64, 1], "step_ms": [4.0, 6.0, 3.0],
                           "decode_tok_s": [250.0, 10666.0, 333.0]})
    g = primer.growth(primer.decode_steps(decode), "batch", "step_ms")
    assert list(g["rig"]) == ["a"] and g.iloc[0]["y_factor"] == pytest.approx(1.5)
    assert primer.prefill_table(_inj([])).empty and primer.decode_steps(decode.iloc[:0]).empty


def test_primer_figures_use_the_rig_colours():
    """The primer's charts colour each rig as every other page does (they used Vega's own palette)."""
    from inference_wall import figures

    decode = pd.DataFrame({"rig": ["h200", "h200", "cpu-tiny"], "batch": [1, 64, 1], "step_ms": [4.0, 6.0, 3.0],
                           "decode_tok_s": [250.0, 10666.0, 333.0]})
    scale = figures.primer.decode_chart(decode).to_dict()["encoding"]["color"]["scale"]
    assert dict(zip(scale["domain"], scale["range"])) == figures.rig_palette(["h200", "cpu-tiny"])
    t = pd.DataFrame({"rig": ["h200"], "prompt_len": [4096], "ttft_ms": [10.0], "ttft_min_ms": [9.0], "ttft_max_ms": [11.0]})
    layers = figures.primer.prefill_chart(t).to_dict()["concat"][0]["layer"]
    colours = [layer["encoding"]["color"]["scale"]["range"] for layer in layers if "color" in layer["encoding"]]
    assert colours and all(c == [figures.rig_colour("h200")] for c in colours)
