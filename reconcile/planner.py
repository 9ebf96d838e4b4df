"""The planner: a pure function of (desired, observed) to a Plan.

It reads no disk and no network (a test walks its imports). It decides from the observed level
of the world, never from what changed in git, so running it again after an apply finds nothing
left to do.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconcile.diff import field_diff
from reconcile.model import Action, Change, Diagnostic, Plan, RunView, StopStep, SubmitStep, UnmanagedJob
from specs.desired import DesiredState
from specs.models import Job
from specs.submission import Submission, resolve, spec_hash, submission_id
from state.observed import ACTIVE, NOT_SUBMITTED, ObservedState


def plan(desired: DesiredState, observed: ObservedState) -> Plan:
    workspace = desired.workspace.name
    runs = runs_by_job(workspace, observed)
    submissions = {sid: r.submission for sid, r in observed.records.items()}
    changes: list[Change] = []
    diagnostics: list[Diagnostic] = []
    for name, job in sorted(desired.jobs.items()):
        sub = resolve(desired.workspace, desired.cluster_of(job), job)
        change = plan_job(job, sub, runs.get(name, []), submissions)
        changes.append(change)
        diagnostics.extend(_job_diagnostics(desired, job, change, runs.get(name, [])))
    for name in sorted(set(runs) - set(desired.jobs)):
        change = plan_removed(name, runs[name])
        if change is not None:
            changes.append(change)
    return Plan(workspace=workspace, changes=tuple(changes), diagnostics=tuple(diagnostics),
                unmanaged=_unmanaged(workspace, observed))


def plan_job(job: Job, sub: Submission, runs: list[RunView], submissions: Mapping[str, dict]) -> Change:
    """Decide one desired job from its observed runs (on Ray or only in argus's records)."""
    address = f"job.{job.name}"
    digest = spec_hash(sub)
    after = sub.model_dump()
    active = [r for r in runs if _active(r)]
    if job.state == "stopped":
        if not active:
            return Change(address=address, action=Action.NOOP, reason="state: stopped, nothing running",
                          current=_latest(runs))
        return _stop(address, active, "state: stopped", after=None)
    mine = [r for r in runs if r.spec_hash == digest]
    stale_active = [r for r in active if r.spec_hash != digest]
    if mine and stale_active:
        return _stop(address, stale_active, f"this spec's run {_latest(mine).submission_id} "
                     "already exists; an older spec's run is still active", after=after)
    if mine:
        latest = _latest(mine)
        return Change(address=address, action=Action.NOOP, reason=_in_sync_reason(latest),
                      current=latest, after=after)
    submit = SubmitStep(cluster=sub.cluster, submission_id=submission_id(sub.workspace, sub.job, digest, 1),
                        spec_hash=digest, attempt=1, submission=sub)
    previous = _latest(runs)
    before = submissions.get(previous.submission_id) if previous else None
    if stale_active:
        stops = tuple(StopStep(cluster=r.cluster, submission_id=r.submission_id) for r in stale_active)
        return Change(address=address, action=Action.REPLACE, current=previous, before=before, after=after,
                      reason=f"spec changed while {stale_active[0].submission_id} is {stale_active[0].status}",
                      diff=field_diff(before, after), steps=(*stops, submit))
    reason = "no run of this spec yet" if previous is None else \
        f"spec changed since {previous.submission_id} ({previous.health})"
    return Change(address=address, action=Action.SUBMIT, reason=reason, current=previous, before=before,
                  after=after, diff=field_diff(before, after), steps=(submit,))


def plan_removed(name: str, runs: list[RunView]) -> Change | None:
    """A job whose spec is gone: stop what still runs; finished runs are left alone."""
    active = [r for r in runs if _active(r)]
    if not active:
        return None
    return _stop(f"job.{name}", active, "spec removed from the desired state", after=None)


def runs_by_job(workspace: str, observed: ObservedState) -> dict[str, list[RunView]]:
    """This workspace's runs: Ray's view where Ray still knows them, else argus's record."""
    views: dict[str, tuple[str, RunView]] = {}
    for cluster in observed.clusters.values():
        for job in cluster.jobs:
            if job.workspace == workspace and job.job and job.spec_hash:
                views[job.submission_id] = (job.job, RunView(
                    submission_id=job.submission_id, cluster=cluster.name, spec_hash=job.spec_hash,
                    attempt=job.attempt, status=job.status, on_ray=True))
    for record in observed.records.values():
        if record.submission_id in views or record.status in NOT_SUBMITTED:
            continue
        views[record.submission_id] = (record.job, RunView(
            submission_id=record.submission_id, cluster=record.cluster, spec_hash=record.spec_hash,
            attempt=record.attempt, status=record.status, on_ray=False))
    grouped: dict[str, list[RunView]] = {}
    for job_name, view in views.values():
        grouped.setdefault(job_name, []).append(view)
    return grouped


def _stop(address: str, active: list[RunView], reason: str, after: dict | None) -> Change:
    steps = tuple(StopStep(cluster=r.cluster, submission_id=r.submission_id) for r in active)
    return Change(address=address, action=Action.STOP, reason=reason, current=active[0], after=after,
                  steps=steps)


def _active(run: RunView) -> bool:
    return run.on_ray and run.status in ACTIVE


def _latest(runs: list[RunView]) -> RunView | None:
    return max(runs, key=lambda r: (r.attempt, r.submission_id), default=None)


def _in_sync_reason(run: RunView) -> str:
    if run.on_ray and run.status in ACTIVE:
        return f"{run.submission_id} is {run.status}"
    if run.on_ray:
        return f"{run.submission_id} finished {run.status}; bump `run:` to run it again"
    return f"{run.submission_id} is {run.health}: Ray no longer knows it; not resubmitted"


def _job_diagnostics(desired: DesiredState, job: Job, change: Change, runs: list[RunView]) -> list[Diagnostic]:
    address = f"job.{job.name}"
    source = desired.source(address)
    found: list[Diagnostic] = []
    if job.protect and change.action in (Action.STOP, Action.REPLACE):
        found.append(Diagnostic(
            severity="error", address=address, where=source.at("protect"),
            message=f"{address} is protected (protect: true) but the plan would {change.action.value} "
                    f"its run {change.current.submission_id if change.current else ''}; set `protect: false` "
                    f"first if that is intended"))
    for run in runs:
        if not run.on_ray and run.status in ACTIVE:
            found.append(Diagnostic(
                severity="warning", address=address, where=source.at(),
                message=f"run {run.submission_id} was {run.status} when argus last saw it, but cluster "
                        f"{run.cluster!r} no longer knows it (head restarted?). It is not resubmitted; "
                        f"bump `run:` to start a new run"))
    return found


def _unmanaged(workspace: str, observed: ObservedState) -> tuple[UnmanagedJob, ...]:
    return tuple(
        UnmanagedJob(cluster=c.name, submission_id=j.submission_id, status=j.status, owner=j.workspace)
        for c in observed.clusters.values()
        for j in c.jobs
        if j.workspace != workspace
    )
