"""The plan stops a run serve found idle only where its job says `health.idle.action: stop`. Pure, plain data."""

from __future__ import annotations

from reconcile.model import Action, StopStep
from reconcile.plan.planner import plan
from tests.support.planning import desired, job, observed, run_of

STOPS = {"health": {"idle": {"below_percent": 10, "for": "30m", "action": "stop"}}}
ALERTS = {"health": {"idle": {"below_percent": 10, "for": "30m"}}}


def idle_change(spec, idle: bool = True):
    running = run_of(spec, "RUNNING")
    seen = observed(running).model_copy(update={"idle": frozenset({running.submission_id} if idle else ())})
    [change] = [c for c in plan(desired(spec), seen).changes if c.address == f"job.{spec.name}"]
    return change, running.submission_id


def test_an_idle_run_of_a_stop_policy_is_stopped_classed_idle():
    change, sid = idle_change(job("t", **STOPS))
    assert change.action is Action.IDLE and "stayed below 10% for 30m" in change.reason
    assert change.steps == (StopStep(cluster="c", submission_id=sid, idle=True),)


def test_an_alert_policy_a_protected_job_or_no_verdict_leave_the_run_alone():
    assert idle_change(job("t", **ALERTS))[0].action is Action.NOOP
    assert idle_change(job("t", **STOPS), idle=False)[0].action is Action.NOOP
    protected = job("t", **STOPS).model_copy(update={"protect": True})  # protected after its run started (the
    assert idle_change(protected)[0].action is Action.NOOP               # spec refuses both in one version)
