"""The manifest as a typed, versioned record (record.PointRecord): every format loads, a bad one fails in one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference_wall.records import store
from inference_wall.records.record import FORMAT_VERSION, BadRecord, PointRecord

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


# ---------------------------------------------------------------------------------------------
# One reader of manifests; a format-1 manifest migrated once (migrate-records), then its files are checked on read
# ---------------------------------------------------------------------------------------------

def test_the_reader_names_a_manifest_that_is_not_json_or_not_a_record(tmp_path):
    from inference_wall.records.record import read_manifest, read_record

    assert read_manifest(tmp_path) is None and read_record(tmp_path) is None
    (tmp_path / ".writer.lock").write_text("")  # a file beside the points (the lock any run leaves) is no point
    assert read_manifest(tmp_path / ".writer.lock") is None and read_record(tmp_path / ".writer.lock") is None
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(BadRecord, match="not valid JSON"):
        read_record(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({**_cap256(), "max_num_seqs": "256"}))
    with pytest.raises(BadRecord, match="'max_num_seqs' should be int") as err:
        read_manifest(tmp_path)
    assert str(tmp_path / "manifest.json") in str(err.value)


@pytest.mark.parametrize("text", ["{", "[]", json.dumps({"status": "complete"})])
def test_a_damaged_manifest_is_refused_with_its_remedy(tmp_path, text):
    """Before, a damaged artefact was refused with a remedy (restore it, or rerun the point) but a damaged manifest
    only by name."""
    from inference_wall.records.record import read_record

    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(BadRecord) as err:
        read_record(tmp_path)
    said = str(err.value)
    assert "\n" not in said and said.startswith(str(tmp_path / "manifest.json"))
    assert "restore it from git (git checkout -- manifest.json in its folder)" in said
    assert "remove the point's folder to make the point again" in said


def _format_1_copy(tmp_path, keep_hashes: bool = False) -> tuple[Path, Path]:
    """(data dir, point folder): CAP256's point copied under tmp_path, its manifest as format 1 wrote it (no
    `format`; no `artefacts` unless keep_hashes)."""
    import shutil

    data = tmp_path / "data"
    point = data / "runs" / "03-batching-cliff" / "h200" / "mns-256"
    shutil.copytree(CAP256.parent, point)
    m = _cap256()
    m.pop("format", None)
    if not keep_hashes:
        m.pop("artefacts")
    store.write_json_atomic(point / "manifest.json", m)
    return data, point


def _tamper(path: Path) -> None:
    """Change one byte of `path`, its size kept (so only its hash can tell), with a new mtime."""
    import os

    raw = bytearray(path.read_bytes())
    raw[1] = ord(" ") if raw[1] != ord(" ") else ord("\t")
    path.write_bytes(bytes(raw))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


def test_migrate_records_hashes_a_format_1_point_and_a_tampered_file_is_then_refused(tmp_path, capsys):
    from inference_wall import cli

    data, point = _format_1_copy(tmp_path)
    original = (point / "warmup.json").read_bytes()
    _tamper(point / "warmup.json")
    store.read_artefact(point, "warmup.json")  # format 1 without hashes: the change goes unseen
    (point / "warmup.json").write_bytes(original)

    assert cli.main(["migrate-records", "--check", "--data-dir", str(data)]) == 1
    assert "03-batching-cliff/h200/mns-256" in capsys.readouterr().out
    assert cli.main(["migrate-records", "--data-dir", str(data)]) == 0
    migrated = json.loads((point / "manifest.json").read_text())
    # the hashes a current sweep records, equal to those the committed manifest holds; every other key as written
    assert migrated["format"] == FORMAT_VERSION and migrated["artefacts"] == _cap256()["artefacts"]
    assert {k: v for k, v in migrated.items() if k not in ("format", "artefacts")} == {
        k: v for k, v in _cap256().items() if k not in ("format", "artefacts")}
    assert cli.main(["migrate-records", "--check", "--data-dir", str(data)]) == 0

    _tamper(point / "warmup.json")
    with pytest.raises(store.CorruptArtefact, match="warmup.json"):
        store.read_artefact(point, "warmup.json")


def test_a_format_1_point_whose_file_differs_from_its_recorded_hash_is_left_as_it_is(tmp_path, capsys):
    from inference_wall import cli

    data, point = _format_1_copy(tmp_path, keep_hashes=True)
    _tamper(point / "warmup.json")
    before = (point / "manifest.json").read_text()
    assert cli.main(["migrate-records", "--data-dir", str(data)]) == 1
    out = capsys.readouterr().out
    assert "left at format 1" in out and "warmup.json's sha256 differs" in out
    assert (point / "manifest.json").read_text() == before  # the changed file's hash is never recorded
    assert cli.main(["migrate-records", "--check", "--data-dir", str(data)]) == 1


def test_a_hash_less_point_missing_a_listed_file_is_left_as_it_is(tmp_path, capsys):
    from inference_wall import cli

    data, point = _format_1_copy(tmp_path)
    (point / "warmup.json").unlink()
    assert cli.main(["migrate-records", "--data-dir", str(data)]) == 1
    assert "its manifest lists" in capsys.readouterr().out
    assert "format" not in json.loads((point / "manifest.json").read_text())


def test_migrate_records_without_a_runs_folder_is_one_line(tmp_path, capsys):
    from inference_wall import cli

    assert cli.main(["migrate-records", "--check", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no runs/ folder" in err and err.count("\n") == 1


def test_no_committed_manifest_is_of_format_1():
    assert store.format_1_points() == []


# ---------------------------------------------------------------------------------------------
# Points combined in one fit or spread: the keys on which their setups differ
# ---------------------------------------------------------------------------------------------

def _with(command: list | None = None, vllm: str | None = None, gpu: str | None = None) -> dict:
    d = _cap256()
    if command is not None:
        d["session"] = {**d["session"], "server_command": command}
    if vllm is not None:
        d["rig_info"] = {**d["rig_info"], "vllm": vllm}
    if gpu is not None:
        d["rig_info"] = {**d["rig_info"], "gpu": {**d["rig_info"]["gpu"], "name": gpu}}
    return d


def _command(*flags: str) -> list:
    base = _cap256()["session"]["server_command"]
    serve = base.index("serve")
    return base[:serve + 2] + ["--host", "127.0.0.1", "--port", "1"] + list(flags)


def test_setup_differences_names_vllm_gpu_and_each_serve_flag_that_differs():
    from inference_wall.records.record import setup_differences

    a = _with(_command("--max-num-seqs", "8", "--dtype", "float16", "--enforce-eager"))
    b = _with(_command("--max-num-seqs", "64", "--dtype=float16", "--enforce-eager"))
    b["session"]["server_command"][b["session"]["server_command"].index("--port") + 1] = "2"
    assert setup_differences([a, b], varied=["--max-num-seqs"]) == []  # the varied flag and the port are not setup
    assert setup_differences([a, b]) == ["--max-num-seqs"]
    c = _with(_command("--max-num-seqs", "64", "--dtype", "bfloat16"), vllm="0.0.0-other", gpu="another GPU")
    assert setup_differences([a, b, c], varied=["--max-num-seqs"]) == ["vLLM version", "GPU", "--dtype",
                                                                      "--enforce-eager"]
    no_session = {**_cap256(), "session": None}
    assert setup_differences([a, no_session], varied=["--max-num-seqs"]) == ["serve command"]


def test_setup_differences_reads_points_records_and_dicts_alike():
    from inference_wall.records.record import setup_differences

    pts = [p for p in store.load_points(3, rigs=["h200"]) if p.name == "mns-256"]
    assert pts and setup_differences(pts + [pts[0].record, _cap256()]) == []


def test_pages_read_points_through_the_typed_record():
    """Issue 25: the parts, the glance page and the figures read a point's manifest through PointRecord (39 raw reads
    of the dict before), so a renamed or mistyped key fails once, in record.py, and not silently in a page (p01 read
    `rig_info.vllm_version`, a key no manifest has). Only the store (which loads them) and the sweep (which writes
    them and compares a point's recorded settings as written) touch the dicts."""
    import re
    from pathlib import Path

    pkg = Path(__file__).resolve().parents[1] / "src" / "inference_wall"
    raw = re.compile(r"\bmanifest(?:\.get\(|\[)")
    allowed = {"record.py", "store.py", "sweep.py"}
    found = [f"{p.relative_to(pkg)}:{i}" for p in sorted(pkg.rglob("*.py")) if p.name not in allowed
             for i, line in enumerate(p.read_text().splitlines(), 1) if raw.search(line)]
    assert not found, found
