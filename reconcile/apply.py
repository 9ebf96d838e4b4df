"""The applier: executes a plan's steps in order, recording each run on NFS and in the audit log."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reconcile.model import Change, Plan, StopStep, SubmitStep
from reconcile.render import render_step
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.submission import labels, secret_refs
from state import audit, records
from state.gitinfo import GitInfo
from state.observed import ObservedState, RunRecord
from state.ray_client import RayClient

DEFAULT_STOP_TIMEOUT = 120.0


@dataclass
class ApplyContext:
    desired: DesiredState
    clients: dict[str, RayClient]
    git: GitInfo
    plan_id: str
    stop_timeout: float = DEFAULT_STOP_TIMEOUT
    echo: Callable[[str], None] = print
    outcomes: list[str] = field(default_factory=list)


def apply_plan(plan: Plan, ctx: ApplyContext) -> None:
    """Run every step; on the first failure, record it and raise (later steps are not attempted)."""
    if plan.errors:
        raise ArgusError("The plan has errors; fix them before applying (see `argus plan`).")
    resolve_secrets(plan)  # a missing variable fails here, before anything is submitted
    _audit_all(ctx, {"event": "apply.start", "changes": len(plan.actionable)})
    try:
        for change in plan.actionable:
            _apply_change(change, ctx)
    except ArgusError as err:
        _audit_all(ctx, {"event": "apply.end", "outcome": "failed", "error": str(err)})
        raise
    _audit_all(ctx, {"event": "apply.end", "outcome": "ok", "changes": len(plan.actionable)})


def refresh_records(ctx: ApplyContext, observed: ObservedState) -> int:
    """Copy Ray's current status into argus's records, so a later head restart loses nothing."""
    updated = 0
    for cluster in observed.clusters.values():
        root = ctx.desired.clusters[cluster.name].shared_root
        for job in cluster.jobs:
            record = observed.records.get(job.submission_id)
            if record is not None and record.status != job.status:
                _set_status(root, record, job.status)
                updated += 1
    return updated


def resolve_secrets(plan: Plan) -> dict[str, str]:
    """Values of every `${env:NAME}` the plan's submissions need, read from this process's env."""
    needed = {name for step in _submit_steps(plan) for name in secret_refs(step.submission.env_vars).values()}
    missing = sorted(n for n in needed if n not in os.environ)
    if missing:
        raise ArgusError(f"Environment variable(s) {', '.join(missing)} are referenced as ${{env:...}} "
                         "by jobs in this plan but not set; export them and run `argus apply` again.")
    return {name: os.environ[name] for name in needed}


def _apply_change(change: Change, ctx: ApplyContext) -> None:
    for step in change.steps:
        ctx.echo(f"{change.address}: {render_step(step)}")
        event = {"event": "action", "address": change.address, "action": change.action.value,
                 "step": step.kind, "submission_id": step.submission_id}
        root = ctx.desired.clusters[step.cluster].shared_root
        try:
            outcome = _execute(step, ctx)
        except ArgusError as err:
            failed = {**_common(ctx), **event, "outcome": "failed", "error": str(err)}
            audit.append(root, ctx.desired.workspace.name, failed)
            raise
        audit.append(root, ctx.desired.workspace.name, {**_common(ctx), **event, "outcome": outcome})
        ctx.outcomes.append(f"{change.address}: {step.submission_id} {outcome}")


def _execute(step: SubmitStep | StopStep, ctx: ApplyContext) -> str:
    if isinstance(step, SubmitStep):
        return _submit(step, ctx)
    if isinstance(step, StopStep):
        return _stop(step, ctx)
    raise TypeError(f"unknown step type {type(step).__name__}")


def _stop(step: StopStep, ctx: ApplyContext) -> str:
    client = ctx.clients[step.cluster]
    client.stop(step.submission_id)
    final = client.wait_terminal(step.submission_id, ctx.stop_timeout)
    status = final.status if final else "gone"
    _update_record(ctx, step.cluster, step.submission_id, status)
    return f"stopped ({status})"


def _submit(step: SubmitStep, ctx: ApplyContext) -> str:
    root = ctx.desired.clusters[step.cluster].shared_root
    sub = step.submission
    meta = labels(sub, step.spec_hash, step.attempt, ctx.git.commit, ctx.plan_id)
    payload = _payload(step, meta)
    record = RunRecord(submission_id=step.submission_id, workspace=sub.workspace, job=sub.job,
                       cluster=step.cluster, spec_hash=step.spec_hash, attempt=step.attempt,
                       status="SUBMITTING", updated_at=records.now(), plan_id=ctx.plan_id,
                       commit=ctx.git.commit, submission=sub.model_dump())
    configs = {"ray_config": ctx.desired.clusters[step.cluster].model_dump(mode="json"),
               "jobspec": ctx.desired.jobs[sub.job].model_dump(mode="json")}
    records.write_intent(root, record, configs, {"submission_id": step.submission_id, **payload})
    try:
        outcome = ctx.clients[step.cluster].submit(step.submission_id, _with_secrets(payload))
    except ArgusError as err:
        records.write_status(root, record.model_copy(update={"status": "SUBMIT_FAILED", "error": str(err)}))
        records.append_submit_log(root, step.submission_id, f"submit failed: {err}")
        raise
    stamp = records.now()
    records.write_status(root, record.model_copy(update={"status": "PENDING", "submitted_at": stamp,
                                                         "updated_at": stamp}))
    records.append_submit_log(root, step.submission_id, f"{outcome} to {ctx.clients[step.cluster].address}")
    return outcome


def _payload(step: SubmitStep, meta: dict[str, str]) -> dict[str, Any]:
    """What goes to Ray, with secrets still as references: this is also what is written to NFS."""
    sub = step.submission
    return {
        "entrypoint": sub.entrypoint,
        "runtime_env": {"env_vars": dict(sub.env_vars)} if sub.env_vars else None,
        "metadata": meta,
        "entrypoint_num_cpus": sub.entrypoint_num_cpus,
        "entrypoint_num_gpus": sub.entrypoint_num_gpus,
        "entrypoint_memory": sub.entrypoint_memory,
        "entrypoint_resources": dict(sub.entrypoint_resources) or None,
    }


def _with_secrets(payload: dict[str, Any]) -> dict[str, Any]:
    env = (payload.get("runtime_env") or {}).get("env_vars")
    if not env:
        return payload
    refs = secret_refs(env)
    resolved = {k: os.environ[refs[k]] if k in refs else v for k, v in env.items()}
    return {**payload, "runtime_env": {"env_vars": resolved}}


def _update_record(ctx: ApplyContext, cluster: str, submission_id: str, status: str) -> None:
    root = ctx.desired.clusters[cluster].shared_root
    found = records.read_record(root, submission_id)
    if found is not None:
        _set_status(root, found, status)


def _set_status(root: str, record: RunRecord, status: str) -> None:
    records.write_status(root, record.model_copy(update={"status": status, "updated_at": records.now()}))


def _submit_steps(plan: Plan) -> list[SubmitStep]:
    return [s for c in plan.actionable for s in c.steps if isinstance(s, SubmitStep)]


def _common(ctx: ApplyContext) -> dict[str, Any]:
    return {"plan_id": ctx.plan_id, "commit": ctx.git.commit, "dirty": ctx.git.dirty}


def _audit_all(ctx: ApplyContext, event: dict[str, Any]) -> None:
    for root in sorted({c.shared_root for c in ctx.desired.clusters.values()}):
        audit.append(root, ctx.desired.workspace.name, {**_common(ctx), **event})
