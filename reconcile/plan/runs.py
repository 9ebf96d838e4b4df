"""The runs the planner decides from: Ray's jobs and argus's records, as one RunView each. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from reconcile.model import Change, RunView, SubmitStep, UnmanagedJob
from reconcile.plan.registry import (
    ever_submitted,
    forged_row,
    forged_row_warning,
    holds,
    imported_run,
    own_failure,
    registered,
    stopped_by,
)
from specs.address import Address
from specs.diagnostics import Diagnostic, printable
from specs.workloads.run_progress import Progress
from specs.workloads.submission import LABEL_JOB, LABEL_WORKSPACE, RunId
from state.observed import ACTIVE, MAYBE_RUNNING, ClusterState, ObservedState, RayJob, RunRecord, RunStatus


def runs_by_job(workspace: str, observed: ObservedState) -> dict[str, list[RunView]]:
    """This workspace's runs by job name: Ray's view where Ray still knows them, else argus's record."""
    views: dict[str, tuple[str, RunView]] = {}
    for cluster in observed.clusters.values():
        for job in cluster.jobs:
            run = ours(job, workspace, cluster.name, observed)
            if run is not None:
                views[job.submission_id] = (run.job, _seen_on_ray(job, run, cluster.name, observed))
    earlier = first_attempts(observed.clusters)
    for record in observed.records.values():
        if (record.submission_id not in views and not _never_reached_ray(record, observed)
                and outran_ray(record, observed.clusters, earlier) is None
                and registered(observed, record.cluster, record.submission_id)):
            views[record.submission_id] = (record.job, _recorded(record, observed))
    grouped: dict[str, list[RunView]] = {}
    for job_name, view in views.values():
        grouped.setdefault(job_name, []).append(view)
    return grouped


def archived(workspace: str, job: str, digest: str, observed: ObservedState, shown: list[RunView]) -> list[RunView]:
    """This spec's runs the run index archived (state.runs.past), asked for only when no run of it is shown: a
    spec reverted to an earlier version. Each counts only if argus's verified chain holds its id, and is seen
    as a record of a run Ray forgot is."""
    if any(view.spec_hash == digest for view in shown):
        return []
    seen = {view.submission_id for view in shown}
    return [_recorded(record, observed) for record in observed.past.of(job, digest)
            if record.submission_id not in seen and (record.workspace, record.job, record.spec_hash) ==
            (workspace, job, digest) and holds(observed, record.cluster, record.submission_id)]


def outran_ray(record: RunRecord, clusters: Mapping[str, ClusterState],
               earlier: Mapping[tuple[str, str, str, str], int] | None = None) -> str | None:
    """Why a record of a run Ray does not list cannot be a run that happened, when it cannot: Ray lists
    an earlier attempt of the same spec on the run's cluster. A later attempt is submitted after the
    earlier one, in the same Ray session or a later one, and argus deletes from Ray only runs older
    than those it keeps: Ray would list it. Such a record (any job can write one, for any future
    submission id) is no run; it never keeps that attempt from being submitted. `earlier`: the first
    attempts Ray lists (first_attempts), when the caller asks for many records."""
    cluster = clusters.get(record.cluster)
    if cluster is None:
        return None
    first = (earlier if earlier is not None else first_attempts(clusters)).get(
        (record.cluster, record.workspace, record.job, record.spec_hash))
    if first is None or first >= record.attempt or any(j.submission_id == record.submission_id for j in cluster.jobs):
        return None
    shown = RunId(workspace=record.workspace, job=record.job, spec_hash=record.spec_hash, attempt=first)
    return (f"Ray lists {shown.submission_id}, an earlier attempt of the same spec, but not "
            f"{record.submission_id}, whose record says it was {record.status}")


def first_attempts(clusters: Mapping[str, ClusterState]) -> dict[tuple[str, str, str, str], int]:
    """(cluster, workspace, job, spec hash) -> the lowest attempt Ray lists (labels parsed once a row)."""
    found: dict[tuple[str, str, str, str], int] = {}
    for name, cluster in clusters.items():
        for job in cluster.jobs:
            run = job.run_id
            if run is not None and run.submission_id == job.submission_id:
                key = (name, run.workspace, run.job, run.spec_hash)
                found[key] = min(found.get(key, run.attempt), run.attempt)
    return found


def newest(runs: list[RunView]) -> RunView | None:
    return max(runs, key=lambda r: (r.started_at, r.attempt, r.submission_id), default=None)


def is_active(run: RunView) -> bool:
    """PENDING or RUNNING on Ray now: a run argus may have to stop."""
    return run.on_ray and run.status in ACTIVE


def unmanaged(workspace: str, observed: ObservedState) -> tuple[UnmanagedJob, ...]:
    """Every job on the clusters that is not a proven run of this workspace; what it claims to be
    when it carries this workspace's labels without the proof."""
    return tuple(
        UnmanagedJob(cluster=c.name, submission_id=j.submission_id, status=j.status, owner=j.workspace,
                     claims=claimed(j, workspace))
        for c in observed.clusters.values()
        for j in c.jobs
        if ours(j, workspace, c.name, observed) is None
    )


def ours(job: RayJob, workspace: str, cluster: str, observed: ObservedState) -> RunId | None:
    """The run, only when it is proven a run of this workspace: its labels parse, its submission id
    is the one argus derives from them, argus's audit log registers it once it is the registry (argus
    registers every submit before Ray is asked: reconcile.plan.registry), and argus's record of that run
    on this cluster exists (argus writes it before every submit) unless the adopted chain holds the id (a job
    can delete the record: the run stays argus's, its deadline holds). Anything else is never stopped or
    planned on: labels are metadata anyone can submit. A job submitted outside argus is a run of this workspace
    only when its verified chain records importing it (`argus import ray-job`), as a run of that job and spec."""
    adopted = imported_run(observed, cluster, job.submission_id)
    if adopted is not None:
        return RunId(workspace=workspace, job=adopted[0], spec_hash=adopted[1], attempt=1)
    run = job.run_id
    if run is None or run.workspace != workspace or job.submission_id != run.submission_id:
        return None
    if not registered(observed, cluster, job.submission_id):  # labels and a record anyone can write; the chain not
        return None
    record = observed.records.get(job.submission_id)
    if record is None and holds(observed, cluster, job.submission_id):
        return run
    if record is None or record.cluster != cluster or record.job != run.job or record.spec_hash != run.spec_hash:
        return None
    return run


def claimed(job: RayJob, workspace: str) -> str | None:
    """"<workspace>/<job>" for a job carrying this workspace's label that is not proven ours."""
    said = job.metadata.get(LABEL_WORKSPACE)
    if said != workspace:
        return None
    return f"{workspace}/{printable(job.metadata.get(LABEL_JOB, '?'))[:64]}"


def ownership_diagnostics(workspace: str, observed: ObservedState, changes: list[Change]) -> list[Diagnostic]:
    """A warning per job claiming to be a run of this workspace without the proof; an error where
    such a job holds the very submission id the plan would submit: argus never adopts it."""
    claims = [j for j in unmanaged(workspace, observed) if j.claims]
    taken = {(j.cluster, j.submission_id): j for j in claims}
    forged = {(c.name, j.submission_id): j for c in observed.clusters.values() for j in c.jobs
              if forged_row(j, workspace, c.name, observed)}
    found = [forged_row_warning(job, cluster, workspace, observed) for (cluster, _), job in sorted(forged.items())]
    found += [Diagnostic(
        severity="warning", address=Address.cluster(j.cluster),
        message=f"Ray job {printable(j.submission_id)[:140]} on cluster {j.cluster!r} claims to be {j.claims} but "
                "is not a run argus submitted (its id is not the one argus derives from its labels, or argus "
                "has no record of it): it is never stopped or counted; stop it with `ray job stop` if unwanted")
        for j in claims if (j.cluster, j.submission_id) not in forged]
    for change in changes:
        for step in change.steps:
            squatter = taken.get((step.cluster, step.submission_id)) if isinstance(step, SubmitStep) else None
            if squatter is not None:
                found.append(Diagnostic(
                    severity="error", address=change.address,
                    message=f"{change.address} would be submitted as {step.submission_id}, but a job argus did not "
                            f"submit already holds that id on cluster {step.cluster!r} ({squatter.status}); argus "
                            f"will not adopt it. Stop and delete it (`ray job stop {step.submission_id}`, then "
                            "`ray job delete`), or bump the job's `run:` counter"))
    return found


def _seen_on_ray(job: RayJob, run: RunId, cluster: str, observed: ObservedState) -> RunView:
    """Ray is the truth while it knows the run: the run's exit.json (any job can write it) is not read
    here. A run that just ended shows its end once Ray notices, a moment later."""
    record = observed.records.get(job.submission_id)
    why = stopped_by(observed, cluster, job.submission_id, record)
    return RunView(submission_id=job.submission_id, cluster=cluster, spec_hash=run.spec_hash, attempt=run.attempt,
                   status=job.status, on_ray=True, started_at=(job.start_time or 0) / 1000,
                   ended_at=(job.end_time or 0) / 1000 if job.status not in MAYBE_RUNNING else 0.0,
                   protect=bool(record and record.protect), stop_asked=why is not None, stopped_by=why,
                   failure=own_failure(why, (record.failure if record else None)
                                       or observed.failures.get(job.submission_id)),
                   evidence=record.evidence if record else (), submission=record.submission if record else None,
                   bindings=record.bindings if record else {}, legacy_outputs=_legacy(record),
                   progress=_progress(job, record, observed))


def _progress(job: RayJob, record: RunRecord | None, observed: ObservedState) -> Progress | None:
    """A running run's as its log says now (a record's may be turns old: no stale ETA); an ended one's as its
    record kept it."""
    if job.status == RunStatus.RUNNING:
        return observed.progress.get(job.submission_id)
    return record.progress if record else None


def _recorded(record: RunRecord, observed: ObservedState) -> RunView:
    """A run Ray does not know (any more): its exit.json says how it ended. Without one, or when a
    signal ended it (a stop argus would have recorded, or a head going down), it is lost only when
    the head restarted since it was seen running (a job Ray still has in the same session was
    deleted, which Ray allows only for finished jobs)."""
    end = observed.ends.get(record.submission_id)
    # evidence only where argus last saw the run under way: an end argus recorded from Ray stays
    ended = end.status if end and record.status in MAYBE_RUNNING else None
    lost = ended is None and record.status in MAYBE_RUNNING and _head_restarted(record, observed)
    why = stopped_by(observed, record.cluster, record.submission_id, record)
    return RunView(submission_id=record.submission_id, cluster=record.cluster, spec_hash=record.spec_hash,
                   attempt=record.attempt, status=ended or record.status, on_ray=False,
                   protect=record.protect, lost=lost, stop_asked=why is not None, stopped_by=why,
                   cluster_read=record.cluster in observed.clusters,
                   failure="lost" if lost else own_failure(why, record.failure
                                                           or observed.failures.get(record.submission_id)),
                   started_at=_epoch(record.submitted_at or record.updated_at), submission=record.submission,
                   ended_at=_epoch(record.updated_at) if (ended or record.status) not in MAYBE_RUNNING else 0.0,
                   evidence=record.evidence, bindings=record.bindings, legacy_outputs=_legacy(record),
                   progress=record.progress)


def _legacy(record: RunRecord | None) -> bool:
    """A run argus made before outputs were per workspace, that did run (a refused submit made nothing)."""
    return record is not None and record.outputs is None and record.status is not RunStatus.SUBMIT_FAILED


def _head_restarted(record: RunRecord, observed: ObservedState) -> bool:
    """The cluster answers with another session than the run's; a record without a session (an
    earlier version's) is judged as before: lost."""
    cluster = observed.clusters.get(record.cluster)
    return cluster is not None and (record.session_name is None or cluster.session_name != record.session_name)


def _never_reached_ray(record: RunRecord, observed: ObservedState) -> bool:
    """A refused submit, or one whose outcome was unknown while the same Ray session still lacks it; never
    one the chain records as sent (Ray may have had it and forgotten it: a job can delete a finished run)."""
    if ever_submitted(observed, record.cluster, record.submission_id):
        return False
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
