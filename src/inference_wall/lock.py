"""One writer per part and rig: an OS file lock (filelock) on data/runs/<part>/<rig>/, and a note of its holder.

The lock is the kernel's: it goes with its holder's process, so a lock left by a killed command is free
again and the next one takes it over (its stale note is simply overwritten). The note (pid, host, the
holder's start time and command) is only for the message a second writer gets. A holder's children
(the notebook kernel that `reproduce` starts) write under their ancestor's lock.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
from filelock import FileLock, Timeout

from .errors import UserError
from .redact import redact_argv

LOCK_FILE = ".writer.lock"
HOLDER_FILE = ".writer.json"
_held: set[str] = set()  # folders this process holds (the sweep inside a locked CLI command re-enters)


class RigBusy(UserError):
    pass


def check_writable(folder: Path) -> Path:
    """Create `folder` if needed and prove a file can be written in it, or fail in one line."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise UserError(f"the rig folder {folder} cannot be written ({e.strerror or e}); {_writable_advice(folder)}"
                        ) from None
    return folder


def _writable_advice(folder: Path) -> str:
    """What to do about an unwritable rig folder (data/runs/<part>/<rig>). --data-dir alone would lose what the
    data folder holds besides runs (rigs/: the rig's profile; models/: the presets), so the advice is a copy."""
    data = folder.parent.parent.parent if folder.parent.parent.name == "runs" else None
    if data is None:
        return "fix its permissions"
    return (f"fix its permissions, or copy the whole repository to a writable place and run there, or copy "
            f"{data} (with its rigs/ and models/: the rig's profile and the model presets) to a writable place and "
            f"pass --data-dir pointing at the copy (a --data-dir without them runs the rig without its profile)")


def read_holder(folder: Path) -> dict | None:
    try:
        return json.loads((Path(folder) / HOLDER_FILE).read_text())
    except (OSError, ValueError):
        return None


def _process_started(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _held_by_an_ancestor(holder: dict | None) -> bool:
    if not holder or holder.get("host") != platform.node():
        return False
    try:
        return any(p.pid == holder.get("pid") and abs(p.create_time() - (holder.get("process_started") or 0)) < 1
                   for p in psutil.Process().parents())
    except psutil.Error:
        return False


def describe(holder: dict | None) -> str:
    if not holder:
        return "another process (no holder note)"
    since = dt.datetime.fromtimestamp(holder.get("acquired", 0)).strftime("%Y-%m-%d %H:%M:%S")
    return (f"pid {holder.get('pid')} on {holder.get('host')} since {since}"
            + (f" ({holder['command']})" if holder.get("command") else ""))


@contextmanager
def writer_lock(folder: Path, what: str | None = None):
    """Hold the writer lock of `folder` (a part's rig folder) for the block; a second writer gets RigBusy at once."""
    folder = check_writable(Path(folder))
    key = str(folder.resolve())
    if key in _held or _held_by_an_ancestor(read_holder(folder)):
        yield
        return
    lock = FileLock(str(folder / LOCK_FILE), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RigBusy(f"{what or folder} is being written by {describe(read_holder(folder))}; wait for it to end "
                      f"or stop it, then rerun (complete points are kept)") from None
    note = {"pid": os.getpid(), "host": platform.node(), "process_started": _process_started(os.getpid()),
            "acquired": time.time(), "command": " ".join(redact_argv([Path(sys.argv[0]).name, *sys.argv[1:]]))[:200]}
    tmp = folder / f".writer-{os.getpid()}.tmp"
    tmp.write_text(json.dumps(note))
    os.replace(tmp, folder / HOLDER_FILE)
    _held.add(key)
    try:
        yield
    finally:
        _held.discard(key)
        (folder / HOLDER_FILE).unlink(missing_ok=True)
        lock.release()
