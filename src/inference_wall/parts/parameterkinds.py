"""The kinds a part's parameters take: a value given for a parameter (--set, a rig profile's overrides) is of its
default's kind (parameter_errors). Read by the run request (runrequest.py) and the registry's profile check."""
from __future__ import annotations

import json
import math


# A parameter whose default is None (the part works it out) takes values of this kind, as a default like it would
# say: the kinds that the parts' plans read (p03's caps as whole numbers, p02's knee_rps as a rate, ...).
UNSET_DEFAULT_LIKE = {"caps": [1], "small_caps": [1], "knee_budgets": [1], "mixed_budgets": [1], "pools": [1],
                      "small_pools": [1], "small_pool_limits": [1], "rates_rps": [1.0], "mixed_prompt_len": 1,
                      "trace_prompt_len": 1, "long_prefill_token_threshold": 1, "block_size": 1, "knee_rps": 1.0,
                      "peak_dense_tflops": 1.0, "peak_source": "", "small_preset": ""}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# (type of a default, what a value must be, the same of a list's items, the check); bool before int (its subclass)
_SCALARS = ((bool, "true or false", "true or false values", lambda v: isinstance(v, bool)),
            (int, "a whole number", "whole numbers", lambda v: isinstance(v, int) and not isinstance(v, bool)),
            (float, "a number", "numbers", _number),
            (str, "a string", "strings", lambda v: isinstance(v, str)),
            (dict, "an object", "objects", lambda v: isinstance(v, dict)))


def _scalar(default):
    return next((rule for rule in _SCALARS if isinstance(default, rule[0])), None)


def _rule(default):
    """(what a value must be, its check) for a parameter with this default; None: a default that takes anything."""
    if isinstance(default, (list, tuple)):
        items = {_scalar(v) for v in default}
        if len(items) == 1 and None not in items:
            _, _, many, check = items.pop()
            return f"a list of {many}", lambda v: isinstance(v, (list, tuple)) and all(check(x) for x in v)
        return "a list", lambda v: isinstance(v, (list, tuple))
    rule = _scalar(default)
    return (rule[1], rule[3]) if rule else None


def _described(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parameter_errors(defaults: dict, values: dict) -> list[str]:
    """'KEY must be a list of whole numbers, not [1, "4"]' for each value (None aside: the default's) of a kind its
    parameter's default (or UNSET_DEFAULT_LIKE) does not have. The one rule for --set and a profile's overrides."""
    out = []
    for key, value in values.items():
        rule = _rule(defaults.get(key) if defaults.get(key) is not None else UNSET_DEFAULT_LIKE.get(key))
        if rule and value is not None and not rule[1](value):
            out.append(f"{key} must be {rule[0]}, not {_described(value)}")
    return out
