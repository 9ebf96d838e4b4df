"""argus logs JOB: the driver log of the job's current run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import connect, load
from reconcile.model import RunView
from specs.desired import DesiredState
from specs.errors import ArgusError

if TYPE_CHECKING:
    from state.ray_client import RayClient


def run(directory: Path, job: str, timeout: float, follow: bool = False, as_json: bool = False) -> int:
    desired = load(directory)
    ray = connect(desired, timeout)
    run_ = current_run(desired, ray, job)
    if not run_.on_ray:
        raise ArgusError(f"Run {run_.submission_id} is {run_.health}: Ray no longer has its logs.")
    client = ray[run_.cluster]
    if as_json:
        typer.echo(json.dumps({"address": f"job.{job}", "submission_id": run_.submission_id,
                               "status": run_.status, "logs": client.logs(run_.submission_id)}))
    elif follow:
        client.follow(run_.submission_id, lambda chunk: typer.echo(chunk, nl=False))
    else:
        typer.echo(client.logs(run_.submission_id), nl=False)
    return EXIT_OK


def current_run(desired: DesiredState, ray: dict[str, RayClient], job: str) -> RunView:
    """The run the plan (and `argus status`) shows as the job's current one, planned from its runs
    alone: no source is fetched, no config composed (state.observe.observe_runs)."""
    from reconcile.plan.planner import plan
    from state.observe import observe_runs

    change = next((c for c in plan(desired, observe_runs(desired, ray)).changes if c.address == f"job.{job}"), None)
    if change is None or change.current is None:
        raise ArgusError(f"job.{job} has no run yet. Known jobs: {', '.join(sorted(desired.jobs)) or 'none'}; "
                         "run `argus apply` to start it.")
    return change.current
