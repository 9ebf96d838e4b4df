"""The jobs on a workspace's clusters that are not its runs, for people: `argus plan` and `argus status`.

A shared cluster holds every team's runs, and Ray keeps finished ones: listed one a line they would grow
forever in every team's output. So other workspaces' runs are one line per workspace (what runs, what
waits, what finished), and jobs argus did not submit (`ray job submit` by hand, a notebook, or a job
wearing this workspace's labels without being its run) stay visible while they hold the cluster: the
active ones one a line, the finished ones counted. `--all-workspaces` lists every job; the JSON views
always carry them all (docs/plan-format.md).
"""

from __future__ import annotations

from collections.abc import Iterable

from reconcile.model import Plan, UnmanagedJob
from specs.diagnostics import printable
from state.observed import ACTIVE, RunStatus

HEADER = "Not managed by this workspace (never touched):"
HINT = "(`--all-workspaces` lists each job)"
WORKSPACES_LISTED = 20
"""Other workspaces given a line each; the rest (labels are anyone's to write) share one line."""
ACTIVE_LISTED = 20
"""Active jobs argus did not submit listed one a line; more are counted."""


def unmanaged_lines(plan: Plan, all_workspaces: bool = False, indent: str = "") -> list[str]:
    """The block under HEADER, each line indented; nothing when every job on the clusters is this workspace's."""
    jobs = plan.unmanaged
    if not jobs:
        return []
    body = [_listed(j) for j in jobs] if all_workspaces else summed_up(jobs, plan.workspace)
    return [indent + HEADER, *(f"{indent}  {line}" for line in body)]


def summed_up(jobs: Iterable[UnmanagedJob], workspace: str) -> list[str]:
    """One line per other workspace; jobs argus did not submit: active ones listed, finished ones counted."""
    theirs: dict[str, list[UnmanagedJob]] = {}
    foreign: list[UnmanagedJob] = []
    for job in jobs:
        if job.owner is None or job.owner == workspace:  # by hand, or this workspace's labels without proof
            foreign.append(job)
        else:
            theirs.setdefault(job.owner, []).append(job)
    lines = _workspace_lines(theirs) + _foreign_lines(foreign)
    counted = bool(theirs) or any(j.status not in ACTIVE for j in foreign) or _active_count(foreign) > ACTIVE_LISTED
    return lines + ([HINT] if counted else [])


def _workspace_lines(theirs: dict[str, list[UnmanagedJob]]) -> list[str]:
    """Busiest first, so what holds the cluster now is never in the summed-up rest."""
    ranked = sorted(theirs.items(), key=lambda item: (-_active_count(item[1]), -len(item[1]), item[0]))
    shown = ranked[:WORKSPACES_LISTED]
    lines = [f"workspace {printable(name)[:64]}: {_counts(runs)}{_on(runs)}" for name, runs in shown]
    rest = [j for _, runs in ranked[WORKSPACES_LISTED:] for j in runs]
    if rest:
        lines.append(f"{len(ranked) - WORKSPACES_LISTED} more workspace(s): {_counts(rest)}{_on(rest)}")
    return lines


def _foreign_lines(foreign: list[UnmanagedJob]) -> list[str]:
    active = [j for j in foreign if j.status in ACTIVE]
    finished = [j for j in foreign if j.status not in ACTIVE]
    lines = [f"not submitted by argus, on {j.cluster}: {_job(j)}" for j in active[:ACTIVE_LISTED]]
    more = active[ACTIVE_LISTED:]
    if more:
        lines.append(f"not submitted by argus: {len(more)} more active{_on(more)}")
    if finished:
        lines.append(f"not submitted by argus: {len(finished)} finished{_on(finished)}")
    return lines


def _listed(job: UnmanagedJob) -> str:
    owner = printable(job.owner or "")[:64] or "none, submitted by hand"
    return f"{job.cluster}: {_job(job)} (owner: {owner})"


def _job(job: UnmanagedJob) -> str:
    claims = f" (claims to be {job.claims})" if job.claims else ""
    return f"{printable(job.submission_id)[:140]} {job.status}{claims}"


def _counts(jobs: list[UnmanagedJob]) -> str:
    running = sum(j.status is RunStatus.RUNNING for j in jobs)
    pending = sum(j.status is RunStatus.PENDING for j in jobs)
    parts = [(running, "running"), (pending, "pending"), (len(jobs) - running - pending, "finished")]
    return ", ".join(f"{n} {what}" for n, what in parts if n)


def _active_count(jobs: list[UnmanagedJob]) -> int:
    return sum(j.status in ACTIVE for j in jobs)


def _on(jobs: list[UnmanagedJob]) -> str:
    """The clusters (this workspace's own, so few) the jobs are on."""
    return f" on {', '.join(sorted({j.cluster for j in jobs}))}"
