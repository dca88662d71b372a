"""One `vllm bench serve` pass against a running server; its result JSON is the raw artefact."""
from __future__ import annotations

import math
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import UserError
from .server import VLLM_MAIN, kill_group, _die_with_parent


class BenchError(UserError):
    pass


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
    if spec.detailed:
        cmd.append("--save-detailed")
    return cmd


def run_pass(python: str, url: str, model: str, tokenizer: str, workload: Workload, spec: PassSpec,
             result_path: Path, log_path: Path, env: dict[str, str] | None = None,
             timeout_s: float = 3600) -> tuple[list[str], float, float]:
    """Run one pass; returns (command, start, end). Raises BenchError with the log's tail on failure."""
    result_path = Path(result_path)
    result_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = bench_command(python, url, model, tokenizer, workload, spec, result_path.parent, result_path.name)
    started = time.time()
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
                                preexec_fn=_die_with_parent)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid, grace_s=5)
            raise BenchError(f"bench pass exceeded {timeout_s:.0f} s; log {log_path}")
        finally:
            if proc.poll() is None:
                kill_group(proc.pid, grace_s=5)
    ended = time.time()
    if code != 0 or not result_path.exists():
        from .server import tail
        raise BenchError(f"vllm bench serve failed (status {code}); log {log_path}, last lines:\n{tail(Path(log_path))}")
    return cmd, started, ended
