"""The one error base class of argus, and the error that carries what the loader found."""

from __future__ import annotations

from specs.diagnostics import Diagnostic, by_place


class ArgusError(Exception):
    """An error the user can act on: printed without a traceback, exit code 1.

    Every layer raises subclasses of this; the CLI's single boundary maps them to exit codes.
    """

    exit_code = 1


class SpecError(ArgusError):
    """The desired state is invalid; carries every diagnostic found, not just the first."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = sorted(diagnostics, key=by_place)
        lines = "\n".join(f"  {d}" for d in self.diagnostics)
        count = len(self.diagnostics)
        noun = "problem" if count == 1 else "problems"
        super().__init__(f"The desired state has {count} {noun}:\n{lines}")
