"""The rig key at the top of each part (inference_wall.pages.rigkey): from the profiles and the manifests, no secret."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from inference_wall.pages.rigkey import rig_key, summary_line
from inference_wall.schema import PUBLISHED_RIG
from inference_wall.records.store import MANIFEST, point_dir

REPO_DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def data(tmp_path):
    """A data folder with the series' reference (its stated setup) and no rigs yet."""
    shutil.copytree(REPO_DATA / "reference" / "01-hit-the-wall", tmp_path / "reference" / "01-hit-the-wall")
    (tmp_path / "rigs").mkdir()
    return tmp_path


def profile(data, rig, **raw):
    (data / "rigs" / f"{rig}.json").write_text(json.dumps(raw))


def manifest(data, part, rig, point, vllm, source="dummy", status="complete"):
    folder = point_dir(part, rig, point, data)
    folder.mkdir(parents=True)
    (folder / MANIFEST).write_text(json.dumps({"status": status, "part": folder.parent.parent.name, "rig": rig,
                                               "point": point, "rig_info": {"vllm": vllm},
                                               "model": {"source": source}}))


def bullet(text, rig):
    (line,) = [line for line in text.splitlines() if line.startswith(f"- **{rig}**")]
    return line


def test_a_token_in_a_profile_does_not_reach_the_key(data):
    token, key = "hf_KEYtokenKEYtokenKEYtokenKEY0123456", "rigkey-api-key-0123456789"
    profile(data, "my-rig", description=f"a rig whose key is {key}", notes=[f"logs in with {token}"],
            env={"HF_TOKEN": token, "OMP_NUM_THREADS": "2"}, serve_args=["--api-key", key, "--enforce-eager"])
    text = rig_key(["my-rig"], data)
    assert token not in text and key not in text
    line = bullet(text, "my-rig")
    assert "`--api-key <redacted> --enforce-eager`" in line
    assert "HF_TOKEN=<redacted> OMP_NUM_THREADS=2" in line


def test_a_rig_without_a_profile_is_stock_and_its_version_comes_from_its_manifests(data):
    manifest(data, 3, "someones-rig", "cap-1", "0.99.1")
    manifest(data, 3, "someones-rig", "cap-4", "0.99.2")
    manifest(data, 3, "someones-rig", "cap-8", "0.77.0", status="failed")  # an unfinished run is not a version
    line = bullet(rig_key(["someones-rig"], data), "someones-rig")
    assert "stock `vllm serve`" in line
    assert "vLLM 0.99.1, 0.99.2 (the series: 0.18.0)" in line
    assert "0.77.0" not in line
    assert "Off stock:" not in line


def test_the_version_is_the_manifests_not_the_profiles_words(data):
    profile(data, "gpu-rig", description="A GPU with vLLM 0.22.1.", model_source="hub")
    manifest(data, 1, "gpu-rig", "rate-1", "0.23.0", source="dummy")
    line = bullet(rig_key(["gpu-rig"], data), "gpu-rig")
    assert "vLLM 0.23.0 (the series: 0.18.0)" in line
    assert "Weights: dummy" in line  # what the runs recorded, over the profile's default
    assert "A stock `vllm serve`" in line  # a profile with no flags or environment


def test_the_version_can_be_one_parts(data):
    manifest(data, 1, "gpu-rig", "rate-1", "0.23.0")
    manifest(data, 3, "gpu-rig", "cap-1", "0.24.0")
    assert "vLLM 0.24.0 (" in bullet(rig_key(["gpu-rig"], data, part=3), "gpu-rig")
    assert "vLLM 0.23.0, 0.24.0 (" in bullet(rig_key(["gpu-rig"], data), "gpu-rig")


def test_the_published_rig_is_the_series_a10g_from_the_reference(data):
    line = bullet(rig_key([PUBLISHED_RIG], data), PUBLISHED_RIG)
    assert "A10G" in line and "vLLM 0.18.0" in line
    # the stated version is read, not typed: change it in the reference and the key follows
    setup = data / "reference" / "01-hit-the-wall" / "server_setup.csv"
    setup.write_text(setup.read_text().replace("vllm_version,0.18.0", "vllm_version,0.17.5"))
    text = rig_key([PUBLISHED_RIG, "other"], data)
    assert "vLLM 0.17.5" in bullet(text, PUBLISHED_RIG)
    assert "(the series: 0.17.5)" in bullet(text, "other")


def test_notes_fold_behind_a_toggle_and_a_repeat_does_not_say_them_twice(data):
    shared = "FlashInfer is not installed, so the prefill runs `triton` kernels."
    profile(data, "base", description="One GPU.", serve_args=["--gdn-prefill-backend", "triton"],
            env={"VLLM_USE_FLASHINFER_SAMPLER": "0"}, notes=[shared])
    profile(data, "base-again", description="The same GPU again.", repeat_of="base",
            serve_args=["--gdn-prefill-backend", "triton"], env={"VLLM_USE_FLASHINFER_SAMPLER": "0"},
            notes=[shared, "Made before the fix."])
    text = rig_key(["base", "base-again"], data)
    body = text.split("<details>", 1)[1]
    assert body.count("FlashInfer is not installed") == 1
    assert "Made before the fix." in body
    assert "<code>triton</code>" in body
    assert "Off stock: as base" in bullet(text, "base-again")
    assert "`--gdn-prefill-backend triton`" in bullet(text, "base")
    assert "`VLLM_USE_FLASHINFER_SAMPLER=0`" in bullet(text, "base")


def test_no_rig_says_so(data):
    assert rig_key([], data) == "**Rig key**: no rig has measured this part yet."


def test_the_repositorys_rigs():
    """The book's own rigs: the H200 runs say dummy weights and the vLLM version their manifests recorded."""
    text = rig_key([PUBLISHED_RIG, "h200"], part=3)
    line = bullet(text, "h200")
    assert "Weights: dummy" in line and "(the series: 0.18.0)" in line
    assert "--gdn-prefill-backend triton" in line
    assert not re.search(r"\b(nan|NaN|None|True|False)\b", text)


# --- the key folds behind one line that names the rigs, so that the page's first figure comes before it -------------
def rendered(text):
    """The key as the book renders a notebook's Markdown output (CommonMark: the <details> lines are HTML blocks)."""
    from bs4 import BeautifulSoup
    from markdown_it import MarkdownIt

    return BeautifulSoup(MarkdownIt("commonmark").render(text), "html.parser")


def test_the_key_folds_behind_one_line_naming_its_rigs(data):
    profile(data, "base", description="One GPU.", notes=["Why it differs."])
    profile(data, "base-again", description="The same GPU again.", repeat_of="base")
    text = rig_key([PUBLISHED_RIG, "base", "base-again", "base"], data)
    assert text.startswith(summary_line([PUBLISHED_RIG, "base", "base-again"]))
    assert text.count("<details") == text.count("</details>") == 2
    soup = rendered(text)
    (key,) = soup.select("details.iw-rigkey")
    assert key.parent.name == "[document]"  # nothing of the key outside its toggle
    line = key.find("summary", recursive=False).get_text()
    assert line.startswith("Rig key: a10g-published, base, base-again ("), line  # each rig once, in the page's order
    # every rig's bullet and the profiles' notes are inside the folded key, the notes in their own toggle
    items = [li.get_text(" ", strip=True) for li in key.select(":scope > ul > li")]
    assert [i.split(" ")[0] for i in items] == [PUBLISHED_RIG, "base", "base-again"]
    (notes,) = key.select(":scope > details")
    assert "Why it differs." in notes.get_text()
    assert not key.has_attr("open") and not notes.has_attr("open")


def test_the_keys_line_escapes_what_it_names():
    line = summary_line(["a<b", "c&d"])
    assert "a&lt;b, c&amp;d" in line and "a<b" not in line
    assert line.startswith('<details class="iw-rigkey"><summary>') and line.endswith("</summary>")


def test_a_key_without_notes_still_closes_its_toggle(data):
    profile(data, "plain", description="A stock GPU.")
    text = rig_key(["plain"], data)
    assert "Why each rig differs" not in text
    assert text.count("<details") == text.count("</details>") == 1
    (key,) = rendered(text).select("details.iw-rigkey")
    assert "A stock GPU." in key.get_text()
