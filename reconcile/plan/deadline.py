"""A job's max_runtime: stop an active run that passed it. Pure.

The deadline is the run's Ray start time (RunView.started_at of a run Ray lists: set when Ray accepted
the submit) plus the spec's max_runtime, judged against the observation's clock. Nothing a run writes on
the shared root (its record, its exit.json) moves it: only runs Ray lists as active are looked at, and
their start comes from Ray.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone

from reconcile.model import Action, Change, RunView, StopStep, SubmitStep
from reconcile.plan.runs import is_active, newest
from specs.address import Address
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.duration import shown
from specs.kinds.models import Job

LEFT_ALONE = (Action.NOOP, Action.WAIT)
"""Changes that leave an active run going: a WAIT too (a follower whose changed spec waits on its predecessors
while its older run goes on), which must not keep that run past its limit."""
WHEN_STOPPED = (Action.STOP, Action.REPLACE, Action.QUEUE)
"""Changes that already stop the job's older runs: a run among them past its deadline is marked so."""


def with_deadlines(jobs: Mapping[str, Job], changes: list[Change], runs: Mapping[str, list[RunView]],
                   now: float) -> list[Change]:
    """Each job change with its active run's deadline shown, and a run past it stopped: a DEADLINE
    change where the plan would leave the run alone, a stop marked `deadline` where it stops it anyway."""
    return [_with_deadline(change, jobs.get(change.address.removeprefix("job.")), runs, now)
            if change.address.startswith("job.") else change for change in changes]


def deadline_of(run: RunView, job: Job) -> float | None:
    """Epoch seconds when `run` reaches the job's max_runtime; None without one, or for a run that is not
    active on Ray (a start time argus cannot take from Ray is no start time to count from)."""
    if job.max_runtime is None or not is_active(run) or run.started_at <= 0:
        return None
    return run.started_at + job.max_runtime


def _with_deadline(change: Change, job: Job | None, runs: Mapping[str, list[RunView]], now: float) -> Change:
    if job is None or job.max_runtime is None:
        return change
    active = [r for r in runs.get(job.name, []) if is_active(r)]
    deadlines = {r.submission_id: d for r in active if (d := deadline_of(r, job)) is not None}
    change = _with_max_runtime(change, job.max_runtime)
    if not deadlines:
        return change
    current = change.current if change.current and change.current.submission_id in deadlines else newest(active)
    shown_at = {"deadline_at": deadlines.get(current.submission_id) if current else None}
    past = {sid: d for sid, d in deadlines.items() if now > 0 and d <= now}
    if not past:
        return change.model_copy(update=shown_at)
    if change.action in LEFT_ALONE:
        return _deadline_change(change, job, [r for r in active if r.submission_id in past], past)
    if change.action in WHEN_STOPPED:
        steps = tuple(s.model_copy(update={"deadline": past[s.submission_id]})
                      if isinstance(s, StopStep) and s.submission_id in past else s for s in change.steps)
        return change.model_copy(update={"steps": steps, **shown_at})
    return change.model_copy(update=shown_at)


def _deadline_change(change: Change, job: Job, late: list[RunView], past: Mapping[str, float]) -> Change:
    run = newest(late)
    limit = shown(job.max_runtime or 0)
    when = datetime.fromtimestamp(past[run.submission_id], tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    reason = f"{run.submission_id} passed its max_runtime of {limit} (deadline {when}): stop it, classed deadline"
    steps = tuple(StopStep(cluster=r.cluster, submission_id=r.submission_id, deadline=past[r.submission_id])
                  for r in late)
    return change.model_copy(update={"action": Action.DEADLINE, "reason": reason, "current": run, "steps": steps,
                                     "deadline_at": past[run.submission_id]})


def _with_max_runtime(change: Change, max_runtime: int) -> Change:
    """Submit steps carry the limit, so the submit hands verl its expiration time (execute.ray_steps)."""
    if not any(isinstance(s, SubmitStep) for s in change.steps):
        return change
    steps = tuple(s.model_copy(update={"max_runtime": max_runtime}) if isinstance(s, SubmitStep) else s
                  for s in change.steps)
    return change.model_copy(update={"steps": steps})


def early_save_warnings(desired: DesiredState) -> list[Diagnostic]:
    """A verl job with a max_runtime that verl will not save a checkpoint before: verl saves early only from
    its PPO trainer (GRPO's too), and only when trainer.save_freq is positive (verl.trainer.ppo.ray_trainer:
    `save_freq > 0 and (... or esi_close_to_expiration)`)."""
    found = []
    for name, job in sorted(desired.jobs.items()):
        if job.max_runtime is None or job.workload == "command":
            continue
        freq = job.trainer.save_freq if job.trainer else None
        if job.workload == "sft":
            why = ("verl's SFT trainers do not save early before an expiration time: a run stopped at its "
                   "max_runtime resumes from its last trainer.save_freq checkpoint")
        elif not isinstance(freq, int) or freq <= 0:
            why = ("verl saves a checkpoint before the deadline only when trainer.save_freq is positive: set "
                   "`trainer.save_freq` (steps between saves, > 0), or a run stopped at its max_runtime starts over")
        else:
            continue
        address = Address.job(name)
        found.append(Diagnostic(severity="warning", address=address, field="max_runtime",
                                message=f"{address}: {why}").located(desired.source(address)))
    return found
