"""The one home of the numbers a reader sees (inference_wall.words): each rule, and every formatter of the pages
going through it."""
import math

import pandas as pd
import pytest

from inference_wall import words


@pytest.mark.parametrize("x, text", [(8197.54, "8,200"), (1.4757, "1.48"), (0.0123456, "0.0123"), (0, "0"),
                                     (9.996, "10.0"), (99.96, "100"), (-2.944, "-2.94"), (2049.0, "2,050"),
                                     (1234567.0, "1,230,000"), (0.00001234, "0.0000123")])
def test_sig_keeps_three_significant_figures_and_never_writes_scientific_notation(x, text):
    assert words.sig(x) == text


def test_sig_writes_a_whole_value_exactly_where_asked():
    assert words.sig(2049.0, whole=True) == "2,049" and words.sig(2049.5, whole=True) == "2,050"
    assert words.sig(5.0) == "5.00" and words.sig(5.0, whole=True) == "5"


@pytest.mark.parametrize("x, text", [(8725.4, "8,725"), (13388.2, "13,388"), (56.84, "56.8"), (3.9351, "3.94"),
                                     (0.02448, "0.0245"), (9.996, "10.0"), (999.6, "1,000"), (5.0, "5.00")])
def test_number_keeps_every_whole_digit_past_three(x, text):
    assert words.number(x) == text


@pytest.mark.parametrize("x", [None, math.nan, pd.NA, float("nan")])
def test_one_mark_for_a_missing_value(x):
    for f in (words.sig, words.number, words.table_number, words.times, words.percent,
              lambda v: words.fixed(v, 2)):
        assert f(x) == words.MISSING == "–"


def test_an_infinity_is_a_flood():
    assert words.number(math.inf) == words.sig(math.inf) == "∞" and words.number(-math.inf) == "−∞"


def test_percentages_ratios_and_fixed_decimals():
    assert words.percent(0.052) == "5.20%" and words.percent(0.05) == "5%" and words.percent(0.05, whole=False) == "5.00%"
    assert words.percent(-0.029, 2, signed=True) == "-2.9%" and words.percent(0.03, 2, signed=True) == "+3%"
    assert words.percent(0.456, decimals=0) == "46%" and words.percent(3.2, signed=True, points=True) == "+3.20%"
    assert words.times(2.4136) == "2.41x" and words.fixed(1234.5678, 1) == "1,234.6"
    assert words.table_number(0.5) == "0.5" and words.table_number(1234.0) == "1,234" and words.table_number(12.34) == "12.3"


def test_a_list_in_words():
    assert [words.join_and(x) for x in ([], ["a"], ["a", "b"], ["a", "b", "c"])] == ["", "a", "a and b", "a, b and c"]


def test_per_rig_names_each_rig_once_and_says_a_shared_text_once():
    assert words.per_rig([("h200", "3x")]) == "3x" and words.per_rig([("h200", "3x")], name_one=True) == "h200: 3x"
    assert words.per_rig([("h100", "3x"), ("h200", "4x")]) == "h100: 3x; h200: 4x"
    assert words.per_rig([("a", "3x"), ("b", "4x"), ("c", "3x")]) == "a and c: 3x; b: 4x"


def test_the_pages_formatters_are_the_words_module_s():
    """The formatters the parts and pages had each of their own now call inference_wall.words (no digit rule,
    separator or missing mark of their own)."""
    from inference_wall.figures import format_number
    from inference_wall.measure import analysis, claims
    from inference_wall.pages import glance
    from inference_wall.parts import p00, p01, p02, p03, p04, variants
    from inference_wall.parts.p00 import mixed as mixedsteps, predict

    assert claims.fmt_num is words.number and p01.fmt is words.number and p02._fmt is words.number
    assert glance._sig is words.number and p00._n is words.number and variants.num is words.number
    assert mixedsteps.sig is words.sig and predict._n is words.sig and predict.join_and is words.join_and
    assert analysis.round_sig is words.round_sig and claims.missing is words.missing
    for x in (8197.54, 0.0123456, 2049.0, math.nan):
        assert p04.sig(x) == words.sig(x, whole=True) == variants.sig(x)
        assert p04._n(x) == words.number(x, whole=True)
    assert p03._pct(0.456) == words.percent(0.456, decimals=0) and variants.pct(-0.029) == "-2.9%"
    assert predict._pct(0.004) == "0%" and predict._pct(3.21) == "+3.21%"
    assert format_number(12.34) == words.table_number(12.34) and format_number(12.34, 2) == words.fixed(12.34, 2)
