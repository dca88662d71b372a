"""One home for the numbers a reader sees: how a measured or derived number is written in the pages' sentences and
tables (after pyperf's _formatter.py: small pure functions, one rule each). Every page formats through these;
nothing else in the package decides digits, separators, signs or the mark of a missing value.

- `sig`: at most `digits` significant figures (8,725 -> 8,720), thousands separated, never scientific notation.
- `number`: the same, but a number with more whole digits than `digits` keeps them (8,725 -> 8,725): a rate or a
  count of tokens is read whole; below that, `digits` significant figures (12.34 -> 12.3, 0.01234 -> 0.0123).
- `table_number`: a table cell's number (`number`'s rule, a whole value exactly, a fraction's trailing zeros cut).
- `fixed`: exactly so many decimals, thousands separated (a table column lined up).
- `percent`: a share as a percentage ("5.2%", "+3%"); `times`: a ratio ("2.41x").
- `join_and`: a list in words ("a, b and c").
A missing value (None, NaN, pandas' NA) is written `MISSING` everywhere; an infinity (a flood's offered rate) `∞`."""
from __future__ import annotations

import math

MISSING = "–"  # the one mark of a number a page does not have
INFINITY = "∞"


def missing(value) -> bool:
    """A measurement that is not there: None, pandas' NA or NaT, or a float NaN."""
    if value is None:
        return True
    try:
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return True
    except ImportError:  # pragma: no cover - the package always has pandas
        pass
    return isinstance(value, float) and math.isnan(value)


def known_number(value) -> bool:
    """A finite number (not missing, not an infinity, not text)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and not missing(value)
            and math.isfinite(value))


def _special(x) -> str | None:
    """The text of a value that has no digits to round: missing, or an infinity; None for a finite number."""
    if missing(x):
        return MISSING
    x = float(x)
    if math.isnan(x):
        return MISSING
    if math.isinf(x):
        return INFINITY if x > 0 else "−" + INFINITY
    return None


def _places(x: float, digits: int) -> int:
    """Decimals that leave `digits` significant figures of `x` (negative: rounding left of the point), counted on `x`
    rounded (9.996 at three figures is 10.0, not 10.00)."""
    places = digits - 1 - int(math.floor(math.log10(abs(x))))
    rounded = round(x, places)
    return places if rounded == 0 else digits - 1 - int(math.floor(math.log10(abs(rounded))))


def cell_decimals(x, decimals: int | None, digits: int = 3) -> int | None:
    """A table column's `decimals` for one of its cells, cut where they would show more than `digits` significant
    figures (a column of [0.28, 4.71, 18.64] at two decimals shows 18.6): the column lines up to the figure a reader
    needs, never a fourth. None (a whole column), zero, a missing or infinite value: the column's own."""
    if decimals is None or _special(x) is not None or float(x) == 0:
        return decimals
    return max(0, min(decimals, _places(float(x), digits)))


def _figures(x, digits: int, whole: bool, every_whole_digit: bool) -> str:
    """sig's and number's rule: `digits` significant figures (every whole digit kept where `every_whole_digit`), a
    whole value exactly where `whole`, thousands separated, never scientific notation."""
    special = _special(x)
    if special is not None:
        return special
    x = float(x)
    if whole and x.is_integer():
        return f"{int(x):,}"
    if x == 0:
        return "0"
    places = _places(x, digits)
    if every_whole_digit:
        places = max(0, places)
    return f"{round(x, places):,.{max(0, places)}f}"


def sig(x, digits: int = 3, *, whole: bool = False) -> str:
    """`x` at most `digits` significant figures, thousands separated, never scientific notation (8,197.5 -> 8,200;
    1.4757 -> 1.48; 0 -> 0). `whole`: a whole value (a count, a pool's pages) exactly (1,234 stays 1,234)."""
    return _figures(x, digits, whole, every_whole_digit=False)


def number(x, digits: int = 3, *, whole: bool = False) -> str:
    """`x` for a sentence: `digits` significant figures below 10**digits, every whole digit above it (8,725.4 ->
    8,725; 56.84 -> 56.8; 0.03921 -> 0.0392), thousands separated, never scientific notation. `whole`: a whole value
    exactly (5 stays 5, not 5.00)."""
    return _figures(x, digits, whole, every_whole_digit=True)


def fixed(x, decimals: int) -> str:
    """`x` with exactly `decimals` decimals, thousands separated (a table column whose numbers line up)."""
    special = _special(x)
    return special if special is not None else f"{float(x):,.{decimals}f}"


def table_number(x) -> str:
    """A number in a table cell with no column rule: a whole value exactly (1,234), else `number`'s three figures,
    a fraction's trailing zeros cut (0.5, not 0.500)."""
    special = _special(x)
    if special is not None:
        return special
    x = float(x)
    if x.is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    if abs(x) >= 1:
        return number(x)
    return f"{x:.3g}"


def percent(x, digits: int = 3, *, signed: bool = False, decimals: int | None = None, whole: bool = True,
            points: bool = False) -> str:
    """A share `x` (0.052) as a percentage: "5.2%"; `points`: `x` is already in percent (5.2). `digits` significant
    figures (a whole percentage exactly, unless not `whole`), or exactly `decimals` decimals; `signed`: a "+" before
    a rise ("+3%", "-2.9%")."""
    special = _special(x)
    if special is not None:
        return special
    value = float(x) if points else 100 * float(x)
    text = fixed(value, decimals) if decimals is not None else sig(value, digits, whole=whole)
    return ("+" if signed and value > 0 else "") + text + "%"


def times(x, digits: int = 3) -> str:
    """A ratio as a reader reads it: "2.41x" (`number`'s digits)."""
    special = _special(x)
    return special if special is not None else number(x, digits) + "x"


def round_sig(x: float, digits: int = 3) -> float:
    """`x` rounded to `digits` significant figures, as a number (a table's cell); NaN stays NaN."""
    return float(f"{x:.{digits}g}") if x == x else x


def join_and(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c' ('' for none): how the pages' sentences list things."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


def per_rig(items: list[tuple[str, str]], *, name_one: bool = False) -> str:
    """One finding over the rigs a page shows, from (rig, text) pairs: one rig's text as it is (behind its name with
    `name_one`, for a page that shows other rigs too); several rigs' texts each behind its rig's name ('h100: ...;
    h200: ...'), a text several rigs share said once behind all their names ('h100 and h200: ...'). A findings box
    says each finding once with every rig in it, not a rig's bullets in turn."""
    if len(items) == 1 and not name_one:
        return items[0][1]
    same: dict[str, list[str]] = {}
    for rig, text in items:
        same.setdefault(text, []).append(rig)
    return "; ".join(f"{join_and(rigs)}: {text}" for text, rigs in same.items())
