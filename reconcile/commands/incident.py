"""argus status --run ID: the analysis report of one run's interruption (reconcile.views.incident), from the
incident record argus kept in the run's directory (state.runs.incident, docs/incidents.md). Reads the shared
roots only: no cluster is asked, so it works while the cluster is down, which is when it is wanted."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import load
from reconcile.plan.health import next_step
from reconcile.views.incident import render, report
from specs.desired import DesiredState
from specs.diagnostics import printable
from specs.errors import ArgusError
from state.runs import incident, records


def run(directory: Path, submission_id: str, output_format: str = "human") -> int:
    desired = load(directory)
    found = analysed(desired, submission_id)
    if output_format == "json":
        typer.echo(json.dumps(found, indent=2, sort_keys=True))
    else:
        typer.echo(render(found))
    return EXIT_OK


def analysed(desired: DesiredState, submission_id: str) -> dict:
    """The report of the run's incident record, on whichever of the workspace's shared roots holds it."""
    if "/" in submission_id or submission_id in ("", ".", "..") or len(submission_id) > 200:
        raise ArgusError(f"{printable(submission_id)[:80]!r} is no submission id: `argus status` lists them.")
    for cluster in sorted(desired.clusters):
        root = desired.shared_root(cluster)
        record = incident.read(root, submission_id)
        if record is None:
            continue
        run = records.read_record(root, submission_id)
        job = desired.jobs.get(run.job if run else str(record.get("job")))
        attempt = run.attempt if run else 1
        action, words = next_step(str(record.get("kind")), run.failure if run else record.get("failure"), attempt,
                                  job.retry if job else None, job.health if job else None)
        return report(record, action, words)
    raise ArgusError(f"Run {printable(submission_id)[:80]} has no incident record on this workspace's shared roots: "
                     "argus keeps one when a run fails, is lost, is stopped at its deadline, stalls or goes idle. "
                     "`argus status` lists the runs; `argus logs JOB` shows a run's log.")
