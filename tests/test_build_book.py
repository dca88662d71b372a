"""make book's build step runs a build again only when a notebook kernel lost its port to a parallel one."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("build_book", ROOT / "scripts" / "build-book.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("says, rc, runs, final", [
    ("RuntimeError: Kernel died before replying to kernel_info", 1, 2, 1),  # the race, twice: run again once, then fail
    ("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:40897')", 1, 2, 1),
    ("NameError: name 'x' is not defined", 1, 1, 1),  # a real failure is not retried
    ("build succeeded.", 0, 1, 0),
])
def test_only_a_kernel_port_race_is_built_again(tmp_path, capsys, says, rc, runs, final):
    count = tmp_path / "runs"
    child = (f"import sys; open({str(count)!r}, 'a').write('x'); print({says!r}); sys.exit({rc})")
    assert _script().main(tmp_path, cmd=[sys.executable, "-c", child]) == final
    assert len(count.read_text()) == runs
    assert says in capsys.readouterr().out  # the build's output is passed through


def test_a_race_then_a_clean_build_succeeds(tmp_path):
    count = tmp_path / "runs"
    child = (f"import sys; n = len(open({str(count)!r}).read()) if __import__('os').path.exists({str(count)!r}) else 0; "
             f"open({str(count)!r}, 'a').write('x'); print('Kernel died before replying to kernel_info' if n == 0 "
             "else 'ok'); sys.exit(1 if n == 0 else 0)")
    assert _script().main(tmp_path, cmd=[sys.executable, "-c", child]) == 0
    assert len(count.read_text()) == 2
