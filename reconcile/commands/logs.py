"""argus logs JOB [--run ID | --attempt N] [--follow]: a run's driver log.

The run's own copy on NFS (execute.wrapper) is read first: it outlives Ray's memory, older
attempts and a dead head. Ray's copy serves runs that kept none (earlier versions, or a run whose
runtime env failed before its command started).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import load
from reconcile.execute.cycle import connect
from reconcile.model import RunView
from specs.desired import DesiredState
from specs.errors import ArgusError
from state.observed import TERMINAL
from state.runs import logs as run_logs
from state.runs.records import driver_log

if TYPE_CHECKING:
    from state.observed import ObservedState
    from state.ray.client import RayClient

RAY_CHECK_EVERY = 5.0
"""Seconds between asking Ray whether a followed run ended without writing its exit.json."""


def run(directory: Path, job: str, timeout: float, follow: bool = False, as_json: bool = False,
        run_id: str | None = None, attempt: int | None = None) -> int:
    desired = load(directory)
    ray = connect(desired, timeout)
    observed, runs, current = job_runs(desired, ray, job)
    spec = desired.jobs.get(job)
    if not runs and spec is not None and spec.cluster in observed.unreachable:  # "no run yet" would mislead
        raise ArgusError(f"job.{job}: no run of it is on NFS, and cluster {spec.cluster!r} cannot be read: "
                         f"{observed.unreachable[spec.cluster]}")
    chosen = choose(job, runs, current, run_id, attempt)
    root = desired.shared_root(chosen.cluster) if chosen.cluster in desired.clusters else None
    kept = root is not None and driver_log(root, chosen.submission_id) is not None
    refused = run_logs.refusal(root, chosen.submission_id) if root is not None and not kept else None
    if refused:  # a job replaced its log with a link, a FIFO or a device: said, never followed or read
        typer.echo(f"not reading the run's log on the shared root: {refused}", err=True)
    reachable = chosen.cluster in observed.clusters
    if chosen.cluster in observed.unreachable:
        typer.echo(f"cluster {chosen.cluster!r} cannot be read: showing the log the run kept on NFS", err=True)
    if not kept and not (chosen.on_ray and reachable):
        raise ArgusError(_no_log(job, chosen, observed))
    if as_json:
        text = "".join(run_logs.chunks(root, chosen.submission_id)) if kept else ray[chosen.cluster].logs(
            chosen.submission_id)
        typer.echo(json.dumps({"address": f"job.{job}", "submission_id": chosen.submission_id,
                               "status": chosen.status, "health": chosen.health,
                               "source": "nfs" if kept else "ray", "logs": text}))
    elif follow and kept and not chosen.finished:
        run_logs.follow(root, chosen.submission_id, _write, _ray_says_ended(ray, chosen) if reachable else _never)
    elif follow and not kept and not chosen.finished:
        ray[chosen.cluster].follow(chosen.submission_id, _write)
    elif kept:
        for text in run_logs.chunks(root, chosen.submission_id):
            _write(text)
    else:
        _write(ray[chosen.cluster].logs(chosen.submission_id))
    return EXIT_OK


def job_runs(desired: DesiredState, ray: dict[str, RayClient], job: str
             ) -> tuple[ObservedState, list[RunView], RunView | None]:
    """Every run of the job Ray or argus's records know, and the one the plan shows as current
    (planned from the runs alone: no source fetched, no config composed)."""
    from reconcile.plan.planner import plan
    from reconcile.plan.runs import runs_by_job
    from state.observe import observe_runs

    observed = observe_runs(desired, ray)
    runs = runs_by_job(desired.workspace.name, observed).get(job, [])
    if job not in desired.jobs and not runs:
        known = ", ".join(sorted(desired.jobs)) or "none"
        raise ArgusError(f"No such job: job.{job} is not in the desired state and has no recorded run. "
                         f"Known jobs: {known}.")
    change = next((c for c in plan(desired, observed).changes if c.address == f"job.{job}"), None)
    return observed, runs, change.current if change else None


def choose(job: str, runs: list[RunView], current: RunView | None, run_id: str | None,
           attempt: int | None) -> RunView:
    """--run names a run; --attempt an attempt of the current run's spec; else the current run."""
    from reconcile.plan.runs import newest

    if run_id is not None and attempt is not None:
        raise ArgusError("Give --run or --attempt, not both.")
    if run_id is not None:
        found = next((r for r in runs if r.submission_id == run_id), None)
        if found is None:
            raise ArgusError(f"job.{job} has no run {run_id}. {_listing(runs)}")
        return found
    latest = current or newest(runs)
    if latest is None:
        raise ArgusError(f"job.{job} has no run yet: run `argus apply` to start it.")
    if attempt is None:
        return latest
    found = next((r for r in runs if r.spec_hash == latest.spec_hash and r.attempt == attempt), None)
    if found is None:
        raise ArgusError(f"job.{job} has no attempt {attempt} of its current spec ({latest.spec_hash[:12]}). "
                         f"{_listing(runs)}")
    return found


def _listing(runs: list[RunView]) -> str:
    lines = [f"  {r.submission_id}  attempt {r.attempt}  {r.health}" for r in sorted(runs, key=lambda r: r.started_at)]
    return "Its runs (pass one with --run):\n" + "\n".join(lines) if lines else "It has no runs."


def _no_log(job: str, run_: RunView, observed: ObservedState) -> str:
    if run_.cluster in observed.unreachable:
        return (f"Run {run_.submission_id} of job.{job} kept no log on NFS, and cluster {run_.cluster!r} is "
                f"unreachable: {observed.unreachable[run_.cluster]}")
    return (f"Run {run_.submission_id} of job.{job} is {run_.health}: Ray no longer has its log, and the run "
            "kept none on NFS (it started before argus wrapped entrypoints, or never started).")


def _ray_says_ended(ray: dict[str, RayClient], run_: RunView) -> Callable[[], bool]:
    """For follow: True once Ray says the run ended (or forgot it), asked every few seconds. A
    wrapper SIGKILLed by a stop writes no exit.json; this ends the follow then."""
    from state.ray.client import ClusterRequestFailed, ClusterUnreachable

    client, next_check = ray[run_.cluster], [time.monotonic() + RAY_CHECK_EVERY]

    def ended() -> bool:
        if time.monotonic() < next_check[0]:
            return False
        next_check[0] = time.monotonic() + RAY_CHECK_EVERY
        try:
            job = client.job(run_.submission_id)
        except (ClusterUnreachable, ClusterRequestFailed):
            return False  # the head went away: the run may still be writing its log
        return job is None or job.status in TERMINAL

    return ended


def _never() -> bool:
    return False


def _write(text: str) -> None:
    typer.echo(text, nl=False)
