"""argus status: per job, is it in sync with its spec, and how is its run doing on Ray."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK, is_tty
from reconcile.commands.common import connect, load, plan_sync
from reconcile.views.human import render_status


def run(directory: Path, timeout: float, output_format: str = "human", watch: float | None = None) -> int:
    desired = load(directory)
    ray = connect(desired, timeout)
    while True:
        plan = plan_sync(desired, ray)
        if watch and is_tty():
            typer.clear()
        show(plan, set(desired.jobs), output_format)
        if not watch or not any(c.current and c.current.on_ray and not c.current.finished for c in plan.changes):
            return EXIT_OK  # --watch ends when nothing is PENDING or RUNNING any more
        typer.echo(f"-- refreshing every {watch:g}s until every run has finished (^C to stop) --")
        time.sleep(watch)


def show(plan, desired_jobs: set[str], output_format: str) -> None:
    if output_format == "json":
        from reconcile.views.machine import status_json

        typer.echo(status_json(plan, desired_jobs))
    elif output_format == "markdown":
        typer.echo("```\n" + render_status(plan, desired_jobs=desired_jobs) + "\n```")
    else:
        typer.echo(render_status(plan, desired_jobs=desired_jobs))
