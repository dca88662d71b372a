"""One writer per part and rig: a second command exits at once naming the holder; a dead holder's lock is taken over."""
from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from inference_wall.errors import UserError
from inference_wall.run.lock import RigBusy, check_writable, read_holder, writer_lock

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _hold(folder: Path) -> subprocess.Popen:
    """A second process that takes the writer lock of `folder`, says so, and keeps it."""
    code = textwrap.dedent(f"""
        import time
        from inference_wall.run.lock import writer_lock
        with writer_lock({str(folder)!r}):
            print("held", flush=True)
            time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("command", ["sweep", "reproduce"])
def test_a_second_writer_of_the_same_part_and_rig_exits_at_once_naming_the_holder(tmp_path, command):
    folder = tmp_path / "runs" / "03-batching-cliff" / "my-rig"
    holder = _hold(folder)
    try:
        # The holder keeps the lock until it exits (it sleeps 120 s): a second writer that waited for it would
        # run into the 60 s timeout here. It is refused while the holder still holds.
        res = subprocess.run([sys.executable, "-m", "inference_wall", command, "--part", "3", "--rig", "my-rig",
                              "--data-dir", str(tmp_path)], capture_output=True, text=True, env=ENV, timeout=60)
        assert holder.poll() is None and read_holder(folder)["pid"] == holder.pid
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1, res.stderr
        assert f"pid {holder.pid} on {platform.node()} since " in lines[0]
        assert "03-batching-cliff on rig my-rig" in lines[0]
        assert not list(folder.glob("*/manifest.json"))  # refused before any point was written
        # another rig of the same part is free
        with writer_lock(tmp_path / "runs" / "03-batching-cliff" / "other-rig"):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path):
    folder = tmp_path / "rig"
    holder = _hold(folder)
    assert read_holder(folder)["pid"] == holder.pid
    with pytest.raises(RigBusy):
        with writer_lock(folder):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert read_holder(folder)["pid"] == holder.pid  # its note stays behind ...
    with writer_lock(folder):  # ... but the lock went with the process
        assert read_holder(folder)["pid"] == os.getpid()
        with writer_lock(folder):  # the same process re-enters (the CLI, then its sweep)
            pass
    assert read_holder(folder) is None


def test_an_unwritable_rig_folder_fails_in_one_line(tmp_path):
    if os.geteuid() == 0:
        blocker = tmp_path / "file"
        blocker.write_text("")
        target = blocker / "rig"  # a folder under a file: cannot be made, even by root
    else:
        tmp_path.chmod(0o500)
        target = tmp_path / "rig"
    try:
        with pytest.raises(UserError, match="cannot be written") as err:
            check_writable(target)
        assert "\n" not in str(err.value)
    finally:
        tmp_path.chmod(0o700)


def test_a_holders_child_writes_under_the_lock_it_is_handed_and_takes_none_of_its_own(tmp_path):
    """`reproduce` holds the lock for the whole run and hands its note to its notebook kernel (a child) in the run
    request: the kernel's sweep writes under it without taking the lock again. Before, the child took it again by
    recognising its parent in the holder note; a child that is handed nothing is now a second writer."""
    handed = ("import json, sys\nfrom inference_wall.run.lock import writer_lock\n"
              f"with writer_lock({str(tmp_path)!r}, handed_over=json.loads(sys.argv[1])): print('child ok')")
    unhanded = f"from inference_wall.run.lock import writer_lock\nwith writer_lock({str(tmp_path)!r}): print('took it')"
    parent = (f"import json, subprocess, sys\nfrom inference_wall.run.lock import writer_lock\n"
              f"with writer_lock({str(tmp_path)!r}) as note:\n"
              f"    a = subprocess.run([sys.executable, '-c', {handed!r}, json.dumps(note)], capture_output=True,\n"
              f"                       text=True)\n"
              f"    b = subprocess.run([sys.executable, '-c', {unhanded!r}], capture_output=True, text=True)\n"
              f"print(a.stdout.strip(), '|', b.returncode, b.stderr.strip().splitlines()[-1])")
    res = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, env=ENV, timeout=60)
    assert res.returncode == 0, res.stderr
    handed_out, refused = res.stdout.split("|")
    assert handed_out.strip() == "child ok"
    assert refused.strip().startswith("1 ") and "RigBusy" in refused and "is being written by pid" in refused


def test_a_handed_over_lock_its_holder_no_longer_holds_is_refused(tmp_path):
    with writer_lock(tmp_path) as note:
        pass
    with pytest.raises(RigBusy, match=f"pid {os.getpid()} handed over is no longer held"):
        with writer_lock(tmp_path, "part 3 on rig r", handed_over=note):
            pass


def test_the_unwritable_folder_advice_keeps_the_rigs_profile(tmp_path):
    """Before: "fix its permissions or pass --data-dir"; a bare --data-dir has no rigs/ folder, so the run would
    silently drop the rig's profile (a stock server). The advice now names a copy that keeps rigs/ and models/."""
    data = tmp_path / "data"
    (data / "runs").mkdir(parents=True)
    (data / "runs" / "03-the-cliff").write_text("a file where the part's folder should be")
    with pytest.raises(UserError, match="cannot be written") as err:
        check_writable(data / "runs" / "03-the-cliff" / "my-rig")
    message = str(err.value)
    assert "\n" not in message
    assert f"copy {data} (with its rigs/ and models/" in message and "--data-dir pointing at the copy" in message
    assert "or pass --data-dir" not in message
