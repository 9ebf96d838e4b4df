"""The planner: a pure function of (desired, observed) to a Plan.

It reads no disk and no network (a test walks its imports). It decides from the observed level
of the world, never from what changed in git, so running it again after an apply finds nothing
left to do.
"""

from __future__ import annotations

from reconcile.model import Action, Change, Plan, PlanOptions, RunView, StopStep, SubmitStep
from reconcile.plan.after import Pipeline
from reconcile.plan.claims import claim_diagnostics
from reconcile.plan.code import code_ref, plan_dirs, plan_prune, plan_snapshots
from reconcile.plan.deadline import early_save_warnings, with_deadlines
from reconcile.plan.diff import field_diff
from reconcile.plan.idle import with_idle_stops
from reconcile.plan.outputs import continued_outputs, foreign_outputs, legacy_steps
from reconcile.plan.queue import plan_admission
from reconcile.plan.quotas import migration_warnings, plan_quotas
from reconcile.plan.registry import forgotten, registry_diagnostics, resubmits
from reconcile.plan.root import root_diagnostics
from reconcile.plan.runs import archived, is_active, newest, ownership_diagnostics, runs_by_job, unmanaged
from reconcile.plan.unreachable import blocked_elsewhere, not_planned, unreachable_clusters, unseen_clusters
from reconcile.plan.verl import resume_diagnostics, verl_diagnostics, with_verl_notes
from specs.address import WORKSPACE, Address, Kind
from specs.after import in_order
from specs.desired import DesiredState, Source
from specs.diagnostics import Diagnostic
from specs.models import Job
from specs.submission import RunId, Submission, resolve, spec_hash
from state.observed import DEADLINE, MAYBE_RUNNING, PREEMPTED, ObservedState, RunStatus

MAX_DRIFT_RESTARTS = 3
"""How many times `on_drift: restart` starts a spec's runs again after stops outside argus: past it the newest
stays stopped and is reported as drift (something keeps stopping it: a restart loop helps nobody)."""
RESTARTS_SPENT = "on_drift: restart has restarted this spec's runs as many times as it does"


def plan(desired: DesiredState, observed: ObservedState, options: PlanOptions | None = None) -> Plan:
    options = options or PlanOptions()
    runs = runs_by_job(desired.workspace.name, observed)
    changes: list[Change] = plan_dirs(desired, observed) + plan_quotas(desired, observed)
    code_changes, diagnostics = plan_snapshots(desired, observed)
    changes += code_changes
    broken = {d.address for d in diagnostics}
    job_changes, job_diagnostics = _plan_jobs(desired, observed, runs, options, broken)
    job_changes = with_deadlines(desired.jobs, job_changes, runs, observed.observed_at)
    job_changes = with_idle_stops(desired.jobs, job_changes, runs, observed.idle)
    changes += job_changes
    diagnostics += job_diagnostics
    diagnostics += _world_diagnostics(desired, observed) + migration_warnings(desired, observed)
    diagnostics += verl_diagnostics(desired, observed) + early_save_warnings(desired)
    diagnostics += foreign_outputs(desired, observed)
    flagged = {d.address for d in diagnostics if d.severity == "error"}
    changes, admission = plan_admission(desired, observed, changes, flagged)
    diagnostics += admission + resume_diagnostics(desired, observed, changes)
    changes = with_verl_notes(desired, observed, changes)
    prune_changes, prune_diagnostics = plan_prune(desired, observed, runs, options.prune)
    changes += prune_changes
    diagnostics += prune_diagnostics + _empty_guard(desired, changes, options)
    diagnostics += ownership_diagnostics(desired.workspace.name, observed, changes)
    diagnostics += registry_diagnostics(desired.workspace.name, observed) + resubmits(observed, changes)
    changes.sort(key=lambda c: (c.action.order, c.address))
    result = Plan(workspace=desired.workspace.name, changes=tuple(changes), diagnostics=tuple(diagnostics),
                  unmanaged=unmanaged(desired.workspace.name, observed), options=options)
    return targeted(result, desired) if options.targets else result


def targeted(plan_: Plan, desired: DesiredState) -> Plan:
    """Only the targets and what they need: a job's code snapshot and its cluster's directories.

    Diagnostics are kept for those addresses and for the clusters the targets live on: a cluster
    that is down (or misconfigured) elsewhere must not keep a runaway job here from being stopped.
    """
    keep = set(plan_.options.targets)
    for target in filter(None, map(Address.parse, plan_.options.targets)):
        job = desired.jobs.get(target.name) if target.kind is Kind.JOB else None
        spec = job or (desired.snapshots.get(target.name) if target.kind is Kind.CODE else None)
        if job is not None and job.code:
            keep.add(Address.code(job.code))
        if spec is not None:
            keep |= {Address.dirs(spec.cluster), Address.cluster(spec.cluster)}
    return plan_.model_copy(update={
        "changes": tuple(c for c in plan_.changes if c.address in keep),
        "diagnostics": tuple(d for d in plan_.diagnostics if d.address in keep)})


def _plan_jobs(desired: DesiredState, observed: ObservedState, runs: dict[str, list[RunView]],
               options: PlanOptions, broken: set[str]) -> tuple[list[Change], list[Diagnostic]]:
    changes, diagnostics = [], []
    pipeline = Pipeline(desired, runs)
    for name in in_order(desired.jobs):  # predecessors first: a follower sees their changes (`after:`)
        job, job_runs = desired.jobs[name], runs.get(name, [])
        unseen = unseen_clusters(observed, job.cluster, job_runs)
        if unseen:
            changes.append(not_planned(Address.job(name), unseen, job_runs, observed))
            pipeline.not_planned(name, changes[-1])
            diagnostics += blocked_elsewhere(desired, job, unseen, job_runs)
            continue
        change, found = _plan_desired_job(desired, observed, job, runs, options, broken, pipeline)
        changes.append(change)
        diagnostics += found
    for name in sorted(set(runs) - set(desired.jobs)):
        if unseen := unseen_clusters(observed, None, runs[name]):
            changes.append(not_planned(Address.job(name), unseen, runs[name], observed))
            continue
        change = plan_removed(name, runs[name])
        if change is not None:
            changes.append(change)
            diagnostics += _protected_removal(change, runs[name])
    return changes, diagnostics


def _plan_desired_job(desired: DesiredState, observed: ObservedState, job: Job, by_job: dict[str, list[RunView]],
                      options: PlanOptions, broken: set[str], pipeline: Pipeline) -> tuple[Change, list[Diagnostic]]:
    code = code_ref(desired, observed, job.code) if job.code else None
    sub = resolve(desired.workspace, desired.cluster_of(job), job, code)
    if (follows := pipeline.follows(job)) is not None:
        sub = sub.model_copy(update={"follows": follows})
    # this spec's runs the index archived (a spec reverted to), and those argus registered that nobody
    # remembers: counted, so never sent again (the pipeline shares by_job, so a follower sees them too)
    digest, shown = spec_hash(sub), by_job.get(job.name, [])
    shown = shown + archived(desired.workspace.name, job.name, digest, observed, shown)
    runs = by_job[job.name] = shown + forgotten(observed, desired.workspace.name, job.name, sub.cluster, digest,
                                                {r.submission_id for r in shown})
    sub, legacy = continued_outputs(sub, runs)
    planned = legacy_steps(plan_job(job, sub, runs, forced=Address.job(job.name) in options.replace), legacy)
    change, diagnostics = pipeline.decide(job, sub, planned)
    diagnostics += _job_diagnostics(desired.source(change.address), job, change, runs, observed)
    if job.code and Address.code(job.code) in broken and change.action in (Action.SUBMIT, Action.REPLACE):
        diagnostics.append(Diagnostic(severity="error", address=change.address, field="code",
                                      message=f"{change.address} runs on code.{job.code}, which has errors",
                                      ).located(desired.source(change.address)))
    return change, diagnostics


def _world_diagnostics(desired: DesiredState, observed: ObservedState) -> list[Diagnostic]:
    found = unreachable_clusters(desired, observed) + root_diagnostics(desired, observed)
    found += _runs_on_removed_clusters(observed) + _restarted_heads(observed) + claim_diagnostics(desired, observed)
    found += [Diagnostic(severity="warning", address=Address.cluster(name),
                         message=f"{problem}: every run record was read instead (slower); argus rebuilds the "
                                 "index where it can")
              for name, problem in sorted(observed.run_index_problems.items())]
    found += [Diagnostic(severity="warning", address=Address.job(observed.records[sid].job),
                         message=f"run {sid} failed, but Ray would not give its log, so it is not classified nor "
                                 f"retried this time ({why}); argus asks again on the next plan")
              for sid, why in sorted(observed.unread_rows.items()) if sid in observed.records]
    found += [Diagnostic(severity="warning", address=Address.cluster(name), message=state.version_warning)
              for name, state in sorted(observed.clusters.items()) if state.version_warning]
    return found + [
        Diagnostic(severity="error", address=Address.cluster(name), field="shared_root",
                   message=f"shared root {desired.shared_root(name)} does not exist on this machine: mount the NFS "
                           "here, or fix `shared_root`").located(desired.source(Address.cluster(name)))
        for name in observed.absent_roots]


def _empty_guard(desired: DesiredState, changes: list[Change], options: PlanOptions) -> list[Diagnostic]:
    """No jobs at all while runs are active looks like a broken checkout, not an intent."""
    stops = [c for c in changes if c.action is Action.STOP]
    if desired.jobs or not stops or options.allow_empty:
        return []
    return [Diagnostic(severity="error", address=WORKSPACE,
                       message=f"the desired state has no jobs, so the plan would stop all {len(stops)} active "
                               "job(s) of this workspace; if that is meant, pass --allow-empty")]


def plan_job(job: Job, sub: Submission, runs: list[RunView], forced: bool = False) -> Change:
    """Decide one desired job from its observed runs (on Ray or only in argus's records).

    forced (--replace): a new attempt of the same spec, even if a run of it already exists.
    """
    address, first = Address.job(job.name), RunId.of(sub)
    active = [r for r in runs if is_active(r)]
    if job.state == "stopped":
        if active:
            return _stop(address, active, "state: stopped")
        return Change(address=address, action=Action.NOOP, reason="state: stopped, nothing running",
                      current=newest(runs))
    mine = [r for r in runs if r.spec_hash == first.spec_hash]
    older_active = [r for r in active if r.spec_hash != first.spec_hash]
    if forced and mine:
        again = first.with_attempt(max(r.attempt for r in mine) + 1)
        return _submit(address, sub, again, runs, active, why="forced by --replace")
    if mine and older_active:
        reason = f"a run of this spec ({newest(mine).submission_id}) exists; an older spec's run is still active"
        return _stop(address, older_active, reason)
    if mine and (retry := _retry(job, sub, first, mine)) is not None:
        return retry
    if mine and (drift := _drift(job, sub, first, mine)) is not None:
        return drift
    if mine:
        current = newest(mine)
        return Change(address=address, action=Action.NOOP, reason=_in_sync_reason(current), current=current,
                      after=sub.model_dump())
    return _submit(address, sub, first, runs, older_active)


def plan_removed(name: str, runs: list[RunView]) -> Change | None:
    """A job whose spec is gone: stop what still runs; finished runs are left alone."""
    active = [r for r in runs if is_active(r)]
    if not active:
        return None
    return _stop(Address.job(name), active, "spec removed from the desired state")


def _retry(job: Job, sub: Submission, first: RunId, mine: list[RunView]) -> Change | None:
    """A new attempt when the newest run of this spec failed in a way its retry policy names, or was
    preempted (never counted against the policy)."""
    last = newest(mine)
    attempt = last.attempt + 1
    if last.failure == PREEMPTED and last.status is RunStatus.STOPPED:
        why = f"attempt {attempt}: {last.submission_id} was preempted; it resumes from its checkpoint"
    elif _retryable(job, last, mine):
        counted = _spent(mine)  # preempted attempts are not counted against the policy
        shown = f"{attempt}/{job.retry.max_attempts}" if counted == attempt else \
            f"{attempt} ({counted}/{job.retry.max_attempts} by the policy)"
        why = f"attempt {shown}: {last.submission_id} {last.failure}"
    else:
        return None
    change = _submit(Address.job(job.name), sub, first.with_attempt(attempt), mine, [], why=why)
    return change.model_copy(update={"action": Action.RETRY})


def _drift(job: Job, sub: Submission, first: RunId, mine: list[RunView]) -> Change | None:
    """The newest run of this spec was stopped, or deleted while it ran, outside argus: drift, shown and
    left so; with `on_drift: restart` a new attempt (never counted against the retry policy)."""
    last = newest(mine)
    how = last.drifted
    if how is None:
        return None
    address = Address.job(job.name)
    restarts = sum(r.drifted is not None for r in mine) - 1  # each drifted run before the newest was restarted
    if job.on_drift == "restart" and restarts < MAX_DRIFT_RESTARTS:
        why = (f"attempt {last.attempt + 1}: {last.submission_id} was {how}; on_drift: restart starts it again "
               f"(restart {restarts + 1} of at most {MAX_DRIFT_RESTARTS})")
        change = _submit(address, sub, first.with_attempt(last.attempt + 1), mine, [], why=why)
        return change.model_copy(update={"action": Action.RETRY})
    if job.on_drift == "restart":
        return Change(address=address, action=Action.DRIFT, current=last, after=sub.model_dump(),
                      reason=f"{last.submission_id} was {how}; {RESTARTS_SPENT} ({MAX_DRIFT_RESTARTS}), so it is "
                             f"left so. Find what stops it; `argus apply --replace {address}` runs it again")
    return Change(address=address, action=Action.DRIFT, current=last, after=sub.model_dump(),
                  reason=f"{last.submission_id} was {how}; left so (on_drift: report). Set `state: stopped` "
                         f"to agree, `on_drift: restart` or `argus apply --replace {address}` to run it again")


def _spent(mine: list[RunView]) -> int:
    """Attempts the retry policy counts: every attempt so far (and the next) but the preempted ones and
    those stopped outside argus."""
    return newest(mine).attempt + 1 - sum(r.failure == PREEMPTED or r.drifted is not None for r in mine)


def _retryable(job: Job, last: RunView, mine: list[RunView]) -> bool:
    """The policy names the failure and has attempts left; preempted attempts are not counted."""
    policy = job.retry
    if policy is None or last.failure not in policy.on or _spent(mine) > policy.max_attempts:
        return False
    return not last.on_ray or last.status is RunStatus.FAILED or (last.failure == DEADLINE
                                                                   and last.status is RunStatus.STOPPED)


def _submit(address: str, sub: Submission, run: RunId, runs: list[RunView], older_active: list[RunView],
            why: str = "") -> Change:
    step = SubmitStep(cluster=sub.cluster, submission_id=run.submission_id, spec_hash=run.spec_hash,
                      attempt=run.attempt, submission=sub)
    previous = newest(older_active) or newest(runs)
    before, after = _submitted(previous), sub.model_dump()
    common = {"address": address, "current": previous, "before": before, "after": after,
              "diff": field_diff(before, after)}
    if older_active:
        reason = why or f"spec changed while {previous.submission_id} is {previous.status}"
        return Change(action=Action.REPLACE, reason=reason, steps=(*_stop_steps(older_active), step), **common)
    reason = why or ("no run of this spec yet" if previous is None else
                     f"spec changed since {previous.submission_id} ({previous.health})")
    return Change(action=Action.SUBMIT, reason=reason, steps=(step,), **common)


def _stop(address: str, active: list[RunView], reason: str) -> Change:
    current = newest(active)
    return Change(address=address, action=Action.STOP, reason=reason, current=current,
                  before=_submitted(current), steps=_stop_steps(active))


def _submitted(run: RunView | None) -> dict | None:
    """What a run was asked to run, as the plan shows it (plan JSON keeps submissions as objects)."""
    return run.submission.model_dump() if run is not None and run.submission is not None else None


def _stop_steps(runs: list[RunView]) -> tuple[StopStep, ...]:
    return tuple(StopStep(cluster=r.cluster, submission_id=r.submission_id) for r in runs)


def _in_sync_reason(run: RunView) -> str:
    if is_active(run):
        return f"{run.submission_id} is {run.status}"
    if run.on_ray:
        return f"{run.submission_id} finished {run.status}; bump `run:` to run it again"
    return f"{run.submission_id} is {run.health}: Ray no longer knows it; not resubmitted"


def _job_diagnostics(source: Source, job: Job, change: Change, runs: list[RunView],
                     observed: ObservedState) -> list[Diagnostic]:
    found = []
    if job.protect and change.action in (Action.STOP, Action.REPLACE):
        found.append(Diagnostic(
            severity="error", address=change.address, field="protect",
            message=f"{change.address} is protected (protect: true) but the plan would {change.action.value} "
                    f"its run {change.current.submission_id if change.current else ''}; set `protect: false` "
                    f"first if that is intended").located(source))
    latest = newest(runs)
    for run in runs:
        if run.lost and run is latest:  # once the job has run again, the lost run is history, not news
            found.append(Diagnostic(severity="warning", address=change.address, message=_lost_message(run))
                         .located(source))
    return found


def _lost_message(run: RunView) -> str:
    if run.unrecorded:
        return (f"argus submitted run {run.submission_id} (its audit log registers it), but neither cluster "
                f"{run.cluster!r} nor a record on the shared root remembers it (deleted?). It is never submitted "
                "again: a `retry:` policy on `lost`, a bumped `run:` or `--replace` starts a new attempt")
    return (f"run {run.submission_id} was {run.status} when argus last saw it, but cluster {run.cluster!r} no longer "
            "knows it (head restarted?). It is not resubmitted; bump `run:` to start a new run")


def _protected_removal(change: Change, runs: list[RunView]) -> list[Diagnostic]:
    protected = [r for r in runs if is_active(r) and r.protect]
    return [Diagnostic(
        severity="error", address=change.address,
        message=f"run {r.submission_id} was submitted with protect: true and its spec is gone; restore the "
                f"spec with `protect: false` and apply, then remove it") for r in protected]


def _runs_on_removed_clusters(observed: ObservedState) -> list[Diagnostic]:
    """Runs recorded on a cluster the desired state no longer has: argus cannot see or stop them."""
    return [Diagnostic(
        severity="error", address=Address.job(r.job),
        message=f"run {r.submission_id} was {r.status} on cluster {r.cluster!r}, which is no longer in the "
                f"desired state; put the Cluster back and stop the job first (state: stopped), then remove it")
        for r in observed.records.values()
        if r.cluster not in observed.clusters and r.cluster not in observed.unreachable and r.status in MAYBE_RUNNING]


def _restarted_heads(observed: ObservedState) -> list[Diagnostic]:
    """Runs submitted in an earlier Ray session that Ray no longer knows: the head restarted."""
    found = []
    for name, cluster in sorted(observed.clusters.items()):
        on_ray = {j.submission_id for j in cluster.jobs}
        earlier = sorted({r.session_name for r in observed.records.values() if r.cluster == name and r.session_name
                          and r.session_name != cluster.session_name and r.submission_id not in on_ray})
        if earlier:
            found.append(Diagnostic(severity="warning", address=Address.cluster(name),
                                    message=f"the head of cluster {name!r} restarted since argus submitted there "
                                            f"(session {earlier[-1]} -> {cluster.session_name}): Ray forgot those "
                                            "jobs; they are shown from argus's records"))
    return found
