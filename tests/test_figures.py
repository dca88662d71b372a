"""figures.table_html and format_number: a number a table does not have reads as words."""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from inference_wall.figures import MISSING_NUMBER, format_number, table_html


def _cells(html: str) -> list[tuple[str, str]]:
    return re.findall(r'<td class="([^"]*)">([^<]*)</td>', html)


def test_a_missing_number_reads_not_measured():
    assert MISSING_NUMBER == "not measured"
    for value in (None, math.nan, np.nan, pd.NA, np.float64("nan")):
        assert format_number(value) == "not measured"
        assert format_number(value, 2) == "not measured"
    assert format_number(0.0) == "0" and format_number(math.inf) == "∞"  # zero and a flood are numbers


def test_tables_show_missing_numbers_as_words_and_missing_text_as_a_dash():
    frame = pd.DataFrame({"rig": ["a10g", None], "tok_s": [1234.5, math.nan],
                          "ttft_ms": pd.Series([np.int64(12), None], dtype=object)})
    cells = _cells(table_html(frame))
    assert cells[:3] == [("iw-text", "a10g"), ("iw-num", "1,234"), ("iw-num", "12")]
    assert cells[3:] == [("iw-text iw-missing", "–"), ("iw-num iw-missing", "not measured"),
                         ("iw-num iw-missing", "not measured")]
    assert '<th class="iw-num">TTFT (ms)</th>' in table_html(frame)
