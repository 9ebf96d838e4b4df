"""Datasets and Models in the plan: each version is sealed once, then jobs may read it.

Per input, from what observation found (state.observed.InputState): a problem is an error at its spec; a sealed
version is in sync (shared when another workspace sealed it); a finished materialisation that Ray says SUCCEEDED is
sealed; a `path:` is adopted by apply itself; anything else is planned like a job, the synthetic job
`dataset--NAME` (`model--NAME`) whose run fetches or prepares the version into its staging directory. Pure.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from reconcile.model import Action, Change, PlanOptions, RunView, SealInputStep
from reconcile.plan.code import code_ref
from reconcile.plan.jobs import plan_job
from reconcile.plan.runs import newest
from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.kinds.inputs import OUTPUT_PLACEHOLDER, Dataset, Model, materialiser_name, staged_rel
from specs.kinds.models import Job
from specs.workloads.submission import SHARED_ROOT_PLACEHOLDER, Submission, resolve, spec_hash
from state.observed import InputState, ObservedState, RunStatus

MAX_EMPTY_SUCCESSES = 3
"""Attempts whose run SUCCEEDED but left nothing to seal before argus stops trying (something removes it)."""


def materialiser(spec: Dataset | Model, state: InputState, desired: DesiredState) -> Job | None:
    """The synthetic job whose run writes this version into the workspace's staging directory: the fetch (built
    by observation, InputState.fetch) or the prepare step's argv run from its CodeSnapshot. None for a `path:`
    (apply adopts it), and when the version is not pinned or its fetch was not built. Its `run:` stays 1: the
    staging directory holds the version's key, so a new version is a new spec anyway."""
    if spec.path is not None or state.key is None:
        return None
    staged = f"{SHARED_ROOT_PLACEHOLDER}/{staged_rel(spec, state.key, desired.workspace.name)}"
    here = shlex.quote(staged)  # a retry starts clean: what an earlier run (or argus) left is not trusted
    if spec.prepare is not None:
        argv = [arg.replace(OUTPUT_PLACEHOLDER, staged) for arg in spec.prepare.entrypoint]
        command, code = f"rm -rf {here} && mkdir -p {here} && {shlex.join(argv)}", spec.prepare.code
    elif state.fetch:  # the fetcher makes the directory itself, and refuses one that exists
        command, code = f"rm -rf {here} && {state.fetch}", None
    else:
        return None
    secret = spec.ftp.password_variable if spec.ftp is not None else None
    return Job(kind="Job", name=materialiser_name(spec), cluster=spec.cluster, workload="command",
               entrypoint=command, code=code, entrypoint_num_cpus=1, entrypoint_num_gpus=0,
               env={secret: f"${{env:{secret}}}"} if secret else {})


def plan_inputs(desired: DesiredState, observed: ObservedState, runs: dict[str, list[RunView]],
                options: PlanOptions) -> tuple[list[Change], list[Diagnostic], dict[str, InputState]]:
    """Each input's change (sorted by address), its errors, and the inputs whose version is sealed and usable."""
    changes, diagnostics, ready = [], [], {}
    for address in sorted(desired.inputs):
        spec, state = desired.inputs[address], observed.inputs.get(address)
        if state is None:
            continue  # not observed: its cluster did not answer (said at the cluster)
        if state.problem or state.key is None or state.rel is None:
            diagnostics.append(_error(desired, address, spec.source, state.problem or "its version is not pinned"))
            continue
        if state.manifest is not None:
            changes.append(Change(address=address, action=Action.NOOP,
                                  reason=f"{shown_source(spec, state)}: {_ready(state, desired)}"))
            ready[address] = state
            continue
        change = _materialise(desired, observed, spec, state, runs, options)
        if change is None:
            diagnostics.append(_error(desired, address, spec.source, "argus could not build its fetch (observation "
                                                                      "gave none): run `argus plan` again"))
        else:
            changes.append(change)
    return changes, diagnostics, ready


def _materialise(desired: DesiredState, observed: ObservedState, spec: Dataset | Model, state: InputState,
                 runs: dict[str, list[RunView]], options: PlanOptions) -> Change | None:
    address, key, rel = Address.of_spec(spec.kind, spec.name), state.key or "", state.rel or ""
    staged = staged_rel(spec, key, desired.workspace.name)
    if spec.path is not None:
        step = SealInputStep(cluster=spec.cluster, address=address, key=key, pin=state.pin, rel=rel, staged=staged,
                             adopt=spec.path)
        return Change(address=address, action=Action.CREATE, reason=f"adopt {spec.path} (no copy)", steps=(step,))
    job = materialiser(spec, state, desired)
    if job is None:
        return None
    sub = materialisation(desired, observed, job)
    mine = [r for r in runs.get(job.name, []) if r.spec_hash == spec_hash(sub)]
    last = newest(mine)
    if last is not None and last.on_ray and last.status is RunStatus.SUCCEEDED:
        if state.staged:
            step = SealInputStep(cluster=spec.cluster, address=address, key=key, pin=state.pin, rel=rel,
                                 staged=state.staged, run=last.submission_id)
            return Change(address=address, action=Action.CREATE, current=last, steps=(step,),
                          reason=f"seal what {last.submission_id} {_verb(spec)} ({rel})")
        if last.attempt < MAX_EMPTY_SUCCESSES:
            change = plan_job(job, sub, runs.get(job.name, []), forced=True)
            return change.model_copy(update={"address": address, "reason": f"{last.submission_id} SUCCEEDED but "
                                             f"left nothing to seal at {staged}: {_verb(spec, 'again')}"})
    change = plan_job(job, sub, runs.get(job.name, []), forced=address in options.replace)
    reason = f"{shown_source(spec, state)}: {_reason(spec, change, address, rel)}"
    return change.model_copy(update={"address": address, "reason": reason})


def materialisation(desired: DesiredState, observed: ObservedState, job: Job) -> Submission:
    """What Ray is asked to run for a materialiser: resolved like any job (a prepare step from its snapshot)."""
    code = code_ref(desired, observed, job.code) if job.code else None
    return resolve(desired.workspace, desired.clusters[job.cluster], job, code)


def _reason(spec: Dataset | Model, change: Change, address: str, rel: str) -> str:
    run = change.current
    if change.action in (Action.SUBMIT, Action.RETRY, Action.REPLACE):
        return f"{_verb(spec, 'into')} {rel}: {change.reason}"
    if run is not None and run.status in (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.SUBMITTING):
        return f"being {_verb(spec)}: run {run.submission_id} is {run.status}"
    if run is not None and change.action is Action.NOOP:
        failure = f" ({run.failure})" if run.failure else ""
        return (f"its run {run.submission_id} {run.health}{failure}, nothing sealed; once the cause is fixed "
                f"`argus apply --replace {address}` {_verb(spec, 'again')}")
    return change.reason


def shown_source(spec: Dataset | Model, state: InputState) -> str:
    """The source and what pinned it, as a reviewer checks it: a branch shown with the commit it resolved to."""
    pin = (state.pin or "")[:12]
    if spec.hub is not None:
        resolved = f" = commit {pin}" if pin and spec.hub.revision != state.pin else ""
        return f"hub {spec.hub.repo} at {spec.hub.revision}{resolved}"
    source = spec.url or spec.ftp
    if source is not None:
        return f"{source.url} (sha256 {source.sha256[:12]})"
    if spec.prepare is not None:
        return f"prepared by code.{spec.prepare.code} (content {pin})"
    return f"{spec.path} (files {pin})"


def _verb(spec: Dataset | Model, form: str = "past") -> str:
    """fetch (hub, url, ftp) or prepare, in the form a reason needs."""
    fetch = spec.prepare is None
    return {"past": "fetched" if fetch else "prepared", "again": "fetches it again" if fetch else "prepares it again",
            "into": "fetch it into" if fetch else "prepare it into"}[form]


def _ready(state: InputState, desired: DesiredState) -> str:
    manifest = state.manifest
    assert manifest is not None
    commit = f", commit {manifest.commit[:12]}" if manifest.commit not in ("", "none") else ""
    shared = "; shared" if manifest.workspace != desired.workspace.name else ""
    return (f"ready: {len(manifest.files)} files, {manifest.bytes} bytes (workspace {manifest.workspace}{commit})"
            f"{shared}")


def _error(desired: DesiredState, address: str, field: str, message: str) -> Diagnostic:
    return Diagnostic(severity="error", address=address, field=field,
                      message=f"{address}: {message}").located(desired.source(address))


def with_materialisers(desired: DesiredState, observed: ObservedState) -> DesiredState:
    """The desired state with each input's materialiser among its jobs: admission queues their runs as any job's."""
    extra = {job.name: job for address, spec in desired.inputs.items()
             if (state := observed.inputs.get(address)) is not None and state.manifest is None and not state.problem
             and (job := materialiser(spec, state, desired)) is not None}
    return replace(desired, jobs={**desired.jobs, **extra}) if extra else desired
