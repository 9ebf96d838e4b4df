"""After apply: argus's records brought up to date from the plan's observation and what apply did.

Only the clusters apply changed are read again, with one list_jobs each: the runs it submitted or
stopped moved since the observation; every other cluster's job list is still the observation's.
No git, no snapshot, no verl check runs here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from reconcile.execute.incident import keep_scene, keep_scene_once, kind_of
from reconcile.execute.world import Secrets, World
from specs.address import Address
from specs.diagnostics import printable
from specs.errors import ArgusError
from specs.workloads.run_progress import Progress
from specs.workloads.submission import held_secrets
from state.audit.events import RunFinished
from state.observed import IDLE, TERMINAL, ClusterState, RayJob, RunRecord, RunStatus
from state.runs import debug, records
from state.runs import secrets as run_secrets
from state.runs.failures import DEADLINE, PREEMPTED, Evidence, advice_for, classify, evidence_of, matched_lines
from state.runs.settle import SECRETS_GRACE


def refresh_records(world: World, observed: Mapping[str, ClusterState], keep_finished: int = 3,
                    progress: Mapping[str, Progress] | None = None) -> int:
    """Copy Ray's status into argus's records, so a later head restart loses nothing; keep the driver
    log of each run seen finished. Returns how many records changed. A record rewritten carries the run's
    progress as the observation read it (`progress`, by submission id): a run seen ending keeps its last step."""
    clusters = after_apply(observed, world)
    submitted: dict[str, list[str]] = {}
    for record in world.runs.submitted:
        submitted.setdefault(record.cluster, []).append(record.submission_id)
    for name, ids in submitted.items():  # seed 001's `ray job list` after the submit (one text per cluster)
        records.write_debug_to_all(world.roots[name], ids, "ray_job_list_post.txt", debug.job_list(clusters[name]))
    updated = 0
    for cluster in clusters.values():
        forget_old_runs(world, cluster, keep_finished)
        for job in cluster.jobs:
            record = world.runs.get(job.submission_id)
            if record is not None and _behind(world.roots[record.cluster], record, job):
                _record_progress(world, record, job, (progress or {}).get(job.submission_id))
                updated += 1
    drop_secrets_never_sent(world, clusters)
    return updated


def drop_secrets_never_sent(world: World, clusters: Mapping[str, ClusterState]) -> None:
    """Under the apply lock: the secrets file of a run an earlier apply wrote the intent of but never got
    to Ray (it died first, or the answer was lost and Ray has no such job). Ray does not have it and no
    other apply can be sending it, so the file waits for nobody; an apply that sends the id again (its
    spec back as it was) writes it again. A record younger than SECRETS_GRACE is left: a lost submit Ray
    was still working on may yet be accepted, and every run this apply sent has a record written just now."""
    on_ray = {job.submission_id for cluster in clusters.values() for job in cluster.jobs}
    for record in world.runs.known():
        if (record.status is RunStatus.SUBMITTING and record.cluster in clusters and record.submission_id not in on_ray
                and records.older_than(record, SECRETS_GRACE)):
            run_secrets.remove(records.job_dir(world.roots[record.cluster], record.submission_id))


def after_apply(observed: Mapping[str, ClusterState], world: World) -> dict[str, ClusterState]:
    """The observed clusters, with the job list of each cluster apply touched read again."""
    return {name: cluster.model_copy(update={"jobs": world.clients[name].jobs()})
            if name in world.journal.touched else cluster for name, cluster in observed.items()}


def forget_old_runs(world: World, cluster: ClusterState, keep_finished: int) -> None:
    """Delete this workspace's oldest finished jobs from Ray's table, keeping the newest few per job:
    list_jobs returns every job ever, so an unpruned table makes every plan slower. Only argus's own runs
    (the id derived from their labels, and argus's record of them on this cluster) whose driver log is
    already kept on NFS are deleted. Housekeeping: a row Ray will not delete is a warning naming it, and
    the apply goes on (anyone who reaches the dashboard can submit rows argus cannot act on)."""
    root = world.roots[cluster.name]
    finished: dict[str, list[RayJob]] = {}
    for job in cluster.jobs:
        if (_proven(world, cluster.name, job) and job.status in TERMINAL
                and records.has_log(root, job.submission_id, "driver.log")):
            finished.setdefault(job.job or "", []).append(job)
    for runs in finished.values():
        for old in sorted(runs, key=lambda j: j.start_time or 0)[:-keep_finished]:
            try:
                world.clients[cluster.name].delete(old.submission_id)
            except ArgusError as err:
                world.echo(f"  warning: finished job {printable(old.submission_id)[:140]} stays in the job table of "
                           f"cluster {cluster.name!r}: {err} Delete it by hand (`ray job delete <id>`) if it "
                           "lingers; its record and log stay on the shared root.")


def _proven(world: World, cluster: str, job: RayJob) -> bool:
    """argus's run: its labels, its record, and (once adopted) argus's chain, which no job can write to
    without the audit key: a Ray row and record a job forged are not argus's to delete."""
    run, record, chain = job.run_id, world.runs.get(job.submission_id), world.chains.get(cluster)
    return (run is not None and run.workspace == world.workspace and run.submission_id == job.submission_id
            and record is not None and record.cluster == cluster
            and (chain is None or not chain.adopted or chain.vouches(job.submission_id)))


def records_behind(roots: Mapping[str, str], known: Mapping[str, RunRecord],
                   observed: Mapping[str, ClusterState]) -> bool:
    """Whether a refresh would change a record: Ray knows more than it says."""
    return any(_behind(roots[record.cluster], record, job) for cluster in observed.values() for job in cluster.jobs
               if (record := known.get(job.submission_id)) is not None and record.cluster in roots)


def _behind(root: str, record: RunRecord, job: RayJob) -> bool:
    unkept = job.status in TERMINAL and not records.has_log(root, job.submission_id, "driver.log")
    return record.status != job.status or unkept


def _record_progress(world: World, record: RunRecord, job: RayJob, seen: Progress | None = None) -> None:
    """A run seen finished for the first time: keep its driver log (Ray keeps it on one node's
    disk only), classify a failure (with the lines that made its class, and what to do), and say so
    in the audit log."""
    root = world.roots[record.cluster]
    status = job.status  # Ray's word while it lists the run: an exit.json (any job writes one) never outranks it
    stepped = {"progress": seen} if seen is not None else {}
    if status not in TERMINAL:
        world.runs.update(record, status=status, **stepped)
        return
    run_secrets.remove(records.job_dir(root, job.submission_id))  # a run that never reached its wrapper left it
    if records.has_log(root, job.submission_id, "driver.log"):  # the run kept its own (execute.wrapper)
        logs = records.log_tail(root, job.submission_id)
    else:  # a run that never reached its wrapper (runtime env setup), or one of an earlier version
        try:
            logs = world.clients[record.cluster].logs(job.submission_id)
        except ArgusError as err:  # its record stays behind, and is brought up to date by a later apply
            world.echo(f"  warning: run {job.submission_id} ended {status}, but Ray would not give its log: {err} "
                       "Its record is updated once Ray does; `argus logs` shows what there is.")
            return
        records.write_log(root, job.submission_id, "driver.log", logs)
    explained = _explained(world, record, evidence_of(job, logs, status))
    if status is RunStatus.FAILED or explained["failure"] == DEADLINE:  # the scene, before the row is pruned
        keep = keep_scene if status is RunStatus.FAILED else keep_scene_once  # a deadline's was kept before the stop
        keep(world.clients[record.cluster], root, record, kind_of(explained["failure"]),
             failure=explained["failure"], redact=_secrets_of(world, record).redact, echo=world.echo)
    world.runs.update(record, status=status, **explained, **stepped)
    world.audit.append(record.cluster, RunFinished(address=Address.job(record.job), submission_id=job.submission_id,
                                                   status=status, failure=explained["failure"]))


def _explained(world: World, record: RunRecord, evidence: Evidence) -> dict[str, Any]:
    """The run's failure class; for a failed run also the lines that made it and what to do about it."""
    if record.failure == PREEMPTED and evidence.status != RunStatus.FAILED:
        return {"failure": PREEMPTED}  # stopped by argus itself, for a job of higher priority
    if record.failure in (DEADLINE, IDLE) and evidence.status == RunStatus.STOPPED:
        return {"failure": record.failure, "advice": advice_for(record.failure)}  # argus stopped it: limit, idle
    failure = classify(evidence)
    if evidence.status != RunStatus.FAILED:
        return {"failure": failure}
    # Redacted before the lines are cut to length: a cut could leave part of a value that no longer matches.
    redact = _secrets_of(world, record).redact
    shown = replace(evidence, message=redact(evidence.message), log_tail=redact(evidence.log_tail))
    return {"failure": failure, "evidence": matched_lines(shown, failure), "advice": advice_for(failure)}


def _secrets_of(world: World, record: RunRecord) -> Secrets:
    """This apply's secrets and those of the run's own `${env:NAME}` references this process holds: the
    run may have been sent by an earlier apply, with secrets this plan does not send."""
    env = record.submission.env_vars if record.submission else {}
    return Secrets({**held_secrets(env, os.environ), **world.secrets.values})
