"""argus status: per job, is it in sync with its spec, and how is its run doing on Ray."""

from __future__ import annotations

from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import connect, load, observe_and_plan
from reconcile.render import render_status


def run(directory: Path, timeout: float, output_format: str = "human") -> int:
    desired = load(directory)
    _, plan = observe_and_plan(desired, connect(desired, timeout))
    if output_format == "json":
        from reconcile.views import status_json

        typer.echo(status_json(plan, set(desired.jobs)))
    elif output_format == "markdown":
        typer.echo("```\n" + render_status(plan, desired_jobs=set(desired.jobs)) + "\n```")
    else:
        typer.echo(render_status(plan, desired_jobs=set(desired.jobs)))
    return EXIT_OK
