"""A job's `health.idle` with `action: stop`: stop a run whose GPUs stayed idle over the policy's window. Pure.

Only `argus serve` holds the GPU samples a verdict needs (reconcile.serve.gpu_window), so the verdicts come in
with the observation (ObservedState.idle, from reconcile.plan.health.idle_runs); a plan without them (`argus
plan`, `argus apply`) stops nothing for idleness. Never a `protect: true` job's run (the spec refuses the
combination; a job protected later keeps its run), and only where the plan would leave the run alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconcile.model import Action, Change, RunView, StopStep
from reconcile.plan.deadline import LEFT_ALONE
from reconcile.plan.runs import is_active, newest
from specs.duration import shown
from specs.kinds.models import Job


def with_idle_stops(jobs: Mapping[str, Job], changes: list[Change], runs: Mapping[str, list[RunView]],
                    idle: frozenset[str]) -> list[Change]:
    if not idle:
        return changes
    return [_stopped_if_idle(change, jobs.get(change.address.removeprefix("job.")), runs, idle)
            if change.address.startswith("job.") and change.action in LEFT_ALONE else change for change in changes]


def _stopped_if_idle(change: Change, job: Job | None, runs: Mapping[str, list[RunView]], idle: frozenset[str]
                     ) -> Change:
    if job is None or job.protect or job.health is None or not job.health.stops_when_idle():
        return change
    found = [r for r in runs.get(job.name, []) if is_active(r) and r.submission_id in idle]
    if not found:
        return change
    policy, run = job.health.idle, newest(found)
    assert policy is not None  # stops_when_idle
    reason = (f"{run.submission_id}'s GPUs stayed below {policy.below_percent:g}% for {shown(int(policy.window))} "
              "(health.idle, action: stop): stop it, classed idle")
    steps = tuple(StopStep(cluster=r.cluster, submission_id=r.submission_id, idle=True) for r in found)
    return change.model_copy(update={"action": Action.IDLE, "reason": reason, "current": run, "steps": steps})
