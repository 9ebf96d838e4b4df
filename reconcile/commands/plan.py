"""argus plan: read-only; observe once, plan, show."""

from __future__ import annotations

from pathlib import Path

import typer

from reconcile.boundary import EXIT_CHANGES, EXIT_ERROR, EXIT_OK
from reconcile.commands.common import check_addresses, connect, load, observe_and_plan
from reconcile.model import PlanOptions
from reconcile.render import render_plan


def run(directory: Path, detailed_exitcode: bool, timeout: float, colour: bool, options: PlanOptions | None = None,
        verify_snapshots: bool = False) -> int:
    desired = load(directory)
    options = options or PlanOptions()
    check_addresses(desired, options)
    _, plan = observe_and_plan(desired, connect(desired, timeout), options, verify_snapshots)
    typer.echo(render_plan(plan, colour=colour))
    if plan.errors:
        return EXIT_ERROR
    if detailed_exitcode and plan.actionable:
        return EXIT_CHANGES
    return EXIT_OK
