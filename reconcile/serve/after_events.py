"""The events of `after:`: a follower blocked by a failed predecessor run, a follower started. Pure.

Each is told once: `blocked` once per follower and predecessor run (a retry that fails again is new
news), `released` once per follower run.
"""

from __future__ import annotations

from reconcile.model import Action, Plan, SubmitStep
from reconcile.report import Event
from reconcile.serve.events import Clock, event


def after_events(workspace: str, plan: Plan, applied: set[str], clock: Clock) -> list[Event]:
    """`applied`: the addresses this turn carried out; a follower among them whose start was a release."""
    found = []
    for change in plan.changes:
        job = change.address.removeprefix("job.")
        if change.action is Action.WAIT:
            for waiting in change.waiting_on:
                if waiting.blocked:
                    found.append(event(
                        workspace, "blocked", f"blocked:{job}:{waiting.submission_id or waiting.job}", clock, job=job,
                        summary=f"{change.address}: blocked by job.{waiting.job} ({waiting.state})",
                        next=change.reason))
        elif change.waiting_on and change.address in applied and change.action is Action.SUBMIT:
            for step in change.steps:
                if isinstance(step, SubmitStep):
                    follows = ", ".join(f"job.{w.job} {w.state} ({w.submission_id})" for w in change.waiting_on)
                    found.append(event(workspace, "released", f"released:{step.submission_id}", clock, job=job,
                                        cluster=step.cluster, submission_id=step.submission_id,
                                        attempt=step.attempt, summary=f"{change.address}: started after {follows}"))
    return found
