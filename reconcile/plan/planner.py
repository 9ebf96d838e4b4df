"""The planner: a pure function of (desired, observed) to a Plan.

It reads no disk and no network (a test walks its imports). It decides from the observed level
of the world, never from what changed in git, so running it again after an apply finds nothing
left to do.
"""

from __future__ import annotations

from reconcile.model import Action, Change, Plan, PlanOptions, RunView
from reconcile.plan.after import Pipeline
from reconcile.plan.claims import claim_diagnostics
from reconcile.plan.code import code_ref, plan_dirs, plan_prune, plan_snapshots
from reconcile.plan.deadline import early_save_warnings, with_deadlines
from reconcile.plan.idle import with_idle_stops
from reconcile.plan.input_jobs import Inputs, with_changed_reason
from reconcile.plan.input_prune import prune_inputs
from reconcile.plan.inputs import plan_inputs, with_materialisers
from reconcile.plan.jobs import plan_job, plan_removed
from reconcile.plan.outputs import continued_outputs, foreign_outputs, legacy_steps
from reconcile.plan.queue import plan_admission
from reconcile.plan.quotas import migration_warnings, plan_quotas
from reconcile.plan.registry import forgotten, registry_diagnostics, resubmits
from reconcile.plan.root import root_diagnostics
from reconcile.plan.runs import archived, is_active, newest, ownership_diagnostics, runs_by_job, unmanaged
from reconcile.plan.unreachable import blocked_elsewhere, not_planned, unreachable_clusters, unseen_clusters
from reconcile.plan.verl import resume_diagnostics, verl_diagnostics, with_verl_notes
from specs.address import WORKSPACE, Address, Kind
from specs.desired import DesiredState, Source
from specs.diagnostics import Diagnostic
from specs.kinds.inputs import materialiser_name
from specs.kinds.models import Job
from specs.load.after import in_order
from specs.load.input_refs import inputs_of
from specs.workloads.submission import resolve, spec_hash
from state.observed import MAYBE_RUNNING, ObservedState


def plan(desired: DesiredState, observed: ObservedState, options: PlanOptions | None = None) -> Plan:
    options = options or PlanOptions()
    runs = runs_by_job(desired.workspace.name, observed)
    changes: list[Change] = plan_dirs(desired, observed) + plan_quotas(desired, observed)
    code_changes, diagnostics = plan_snapshots(desired, observed)
    changes += code_changes
    input_changes, input_diagnostics, ready = plan_inputs(desired, observed, runs, options)
    changes += input_changes  # before the jobs: a job waits on its inputs' changes
    diagnostics += input_diagnostics
    inputs = Inputs(observed.inputs, ready, {c.address: c for c in input_changes})
    broken = {d.address for d in diagnostics}
    job_changes, job_diagnostics = _plan_jobs(desired, observed, runs, options, broken, inputs)
    job_changes = with_deadlines(desired.jobs, job_changes, runs, observed.observed_at)
    job_changes = with_idle_stops(desired.jobs, job_changes, runs, observed.idle)
    changes += job_changes
    diagnostics += job_diagnostics
    diagnostics += _world_diagnostics(desired, observed) + migration_warnings(desired, observed)
    diagnostics += verl_diagnostics(desired, observed) + early_save_warnings(desired)
    diagnostics += foreign_outputs(desired, observed)
    flagged = {d.address for d in diagnostics if d.severity == "error"}
    changes, admission = plan_admission(with_materialisers(desired, observed), observed, changes, flagged)
    diagnostics += admission + resume_diagnostics(desired, observed, changes)
    changes = with_verl_notes(desired, observed, changes)
    prune_changes, prune_diagnostics = plan_prune(desired, observed, runs, options.prune)
    input_prunes, input_prune_diagnostics = prune_inputs(desired, observed, runs, options.prune)
    changes += prune_changes + input_prunes
    diagnostics += prune_diagnostics + input_prune_diagnostics + _empty_guard(desired, changes, options)
    diagnostics += ownership_diagnostics(desired.workspace.name, observed, changes)
    diagnostics += registry_diagnostics(desired.workspace.name, observed) + resubmits(observed, changes)
    changes.sort(key=lambda c: (c.action.order, c.address))
    result = Plan(workspace=desired.workspace.name, changes=tuple(changes), diagnostics=tuple(diagnostics),
                  unmanaged=unmanaged(desired.workspace.name, observed), options=options)
    return targeted(result, desired) if options.targets else result


def targeted(plan_: Plan, desired: DesiredState) -> Plan:
    """Only the targets and what they need: a job's code snapshot, the Datasets and Models it reads (and a prepare
    step's snapshot), and its cluster's directories.

    Diagnostics are kept for those addresses and for the clusters the targets live on: a cluster
    that is down (or misconfigured) elsewhere must not keep a runaway job here from being stopped.
    """
    keep = set(plan_.options.targets)
    for target in filter(None, map(Address.parse, plan_.options.targets)):
        job = desired.jobs.get(target.name) if target.kind is Kind.JOB else None
        needed = [desired.inputs[a] for a in ([*inputs_of(job)] if job else [target]) if a in desired.inputs]
        keep |= {Address.of_spec(spec.kind, spec.name) for spec in needed}
        codes = [job.code] if job is not None and job.code else []
        codes += [spec.prepare.code for spec in needed if spec.prepare is not None]
        keep |= {Address.code(code) for code in codes}
        spec = job or (desired.snapshots.get(target.name) if target.kind is Kind.CODE else None)
        for cluster in {s.cluster for s in [*needed, *([spec] if spec is not None else [])]}:
            keep |= {Address.dirs(cluster), Address.cluster(cluster)}
    return plan_.model_copy(update={
        "changes": tuple(c for c in plan_.changes if c.address in keep),
        "diagnostics": tuple(d for d in plan_.diagnostics if d.address in keep)})


def _plan_jobs(desired: DesiredState, observed: ObservedState, runs: dict[str, list[RunView]],
               options: PlanOptions, broken: set[str], inputs: Inputs) -> tuple[list[Change], list[Diagnostic]]:
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
        change, found = _plan_desired_job(desired, observed, job, runs, options, broken, pipeline, inputs)
        changes.append(change)
        diagnostics += found
    materialising = {materialiser_name(spec) for spec in desired.inputs.values()}  # planned with their inputs
    for name in sorted(set(runs) - set(desired.jobs) - materialising):
        if unseen := unseen_clusters(observed, None, runs[name]):
            changes.append(not_planned(Address.job(name), unseen, runs[name], observed))
            continue
        change = plan_removed(name, runs[name])
        if change is not None:
            changes.append(change)
            diagnostics += _protected_removal(change, runs[name])
    return changes, diagnostics


def _plan_desired_job(desired: DesiredState, observed: ObservedState, job: Job, by_job: dict[str, list[RunView]],
                      options: PlanOptions, broken: set[str], pipeline: Pipeline,
                      inputs: Inputs) -> tuple[Change, list[Diagnostic]]:
    code = code_ref(desired, observed, job.code) if job.code else None
    sub, unknown = inputs.fill(job, resolve(desired.workspace, desired.cluster_of(job), job, code))
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
    planned = inputs.gate(job, with_changed_reason(planned, sub), unknown)  # before `after:`: followers see it
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
