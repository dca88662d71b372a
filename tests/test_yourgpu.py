"""'What would my GPU do?' as a view (pages/yourgpu.py, _static/iw-yourgpu.js): the payload's rule gives what the
refit and the frozen model's page arithmetic give, and in the browser a reader's choice changes the numbers to the
table's."""
from __future__ import annotations

import re
from urllib.parse import urljoin

import pytest

from inference_wall.pages import yourgpu
from inference_wall.parts.p00 import predict, refit
from test_site import base_url, site  # noqa: F401 (the built site, served on loopback)


@pytest.fixture(scope="module")
def data():
    d = yourgpu.payload()
    if d is None:
        pytest.skip("no measured GPU has traced the 4B")
    return d


def test_the_payload_rule_is_the_refits_for_every_datasheet_gpu(data):
    """The rule the browser runs, written out in yourgpu.step, gives refit.predicted_step from the measured GPU
    nearest in bandwidth, at every datasheet GPU and batch: the view's numbers are the model's."""
    measured = refit.measured_gpus()
    tf = {k: g.tflops for k, g in predict.gpus().items()}
    res, _ = refit.resources_from({r: m["fit"] for r, m in measured.items()}, tf)
    model = data["models"]["4B"]
    for g in data["gpus"]:
        fit_rig = yourgpu.nearest_fit(model, g["bandwidth_gb_s"])["rig"]
        m = measured[fit_rig]
        t = refit.Target(g["key"], g["name"], g["bandwidth_gb_s"], "", g["tflops"])
        for b in (1, 8, 100, 256, 700):
            want = refit.predicted_step(m["fit"], res, t, tf[m["datasheet"]], b)["step"]
            assert yourgpu.step(model, g["bandwidth_gb_s"], g["tflops"], b) == pytest.approx(want, rel=1e-9), (g, b)


def test_the_payload_admission_is_the_frozen_models_page_arithmetic(data):
    from inference_wall.parts import p00

    view = p00.rig_view("h200", p00.page_tables(None, ["h200"]), None, None)
    gpus_ = predict.gpus()
    models = predict.step_models(view, None, gpus_)
    ratio = predict.memory_ratio(view, gpus_)
    for g in data["gpus"]:
        for label, m in data["models"].items():
            sm = models[next(v for v, lab in predict.MODEL_LABELS.items() if lab == label)]
            want = sm.admission(sm.usable_gib(gpus_[g["key"]], ratio), data["utilization"], data["tokens"])
            assert yourgpu.admission(m, g["memory_gb"], data["memory_ratio"], data["utilization"]) == want


def test_a_slower_gpu_is_predicted_slower_and_its_ceiling_lower(data):
    gpus_ = {g["key"]: g for g in data["gpus"]}
    fast = yourgpu.summary(data, "4B", gpus_["h200-sxm"]["bandwidth_gb_s"], gpus_["h200-sxm"]["tflops"],
                           gpus_["h200-sxm"]["memory_gb"])
    slow = yourgpu.summary(data, "4B", gpus_["l4"]["bandwidth_gb_s"], gpus_["l4"]["tflops"], gpus_["l4"]["memory_gb"])
    assert slow["single_ms"] > fast["single_ms"] and slow["ceiling_tok_s"] < fast["ceiling_tok_s"]
    assert slow["admission"] < fast["admission"]


# --- in the browser ------------------------------------------------------------------------------------------------

def _number(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.browser
def test_choosing_a_gpu_in_the_page_shows_that_gpus_numbers(page, base_url, data):
    page.goto(urljoin(base_url, "notebooks/00-inside-a-step.html"), wait_until="load")
    page.wait_for_selector("#iw-yourgpu[data-iw-ready]", timeout=20_000)
    root = page.locator("#iw-yourgpu")
    seen = {}
    for key in ("h100-sxm", "a10g", "l4"):
        root.locator("select[name=gpu]").select_option(key)
        page.wait_for_function("k => document.getElementById('iw-yourgpu').dataset.iwReady.startsWith(k + '|')",
                               arg=key, timeout=10_000)
        g = next(x for x in data["gpus"] if x["key"] == key)
        want = yourgpu.summary(data, "4B", g["bandwidth_gb_s"], g["tflops"], g["memory_gb"])
        got = {name: root.locator(f'[data-out="{name}"]').inner_text() for name in
               ("single", "admission", "ceiling", "batch", "stop")}
        assert _number(got["single"]) == pytest.approx(want["single_ms"], rel=0.006)
        assert _number(got["admission"]) == want["admission"] and _number(got["batch"]) == want["batch"]
        assert _number(got["ceiling"]) == pytest.approx(want["ceiling_tok_s"], rel=0.006)
        assert got["stop"] == yourgpu.shown_numbers(want)["stop"]
        note = root.locator('[data-out="note"]').inner_text()
        assert want["fit"] in note and "Predicted, not measured" in note
        seen[key] = got
        # the chart draws the prediction beside the measured rigs
        page.wait_for_function("() => document.querySelector('#iw-yourgpu .iw-yourgpu-chart svg')", timeout=10_000)
    assert len({v["single"] for v in seen.values()}) == 3  # the numbers change with the choice
    # a GPU of the reader's own: twice the bandwidth of the L4 gives a faster single stream than the L4's
    root.locator("select[name=gpu]").select_option("custom")
    l4 = next(x for x in data["gpus"] if x["key"] == "l4")
    root.locator("input[name=bandwidth]").fill(str(2 * l4["datasheet_bandwidth_gb_s"]))
    root.locator("input[name=tflops]").fill(str(l4["tflops"]))
    root.locator("input[name=memory]").fill(str(l4["memory_gb"]))
    root.locator("input[name=memory]").dispatch_event("change")
    page.wait_for_function("() => document.getElementById('iw-yourgpu').dataset.iwReady.startsWith('custom|')")
    assert _number(root.locator('[data-out="single"]').inner_text()) < _number(seen["l4"]["single"])
    assert not re.search(r"\bnan\b|undefined|NaN", root.inner_text())
