"""Rig profiles (data/rigs/*.json) are checked against a schema: known keys, right types, one-line errors."""
from __future__ import annotations

import json

import pytest

from inference_wall.errors import UserError
from inference_wall.run.rig import PROFILE_KEYS, known_profiles, load_profile


def test_every_committed_profile_is_valid():
    assert known_profiles()
    for rig in known_profiles():
        assert load_profile(rig).has_profile


def test_the_emulation_keys_are_known(tmp_path):
    (tmp_path / "rigs").mkdir()
    (tmp_path / "rigs" / "emu.json").write_text(json.dumps(
        {"emulates": "the A10G's KV pool", "does_not_emulate": ["bandwidth", "compute"], "repeat_of": None}))
    profile = load_profile("emu", tmp_path)
    assert profile.emulates == "the A10G's KV pool" and profile.does_not_emulate == ["bandwidth", "compute"]
    assert {"emulates", "does_not_emulate", "serve_args", "env", "overrides", "repeat_of"} <= PROFILE_KEYS


@pytest.mark.parametrize("raw, needle", [
    ({"serve_args": "--enforce-eager"}, "['serve_args']: '--enforce-eager' is not of type 'array'"),
    ({"env": {"OMP_NUM_THREADS": 2}}, "['env']['OMP_NUM_THREADS']: 2 is not of type 'string'"),
    ({"model_source": "disk"}, "'disk' is not one of ['dummy', 'hub']"),
    ({"method_only": "yes"}, "['method_only']: 'yes' is not of type 'boolean'"),
    ({"does_not_emulate": "bandwidth"}, "['does_not_emulate']"),
    ({"overrides": {"03-batching-cliff": [1, 4]}}, "['overrides']['03-batching-cliff']"),
    ({"serve_arg": []}, "unknown keys ['serve_arg']"),
    ({"part_env": {"09-nowhere": {"A": "1"}}}, "part_env: unknown part(s) ['09-nowhere']"),
    ({"part_env": {"03-batching-cliff": {"A": 1}}}, "['part_env']['03-batching-cliff']['A']: 1 is not of type"),
    ([1, 2], "is not of type 'object'"),
])
def test_a_bad_profile_is_one_line_naming_the_file_and_key(tmp_path, raw, needle):
    (tmp_path / "rigs").mkdir()
    (tmp_path / "rigs" / "bad.json").write_text(json.dumps(raw))
    with pytest.raises(UserError) as err:
        load_profile("bad", tmp_path)
    message = str(err.value)
    assert "\n" not in message and "bad.json" in message and needle in message, message


def test_the_rigs_page_rows_never_hold_a_secret_of_a_profile(tmp_path):
    import json

    from inference_wall.run.rig import rigs_overview

    token, key = "hf_PROFILEtokenPROFILEtokenPROFILE0123", "profile-api-key-0123456789"
    (tmp_path / "rigs").mkdir()
    (tmp_path / "rigs" / "my-rig.json").write_text(json.dumps({
        "description": "a rig", "notes": [f"the key is {key}"], "env": {"HF_TOKEN": token, "OMP_NUM_THREADS": "2"},
        "serve_args": ["--api-key", key, "--enforce-eager"]}))
    (row,) = rigs_overview(tmp_path)
    assert row["serve_args"] == "--api-key <redacted> --enforce-eager"
    assert row["env"] == "HF_TOKEN=<redacted> OMP_NUM_THREADS=2"
    assert token not in json.dumps(row) and key not in json.dumps(row)


def test_a_rig_that_names_its_gpu_refuses_another_gpu_before_any_server_starts():
    from inference_wall.errors import UserError
    from inference_wall.run.rig import RigProfile, check_gpu

    h100 = RigProfile(name="h100", gpu_name="H100")
    check_gpu(h100, {"gpu": {"name": "NVIDIA H100 80GB HBM3"}})
    with pytest.raises(UserError, match="rig h100 is a H100 .* this machine has NVIDIA H200"):
        check_gpu(h100, {"gpu": {"name": "NVIDIA H200"}})
    with pytest.raises(UserError, match="has no NVIDIA GPU"):
        check_gpu(h100, {"cpu_count": 2})
    check_gpu(RigProfile(name="my-a10g"), {"cpu_count": 2})  # a rig that names no GPU takes any machine


def test_the_measured_gpu_rigs_name_their_gpu_and_datasheet_row():
    from inference_wall.records.reference import gpu_datasheets
    from inference_wall.run.rig import load_profile

    keys = set(gpu_datasheets()["key"])
    for rig, name in (("h200", "H200"), ("h100", "H100")):
        p = load_profile(rig)
        assert p.gpu_name == name and p.datasheet in keys


def test_the_capture_names_the_host_cpu_model(tmp_path):
    from inference_wall.run.rig import cpu_model

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\n")
    assert cpu_model(str(info)) == "Intel(R) Xeon(R) Platinum 8480C"
    assert cpu_model(str(tmp_path / "absent")) is None


def test_a_parts_environment_reaches_that_parts_servers_and_the_identity_check_and_no_other_part(tmp_path):
    """part_env adds to env for one part's runs: its dry-run command lines, and the settings its points are checked
    against (a point made without the variable is made otherwise), while another part's servers never see it."""
    import shutil

    from inference_wall import parts
    from inference_wall.run.rig import rigs_overview
    from inference_wall.run.sweep import changed_points
    from inference_wall.schema import REPO

    data = REPO / "data"
    (tmp_path / "rigs").mkdir()
    raw = json.loads((data / "rigs" / "cpu-tiny.json").read_text())
    raw["part_env"] = {"03-batching-cliff": {"IW_PART_ONLY": "three"}, "04-kv-starvation": {"IW_B": "1"},
                       "01-hit-the-wall": {"IW_B": "1"}}
    (tmp_path / "rigs" / "cpu-tiny.json").write_text(json.dumps(raw))
    shutil.copytree(data / "models", tmp_path / "models")
    shutil.copytree(data / "runs" / "03-batching-cliff" / "cpu-tiny", tmp_path / "runs" / "03-batching-cliff" / "cpu-tiny")
    three = "\n".join(parts.dry_run(3, "cpu-tiny", tmp_path, points=["mns-001"]))
    one = "\n".join(parts.dry_run(1, "cpu-tiny", tmp_path, points=["single"]))
    assert "IW_PART_ONLY=three" in three and "IW_PART_ONLY" not in one and "IW_B=1" in one
    profile = load_profile("cpu-tiny", tmp_path)
    assert profile.for_run("03-batching-cliff").env["IW_PART_ONLY"] == "three"
    assert "IW_PART_ONLY" not in profile.for_run("01-hit-the-wall").env and "IW_PART_ONLY" not in profile.env
    params = parts.parameters(3, "cpu-tiny", tmp_path)
    made = changed_points(parts.plan(3, "cpu-tiny", tmp_path), tmp_path / "runs" / "03-batching-cliff" / "cpu-tiny",
                          parts.settings_source(profile.for_run("03-batching-cliff"), params))
    assert set(made) == {"mns-001", "mns-004"} and all("IW_PART_ONLY" in " ".join(d) for d in made.values()), made
    (row,) = [r for r in rigs_overview(tmp_path) if r["rig"] == "cpu-tiny"]
    assert row["env"].endswith("(parts 01, 04: IW_B=1) (part 03: IW_PART_ONLY=three)"), row["env"]
