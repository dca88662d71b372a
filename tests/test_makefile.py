"""The Makefile: `make help` names every target."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_make_help_lists_every_target():
    text = (ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", text, re.M)[1].split()
    defined = set(re.findall(r"^([a-z][a-z-]*):(?!=)", text, re.M))
    assert set(phony) == defined, "every target is .PHONY and every .PHONY target is defined"
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    listed = set(re.findall(r"^make ([a-z][a-z-]*)", out, re.M))
    assert listed == defined, f"make help misses {sorted(defined - listed)}"


def _reproduce(tmp_path: Path, part: str, args: str):
    import os
    import sys

    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for name in ("models", "rigs", "reference"):
        if not (data / name).exists():
            (data / name).symlink_to(ROOT / "data" / name)
    env = {k: v for k, v in os.environ.items() if k not in ("IW_ARGS", "ARGS")}
    # --budget-min 2 stops every run at the CLI's checks: nothing starts, whatever else ARGS holds
    return subprocess.run(["make", "-s", "reproduce", f"PART={part}", "RIG=cpu-tiny", f"PYTHON={sys.executable}",
                           f"ARGS=--data-dir {data} --budget-min 2 {args}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)


def test_make_reproduce_passes_args_to_the_cli_without_evaluating_them(tmp_path):
    """Before, ARGS was recipe text: the shell ran `$(touch ...)` and `|| touch ...` and took `;` as a command end."""
    marker = tmp_path / "evaluated"
    for args in (f"$(touch {marker})", f"`touch {marker}`", f"|| touch {marker}", f"; touch {marker}",
                 f"$(shell touch {marker})"):
        res = _reproduce(tmp_path, "1", args)
        assert res.returncode != 0, res.stderr
        assert not marker.exists(), (args, res.stderr)


def test_the_readmes_args_example_reaches_the_cli_with_its_quotes(tmp_path):
    """README: ARGS='--set configs=["tp1"]'. Before, the shell stripped the quotes and --set read [tp1], not JSON."""
    assert """ARGS='--set configs=["tp1"]'""" in (ROOT / "README.md").read_text()
    for args in ("""--set configs=["tp1"]""", """--set 'configs=["tp1", "dp2"]'"""):
        res = _reproduce(tmp_path, "6", args)
        errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "--budget-min 2 is below what one point needs" in errors[0], res.stderr


def test_make_reproduce_runs_in_a_clone_under_a_path_with_a_space(tmp_path):
    """Before, the recipe's PYTHONPATH=$(CURDIR)/src was unquoted: `/bin/bash: line 1: space/repo/src: No such file or
    directory` (make Error 127) before the CLI ran. Now the CLI runs and refuses ARGS' budget (its first check)."""
    import os
    import shutil
    import sys

    clone = tmp_path / "a space" / "repo"
    clone.mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", clone)
    (clone / "src").symlink_to(ROOT / "src")
    env = {k: v for k, v in os.environ.items() if k not in ("IW_ARGS", "ARGS", "PYTHONPATH")}
    res = subprocess.run(["make", "-s", "reproduce", "PART=3", "RIG=cpu-tiny", f"PYTHON={sys.executable}",
                          "ARGS=--budget-min 2"], cwd=clone, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode != 0 and "No such file or directory" not in res.stderr, res.stderr
    from inference_wall.run.sweep import POINT_ESTIMATE_S, _minutes, rig_start_estimate
    from inference_wall.records.store import DATA_DIR

    start = rig_start_estimate(DATA_DIR / "runs", "cpu-tiny")  # the rig's slowest recorded start (the src is the repo's)
    need = start + POINT_ESTIMATE_S
    assert [line for line in res.stderr.splitlines() if line.startswith("error:")] == [
        f"error: --budget-min 2 is below what one point needs (about {_minutes(need)} min: a server start, "
        f"{_minutes(start)} min, and a point, 1 min); give at least {_minutes(-(-need // 6) * 6)}"], res.stderr


def test_a_double_quoted_value_with_a_space_in_args_is_refused_naming_single_quotes(tmp_path):
    """ARGS keeps double quotes as text (JSON's): before, --data-dir "my data" was cut into '"my' and 'data"' and
    refused as an unrecognized argument, without a word on how to quote it."""
    res = _reproduce(tmp_path, "3", '--data-dir "my data"')
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "double quotes do not group words" in errors[0], res.stderr
    assert "ARGS=\"--data-dir 'my data'\"" in errors[0]
    spaced = tmp_path / "my data"
    res = _reproduce(tmp_path, "3", f"--data-dir '{spaced}'")  # single quotes group: the CLI reads the folder's name
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: --data-dir {spaced}: no such folder (give the data folder that holds runs/, rigs/ "
                      f"and models/, e.g. the repository's data/ or a copy of it)"], res.stderr
    spaced.mkdir()
    for name in ("models", "rigs", "reference"):
        (spaced / name).symlink_to(ROOT / "data" / name)
    res = _reproduce(tmp_path, "3", f"--data-dir '{spaced}'")  # a data folder there: the run's own checks follow
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--budget-min 2 is below what one point needs" in errors[0], res.stderr


def test_make_bench_passes_args_as_words_only(tmp_path):
    marker = tmp_path / "evaluated"
    out = subprocess.run(["make", "-n", "bench", f"ARGS=--runs 3 $(touch {marker}); touch {marker}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60).stdout
    assert "$IW_ARGS" in out and "touch" not in out and not marker.exists()


def test_make_test_without_chromium_stops_at_once_naming_the_command(tmp_path):
    """Before, a machine without Chromium ran 11 minutes of vLLM tests and then reported 35 errors ("no Chromium at
    /usr/bin/chromium"). Now make test's first step installs it where it can (.ci/run's apt-get) or stops within
    seconds naming the command; here the browser is one at a path nothing can install (CHROMIUM_PATH), in a copy of
    the Makefile and scripts, so that nothing else of make test could run here."""
    import os
    import shutil
    import time

    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    env = {**os.environ, "CHROMIUM_PATH": str(tmp_path / "no" / "chromium")}
    t0 = time.monotonic()
    res = subprocess.run(["make", "test"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert time.monotonic() - t0 < 30 and res.returncode != 0
    said = res.stdout + res.stderr
    assert f"no Chromium at {tmp_path / 'no' / 'chromium'}" in said and "sudo apt-get install -y chromium" in said, said
    assert "-m pytest" not in said and "book_static" not in said, said  # nothing else started


def test_make_test_prints_its_slowest_tests():
    """Issue 25: `make test` ends with pytest's slowest tests. Before, it ran `pytest -q` alone."""
    out = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    pytest_lines = [line for line in out.splitlines() if "-m pytest" in line]
    assert pytest_lines and all("--durations=15" in line for line in pytest_lines), out
    assert "--durations=15" in (ROOT / "README.md").read_text()


def _fake_venv_make_n(tmp_path: Path, version: str) -> str:
    """`make -n setup` in a copy of the Makefile beside a .venv whose pyvenv.cfg names `version`, installed after
    the lock (so only the Python version can make it stale)."""
    import os
    import time

    earlier = time.time() - 3600
    for name in ("Makefile", "pyproject.toml", "requirements.lock"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
        os.utime(tmp_path / name, (earlier, earlier))
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to("/bin/true")
    (venv / "pyvenv.cfg").write_text(f"home = /nowhere/bin\ninclude-system-site-packages = false\nversion = {version}\n")
    stamp = venv / ".installed"
    stamp.write_text("")
    # --no-print-directory: under `make test` the outer make's MAKELEVEL makes this one print its directory,
    # whose name holds this test's own name ("..._a_venv_built_...")
    return subprocess.run(["make", "--no-print-directory", "-n", "setup"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60,
                          check=True).stdout


def test_a_venv_built_by_another_python_is_rebuilt(tmp_path):
    """Before, the stamp rule reused any .venv with a bin/python: one made by another Python was kept."""
    import sys

    here = subprocess.run(["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                          text=True, check=True).stdout.strip()
    other = "2.7.18" if not here.startswith("2.") else "3.12.1"
    out = _fake_venv_make_n(tmp_path, other)
    assert "python3 -m venv --clear .venv" in out and f"built by Python {other.rsplit('.', 1)[0]}" in out, out
    (tmp_path / "same").mkdir()
    same = _fake_venv_make_n(tmp_path / "same", f"{here}.0")
    assert "venv" not in same, same  # the same major.minor: nothing to do
