"""argus status: per job, is it in sync with its spec, and how is its run doing on Ray."""

from __future__ import annotations

from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import connect, load, observe_and_plan
from reconcile.render import render_status


def run(directory: Path, timeout: float) -> int:
    desired = load(directory)
    _, plan = observe_and_plan(desired, connect(desired, timeout))
    typer.echo(render_status(plan, desired_jobs=set(desired.jobs)))
    return EXIT_OK
