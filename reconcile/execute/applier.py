"""The applier: executes a plan's steps in order, recording each run on NFS and in the audit log."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconcile.execute import files as apply_files
from reconcile.model import Change, DeleteSnapshotStep, MkdirStep, Plan, SnapshotStep, Step, StopStep, SubmitStep
from reconcile.views.human import render_step
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.submission import RunId, expand, labels, secret_refs
from state import audit, debug, records
from state.failures import classify, evidence_of
from state.gitinfo import GitInfo
from state.observed import TERMINAL, ClusterState, ObservedState, RayJob, RunRecord
from state.ray_client import ClusterUnreachable, RayClient

DEFAULT_STOP_TIMEOUT = 120.0


@dataclass
class ApplyContext:
    desired: DesiredState
    clients: dict[str, RayClient]
    git: GitInfo
    plan_id: str
    sessions: dict[str, str] = field(default_factory=dict)
    """Each cluster's Ray session at observation, stamped on the records of runs submitted now."""
    stop_timeout: float = DEFAULT_STOP_TIMEOUT
    echo: Callable[[str], None] = print
    secrets: dict[str, str] = field(default_factory=dict)
    outcomes: list[tuple[str, str, str]] = field(default_factory=list)
    """(address, action, outcome) of every change applied, for the closing summary table."""
    observed: ObservedState | None = None
    """What the plan was made from: the cluster's resources before each submit come from here."""
    submitted: list[tuple[str, str]] = field(default_factory=list)
    """(cluster, submission_id) of every run submitted by this apply."""
    keep_finished: int = 3
    """Finished runs per job left in Ray's job table; older ones are deleted once their log is kept."""
    reviewed: dict[str, str] = field(default_factory=dict)
    """For a saved plan: the reviewed commit and desired-state digest, stamped on every audit record."""
    fetch_timeout: float | None = None
    """Seconds a snapshot's source may take to fetch again before export (None: the default)."""


def apply_plan(plan: Plan, ctx: ApplyContext) -> None:
    """Run every step; on the first failure, record it and raise (later steps are not attempted)."""
    if plan.errors:
        raise ArgusError("The plan has errors; fix them before applying (see `argus plan`).")
    ctx.secrets = resolve_secrets(plan)  # a missing variable fails here, before anything is submitted
    _audit_all(ctx, {"event": "apply.start", "changes": len(plan.actionable),
                     "options": plan.options.model_dump(mode="json")})
    try:
        for change in plan.actionable:
            _apply_change(change, ctx)
    except BaseException as err:  # ^C and bugs too: the log must say the apply did not finish
        _audit_all(ctx, {"event": "apply.end", "outcome": "failed", "error": redact(_describe(err), ctx)})
        raise
    _audit_all(ctx, {"event": "apply.end", "outcome": "ok", "changes": len(plan.actionable)})


def refresh_records(ctx: ApplyContext, observed: ObservedState) -> int:
    """Copy Ray's current status into argus's records, so a later head restart loses nothing.

    The same observation gives each run submitted by this apply its ray_job_list_post.txt: one
    list_jobs per cluster for the whole apply, not one per job.
    """
    for cluster, submission_id in ctx.submitted:
        records.write_debug(ctx.desired.shared_root(cluster), submission_id, "ray_job_list_post.txt",
                            debug.job_list(observed.clusters[cluster]))
    updated = 0
    for cluster in observed.clusters.values():
        _forget_old_runs(ctx, cluster)
        root = ctx.desired.shared_root(cluster.name)
        for job in cluster.jobs:
            record = observed.records.get(job.submission_id)
            unkept = job.status in TERMINAL and not records.has_log(root, job.submission_id, "driver.log")
            if record is not None and (record.status != job.status or unkept):
                _record_progress(ctx, root, record, job)
                updated += 1
    return updated


def _forget_old_runs(ctx: ApplyContext, cluster: ClusterState) -> None:
    """Delete this workspace's oldest finished jobs from Ray's table, keeping the newest few per job:
    list_jobs returns every job ever, so an unpruned table makes every plan slower. Only runs whose
    driver log is already kept on NFS are deleted."""
    root = ctx.desired.shared_root(cluster.name)
    finished: dict[str, list[RayJob]] = {}
    for job in cluster.jobs:
        if (job.workspace == ctx.desired.workspace.name and job.status in TERMINAL
                and records.has_log(root, job.submission_id, "driver.log")):
            finished.setdefault(job.job or "", []).append(job)
    for runs in finished.values():
        for old in sorted(runs, key=lambda j: j.start_time or 0)[:-ctx.keep_finished]:
            ctx.clients[cluster.name].delete(old.submission_id)


def _record_progress(ctx: ApplyContext, root: str, record: RunRecord, job: RayJob) -> None:
    """A run seen finished for the first time: keep its driver log (Ray keeps it on one node's
    disk only), classify a failure, and say so in the audit log."""
    if job.status not in TERMINAL:
        _set_status(root, record, job.status)
        return
    logs = ctx.clients[record.cluster].logs(job.submission_id)
    records.write_log(root, job.submission_id, "driver.log", logs)
    failure = classify(evidence_of(job, logs))
    records.write_status(root, record.model_copy(update={"status": job.status, "failure": failure,
                                                         "updated_at": records.now()}))
    audit.append(root, ctx.desired.workspace.name, {**_common(ctx), "event": "run.finished", "address":
                 f"job.{record.job}", "submission_id": job.submission_id, "status": job.status, "failure": failure})


def resolve_secrets(plan: Plan) -> dict[str, str]:
    """Values of every `${env:NAME}` the plan's submissions need, read from this process's env."""
    needed = {name for step in _submit_steps(plan) for name in secret_refs(step.submission.env_vars).values()}
    missing = sorted(n for n in needed if n not in os.environ)
    if missing:
        raise ArgusError(f"Environment variable(s) {', '.join(missing)} are referenced as ${{env:...}} "
                         "by jobs in this plan but not set; export them and run `argus apply` again.")
    return {name: os.environ[name] for name in needed}


def redact(text: str, ctx: ApplyContext) -> str:
    """Errors can echo what was sent; no secret value may reach a record or the audit log."""
    for value in ctx.secrets.values():
        if value:
            text = text.replace(value, "***")
    return text


def _apply_change(change: Change, ctx: ApplyContext) -> None:
    done: list[str] = []
    for step in change.steps:
        ctx.echo(f"{change.address}: {render_step(step)}")
        event = {**_common(ctx), "event": "action", "address": change.address, "action": change.action.value,
                 "step": step.kind, "submission_id": getattr(step, "submission_id", None)}
        root = ctx.desired.shared_root(step.cluster)
        try:
            outcome = _execute(step, ctx)
        except BaseException as err:
            audit.append(root, ctx.desired.workspace.name,
                         {**event, "outcome": "failed", "error": redact(_describe(err), ctx)})
            raise
        audit.append(root, ctx.desired.workspace.name, {**event, "outcome": outcome})
        sid = getattr(step, "submission_id", None)
        done.append(f"{outcome} ({sid})" if sid else outcome)
    counted = Counter(done)
    ctx.outcomes.append((change.address, change.action.value,
                         ", ".join(f"{o} x{n}" if n > 1 else o for o, n in counted.items())))


def _execute(step: Step, ctx: ApplyContext) -> str:
    if isinstance(step, SubmitStep):
        return _submit(step, ctx)
    if isinstance(step, StopStep):
        return _stop(step, ctx)
    if isinstance(step, MkdirStep):
        return apply_files.make_dir(step, ctx)
    if isinstance(step, SnapshotStep):
        return apply_files.make_snapshot(step, ctx)
    if isinstance(step, DeleteSnapshotStep):
        return apply_files.delete_snapshot(step, ctx)
    raise TypeError(f"unknown step type {type(step).__name__}")


def _stop(step: StopStep, ctx: ApplyContext) -> str:
    client = ctx.clients[step.cluster]
    client.stop(step.submission_id)
    final = client.wait_terminal(step.submission_id, ctx.stop_timeout, progress=ctx.echo)
    status = final.status if final else "gone"
    root = ctx.desired.shared_root(step.cluster)
    found = records.read_record(root, step.submission_id)
    if found is not None:
        _set_status(root, found, status)
    return f"stopped ({status})"


def _submit(step: SubmitStep, ctx: ApplyContext) -> str:
    """Record the intent, submit, record the outcome: a crash in between leaves SUBMITTING behind."""
    root = ctx.desired.shared_root(step.cluster)
    sub = step.submission
    if sub.code is not None:
        apply_files.check_code(sub.code, ctx.desired, step.cluster)
    run = RunId(workspace=sub.workspace, job=sub.job, spec_hash=step.spec_hash, attempt=step.attempt)
    payload = _payload(step, root, labels(run, ctx.git.commit, ctx.plan_id))
    record = RunRecord.submitting(run, sub, updated_at=records.now(), plan_id=ctx.plan_id, commit=ctx.git.commit,
                                  protect=ctx.desired.jobs[sub.job].protect,
                                  session_name=ctx.sessions.get(step.cluster))
    configs = {"ray_config": ctx.desired.clusters[step.cluster].model_dump(mode="json"),
               "jobspec": ctx.desired.jobs[sub.job].model_dump(mode="json")}
    records.write_intent(root, record, configs, {"submission_id": step.submission_id, **payload})
    if ctx.observed is not None:
        records.write_debug(root, step.submission_id, "ray_status_pre.txt",
                            debug.cluster_status(ctx.observed.clusters[step.cluster]))
    try:
        outcome = ctx.clients[step.cluster].submit(step.submission_id, _with_secrets(payload, ctx.secrets))
    except ArgusError as err:
        # Ray refused it, or the request was lost on the way: then Ray may well have accepted it.
        status = "SUBMITTING" if isinstance(err, ClusterUnreachable) else "SUBMIT_FAILED"
        records.write_status(root, record.model_copy(update={"status": status, "error": redact(str(err), ctx)}))
        records.append_submit_log(root, step.submission_id, f"submit failed: {redact(str(err), ctx)}")
        raise
    stamp = records.now()
    records.write_status(root, record.model_copy(update={"status": "PENDING", "submitted_at": stamp,
                                                         "updated_at": stamp}))
    ctx.submitted.append((step.cluster, step.submission_id))
    records.append_submit_log(root, step.submission_id, f"{outcome} to {ctx.clients[step.cluster].address}")
    return outcome


def _payload(step: SubmitStep, shared_root: str, meta: dict[str, str]) -> dict[str, Any]:
    """What goes to Ray, secrets still as references: this is also what is written to NFS."""
    sub = step.submission
    env = {k: expand(v, shared_root, step.submission_id) for k, v in sub.env_vars.items()}
    return {
        "entrypoint": expand(sub.entrypoint, shared_root, step.submission_id),
        "runtime_env": {"env_vars": env} if env else None,
        "metadata": meta,
        "entrypoint_num_cpus": sub.entrypoint_num_cpus,
        "entrypoint_num_gpus": sub.entrypoint_num_gpus,
        "entrypoint_memory": sub.entrypoint_memory,
        "entrypoint_resources": dict(sub.entrypoint_resources) or None,
    }


def _with_secrets(payload: dict[str, Any], secrets: dict[str, str]) -> dict[str, Any]:
    env = (payload.get("runtime_env") or {}).get("env_vars")
    if not env:
        return payload
    refs = secret_refs(env)
    resolved = {k: secrets[refs[k]] if k in refs else v for k, v in env.items()}
    return {**payload, "runtime_env": {"env_vars": resolved}}


def _set_status(root: str, record: RunRecord, status: str) -> None:
    records.write_status(root, record.model_copy(update={"status": status, "updated_at": records.now()}))


def _submit_steps(plan: Plan) -> list[SubmitStep]:
    return [s for c in plan.actionable for s in c.steps if isinstance(s, SubmitStep)]


def _describe(err: BaseException) -> str:
    return str(err) if isinstance(err, ArgusError) else f"{type(err).__name__}: {err}"


def _common(ctx: ApplyContext) -> dict[str, Any]:
    return {"plan_id": ctx.plan_id, "commit": ctx.git.commit, "dirty": ctx.git.dirty, **ctx.reviewed}


def _audit_all(ctx: ApplyContext, event: dict[str, Any]) -> None:
    for root in sorted(set(ctx.desired.shared_roots.values())):
        audit.append(root, ctx.desired.workspace.name, {**_common(ctx), **event})
