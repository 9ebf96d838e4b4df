"""argus logs JOB: the driver log of the job's current run."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import connect, load, observe_and_plan
from specs.errors import ArgusError


def run(directory: Path, job: str, timeout: float, follow: bool = False, as_json: bool = False) -> int:
    desired = load(directory)
    ray = connect(desired, timeout)
    _, plan = observe_and_plan(desired, ray)
    change = next((c for c in plan.changes if c.address == f"job.{job}"), None)
    if change is None or change.current is None:
        raise ArgusError(f"job.{job} has no run yet. Known jobs: {', '.join(sorted(desired.jobs)) or 'none'}; "
                         "run `argus apply` to start it.")
    run_ = change.current
    if not run_.on_ray:
        raise ArgusError(f"Run {run_.submission_id} is {run_.health}: Ray no longer has its logs.")
    if as_json:
        typer.echo(json.dumps({"address": f"job.{job}", "submission_id": run_.submission_id,
                               "status": run_.status, "logs": ray[run_.cluster].logs(run_.submission_id)}))
    elif follow:
        ray[run_.cluster].follow(run_.submission_id, lambda chunk: typer.echo(chunk, nl=False))
    else:
        typer.echo(ray[run_.cluster].logs(run_.submission_id), nl=False)
    return EXIT_OK
