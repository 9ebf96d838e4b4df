"""The loop's events from plain data: which runs are told about, once-only keys, what argus does next."""

from __future__ import annotations

from reconcile.model import Action, Change, Plan, RunView
from reconcile.serve.choice import choose
from reconcile.serve.events import (
    RECOVERED_AFTER,
    Clock,
    Policy,
    apply_failed_event,
    drift_event,
    retried_events,
    run_events,
)
from specs.diagnostics import Diagnostic
from state.observed import RunStatus

NOW = 1_800_000_000.0
CLOCK = Clock(now=NOW, pending_alert=600, stall_alert=1800)
NCCL = Policy(on=("nccl_timeout",), max_attempts=3)


def run(sid: str, status: RunStatus, attempt: int = 1, failure: str | None = None, age: float = 60,
        **extra: object) -> RunView:
    return RunView(submission_id=sid, cluster="c", spec_hash="h", attempt=attempt, status=status, on_ray=True,
                   failure=failure, started_at=NOW - age, **extra)


def retry_change(job: str, current: RunView) -> Change:
    return Change(address=f"job.{job}", action=Action.RETRY, reason="attempt 2/3", current=current)


def test_a_failure_says_its_class_and_what_argus_does_next():
    failed = run("ws.a.h.1", RunStatus.FAILED, failure="nccl_timeout")
    plan = Plan(workspace="ws", changes=(retry_change("a", failed),))
    [event] = run_events("ws", plan, {"a": [failed]}, {"a": NCCL}, {}, CLOCK)
    assert (event.kind, event.key, event.failure, event.attempt, event.max_attempts) == \
        ("failed", "ws:failed:ws.a.h.1", "nccl_timeout", 1, 3)
    assert event.next == "retries it as attempt 2 of 3, from its checkpoint directory"

    for policy, failure, attempt, said in ((Policy(), "oom", 1, "the job has no retry policy"),
                                           (NCCL, "oom", 1, "oom is not in the job's retry.on"),
                                           (NCCL, "nccl_timeout", 3, "attempt 3 of 3 was the last")):
        last = run("ws.a.h.3", RunStatus.FAILED, attempt=attempt, failure=failure)
        [event] = run_events("ws", Plan(workspace="ws", changes=()), {"a": [last]}, {"a": policy}, {}, CLOCK)
        assert said in event.next


def test_only_the_newest_run_of_a_job_is_told_about():
    old = run("ws.a.h.1", RunStatus.FAILED, failure="oom", age=9000)
    new = run("ws.a.k.1", RunStatus.RUNNING, attempt=1, age=10)  # a new spec's first run
    assert run_events("ws", Plan(workspace="ws", changes=()), {"a": [old, new]}, {"a": NCCL}, {}, CLOCK) == []


def test_the_failure_a_running_retry_follows_is_told_too():
    """An apply may submit the retry between two turns: the loop still tells the failure, once."""
    failed = run("ws.a.h.1", RunStatus.FAILED, failure="nccl_timeout", age=120)
    retry = run("ws.a.h.2", RunStatus.RUNNING, attempt=2, age=30)
    events = run_events("ws", Plan(workspace="ws", changes=()), {"a": [failed, retry]}, {"a": NCCL}, {}, CLOCK)
    assert [(e.kind, e.submission_id) for e in events] == [("failed", "ws.a.h.1")]
    done = retry.model_copy(update={"status": RunStatus.SUCCEEDED})
    events = run_events("ws", Plan(workspace="ws", changes=()), {"a": [failed, done]}, {"a": NCCL}, {}, CLOCK)
    assert [e.kind for e in events] == ["recovered"]


def test_recovered_pending_stalled_and_lost():
    cases = {
        "recovered": run("s1", RunStatus.RUNNING, attempt=2, age=RECOVERED_AFTER + 1),
        "pending": run("s2", RunStatus.PENDING, age=601),
        "stalled": run("s3", RunStatus.RUNNING, age=5000),
        "lost": run("s4", RunStatus.RUNNING, age=50).model_copy(update={"lost": True, "on_ray": False}),
    }
    quiet_logs = {"s3": NOW - 1801}
    events = run_events("ws", Plan(workspace="ws", changes=()), {k: [v] for k, v in cases.items()}, {},
                        quiet_logs, CLOCK)
    assert {e.job: e.kind for e in events} == {name: name for name in cases}
    calm = {"young": [run("s5", RunStatus.RUNNING, attempt=2, age=10)], "fresh": [run("s6", RunStatus.PENDING)],
            "busy": [run("s7", RunStatus.RUNNING, age=5000)]}
    assert run_events("ws", Plan(workspace="ws", changes=()), calm, {}, {"s7": NOW - 10}, CLOCK) == []


def test_drift_retried_and_apply_failed_keys_are_stable():
    first = drift_event("ws", [("job.a", "submit", "ws.a.1.1"), ("job.b", "stop", "ws.b.2.1")], CLOCK)
    again = drift_event("ws", [("job.b", "stop", "ws.b.2.1"), ("job.a", "submit", "ws.a.1.1")],
                        Clock(NOW + 30, 600, 1800))
    other = drift_event("ws", [("job.a", "submit", "ws.a.1.1")], CLOCK)
    changed_again = drift_event("ws", [("job.a", "submit", "ws.a.3.1"), ("job.b", "stop", "ws.b.2.1")], CLOCK)
    assert first.key == again.key != other.key and "2 change(s) not applied" in first.summary
    assert changed_again.key != first.key  # the same job changed again later is new drift
    assert drift_event("ws", [], CLOCK) is None
    assert apply_failed_event("ws", ["job.a"], "boom", CLOCK).key == apply_failed_event("ws", ["job.a"], "boom",
                                                                                        CLOCK).key
    from reconcile.model import SubmitStep
    from specs.workloads.submission import Submission

    failed = run("ws.a.h.1", RunStatus.FAILED, failure="nccl_timeout")
    sub = Submission.model_construct(cluster="c")
    step = SubmitStep(cluster="c", submission_id="ws.a.h.2", spec_hash="0a1b2c3d4e5f", attempt=2, submission=sub)
    plan = Plan(workspace="ws", changes=(retry_change("a", failed).model_copy(update={"steps": (step,)}),))
    [event] = retried_events("ws", plan, {"ws.a.h.2"}, CLOCK)
    assert (event.kind, event.attempt, event.failure) == ("retried", 2, "nccl_timeout")
    assert retried_events("ws", plan, set(), CLOCK) == []


def test_the_loop_carries_out_retries_always_and_the_rest_only_with_sync_auto():
    failed = run("ws.a.h.1", RunStatus.FAILED, failure="nccl_timeout")
    retry = retry_change("a", failed)
    submit = Change(address="job.b", action=Action.SUBMIT, reason="new")
    plan = Plan(workspace="ws", changes=(retry, submit))
    assert choose(plan, sync_auto=False) == [retry]
    assert choose(plan, sync_auto=True) == [retry, submit]
    on_b = Diagnostic(severity="error", address="job.b", message="bad")
    assert choose(plan.model_copy(update={"diagnostics": (on_b,)}), sync_auto=True) == [retry]
    on_a = Diagnostic(severity="error", address="job.a", message="bad")
    assert choose(plan.model_copy(update={"diagnostics": (on_a,)}), sync_auto=False) == []
    on_cluster = Diagnostic(severity="error", address="cluster.c", message="down")
    assert choose(plan.model_copy(update={"diagnostics": (on_cluster,)}), sync_auto=False) == []


def test_a_run_that_reports_steps_is_stalled_by_its_step_not_by_its_log():
    plan, running = Plan(workspace="ws", changes=()), run("ws.a.h.1", RunStatus.RUNNING, age=3600)
    steady = ((NOW - 900, 10), (NOW - 840, 11), (NOW - 780, 12), (NOW - 720, 13))  # a step a minute, then none
    [stall] = run_events("ws", plan, {"a": [running]}, {"a": Policy()}, {"ws.a.h.1": NOW}, CLOCK,
                         {"ws.a.h.1": steady})  # its log grew just now: only the step says it
    assert stall.kind == "stalled" and "its step (13) has not advanced for 12 min" in stall.summary
    moving = (*steady[:-1], (NOW - 30, 13))
    assert run_events("ws", plan, {"a": [running]}, {"a": Policy()}, {"ws.a.h.1": NOW - 3000}, CLOCK,
                      {"ws.a.h.1": moving}) == []  # stepping: a quiet log no longer counts
    assert [e.kind for e in run_events("ws", plan, {"a": [running]}, {"a": Policy()}, {"ws.a.h.1": NOW - 3000},
                                       CLOCK)] == ["stalled"]  # no steps reported: the quiet log still does


def test_an_input_with_an_error_holds_back_only_its_own_changes():
    """A hub mirror that does not answer (an error at model.x) keeps its readers waiting (they carry no error of
    their own: they wait, blocked), never another job's retry."""
    failed = run("ws.a.h.1", RunStatus.FAILED, failure="nccl_timeout")
    retry = retry_change("a", failed)
    plan = Plan(workspace="ws", changes=(retry,))
    for address in ("model.qwen", "dataset.gsm8k"):
        hub_down = Diagnostic(severity="error", address=address, message="hub did not answer")
        assert choose(plan.model_copy(update={"diagnostics": (hub_down,)}), sync_auto=False) == [retry]
        assert choose(plan.model_copy(update={"diagnostics": (hub_down,)}), sync_auto=True) == [retry]
