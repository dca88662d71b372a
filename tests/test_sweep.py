"""The sweep's run path against a fake vLLM (tests/fake_vllm.py): what it writes, and what it never writes."""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from inference_wall.run.bench import PassSpec, Workload
from inference_wall.model.modelkit import ModelSpec
from inference_wall.run.rig import RigProfile, capture
from inference_wall.run.sweep import PassPlan, PointPlan, SweepContext, run_sweep

FAKE_SECRETS = {
    "HF_TOKEN": "hf_FAKEfakeFAKEfakeFAKEfakeFAKEfake0123",
    "VLLM_API_KEY": "fake-vllm-api-key-0123456789",
    "MY_SERVICE_PASSWORD": "fake-password-0123456789",
    "AWS_SECRET_ACCESS_KEY": "fake/aws/secret/0123456789",
}


def _context(tmp_path: Path, rig: RigProfile, **kw) -> SweepContext:
    model = ModelSpec(preset="tiny-dense", source="dummy", model=str(tmp_path / "model"),
                      tokenizer=str(tmp_path / "model"), load_format="dummy", served_name="tiny")
    return SweepContext(part="03-batching-cliff", rig=rig, rig_dir=tmp_path / "runs" / "03-batching-cliff" / rig.name,
                        python=sys.executable, models={"tiny-dense": model}, workload=Workload(8, 4),
                        progress=False, startup_timeout_s=60, **kw)


def _plans(n: int = 2) -> list[PointPlan]:
    return [PointPlan(name=f"p{i}", session="one", max_num_seqs=4,
                      passes=[PassPlan("bench", "measured", PassSpec(num_prompts=4, seed=i))]) for i in range(n)]


def _all_text(folder: Path) -> dict[Path, str]:
    out = {}
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            raw = f.read_bytes()
            out[f] = (gzip.decompress(raw) if f.suffix == ".gz" else raw).decode(errors="replace")
    return out


def test_no_file_a_sweep_writes_holds_a_secret(fake_vllm_env, monkeypatch):
    tmp_path = fake_vllm_env
    for k, v in FAKE_SECRETS.items():
        monkeypatch.setenv(k, v)
    rig = RigProfile(name="fake", model_preset="tiny-dense", env={"EXTRA_AUTH_TOKEN": "fake-profile-token-0123456789", "OMP_NUM_THREADS": "1"},
                     serve_args=["--api-key", "fake-cli-api-key-0123456789"])
    secrets = [*FAKE_SECRETS.values(), "fake-profile-token-0123456789", "fake-cli-api-key-0123456789"]
    ctx = _context(tmp_path, rig, rig_info=capture(sys.executable, bandwidth=False, env=rig.env))
    report = run_sweep(_plans(), ctx)
    assert report.done == ["p0", "p1"], report

    files = _all_text(ctx.rig_dir)
    names = {f.name for f in files}
    assert {"manifest.json", "server_info.json", "server.log", "bench.log", "bench.json"} <= names
    for f, text in files.items():
        for s in secrets:
            assert s not in text, f"{f.relative_to(tmp_path)} holds a secret"
    manifest = json.loads((ctx.rig_dir / "p0" / "manifest.json").read_text())
    env = manifest["rig_info"]["environment"]
    assert env["HF_TOKEN"] == env["VLLM_API_KEY"] == "<redacted>"  # the name stays visible, the value never
    assert "MY_SERVICE_PASSWORD" not in env  # not on the allow-list at all
    assert manifest["session"]["server_env"]["EXTRA_AUTH_TOKEN"] == "<redacted>"
    assert manifest["session"]["server_env"]["OMP_NUM_THREADS"] == "1"
    assert set(manifest["artefacts"]) == set(manifest["files"])  # each file's size and sha256
    from inference_wall.records.record import FORMAT_VERSION, PointRecord

    assert manifest["format"] == FORMAT_VERSION  # written through the typed record
    assert PointRecord.from_dict(manifest).pass_("bench").kind == "measured"
    assert manifest["artefacts"]["bench.json"]["bytes"] == (ctx.rig_dir / "p0" / "bench.json").stat().st_size
    info = json.loads((ctx.rig_dir / "p0" / "server_info.json").read_text())
    assert info["vllm_env"]["VLLM_MAX_BAD_WORDS_TOTAL_TOKENS"] == 1024  # a setting, not a secret: kept


def test_a_session_warms_up_with_the_parts_lengths_and_sizes_every_later_pass_to_its_window(fake_vllm_env):
    """The session's warm-up floods with the part's workload (a point's own, longer lengths would make it a long
    pass), and its rate sizes the measured passes of every point of the session to their window (not only the
    first's)."""
    tmp_path = fake_vllm_env
    ctx = _context(tmp_path, RigProfile(name="fake", model_preset="tiny-dense", env={"OMP_NUM_THREADS": "1"}))
    long_lengths = Workload(16, 32)
    plans = [PointPlan(name=f"p{i}", session="one", max_num_seqs=4, workload=long_lengths, min_window_s=3.0,
                       max_prompts=200, passes=[PassPlan("bench", "measured", PassSpec(num_prompts=4, seed=i))])
             for i in range(2)]
    assert run_sweep(plans, ctx).done == ["p0", "p1"]
    first = json.loads((ctx.rig_dir / "p0" / "manifest.json").read_text())
    warm, bench = first["passes"]
    assert warm["kind"] == "warmup" and warm["workload"] == {"input_len": 8, "output_len": 4}
    flag = lambda cmd: cmd[cmd.index("--random-input-len") + 1]  # noqa: E731
    assert flag(warm["command"]) == "8" and flag(bench["command"]) == "16"
    for name in ("p0", "p1"):  # the fake's warm-up completes 16 prompts a second: a 3-s window wants more than 4
        (measured,) = [p for p in json.loads((ctx.rig_dir / name / "manifest.json").read_text())["passes"]
                       if p["kind"] == "measured"]
        assert measured["planned_prompts"] == 4 and measured["spec"]["num_prompts"] > 4, (name, measured)


def test_a_resume_refuses_a_complete_point_made_with_other_settings_and_redoes_it_when_asked(fake_vllm_env):
    tmp_path = fake_vllm_env
    rig = RigProfile(name="fake", model_preset="tiny-dense")
    assert run_sweep(_plans(), _context(tmp_path, rig)).done == ["p0", "p1"]
    from inference_wall.errors import UserError

    ctx = _context(tmp_path, rig)
    ctx.workload = Workload(16, 4)  # what `--set input_len=16` makes of the part's workload
    with pytest.raises(UserError, match="point p0 .* workload input_len: made with 8, the plan has 16") as e:
        run_sweep(_plans(), ctx)
    assert "\n" not in str(e.value) and "--redo-changed" in str(e.value)
    flagged = _context(tmp_path, RigProfile(name="fake", model_preset="tiny-dense", serve_args=["--enforce-eager"]))
    with pytest.raises(UserError, match="serve flags: made with .* the plan has --enforce-eager"):
        run_sweep(_plans(), flagged)
    ctx.redo_changed = True
    assert run_sweep(_plans(), ctx).done == ["p0", "p1"]
    for name in ("p0", "p1"):
        assert json.loads((ctx.rig_dir / name / "manifest.json").read_text())["workload"]["input_len"] == 16


def test_a_crash_mid_sweep_loses_no_complete_point_and_the_rerun_redoes_the_one_without_a_manifest(fake_vllm_env):
    """A crash between a point's artefacts and its manifest (written last) leaves a folder without one: the next run
    makes that point again from an empty folder and keeps the complete point, byte for byte."""
    tmp_path = fake_vllm_env
    rig = RigProfile(name="fake", model_preset="tiny-dense")
    ctx = _context(tmp_path, rig)
    assert run_sweep(_plans(), ctx).done == ["p0", "p1"]
    kept = _all_text(ctx.rig_dir / "p0")
    (ctx.rig_dir / "p1" / "manifest.json").unlink()  # the crash: p1's artefacts written, its manifest not
    (ctx.rig_dir / "p1" / "left-by-the-crash.txt").write_text("partial")
    report = run_sweep(_plans(), _context(tmp_path, rig))
    assert (report.done, report.skipped) == (["p1"], ["p0"])
    assert _all_text(ctx.rig_dir / "p0") == kept
    assert not (ctx.rig_dir / "p1" / "left-by-the-crash.txt").exists()
    assert json.loads((ctx.rig_dir / "p1" / "manifest.json").read_text())["status"] == "complete"


def test_a_run_on_another_machine_than_the_rigs_recorded_one_is_refused_before_a_server_starts(fake_vllm_env):
    tmp_path = fake_vllm_env
    rig = RigProfile(name="fake", model_preset="tiny-dense")
    made = {"gpu": {"name": "NVIDIA H200"}, "vllm": "0.22.1"}
    assert run_sweep(_plans(1), _context(tmp_path, rig, rig_info=made)).done == ["p0"]
    from inference_wall.run import server
    from inference_wall.errors import UserError

    def no_server(self):
        raise AssertionError("a server started")

    for other, named in (({"gpu": {"name": "NVIDIA A10G"}, "vllm": "0.22.1"}, "GPU NVIDIA A10G"),
                         ({"gpu": {"name": "NVIDIA H200"}, "vllm": "0.23.0"}, "vLLM 0.23.0")):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(server.VllmServer, "start", no_server)
            with pytest.raises(UserError, match=f"rig fake's runs were made on GPU NVIDIA H200 with vLLM 0.22.1.*"
                                                f"{named}.*new rig name"):
                run_sweep(_plans(2), _context(tmp_path, rig, rig_info=other))
    assert run_sweep(_plans(2), _context(tmp_path, rig, rig_info=made)).done == ["p1"]  # the same machine resumes


def test_every_committed_point_counts_as_complete_for_its_own_plan():
    """The identity check against the committed data: no complete point of any part and rig profile is 'made
    otherwise' by today's plan (a change to a plan or to the check that would drop committed points shows here)."""
    from inference_wall import parts
    from inference_wall.run.rig import known_profiles, load_profile
    from inference_wall.records.store import iter_points, rig_dir
    from inference_wall.run.sweep import SettingsSource, changed_points

    checked = 0
    for part in parts.MODULES:
        for rig in known_profiles():
            if not rig_dir(part, rig).is_dir():
                continue
            params = parts.parameters(part, rig)
            src = SettingsSource(parts.SERVE_ARGS, parts.SERVER_ENV, load_profile(rig).for_run(part),
                                 Workload(params["input_len"], params["output_len"]))
            plans = parts.plan(part, rig)
            assert changed_points(plans, rig_dir(part, rig), src) == {}, (part, rig)
            checked += sum(1 for _, _, p, _ in iter_points(None, part, rig) if p.name in {x.name for x in plans})
    assert checked >= 100


def test_the_client_sends_the_key_the_server_requires_and_never_the_callers_own(monkeypatch):
    from inference_wall.run.server import ServerSpec
    from inference_wall.run.sweep import client_env

    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-users-own-openai-key-0123456789")
    keyed = ServerSpec(model="m", python="py", args=["--api-key", "rig-key-0123456789"], env={})
    assert client_env(keyed, {"OMP_NUM_THREADS": "1"}) == {"OMP_NUM_THREADS": "1", "OPENAI_API_KEY": "rig-key-0123456789"}
    by_env = ServerSpec(model="m", python="py", args=[], env={"VLLM_API_KEY": "env-key-0123456789"})
    assert client_env(by_env, {})["OPENAI_API_KEY"] == "env-key-0123456789"
    assert client_env(ServerSpec(model="m", python="py", args=[], env={}), {})["OPENAI_API_KEY"] == ""


def test_an_http_401_is_reported_as_what_it_is():
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from inference_wall.run.sweep import unauthorized

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            ok = self.headers.get("Authorization") == "Bearer right-key"
            self.send_response(200 if ok else 401)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        err = unauthorized(url, None)
        assert err is not None and "HTTP 401 Unauthorized" in str(err) and "sent none" in str(err)
        assert "not one of them" in str(unauthorized(url, "wrong-key"))
        assert unauthorized(url, "right-key") is None
    finally:
        httpd.shutdown()


def test_a_failed_server_start_names_a_log_that_still_exists(fake_vllm_env):
    """Before, the error named the server log in the session's temporary iw-<session> folder, which the sweep
    removes when the session ends; now it names the copy kept in the failed point's folder."""
    import re

    from inference_wall.run.sweep import SweepFailed

    tmp_path = fake_vllm_env
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\necho 'ERROR the engine could not start (a test)'\nexit 3\n")
    broken.chmod(0o755)
    ctx = _context(tmp_path, RigProfile(name="fake", model_preset="tiny-dense"))
    ctx.python = str(broken)
    with pytest.raises(SweepFailed, match="exited with status 3") as err:
        run_sweep(_plans(), ctx)
    named = re.search(r"log (\S+?),", str(err.value))[1]
    assert Path(named) == ctx.rig_dir / "p0" / "server.log"
    assert "the engine could not start" in Path(named).read_text()
    manifest = json.loads((ctx.rig_dir / "p0" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and str(ctx.rig_dir / "p0" / "server.log") in manifest["error"]


def _another_run(server) -> Path:
    """A registry entry of another live run (this test's parent process) whose server's group is this test's own."""
    import os

    import psutil

    server.REGISTRY.mkdir(parents=True, exist_ok=True)
    other = server.REGISTRY / "other.json"
    other.write_text(json.dumps({"pgid": os.getpgid(0), "port": 8123, "cmd": ["not", "the", "leader"],
                                 "create_time": 0.0, "owner_pid": os.getppid(),
                                 "owner_started": psutil.Process(os.getppid()).create_time(),
                                 "run": {"part": "01-hit-the-wall", "rig": "other-rig"}}))
    return other


def test_a_sweep_warns_before_its_first_server_when_another_run_serves_on_the_machine(fake_vllm_env, capsys):
    """Before, nothing was said: two runs' servers shared the GPU silently; and neither run's manifests said so."""
    import os

    from inference_wall.run import server

    tmp_path = fake_vllm_env
    other = _another_run(server)
    ctx = _context(tmp_path, RigProfile(name="fake", model_preset="tiny-dense", has_profile=True))  # a CPU rig
    assert run_sweep(_plans(1), ctx).done == ["p0"]
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning: another run")]
    assert len(warnings) == 1 and "part 01-hit-the-wall on rig other-rig" in warnings[0], warnings
    assert f"server pid {os.getpgid(0)} on port 8123" in warnings[0] and other.exists()
    shared = json.loads((ctx.rig_dir / "p0" / "manifest.json").read_text())["shared_with"]
    assert shared == [{"part": "01-hit-the-wall", "rig": "other-rig", "rig_dir": None, "run_pid": os.getppid(),
                       "server_pid": os.getpgid(0), "port": 8123}]
    assert run_sweep(_plans(1), ctx).skipped == ["p0"]  # nothing to run: no server, no warning
    assert "warning: another run" not in capsys.readouterr().err


def test_a_gpu_rigs_run_beside_another_is_refused_unless_asked_and_then_recorded(fake_vllm_env, capsys):
    """On a GPU rig, a second run measures under the first's load: refused in one line before any server starts,
    unless --allow-shared; a point measured alone records no other run."""
    from inference_wall.errors import UserError
    from inference_wall.run import server

    tmp_path = fake_vllm_env
    gpu_rig = RigProfile(name="fake", model_preset="tiny-dense")  # no profile: a GPU rig
    ctx = _context(tmp_path, gpu_rig)
    assert run_sweep(_plans(1), ctx).done == ["p0"]
    assert "shared_with" not in json.loads((ctx.rig_dir / "p0" / "manifest.json").read_text())
    other = _another_run(server)
    with pytest.raises(UserError, match="another run is serving on this machine's GPU: part 01-hit-the-wall on rig "
                                        "other-rig") as refused:
        run_sweep(_plans(2), ctx)
    assert "--allow-shared" in str(refused.value) and not (ctx.rig_dir / "p1").exists()
    allowed = _context(tmp_path, gpu_rig, allow_shared=True)
    assert run_sweep(_plans(2), allowed).done == ["p1"]
    assert json.loads((ctx.rig_dir / "p1" / "manifest.json").read_text())["shared_with"][0]["rig"] == "other-rig"
    other.unlink()


def test_a_full_disk_while_copying_the_server_log_names_the_copy_and_keeps_no_truncated_one(tmp_path, monkeypatch):
    """Before, the OSError of the point's server.log copy named no path and could leave a partial copy."""
    import errno

    from inference_wall.run import sweep
    from inference_wall.errors import UserError

    log = tmp_path / "server.log"
    log.write_text("INFO a server's log\n" * 100)
    dest = tmp_path / "p0" / "server.log"
    dest.parent.mkdir()
    real = Path.write_bytes

    def half_then_full(self, data):
        real(self, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", half_then_full)
    with pytest.raises(UserError, match=f"could not write {dest}: No space left on device"):
        sweep._copy_log_slice(log, 0, dest)
    assert not dest.exists()


def test_every_part_page_flags_its_points_measured_beside_another_run(tmp_path):
    """A point's manifest records the other runs it was measured beside (shared_with); each part's page names such
    points under its figures (pages.sharednote), one line."""
    import shutil

    from inference_wall.pages.sharednote import shared_note
    from inference_wall.schema import PARTS

    root = Path(__file__).resolve().parents[1]
    folder = tmp_path / "runs" / "03-batching-cliff" / "cpu-tiny"
    shutil.copytree(root / "data" / "runs" / "03-batching-cliff" / "cpu-tiny", folder)
    assert shared_note(3, tmp_path, ["cpu-tiny"]) is None
    manifest = folder / "mns-004" / "manifest.json"
    m = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**m, "shared_with": [{"part": "01-hit-the-wall", "rig": "other-rig", "run_pid": 1,
                                                          "server_pid": 2, "port": 8123}]}))
    line = shared_note(3, tmp_path, ["cpu-tiny"])
    assert line.startswith("**Measured beside another run:** cpu-tiny mns-004 (beside part 01-hit-the-wall on rig "
                           "other-rig)") and "\n" not in line and "mns-001" not in line
    assert shared_note(3, tmp_path, ["h200"]) is None  # a rig the page does not show
    for name in PARTS.values():
        text = (root / "notebooks" / f"{name}.md").read_text()
        assert f"shared_note({int(name[:2])}, data_dir, shown)" in text, name
