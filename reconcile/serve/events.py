"""What people are told after a turn of the loop: pure, from the plan, the runs and the clock.

Each event has a key that makes it once-only (the notifier keeps a ledger of keys sent). Only each
job's newest run is looked at: a loop started on a workspace with a long history tells about what
is happening now, not about every failure of last year.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from reconcile.model import Action, Change, Plan, RunView, StopStep
from reconcile.plan.health import last_advance, stalled
from reconcile.plan.jobs import RESTARTS_SPENT
from reconcile.plan.runs import newest
from reconcile.report import Event
from specs.duration import shown
from specs.kinds.health import IdlePolicy, StallPolicy
from state.observed import RunStatus
from state.runs.failures import DEADLINE, advice_for

RECOVERED_AFTER = 300.0
"""Seconds a new attempt must be running (or have succeeded) before it counts as recovered."""


@dataclass(frozen=True)
class Policy:
    """A job's retry and stall policies as the events need them: which classes, how many attempts in all, and
    how long its step may stand still (specs.kinds.health: the job's own `health.stall`, else the defaults)."""

    on: tuple[str, ...] = ()
    max_attempts: int = 1
    stall: StallPolicy = StallPolicy()


@dataclass(frozen=True)
class Clock:
    now: float
    pending_alert: float
    stall_alert: float


def run_events(workspace: str, plan: Plan, runs: Mapping[str, list[RunView]], policies: Mapping[str, Policy],
               log_changed_at: Mapping[str, float], clock: Clock,
               steps: Mapping[str, Sequence[tuple[float, int]]] | None = None) -> list[Event]:
    """Failed, lost, recovered, pending too long, stalled: one per job at most, for its newest run.
    `log_changed_at`: submission id -> when its driver.log on the shared root last grew; `steps`: submission id
    -> the (time, step) samples its progress showed (state.runs.progress.history)."""
    steps = steps or {}
    retries = {c.address.removeprefix("job."): c for c in plan.changes if c.action is Action.RETRY}
    found = []
    for job, views in sorted(runs.items()):
        for run in _told_about(views):
            told = _run_event(workspace, job, run, policies.get(job, Policy()), retries.get(job),
                              log_changed_at.get(run.submission_id), clock, steps.get(run.submission_id, ()))
            if told is not None:
                found.append(told)
    return found


def _told_about(views: list[RunView]) -> list[RunView]:
    """The newest run, and while a new attempt is under way the failure it follows (the attempt may
    have been submitted by an apply between two turns, before the loop saw that failure)."""
    ordered = sorted(views, key=lambda r: r.started_at)
    if not ordered:
        return []
    latest = ordered[-1]
    before = ordered[-2] if len(ordered) > 1 else None
    if before is not None and latest.attempt > 1 and not latest.finished and (
            before.status is RunStatus.FAILED or before.lost):
        return [before, latest]
    return [latest]


def idle_events(workspace: str, runs: Mapping[str, list[RunView]], idle: Mapping[str, str],
                policies: Mapping[str, IdlePolicy], stopped: set[str], clock: Clock) -> list[Event]:
    """A run whose GPUs stayed under its job's health.idle threshold for the window (`idle`: submission id ->
    job): once per run; what argus does is the policy's (`stopped`: addresses the loop stopped this turn)."""
    found = []
    for sid, job in sorted(idle.items()):
        policy = policies.get(job)
        run = next((r for r in runs.get(job, []) if r.submission_id == sid), None)
        if policy is None or run is None:
            continue
        then = ("stopped it, freeing its GPUs (health.idle.action: stop)" if f"job.{job}" in stopped else
                "stops it (health.idle.action: stop), freeing its GPUs" if policy.action == "stop" else
                "nothing but tell: the job's health.idle.action is `alert`; the run goes on")
        found.append(event(workspace, "idle", f"idle:{sid}", clock, job=job, cluster=run.cluster, submission_id=sid,
                           attempt=run.attempt, next=then,
                           summary=f"job.{job}: its GPUs stayed below {policy.below_percent:g}% for "
                                   f"{shown(int(policy.window))}"))
    return found


def retried_events(workspace: str, plan: Plan, submitted: set[str], clock: Clock) -> list[Event]:
    """A new attempt the loop submitted this turn, with the run it replaces."""
    found = []
    for change in plan.changes:
        step_ids = {getattr(s, "submission_id", None) for s in change.steps}
        for sid in sorted(step_ids & submitted):
            attempt = next(s.attempt for s in change.steps if getattr(s, "submission_id", None) == sid)
            previous = change.current
            found.append(event(workspace, "retried", f"retried:{sid}", clock, job=change.address.removeprefix("job."),
                                submission_id=sid, attempt=attempt,
                                failure=previous.failure if previous else None,
                                cluster=previous.cluster if previous else None,
                                summary=f"{change.address}: retried as attempt {attempt} ({change.reason})"))
    return found


def preempted_events(workspace: str, changes: list[Change], done: set[str], clock: Clock) -> list[Event]:
    """A run the loop stopped this turn for a higher-priority job."""
    return [event(workspace, "preempted", f"preempted:{step.submission_id}", clock,
                   job=change.address.removeprefix("job."), submission_id=step.submission_id, cluster=step.cluster,
                   summary=f"{change.address}: run {step.submission_id} preempted for {step.preempted_for}",
                   next="waits in the queue; resumes from its checkpoint as a new attempt when there is room")
            for change in changes if change.action is Action.PREEMPT and change.address in done
            for step in change.steps if isinstance(step, StopStep)]


def deadline_events(workspace: str, changes: list[Change], done: set[str], runs: Mapping[str, list[RunView]],
                    limits: Mapping[str, int], clock: Clock) -> list[Event]:
    """A run stopped at its job's max_runtime: by the loop this turn, or seen so (an apply stopped it).
    Keyed by the run, so the two ways of seeing it make one notification."""
    stopped = {(change.address.removeprefix("job."), step.cluster, step.submission_id)
               for change in changes if change.address in done
               for step in change.steps if isinstance(step, StopStep) and step.deadline is not None}
    # seen so: argus's chain records its deadline stop (run.stopping); what the run's record says is no notice
    stopped |= {(job, run.cluster, run.submission_id) for job, views in runs.items() if (run := newest(views))
                and run.failure == DEADLINE and run.status is RunStatus.STOPPED and run.stop_asked}
    return [event(workspace, "deadline", f"deadline:{sid}", clock, job=job, cluster=cluster, submission_id=sid,
                   failure=DEADLINE, advice=advice_for(DEADLINE),
                   summary=f"job.{job}: run {sid} stopped at its max_runtime{_limit(limits.get(job))}",
                   next="a new attempt if the job's retry.on names deadline; otherwise nothing")
            for job, cluster, sid in sorted(stopped)]


def _limit(seconds: int | None) -> str:
    return f" of {shown(seconds)}" if seconds else ""


def drifted_events(workspace: str, plan: Plan, clock: Clock) -> list[Event]:
    """One per run stopped (or deleted while it ran) outside argus, whether the job leaves it so
    (on_drift: report) or the loop starts it again (on_drift: restart: a `retried` event follows)."""
    found = []
    for change in plan.changes:
        run = change.current
        how = run.drifted if run is not None and change.action in (Action.DRIFT, Action.RETRY) else None
        if how is None:
            continue
        job = change.address.removeprefix("job.")
        then = "starts it again as a new attempt (on_drift: restart)" if change.action is Action.RETRY else (
            f"nothing: it stays stopped ({RESTARTS_SPENT}); `argus apply --replace {change.address}` runs it again"
            if RESTARTS_SPENT in change.reason else
            "nothing: it stays stopped (on_drift: report); set `state: stopped` to agree, or `on_drift: "
            f"restart` / `argus apply --replace {change.address}` to run it again")
        found.append(event(workspace, "drift", f"drift:{run.submission_id}", clock, job=job, cluster=run.cluster,
                            submission_id=run.submission_id, attempt=run.attempt,
                            summary=f"{change.address}: run {run.submission_id} was {how}", next=then))
    return found


def drift_event(workspace: str, unapplied: list[tuple[str, str, str]], clock: Clock) -> Event | None:
    """The desired state and the clusters differ and the loop did not act (sync off, or errors).
    `unapplied`: (address, action, what it would submit or stop); a new decision is new drift."""
    if not unapplied:
        return None
    listed = ", ".join(f"{action} {address}" for address, action, _what in unapplied[:10])
    more = f" and {len(unapplied) - 10} more" if len(unapplied) > 10 else ""
    return event(workspace, "drift", f"drift:{_digest(sorted(unapplied))}", clock,
                  summary=f"{len(unapplied)} change(s) not applied: {listed}{more}",
                  next="nothing: run `argus apply` (or serve with --sync auto)")


def apply_failed_event(workspace: str, addresses: list[str], error: str, clock: Clock) -> Event:
    return event(workspace, "apply_failed", f"apply_failed:{_digest([*addresses, error])}", clock,
                  summary=f"apply of {', '.join(addresses) or 'records'} failed: {error}",
                  next="tries again next turn; `argus plan` shows what is left")


def _run_event(workspace: str, job: str, run: RunView, policy: Policy, retry: object | None,
               log_changed_at: float | None, clock: Clock, steps: Sequence[tuple[float, int]] = ()) -> Event | None:
    common = {"job": job, "cluster": run.cluster, "submission_id": run.submission_id, "attempt": run.attempt,
              "max_attempts": policy.max_attempts if policy.on else None, "failure": run.failure,
              "evidence": tuple(getattr(run, "evidence", ())), "advice": getattr(run, "advice", None),
              "status": str(run.status)}
    sid, age = run.submission_id, clock.now - run.started_at
    if run.lost:
        return event(workspace, "lost", f"lost:{sid}", clock, **common, next=_next(run, policy, retry),
                      summary=f"job.{job}: run {sid} was lost with its head (last seen {run.status})")
    if run.status is RunStatus.FAILED:
        return event(workspace, "failed", f"failed:{sid}", clock, **common, next=_next(run, policy, retry),
                      summary=f"job.{job}: attempt {run.attempt} failed ({run.failure or 'unknown'})")
    if run.attempt > 1 and (run.status is RunStatus.SUCCEEDED
                            or (run.status is RunStatus.RUNNING and age >= RECOVERED_AFTER)):
        return event(workspace, "recovered", f"recovered:{sid}", clock, **common,
                      summary=f"job.{job}: recovered, attempt {run.attempt} is {run.status}")
    if run.status is RunStatus.PENDING and run.on_ray and age > clock.pending_alert:
        return event(workspace, "pending", f"pending:{sid}", clock, **common,
                      summary=f"job.{job}: pending for {age / 60:.0f} min (no room on the cluster, or a "
                              "resource no node offers)")
    if run.status is RunStatus.RUNNING and steps:  # a run that reports steps is judged by them, not its log
        return _step_stall(workspace, job, sid, steps, policy.stall, clock, common)
    quiet_for = clock.now - log_changed_at if log_changed_at is not None else 0.0
    if run.status is RunStatus.RUNNING and quiet_for > clock.stall_alert:
        quiet = quiet_for / 60
        return event(workspace, "stalled", f"stalled:{sid}", clock, **common,
                      summary=f"job.{job}: running, but its log has not grown for {quiet:.0f} min (a hung "
                              "collective looks like this)")
    return None


def _step_stall(workspace: str, job: str, sid: str, steps: Sequence[tuple[float, int]], policy: StallPolicy,
                clock: Clock, common: dict) -> Event | None:
    """Stalled: its step has not advanced for `factor` times its own recent step time (at least the floor):
    sooner and surer than a quiet log, which a run that prints while it hangs never has."""
    if not stalled(steps, clock.now, policy):
        return None
    step, since = max(step for _, step in steps), last_advance(steps)
    return event(workspace, "stalled", f"stalled:{sid}", clock, **common,
                 next=f"nothing but tell: a stalled run is left running (`argus apply --replace job.{job}` stops it)",
                 summary=f"job.{job}: running, but its step ({step}) has not advanced for "
                         f"{(clock.now - since) / 60:.0f} min (a hung collective looks like this)")


def _next(run: RunView, policy: Policy, retry: object | None) -> str:
    """What argus does about a failed or lost run."""
    if retry is not None:
        return f"retries it as attempt {run.attempt + 1} of {policy.max_attempts}, from its checkpoint directory"
    if not policy.on:
        return "nothing: the job has no retry policy; fix it and push, or `argus apply --replace job.NAME`"
    if run.failure not in policy.on:
        return f"nothing: {run.failure or 'unknown'} is not in the job's retry.on"
    if run.attempt >= policy.max_attempts:
        return f"nothing: attempt {run.attempt} of {policy.max_attempts} was the last"
    return "nothing this turn (the plan could not retry it: see `argus plan`)"


def event(workspace: str, kind: str, key: str, clock: Clock, **fields: object) -> Event:
    """One event, keyed within its workspace (every module of the loop that tells makes them here)."""
    when = datetime.fromtimestamp(clock.now, tz=timezone.utc).isoformat(timespec="seconds")
    return Event(kind=kind, key=f"{workspace}:{key}", workspace=workspace, time=when, **fields)


def _digest(parts: list) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
