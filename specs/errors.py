"""The one error base class of argus, and the located problems the loader reports."""

from __future__ import annotations

import json
from dataclasses import dataclass


class ArgusError(Exception):
    """An error the user can act on: printed without a traceback, exit code 1.

    Every layer raises subclasses of this; the CLI's single boundary maps them to exit codes.
    """

    exit_code = 1


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the desired state, located at a YAML node."""

    file: str
    line: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{printable(self.file)}:{self.line}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class SpecError(ArgusError):
    """The desired state is invalid; carries every problem found, not just the first."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems, key=lambda p: (p.file, p.line, p.path))
        lines = "\n".join(f"  {p}" for p in self.problems)
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"The desired state has {count} {noun}:\n{lines}")


def printable(text: str) -> str:
    """A name from the workspace as one visible line: a file named with a line break or a terminal
    escape must not forge lines of argus's output (or of a pull-request comment)."""
    return text if text.isprintable() else json.dumps(text)[1:-1]
