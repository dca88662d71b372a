"""A fork server for `vllm bench serve`: import vLLM's CLI once, then run each pass in a fresh fork.

Run by the vLLM interpreter as a plain script (it imports nothing from inference_wall, whose package
that interpreter may not have):  python _benchfork.py
Each pass is still vLLM's own CLI: the child sets sys.argv to `vllm bench serve ...` (the same argv a
subprocess pass would get) and calls `vllm.entrypoints.cli.main.main()`, with stdout and stderr on
the pass's log. What it saves is the interpreter's start and vLLM's imports (`make bench` prints
the client's overhead per pass of every committed run), paid once per session instead of once per pass; each pass still
starts from the same freshly imported state, since the child is a copy of the preloaded parent.

Protocol, one JSON object per line: the parent prints {"ready": true, "preload_s": ...} once its
imports are done; then for each line {"argv": [...], "log": path, "env": {...}} on stdin it runs one
child and prints {"code": exit_status}; for a line {"jobs": [{"argv", "log", "env"}, ...]} it runs one child per job at
once (the concurrent clients of one pass) and prints {"codes": [...], "ended": [epoch at which each child ended]}.
End of stdin ends it.
"""
import ctypes
import importlib
import json
import os
import signal
import sys
import time
import traceback

# What vllm.entrypoints.cli.main.main() imports (0.18-0.33); missing ones are skipped.
PRELOAD = [
    "vllm.entrypoints.cli.main",
    "vllm.entrypoints.cli.benchmark.main",
    "vllm.entrypoints.cli.benchmark.serve",
    "vllm.benchmarks.serve",
    "vllm.benchmarks.datasets",
    "vllm.entrypoints.cli.openai",
    "vllm.entrypoints.cli.serve",
    "vllm.entrypoints.cli.launch",
    "vllm.entrypoints.cli.collect_env",
    "vllm.entrypoints.cli.run_batch",
    "vllm.entrypoints.cli.download_kernels",
    "vllm.entrypoints.cli.preload",
    "vllm.entrypoints.cli.snapshot",
    "transformers",
]


def _child(job: dict) -> int:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # die with the fork server
    except OSError:
        pass
    fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.environ.update(job.get("env") or {})
    sys.argv = ["vllm", *job["argv"]]
    from vllm.entrypoints.cli.main import main

    try:
        main()
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - the traceback goes to the pass's log
        traceback.print_exc()
        return 1


def serve() -> None:
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the imports print goes to our stderr, never into the replies
    t0 = time.monotonic()
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module this vLLM version lacks
            pass
    reply.write(json.dumps({"ready": True, "preload_s": round(time.monotonic() - t0, 2)}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        if "jobs" in job:
            pids = [_fork(j) for j in job["jobs"]]
            codes, ended = {}, {}
            while len(codes) < len(pids):
                pid, status = os.wait()
                if pid in pids:
                    codes[pid], ended[pid] = os.waitstatus_to_exitcode(status), time.time()
            reply.write(json.dumps({"codes": [codes[p] for p in pids], "ended": [ended[p] for p in pids]}) + "\n")
            continue
        _, status = os.waitpid(_fork(job), 0)
        reply.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")


def _fork(job: dict) -> int:
    """Run one job in a fork of this preloaded interpreter; the child's pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = _child(job)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code if isinstance(code, int) else 1)
    return pid


if __name__ == "__main__":
    serve()
