"""argus plan: read-only; observe once, plan, show."""

from __future__ import annotations

from pathlib import Path

import typer

from reconcile.boundary import EXIT_CHANGES, EXIT_ERROR, EXIT_OK
from reconcile.commands.common import connect, load, observe_and_plan
from reconcile.render import render_plan


def run(directory: Path, detailed_exitcode: bool, timeout: float, colour: bool, prune: bool = False,
        verify_snapshots: bool = False) -> int:
    desired = load(directory)
    _, plan = observe_and_plan(desired, connect(desired, timeout), prune, verify_snapshots)
    typer.echo(render_plan(plan, colour=colour))
    if plan.errors:
        return EXIT_ERROR
    if detailed_exitcode and plan.actionable:
        return EXIT_CHANGES
    return EXIT_OK
