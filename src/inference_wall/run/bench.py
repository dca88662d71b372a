"""One `vllm bench serve` pass against a running server; its result JSON is the raw artefact."""
from __future__ import annotations

import json
import math
import os
import select
import subprocess
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..errors import UserError
from .server import VLLM_MAIN, kill_group, tail, _die_with_parent

FORK_SERVER = Path(__file__).with_name("_benchfork.py")


class BenchError(UserError):
    pass


# `vllm bench serve`'s sampling parameters (its "sampling parameters" group; sent with every request)
SAMPLING_FLAGS = ("top-k", "top-p", "min-p", "temperature")


@dataclass(frozen=True)
class Workload:
    input_len: int = 256
    output_len: int = 128


@dataclass(frozen=True)
class PassSpec:
    """What one pass sends: the workload, how many prompts, at what rate or concurrency, which seed."""

    num_prompts: int
    request_rate: float = math.inf  # requests/s, inf = all at once (a flood)
    max_concurrency: int | None = None
    seed: int = 0
    detailed: bool = True  # per-request arrays (--save-detailed)
    # The client's sampling parameters, as (flag, value) pairs of `vllm bench serve` (("top-k", "0"), ("top-p", "1"));
    # empty: the server's defaults (the checkpoint's generation config, unless the server was started without it)
    sampling: tuple = ()
    # Concurrent `vllm bench serve` processes that share the pass's prompts (client_specs): two clients at once
    # against one server show whether one client limits a flood
    clients: int = 1

    def to_dict(self) -> dict:
        d = asdict(self)
        d["request_rate"] = "inf" if math.isinf(self.request_rate) else self.request_rate
        return d


def rate_arg(rate: float) -> str:
    return "inf" if math.isinf(rate) else f"{rate:g}"


def bench_command(python: str, url: str, model: str, tokenizer: str, workload: Workload, spec: PassSpec,
                  result_dir: Path, result_name: str) -> list[str]:
    cmd = [python, "-m", VLLM_MAIN, "bench", "serve", "--backend", "vllm", "--base-url", url,
           "--model", model, "--tokenizer", tokenizer, "--dataset-name", "random",
           "--random-input-len", str(workload.input_len), "--random-output-len", str(workload.output_len),
           "--ignore-eos", "--request-rate", rate_arg(spec.request_rate), "--num-prompts", str(spec.num_prompts),
           "--seed", str(spec.seed), "--percentile-metrics", "ttft,tpot,itl,e2el",
           "--metric-percentiles", "50,90,99", "--save-result", "--result-dir", str(result_dir),
           "--result-filename", result_name]
    if spec.max_concurrency:
        cmd += ["--max-concurrency", str(spec.max_concurrency)]
    for flag, value in spec.sampling:
        if flag not in SAMPLING_FLAGS:
            raise UserError(f"unknown sampling flag {flag!r} for vllm bench serve; valid: {', '.join(SAMPLING_FLAGS)}")
        cmd += [f"--{flag}", str(value)]
    if spec.detailed:
        cmd.append("--save-detailed")
    return cmd


class BenchForkServer:
    """A long-lived vLLM interpreter that runs each pass's CLI in a fork (see _benchfork.py).

    Start it before the server: its imports overlap the server's start. `close()` always ends it and
    any pass in flight (its own process group, killed with us too). INFERENCE_WALL_BENCH_FORK=0
    turns it off (then every pass is a fresh `python -m vllm... bench serve` process).
    """

    def __init__(self, python: str, env: dict[str, str] | None, log_path: Path, ready_timeout_s: float = 600):
        self.log_path = Path(log_path)
        self.ready_timeout_s = ready_timeout_s
        self.ready: dict | None = None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([python, str(FORK_SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
                                         preexec_fn=_die_with_parent, close_fds=True)
        self._buf = b""

    @staticmethod
    def enabled() -> bool:
        return os.environ.get("INFERENCE_WALL_BENCH_FORK", "1") != "0"

    def _exited(self) -> BenchError:
        return BenchError(f"the bench fork server exited (status {self.proc.poll()}); log {self.log_path}, "
                          f"last lines:\n{tail(self.log_path)}")

    def _line(self, timeout_s: float) -> dict | None:
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([fd], [], [], min(left, 1.0))
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise self._exited()
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def wait_ready(self) -> dict:
        if self.ready is None:
            self.ready = self._line(self.ready_timeout_s)
            if self.ready is None:
                self.close()
                raise BenchError(f"the bench fork server was not ready after {self.ready_timeout_s:.0f} s; "
                                 f"log {self.log_path}")
        return self.ready

    def run(self, argv: list[str], log_path: Path, env: dict[str, str] | None, timeout_s: float) -> int:
        self.wait_ready()
        job = {"argv": argv, "log": str(log_path), "env": {**(env or {}), "PYTHONUNBUFFERED": "1"}}
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:  # it died between passes
            raise self._exited() from None
        reply = self._line(timeout_s)
        if reply is None:
            self.close()
            raise BenchError(f"bench pass exceeded {timeout_s:.0f} s; log {log_path}")
        return int(reply["code"])

    def run_many(self, argvs: list[list[str]], log_paths: list[Path], env: dict[str, str] | None,
                 timeout_s: float) -> tuple[list[int], list[float]]:
        """Several CLIs at once, each in its own fork (the clients of one pass): (exit codes, epochs at which
        each fork ended)."""
        self.wait_ready()
        job = {"jobs": [{"argv": a, "log": str(lg), "env": {**(env or {}), "PYTHONUNBUFFERED": "1"}}
                        for a, lg in zip(argvs, log_paths)]}
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            raise self._exited() from None
        reply = self._line(timeout_s)
        if reply is None:
            self.close()
            raise BenchError(f"a client of the pass exceeded {timeout_s:.0f} s; logs {', '.join(map(str, log_paths))}")
        return [int(c) for c in reply["codes"]], [float(t) for t in reply["ended"]]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        kill_group(self.proc.pid, grace_s=5)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdout, self.proc.stdin):
            try:
                f.close()
            except OSError:
                pass

    def __enter__(self) -> "BenchForkServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


CLIENT_SEED_STRIDE = 100_000  # client k's seed is the pass's seed + (k - 1) x this: no two clients send the same prompts


def client_specs(spec: PassSpec) -> list[PassSpec]:
    """One spec per client of a pass: its share of the prompts (the first clients take the remainder) and its own
    seed; a one-client pass is its own spec."""
    n = max(1, int(spec.clients))
    if n == 1:
        return [spec]
    if spec.num_prompts < n:
        raise UserError(f"a pass of {spec.num_prompts} prompts cannot be shared by {n} clients")
    share, extra = divmod(spec.num_prompts, n)
    return [replace(spec, num_prompts=share + (k < extra), seed=spec.seed + k * CLIENT_SEED_STRIDE, clients=1)
            for k in range(n)]


def client_file(path: Path, k: int) -> Path:
    """Client k's (1-based) result or log file of a pass: the pass's own for the first client, `<stem>-client<k>`
    beside it for the others (readers of a pass's `<label>.json` read its first client)."""
    path = Path(path)
    return path if k == 1 else path.with_name(f"{path.stem}-client{k}{path.suffix}")


def run_clients(python: str, url: str, model: str, tokenizer: str, workload: Workload, spec: PassSpec,
                result_path: Path, log_path: Path, env: dict[str, str] | None = None,
                timeout_s: float = 3600, fork_server: "BenchForkServer | None" = None) -> list[dict]:
    """Run a pass's clients at once (client_specs); returns per client its record: client number, prompts, seed,
    result and log file names, command, and the epoch at which its process ended (its main run ends just before;
    the result's `duration` gives its start). Raises BenchError naming the first client that failed."""
    specs = client_specs(spec)
    results = [client_file(result_path, k + 1) for k in range(len(specs))]
    logs = [client_file(log_path, k + 1) for k in range(len(specs))]
    for r in results:
        r.parent.mkdir(parents=True, exist_ok=True)
    cmds = [bench_command(python, url, model, tokenizer, workload, s, r.parent, r.name) for s, r in zip(specs, results)]
    if fork_server is not None:
        codes, ended = fork_server.run_many([c[3:] for c in cmds], logs, env, timeout_s)
    else:
        codes, ended = _run_processes(cmds, logs, env, timeout_s)
    for k, (code, r, lg, s) in enumerate(zip(codes, results, logs, specs)):
        if code != 0 or not r.exists():
            raise BenchError(f"client {k + 1} of {len(specs)}: vllm bench serve failed (status {code}); log {lg}, "
                             f"last lines:\n{tail(lg)}")
        check_result(r, s, lg)
    return [{"client": k + 1, "num_prompts": s.num_prompts, "seed": s.seed, "result": r.name, "log": lg.name,
             "command": c, "ended": e} for k, (s, r, lg, c, e) in enumerate(zip(specs, results, logs, cmds, ended))]


def _run_processes(cmds: list[list[str]], logs: list[Path], env: dict[str, str] | None,
                   timeout_s: float) -> tuple[list[int], list[float]]:
    """Start every command at once, each logging to its own file; (exit codes, epochs at which each ended)."""
    procs, files = [], []
    try:
        for cmd, log in zip(cmds, logs):
            f = open(log, "ab")
            files.append(f)
            procs.append(subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
                                          preexec_fn=_die_with_parent))
        deadline = time.monotonic() + timeout_s
        codes: list[int | None] = [None] * len(procs)
        ended = [math.nan] * len(procs)
        while any(c is None for c in codes):
            if time.monotonic() > deadline:
                raise BenchError(f"a client of the pass exceeded {timeout_s:.0f} s; logs {', '.join(map(str, logs))}")
            for k, proc in enumerate(procs):
                if codes[k] is None and proc.poll() is not None:
                    codes[k], ended[k] = proc.returncode, time.time()
            time.sleep(0.02)
        return [int(c) for c in codes], ended
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill_group(proc.pid, grace_s=5)
        for f in files:
            f.close()


def run_pass(python: str, url: str, model: str, tokenizer: str, workload: Workload, spec: PassSpec,
             result_path: Path, log_path: Path, env: dict[str, str] | None = None,
             timeout_s: float = 3600, fork_server: BenchForkServer | None = None) -> tuple[list[str], float, float]:
    """Run one pass; returns (command, start, end). Raises BenchError with the log's tail on failure.

    With a fork server the same argv runs in a fork of a preloaded interpreter instead of a new process.
    """
    result_path = Path(result_path)
    result_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = bench_command(python, url, model, tokenizer, workload, spec, result_path.parent, result_path.name)
    started = time.time()
    if fork_server is not None:
        code = fork_server.run(cmd[3:], log_path, env, timeout_s)
    else:
        code = _run_process(cmd, log_path, env, timeout_s)
    ended = time.time()
    if code != 0 or not result_path.exists():
        raise BenchError(f"vllm bench serve failed (status {code}); log {log_path}, last lines:\n{tail(Path(log_path))}")
    check_result(result_path, spec, log_path)
    return cmd, started, ended


def check_result(result_path: Path, spec: PassSpec, log_path: Path) -> None:
    """vLLM's bench exits 0 and saves a result even when requests failed (without its ready check, a pass
    against a dead server "completes" with every request failed): a pass counts only if all completed."""
    try:
        result = json.loads(Path(result_path).read_text())
    except (OSError, ValueError) as e:
        raise BenchError(f"{result_path}: unreadable result ({e})") from None
    failed, completed = result.get("failed") or 0, result.get("completed")
    if failed or completed != spec.num_prompts:
        raise BenchError(f"{failed} of {spec.num_prompts} requests failed ({completed} completed); result "
                         f"{result_path}, log {log_path}, last lines:\n{tail(Path(log_path))}")


def _run_process(cmd: list[str], log_path: Path, env: dict[str, str] | None, timeout_s: float) -> int:
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
                                preexec_fn=_die_with_parent)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid, grace_s=5)
            raise BenchError(f"bench pass exceeded {timeout_s:.0f} s; log {log_path}")
        finally:
            if proc.poll() is None:
                kill_group(proc.pid, grace_s=5)
