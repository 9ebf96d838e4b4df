"""What the serve benches share: argus's CLI run in-process with its output swallowed (the bench prints ratios)."""

from __future__ import annotations

import contextlib
import io
import os

from reconcile.cli import main as argus


def quiet(args: list[str]) -> None:
    """`argus ARGS`, silent; a failure (anything but 0 or 2, changes planned) ends the bench with its command."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(io.StringIO()):
        code = argus(args)
    if code not in (0, 2):
        raise SystemExit(f"argus {' '.join(args)} exited {code}")
