"""The manifest as a typed, versioned record (record.PointRecord): every format loads, a bad one fails in one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference_wall import store
from inference_wall.record import FORMAT_VERSION, BadRecord, PointRecord

ROOT = Path(__file__).resolve().parents[1]
CAP256 = ROOT / "data" / "runs" / "03-batching-cliff" / "h200" / "mns-256" / "manifest.json"
MANIFESTS = sorted(ROOT.glob("data/runs/*/*/*/manifest.json"))


def _cap256() -> dict:
    return json.loads(CAP256.read_text())


@pytest.mark.parametrize("path", MANIFESTS, ids=[str(p.parent.relative_to(ROOT / "data" / "runs")) for p in MANIFESTS])
def test_every_committed_manifest_loads_and_round_trips(path):
    d = json.loads(path.read_text())
    rec = PointRecord.from_dict(d, path)
    assert rec.format == FORMAT_VERSION and rec.part == path.parts[-4] and rec.point == path.parent.name
    assert rec.to_dict() == {**d, "format": FORMAT_VERSION}


def test_a_format_1_manifest_without_artefacts_loads():
    d = _cap256()
    d.pop("artefacts")
    d.pop("format", None)
    rec = PointRecord.from_dict(d)
    assert rec.artefacts == {} and rec.session.has_startup is True and rec.extra == {"parameters": d["parameters"]}


def test_typed_attributes_and_typos_fail_loudly():
    rec = PointRecord.from_dict(_cap256())
    assert rec.max_num_seqs == 256 and rec.pass_("bench").wall_s > 0 and rec.complete
    with pytest.raises(AttributeError):
        rec.max_num_seq  # noqa: B018  (a dict's .get would have returned None)
    with pytest.raises(AttributeError):
        rec.session.start_to_healty_s  # noqa: B018


@pytest.mark.parametrize("change, needle", [
    ({"format": FORMAT_VERSION + 1}, "newer"),
    ({"max_num_seqs": "256"}, "'max_num_seqs' should be int"),
    ({"passes": [{"label": "bench", "kind": "measured", "started": "x", "ended": 1.0, "result": "bench.json"}]},
     "'passes[].started' should be"),
    ({"session": {"has_startup": True}}, "'session.id' should be str"),
])
def test_a_bad_manifest_is_one_line_naming_file_and_key(change, needle):
    with pytest.raises(BadRecord) as err:
        PointRecord.from_dict({**_cap256(), **change}, CAP256)
    assert needle in str(err.value) and str(CAP256) in str(err.value) and "\n" not in str(err.value)


def test_a_manifest_without_its_point_name_fails():
    d = _cap256()
    d.pop("point")
    with pytest.raises(BadRecord, match="no 'point'"):
        PointRecord.from_dict(d, CAP256)


def test_point_data_keeps_the_dict_and_adds_the_record():
    pt = next(p for p in store.load_points(3, rigs=["h200"]) if p.name == "mns-256")
    assert pt.manifest.get("max_num_seqs") == pt.record.max_num_seqs == 256
    assert pt.record is pt.record  # read once
