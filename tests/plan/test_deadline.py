"""max_runtime: the planner stops an active run past its job's limit, counted from Ray's start time. Pure."""

from __future__ import annotations

import pytest

from reconcile.model import Action, StopStep, SubmitStep
from reconcile.plan.planner import plan
from reconcile.views.human import render_status, summary
from reconcile.views.machine import status_json
from specs.desired import DesiredState, Source
from specs.kinds.models import Job
from specs.workloads.submission import resolve, spec_hash
from state.observed import ObservedState
from tests.support.planning import CLUSTER, WS, desired, job, observed, record_of, run_of

START = 1_800_000_000  # seconds; Ray reports milliseconds


def at(now: float, *ray_jobs, records=()) -> ObservedState:
    return observed(*ray_jobs, records=records).model_copy(update={"observed_at": now})


def test_a_run_past_its_max_runtime_is_stopped_and_marked_deadline_even_when_protected():
    spec = job("train", max_runtime="90m", protect=True)
    running = run_of(spec, "RUNNING", started=START * 1000)
    change = plan(desired(spec), at(START + 5400, running)).changes[-1]
    assert change.action is Action.DEADLINE and change.current.submission_id == running.submission_id
    assert change.steps == (StopStep(cluster="c", submission_id=running.submission_id, deadline=START + 5400.0),)
    assert "max_runtime of 1h30m" in change.reason and change.deadline_at == START + 5400
    result = plan(desired(spec), at(START + 5400, running))
    assert not result.errors  # protect: true guards against plans, not against the user's own limit
    assert "1 to stop at max_runtime" in summary(result)


def test_a_run_within_its_limit_is_left_running_with_its_deadline_shown():
    spec = job("train", max_runtime=3600)
    running = run_of(spec, "RUNNING", started=START * 1000)
    result = plan(desired(spec), at(START + 3599, running))
    change = result.changes[-1]
    assert change.action is Action.NOOP and not change.steps and change.deadline_at == START + 3600
    assert "deadline: " in render_status(result, {"train"}) and "(max_runtime" in render_status(result, {"train"})
    assert f'"deadline_at": {START + 3600}' in status_json(result, {"train"})
    no_limit = plan(desired(job("train")), at(START + 10**6, run_of(job("train"), "RUNNING", started=START * 1000)))
    assert no_limit.changes[-1].action is Action.NOOP and no_limit.changes[-1].deadline_at is None


def test_an_older_specs_run_past_the_limit_is_stopped_as_deadline_by_the_stop_the_plan_makes_anyway():
    old, new = job("train", max_runtime="1m"), job("train", max_runtime="1m", env={"V": "2"})
    old_run = run_of(old, "RUNNING", started=START * 1000)
    new_run = run_of(new, "RUNNING", started=(START + 10) * 1000)
    change = plan(desired(new), at(START + 120, old_run, new_run)).changes[-1]
    assert change.action is Action.STOP
    assert [(s.submission_id, s.deadline) for s in change.steps] == [(old_run.submission_id, START + 60.0)]


def test_max_runtime_is_outside_the_spec_hash_and_a_change_applies_to_the_run_under_way():
    assert spec_hash(resolve(WS, CLUSTER, job("train"))) == spec_hash(resolve(WS, CLUSTER, job("train", max_runtime=5)))
    running = run_of(job("train"), "RUNNING", started=START * 1000)
    assert plan(desired(job("train", max_runtime="2h")), at(START + 3600, running)).changes[-1].action is Action.NOOP
    assert plan(desired(job("train", max_runtime="1h")), at(START + 3600, running)).changes[-1].action \
        is Action.DEADLINE


def test_a_submit_carries_the_limit_so_the_run_gets_the_expiration_time():
    step = plan(desired(job("train", max_runtime="45s")), at(START)).changes[-1].steps[0]
    assert isinstance(step, SubmitStep) and step.max_runtime == 45
    assert plan(desired(job("train")), at(START)).changes[-1].steps[0].max_runtime is None


@pytest.mark.parametrize("policy, action, attempt", [
    (None, Action.NOOP, None),
    ({"max_attempts": 3, "on": ["oom", "unknown"]}, Action.NOOP, None),
    ({"max_attempts": 2, "on": ["deadline"]}, Action.RETRY, 2),
])
def test_a_run_stopped_at_its_deadline_is_retried_only_when_retry_on_names_deadline(policy, action, attempt):
    spec = job("train", max_runtime="5s", **({"retry": policy} if policy else {}))
    stopped = run_of(spec, "STOPPED", started=START * 1000)
    marked = record_of(stopped, "STOPPED", failure="deadline", stop_asked="2026-01-01T00:00:05+00:00")
    change = plan(desired(spec), at(START + 60, stopped, records=(marked,))).changes[-1]
    assert change.action is action
    assert [s.attempt for s in change.steps if isinstance(s, SubmitStep)] == ([attempt] if attempt else [])


def test_the_last_allowed_attempt_stopped_at_its_deadline_is_not_retried_again():
    spec = job("train", max_runtime="5s", retry={"max_attempts": 2, "on": ["deadline"]})
    first, second = (run_of(spec, "STOPPED", attempt=n, started=(START + n) * 1000) for n in (1, 2))
    records = tuple(record_of(r, "STOPPED", attempt=n, failure="deadline", stop_asked="x")
                    for n, r in ((1, first), (2, second)))
    assert plan(desired(spec), at(START + 60, first, second, records=records)).changes[-1].action is Action.NOOP


def test_what_a_run_writes_in_its_record_never_moves_its_deadline():
    """Records are on the shared root, writable by the run: one claiming another class, another status or a
    later submit is still stopped at Ray's start time + max_runtime."""
    spec = job("train", max_runtime="10s")
    running = run_of(spec, "RUNNING", started=START * 1000)
    forged = record_of(running, "RUNNING", failure="preempted", submitted_at="2099-01-01T00:00:00+00:00",
                       updated_at="2099-01-01T00:00:00+00:00")
    change = plan(desired(spec), at(START + 11, running, records=(forged,))).changes[-1]
    assert change.action is Action.DEADLINE and change.steps[0].deadline == START + 10


def test_a_run_only_in_argus_records_is_never_stopped_and_no_clock_no_deadline():
    spec = job("train", max_runtime="10s")
    running = run_of(spec, "RUNNING", started=START * 1000)
    recorded = record_of(running, "RUNNING", submitted_at="2020-01-01T00:00:00+00:00", session_name="s1")
    forgotten = at(START + 100, records=(recorded,))
    assert all(c.action is not Action.DEADLINE for c in plan(desired(spec), forgotten).changes)
    assert plan(desired(spec), at(0.0, running)).changes[-1].action is Action.NOOP  # an observation without a clock


def verl_job(workload: str, save_freq=None) -> Job:
    trainer = {"save_freq": save_freq} if save_freq is not None else {}
    return Job(kind="Job", name="rl", cluster="c", workload=workload, code="code", model="/m",
               data={"train": "/d/t.parquet", "val": "/d/v.parquet"}, trainer=trainer, max_runtime="2h")


@pytest.mark.parametrize("workload, save_freq, warned", [
    ("ppo", None, "save_freq is positive"), ("grpo", -1, "save_freq is positive"), ("ppo", 10, None),
    ("sft", 10, "SFT trainers do not save early")])
def test_a_verl_job_that_will_not_save_before_its_deadline_is_warned_about_at_its_max_runtime(
        workload, save_freq, warned):
    from reconcile.plan.deadline import early_save_warnings

    spec = verl_job(workload, save_freq)
    state = DesiredState("/ws", WS, {"c": CLUSTER}, {"rl": spec}, {},
                         {"job.rl": Source("jobs/rl.yaml", 1, {"max_runtime": 9})}, {"c": "/shared"})
    found = early_save_warnings(state)
    if warned is None:
        assert found == []
    else:
        assert [(d.severity, str(d.where)) for d in found] == [("warning", "jobs/rl.yaml:9")]
        assert warned in found[0].text


def test_a_saved_plan_reviewed_before_a_deadline_passed_is_not_stale_for_the_stop_the_limit_makes():
    from reconcile.plan.reviewed import decision_differences

    spec, other = job("train", max_runtime="1m"), job("eval")
    running = run_of(spec, "RUNNING", started=START * 1000)
    reviewed = plan(desired(spec, other), at(START + 30, running))
    fresh = plan(desired(spec, other), at(START + 61, running))
    assert [c.action for c in fresh.changes if c.address == "job.train"] == [Action.DEADLINE]
    assert decision_differences(reviewed, fresh) == []
    assert any(c.action is Action.DEADLINE for c in fresh.actionable)  # apply carries the fresh stop out


def test_a_deadline_the_reviewed_plan_did_not_show_is_a_new_decision():
    from reconcile.plan.reviewed import decision_differences

    running = run_of(job("train"), "RUNNING", started=START * 1000)
    reviewed = plan(desired(job("train")), at(START + 30, running))  # no limit when it was reviewed
    fresh = plan(desired(job("train", max_runtime="1m")), at(START + 61, running))
    assert [line.split(":")[0] for line in decision_differences(reviewed, fresh)] == ["job.train"]
    moved = plan(desired(job("train", max_runtime="2m")), at(START + 30, running))  # shown, then moved earlier
    assert decision_differences(moved, fresh) != []


def test_a_waiting_followers_older_run_past_its_limit_is_stopped_too():
    # eval's spec changed while its old run goes on, and train (its predecessor) has not run its spec yet: the
    # plan shows eval waiting, but the old run is past eval's max_runtime and must not keep its GPUs
    train, old = job("train"), job("eval", max_runtime="1m", after=["train"])
    new = job("eval", max_runtime="1m", after=["train"], env={"V": "2"})
    old_run = run_of(old, "RUNNING", started=START * 1000)
    change = next(c for c in plan(desired(train, new), at(START + 120, old_run)).changes if c.address == "job.eval")
    assert change.action is Action.DEADLINE
    assert [(s.submission_id, s.deadline) for s in change.steps] == [(old_run.submission_id, START + 60.0)]
    within = next(c for c in plan(desired(train, new), at(START + 30, old_run)).changes if c.address == "job.eval")
    assert within.action is Action.WAIT and within.deadline_at == START + 60
