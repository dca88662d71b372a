"""The store's integrity checks: a manifest records each artefact's size and sha256; reading checks them."""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from inference_wall.records import store
from inference_wall.errors import LogParseError

ROOT = Path(__file__).resolve().parents[1]
H200_CAP256 = ROOT / "data" / "runs" / "03-batching-cliff" / "h200" / "mns-256"


def _point_with_hashes(tmp_path: Path, src: Path = H200_CAP256) -> store.PointData:
    dest = tmp_path / "03-batching-cliff" / "h200" / src.name
    shutil.copytree(src, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["artefacts"] = store.artefact_records(dest)
    store.write_json_atomic(dest / "manifest.json", manifest)
    return store.PointData("03-batching-cliff", "h200", dest, manifest)


def test_artefact_records_hold_size_and_sha256(tmp_path):
    pt = _point_with_hashes(tmp_path)
    rec = pt.manifest["artefacts"]
    assert set(rec) == {f.name for f in pt.path.iterdir()} - {"manifest.json"}
    log = pt.path / "server.log"
    assert rec["server.log"] == {"bytes": log.stat().st_size, "sha256": store.sha256_file(log)}


def test_a_truncated_server_log_fails_naming_the_file(tmp_path):
    """Unchecked, the cut log of h200's cap-256 point reads as a running batch of 1 instead of 256."""
    pt = _point_with_hashes(tmp_path)
    assert store.pass_summary(pt)["running_max"] == 256
    log = pt.path / "server.log"
    text = log.read_bytes()
    log.write_bytes(text[: len(text) * 2 // 3])
    with pytest.raises(store.CorruptArtefact) as err:
        store.pass_summary(pt)
    assert str(log) in str(err.value) and "truncated" in str(err.value)


def test_a_changed_file_of_the_same_size_fails_on_its_hash(tmp_path):
    pt = _point_with_hashes(tmp_path)
    path = pt.path / "metrics-after.prom"
    text = path.read_text()
    path.write_text(text.replace("0", "1", 1))
    with pytest.raises(store.CorruptArtefact, match="sha256") as err:
        pt.metrics("after")
    assert str(path) in str(err.value)


def test_a_truncated_gz_names_its_file(tmp_path):
    point = tmp_path / "pt"
    point.mkdir()
    blob = gzip.compress(json.dumps({"completed": 1, "x": list(range(5000))}).encode())
    (point / "bench.json.gz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(LogParseError) as err:
        store.read_artefact(point, "bench.json")  # no manifest: only gzip itself can tell
    assert str(point / "bench.json.gz") in str(err.value) and "gzip" in str(err.value)


def test_manifests_without_hashes_still_load(tmp_path):
    dest = tmp_path / "pt"
    shutil.copytree(H200_CAP256, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest.pop("artefacts", None)
    store.write_json_atomic(dest / "manifest.json", manifest)
    pt = store.PointData("03-batching-cliff", "h200", dest, manifest)
    assert store.pass_summary(pt)["running_max"] == 256


def test_every_committed_point_records_and_matches_its_artefacts():
    points = list(store.iter_points(complete_only=False))
    assert points
    for _part, _rig, point, manifest in points:
        recorded = manifest.get("artefacts")
        assert recorded, f"{point}: no artefact hashes (scripts/record-artefact-hashes.py adds them)"
        assert set(recorded) == {f.name for f in point.iterdir() if f.is_file()} - {"manifest.json"}, point
        for name, rec in recorded.items():
            assert (point / name).stat().st_size == rec["bytes"], point / name


# ---------------------------------------------------------------------------------------------
# The derived-table cache (_build/cache/derived): parse a raw file once per file version and parser version
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def cache(tmp_path, monkeypatch):
    where = tmp_path / "cache"
    monkeypatch.setenv("IW_CACHE_DIR", str(where))
    store.clear_memo()
    yield where
    store.clear_memo()


def _count_calls(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_a_second_build_parses_nothing(cache, tmp_path, monkeypatch):
    """A new process (memo cleared) reads the tables the first one derived instead of parsing the raw files."""
    from inference_wall.records import logs

    pt = _point_with_hashes(tmp_path)
    first = store.pass_summary(pt)
    assert any(cache.rglob("*.pkl"))
    store.clear_memo()
    calls = {n: _count_calls(monkeypatch, logs, n) for n in ("parse_stats", "parse_startup", "bench_from_dict", "parse_metrics")}
    again = store.pass_summary(pt)
    assert {n: len(c) for n, c in calls.items()} == {n: 0 for n in calls}
    assert {k: str(v) for k, v in again.items()} == {k: str(v) for k, v in first.items()}  # str: NaN == NaN


def test_a_data_dir_linking_the_same_runs_reads_their_entries_and_a_copy_parses_anew(cache, tmp_path, monkeypatch):
    """The key holds the file's real path: a data dir whose runs/ is a symlink (the tests', a user's --data-dir)
    reads what the first one derived; a copy of the same bytes elsewhere is another file and is parsed itself
    (a parsed result names its file)."""
    from inference_wall.records import logs

    pt = _point_with_hashes(tmp_path / "a")
    first = store.pass_summary(pt)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "runs").symlink_to(tmp_path / "a")
    linked = store.PointData(pt.part, pt.rig, tmp_path / "b" / "runs" / pt.path.relative_to(tmp_path / "a"), pt.manifest)
    store.clear_memo()
    calls = _count_calls(monkeypatch, logs, "parse_stats")
    hashed = _count_calls(monkeypatch, store, "sha256_file")  # each file version is hashed once, under its real path
    assert str(store.pass_summary(linked)) == str(first) and calls == [] and hashed == []
    copy = _point_with_hashes(tmp_path / "c", pt.path)
    store.pass_summary(copy)
    assert len(calls) == 1


def test_a_changed_raw_file_is_parsed_again(cache, tmp_path, monkeypatch):
    from inference_wall.records import logs

    pt = _point_with_hashes(tmp_path)
    assert store.pass_summary(pt)["running_max"] == 256
    log = pt.path / "server.log"
    log.write_text(log.read_text().replace("Running: 256 reqs", "Running: 255 reqs"))
    manifest = dict(pt.manifest, artefacts=store.artefact_records(pt.path))  # a legitimate rewrite, recorded
    store.write_json_atomic(pt.path / "manifest.json", manifest)
    store.clear_memo()
    calls = _count_calls(monkeypatch, logs, "parse_stats")
    assert store.pass_summary(store.PointData(pt.part, pt.rig, pt.path, manifest))["running_max"] == 255
    assert len(calls) == 1


def test_a_new_parser_version_parses_again(cache, tmp_path, monkeypatch):
    from inference_wall.records import logs

    pt = _point_with_hashes(tmp_path)
    store.pass_summary(pt)
    store.clear_memo()
    monkeypatch.setattr(store, "parser_version", lambda: "another-parser")
    calls = _count_calls(monkeypatch, logs, "parse_stats")
    store.pass_summary(pt)
    assert len(calls) == 1


def test_a_damaged_cache_entry_is_parsed_again(cache, tmp_path):
    pt = _point_with_hashes(tmp_path)
    first = store.pass_summary(pt)["running_max"]
    for entry in cache.rglob("*.pkl"):
        entry.write_bytes(entry.read_bytes()[:10])
    store.clear_memo()
    assert store.pass_summary(pt)["running_max"] == first


def test_the_cache_never_hides_a_corrupt_raw_file(cache, tmp_path):
    pt = _point_with_hashes(tmp_path)
    store.pass_summary(pt)
    store.clear_memo()
    log = pt.path / "server.log"
    log.write_bytes(log.read_bytes()[:-100])
    with pytest.raises(store.CorruptArtefact):
        store.pass_summary(pt)


@pytest.mark.parametrize("name", ["metrics-after.prom", "server.log", "bench.json"])
def test_an_artefact_listed_in_the_manifest_but_deleted_fails_naming_the_point_and_the_file(tmp_path, name):
    """Before, a deleted metrics snapshot read as 'no snapshot' and the point's tokens per step became NaN."""
    pt = _point_with_hashes(tmp_path)
    assert store.pass_summary(pt)["tokens_per_step"] > 0
    path = pt.path / name
    if not path.exists():
        path = path.with_name(name + ".gz")
    path.unlink()
    with pytest.raises(store.CorruptArtefact) as err:
        store.pass_summary(pt)
    assert str(pt.path) in str(err.value) and path.name in str(err.value) and "missing" in str(err.value)


def test_a_file_no_manifest_lists_is_simply_absent(tmp_path):
    pt = _point_with_hashes(tmp_path)
    assert pt.metrics("nonesuch") == {}


def test_a_manifest_gets_the_file_mode_of_the_other_artefacts(tmp_path):
    """mkstemp makes its temp file 0600: a manifest was readable by its owner only, the artefacts beside it not."""
    (tmp_path / "bench.json").write_text("{}")
    store.write_json_atomic(tmp_path / "manifest.json", {"status": "complete"})
    assert (tmp_path / "manifest.json").stat().st_mode & 0o777 == (tmp_path / "bench.json").stat().st_mode & 0o777


def _no_space(*_a, **_k):
    import errno

    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_names_the_manifest_it_could_not_write_and_leaves_nothing_partial(tmp_path, monkeypatch):
    """Before, write_json_atomic let the OSError through (a traceback, no path named)."""
    point = tmp_path / "p0"
    point.mkdir()
    monkeypatch.setattr(store.os, "fsync", _no_space)
    with pytest.raises(store.UserError) as err:
        store.write_json_atomic(point / "manifest.json", {"status": "complete"})
    message = str(err.value)
    assert "\n" not in message and f"could not write {point / 'manifest.json'}: No space left on device" in message
    assert "free space" in message
    assert list(point.iterdir()) == []  # neither the manifest nor its temporary file


def test_a_full_disk_while_compressing_keeps_the_original_and_no_truncated_gz(tmp_path, monkeypatch):
    """Before, the half-written .gz stayed beside the original (and the OSError named no file)."""
    point = tmp_path / "p0"
    point.mkdir()
    big = point / "bench.json"
    big.write_bytes(b"x" * 2048)

    def half_then_full(src, dst):
        dst.write(src.read(512))
        dst.flush()
        _no_space()

    monkeypatch.setattr(store.shutil, "copyfileobj", half_then_full)
    with pytest.raises(store.UserError, match=f"could not write {point / 'bench.json.gz'}: No space left"):
        store.compress_large(point, limit=1024)
    assert sorted(f.name for f in point.iterdir()) == ["bench.json"] and big.read_bytes() == b"x" * 2048


def test_a_full_disk_while_polling_names_the_poll_file_and_removes_it(tmp_path, monkeypatch):
    """Before, the poller's thread died on the OSError unseen and the pass kept a truncated poll file."""
    from inference_wall.records import poller

    real_open = poller.lzma.open

    class FillsUp:
        def __init__(self, *a, **k):
            self._f, self._writes = real_open(*a, **k), 0

        def write(self, text):
            self._writes += 1
            if self._writes > 2:
                _no_space()
            return self._f.write(text)

        def close(self):
            self._f.close()

    monkeypatch.setattr(poller.lzma, "open", FillsUp)
    path = tmp_path / "p0" / poller.artefact_name("bench")
    with pytest.raises(store.UserError) as err:
        with poller.polling("http://127.0.0.1:9", path, 0.01) as running:  # nothing listens: errors are recorded
            running._thread.join(timeout=30)  # the third write fills the disk
            assert path.exists() and running.samples == 2
    assert "\n" not in str(err.value) and f"could not write {path}: No space left on device" in str(err.value)
    assert not path.exists()
