"""One desired job decided from its observed runs: submit, replace, retry, stop, drift or nothing. Pure."""

from __future__ import annotations

from reconcile.model import Action, Change, RunView, StopStep, SubmitStep
from reconcile.plan.diff import field_diff
from reconcile.plan.runs import is_active, newest
from specs.address import Address
from specs.kinds.models import Job
from specs.workloads.submission import RunId, Submission
from state.observed import DEADLINE, PREEMPTED, RunStatus

MAX_DRIFT_RESTARTS = 3
"""How many times `on_drift: restart` starts a spec's runs again after stops outside argus: past it the newest
stays stopped and is reported as drift (something keeps stopping it: a restart loop helps nobody)."""
RESTARTS_SPENT = "on_drift: restart has restarted this spec's runs as many times as it does"


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
