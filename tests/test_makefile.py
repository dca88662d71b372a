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
