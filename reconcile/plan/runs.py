"""The runs the planner decides from: Ray's jobs and argus's records, as one RunView each. Pure."""

from __future__ import annotations

from datetime import datetime

from reconcile.model import RunView, UnmanagedJob
from specs.submission import SUBMISSION_ID_PATTERN, RunId
from state.observed import ACTIVE, MAYBE_RUNNING, ObservedState, RayJob, RunRecord, RunStatus


def runs_by_job(workspace: str, observed: ObservedState) -> dict[str, list[RunView]]:
    """This workspace's runs by job name: Ray's view where Ray still knows them, else argus's record."""
    views: dict[str, tuple[str, RunView]] = {}
    for cluster in observed.clusters.values():
        for job in cluster.jobs:
            run = ours(job, workspace)
            if run is not None:
                views[job.submission_id] = (run.job, _seen_on_ray(job, run, cluster.name, observed))
    for record in observed.records.values():
        if record.submission_id not in views and not _never_reached_ray(record, observed):
            views[record.submission_id] = (record.job, _recorded(record, observed))
    grouped: dict[str, list[RunView]] = {}
    for job_name, view in views.values():
        grouped.setdefault(job_name, []).append(view)
    return grouped


def newest(runs: list[RunView]) -> RunView | None:
    return max(runs, key=lambda r: (r.started_at, r.attempt, r.submission_id), default=None)


def is_active(run: RunView) -> bool:
    """PENDING or RUNNING on Ray now: a run argus may have to stop."""
    return run.on_ray and run.status in ACTIVE


def unmanaged(workspace: str, observed: ObservedState) -> tuple[UnmanagedJob, ...]:
    return tuple(
        UnmanagedJob(cluster=c.name, submission_id=j.submission_id, status=j.status, owner=j.workspace)
        for c in observed.clusters.values()
        for j in c.jobs
        if ours(j, workspace) is None
    )


def ours(job: RayJob, workspace: str) -> RunId | None:
    """The run, when argus's labels name this workspace and the id is one argus could have made:
    anything else is never stopped or planned on."""
    run = job.run_id
    if run is None or run.workspace != workspace or not SUBMISSION_ID_PATTERN.match(job.submission_id):
        return None
    return run


def _seen_on_ray(job: RayJob, run: RunId, cluster: str, observed: ObservedState) -> RunView:
    """The run's own exit.json outranks Ray: it is written as the run ends, before Ray notices."""
    record, end = observed.records.get(job.submission_id), observed.ends.get(job.submission_id)
    return RunView(submission_id=job.submission_id, cluster=cluster, spec_hash=run.spec_hash, attempt=run.attempt,
                   status=(end and end.status) or job.status, on_ray=True, started_at=(job.start_time or 0) / 1000,
                   protect=bool(record and record.protect),
                   failure=(record.failure if record else None) or observed.failures.get(job.submission_id),
                   submission=record.submission if record else None)


def _recorded(record: RunRecord, observed: ObservedState) -> RunView:
    """A run Ray does not know (any more): its exit.json says how it ended. Without one, or when a
    signal ended it (a stop argus would have recorded, or a head going down), it is lost only when
    the head restarted since it was seen running (a job Ray still has in the same session was
    deleted, which Ray allows only for finished jobs)."""
    end = observed.ends.get(record.submission_id)
    ended = end.status if end else None
    lost = ended is None and record.status in MAYBE_RUNNING and _head_restarted(record, observed)
    return RunView(submission_id=record.submission_id, cluster=record.cluster, spec_hash=record.spec_hash,
                   attempt=record.attempt, status=ended or record.status, on_ray=False,
                   protect=record.protect, lost=lost, failure="lost" if lost else record.failure
                   or observed.failures.get(record.submission_id),
                   started_at=_epoch(record.submitted_at or record.updated_at), submission=record.submission)


def _head_restarted(record: RunRecord, observed: ObservedState) -> bool:
    """The cluster answers with another session than the run's; a record without a session (an
    earlier version's) is judged as before: lost."""
    cluster = observed.clusters.get(record.cluster)
    return cluster is not None and (record.session_name is None or cluster.session_name != record.session_name)


def _never_reached_ray(record: RunRecord, observed: ObservedState) -> bool:
    """A refused submit, or one whose outcome was unknown while the same Ray session still lacks it."""
    if record.status == RunStatus.SUBMIT_FAILED:
        return True
    cluster = observed.clusters.get(record.cluster)
    return (record.status == RunStatus.SUBMITTING and cluster is not None
            and cluster.session_name == record.session_name)


def _epoch(timestamp: str) -> float:
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return 0.0
