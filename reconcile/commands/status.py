"""argus status: per job, is it in sync with its spec, and how is its run doing on Ray."""

from __future__ import annotations

from pathlib import Path

import click

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import connect, load, observe_and_plan
from reconcile.model import Action, Change, Plan


def run(directory: Path, timeout: float) -> int:
    desired = load(directory)
    _, plan = observe_and_plan(desired, connect(desired, timeout))
    click.echo(render_status(plan))
    return EXIT_OK


def render_status(plan: Plan) -> str:
    rows = [("JOB", "SYNC", "HEALTH", "RUN")]
    rows += [(c.address, sync_of(c), c.current.health if c.current else "-",
              c.current.submission_id if c.current else "-") for c in plan.changes]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r[:3], widths, strict=True)) + "  " + r[3] for r in rows]
    if plan.unmanaged:
        lines.append("")
        lines.append("Not managed by this workspace (never touched):")
        lines.extend(f"  {j.cluster}: {j.submission_id} {j.status} (owner: {j.owner or 'none, submitted by hand'})"
                     for j in plan.unmanaged)
    return "\n".join(lines)


def sync_of(change: Change) -> str:
    if change.action is Action.NOOP:
        return "in sync"
    if change.action is Action.SUBMIT and change.current is None:
        return "missing"
    if change.after is None and change.reason.startswith("spec removed"):
        return "removed"
    return "changed"
