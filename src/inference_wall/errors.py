"""Errors a user can act on: the CLI prints them as one line and exits with status 2."""
from __future__ import annotations


class UserError(Exception):
    """Bad input or an unmet precondition, explained in one line (no traceback)."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))  # always one line


class LogParseError(UserError):
    """A raw artefact that does not parse: names the file and the line."""

    def __init__(self, path, line: int | None, problem: str):
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {problem}")
        self.path, self.line, self.problem = path, line, problem
