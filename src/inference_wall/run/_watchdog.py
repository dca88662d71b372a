"""A server's watchdog: ends a `vllm serve` process group once the run that started it is gone, SIGKILL included.

A SIGKILL of the run (the OOM killer, a closed cloud shell, `kill -9` of make's process group) runs no cleanup, and
the server lives in a session of its own, so nothing of the run stops it: the server's main process dies with the
process that started it (PR_SET_PDEATHSIG), but vLLM's engine and worker processes, its children, then live on
with the GPU's memory. This process, started beside each server in a session of its own too, watches the run's
processes and the server's group:

- an owner gone (its pid no longer runs, is a zombie, or is now another process: its start differs): the group
  gets SIGTERM, then SIGKILL after GRACE_S; the files named by --forget (the server's registry entry, its session's
  temporary folder) are removed; the watchdog ends;
- the group gone (no member but zombies: its server was stopped): the watchdog ends, its work done.

It outlives nothing: not its server, and not the run by more than GRACE_S and a poll.

Run by server.start_watchdog with the stdlib only (`python -I -S _watchdog.py PGID PID:TICKS ... [--forget PATH
...]`, TICKS: the owner's start in clock ticks since boot, start_ticks).
"""
import os
import shutil
import signal
import sys
import time

POLL_S = 0.5
GRACE_S = 5.0


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields from the state on (state, ppid, pgrp, ...), or None when the pid does not run."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data.rsplit(b")", 1)[1].decode().split()


def start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (/proc/PID/stat's starttime: a pid reused by a later process has
    another, and no clock change moves it), or None when it is gone or a zombie."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def members(pgid: int) -> list[int]:
    """The live processes of group `pgid` (zombies, which only wait to be reaped, do not count)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields is not None and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
                out.append(int(name))
    return out


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_gone(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while members(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def end_group(pgid: int, grace_s: float = GRACE_S) -> None:
    """SIGTERM to the group, SIGKILL to whatever is left of it after `grace_s`."""
    _signal_group(pgid, signal.SIGTERM)
    if not _wait_gone(pgid, grace_s):
        _signal_group(pgid, signal.SIGKILL)
        _wait_gone(pgid, 5.0)


def watch(pgid: int, owners: list[tuple[int, int]], forget: list[str]) -> str:
    """Poll until the group is gone ('stopped') or an owner is ('ended'); in the second case end the group."""
    while True:
        if not members(pgid):
            return "stopped"
        for pid, ticks in owners:
            if start_ticks(pid) != ticks:
                end_group(pgid)
                for path in forget:
                    if os.path.isdir(path):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        try:
                            os.unlink(path)
                        except OSError:
                            pass
                return "ended"
        time.sleep(POLL_S)


def main(argv: list[str]) -> int:
    forget = argv[argv.index("--forget") + 1:] if "--forget" in argv else []
    args = argv[:argv.index("--forget")] if "--forget" in argv else argv
    owners = [(int(pid), int(ticks)) for pid, ticks in (a.split(":", 1) for a in args[1:])]
    watch(int(args[0]), owners, forget)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
