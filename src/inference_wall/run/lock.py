"""One writer per part and rig: an OS file lock (filelock) on data/runs/<part>/<rig>/, and a note of its holder.

The lock is the kernel's: it goes with its holder's process, so a lock left by a killed command is free
again and the next one takes it over (its stale note is simply overwritten). The note (pid, host, the
holder's start time and command) names the holder in the message a second writer gets, and is what a holder
hands over to the process it runs the work in (`reproduce` to its notebook's kernel, in the run request): that
process checks the note is still the folder's and takes no lock of its own.
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

from ..errors import UserError
from ..records.redact import redact_argv

LOCK_FILE = ".writer.lock"
HOLDER_FILE = ".writer.json"
_held: set[str] = set()  # folders this process holds (a nested writer_lock of one of them re-enters)


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


def _still_holds(folder: Path, note: dict) -> bool:
    """Whether the holder `note` names (a process of this host, started when the note says) still holds the lock."""
    now = read_holder(folder)
    if not now or note.get("host") != platform.node() or any(now.get(k) != note.get(k) for k in ("pid", "acquired")):
        return False
    started = _process_started(note["pid"])
    return started is not None and abs(started - (note.get("process_started") or 0)) < 1


def describe(holder: dict | None) -> str:
    if not holder:
        return "another process (no holder note)"
    since = dt.datetime.fromtimestamp(holder.get("acquired", 0)).strftime("%Y-%m-%d %H:%M:%S")
    return (f"pid {holder.get('pid')} on {holder.get('host')} since {since}"
            + (f" ({holder['command']})" if holder.get("command") else ""))


@contextmanager
def writer_lock(folder: Path, what: str | None = None, handed_over: dict | None = None):
    """Hold the writer lock of `folder` (a part's rig folder) for the block, yielding its holder note; a second
    writer gets RigBusy at once. With `handed_over`, the note of a holder that runs its work in this process (or a
    child of it), no lock is taken: the note must still be the folder's holder's."""
    folder = Path(folder)
    if handed_over is not None:
        if not _still_holds(folder, handed_over):
            raise RigBusy(f"{what or folder}: the writer lock that pid {handed_over.get('pid')} handed over is no "
                          f"longer held by it (now: {describe(read_holder(folder))}); rerun the command (complete "
                          f"points are kept)")
        yield handed_over
        return
    folder = check_writable(folder)
    key = str(folder.resolve())
    if key in _held:
        yield read_holder(folder)
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
        yield note
    finally:
        _held.discard(key)
        (folder / HOLDER_FILE).unlink(missing_ok=True)
        lock.release()
