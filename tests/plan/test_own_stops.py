"""argus's marks are argus's, on plain data: which runs argus stopped, and why, come from its audit chain
(Registry.stops, folded from run.stopping), never from the run's record a job can rewrite; a registered run
whose record is gone is still argus's and still stopped at its deadline; on_drift: restart is bounded."""

from __future__ import annotations

from reconcile.model import Action, StopStep, SubmitStep
from reconcile.plan.jobs import MAX_DRIFT_RESTARTS
from reconcile.plan.planner import plan
from state.observed import ObservedState, Registry
from tests.support.planning import desired, job, observed, record_of, run_of

START = 1_800_000_000


def chained(state: ObservedState, *ids: str, stops: dict[str, str] | None = None, now: float = 0.0) -> ObservedState:
    registry = Registry(log="/shared/.argus/audit/team.jsonl", adopted=True,
                        submitted=dict.fromkeys(ids, "2026-01-01T00:00:00+00:00"), stops=stops or {})
    return state.model_copy(update={"registries": {"c": registry}, "observed_at": now})


def test_a_record_claiming_a_deadline_stop_argus_never_made_is_drift_not_a_deadline():
    spec = job("train", max_runtime="5s")
    stopped = run_of(spec, "STOPPED", started=START * 1000)
    forged = record_of(stopped, "STOPPED", failure="deadline", stop_asked="2026-01-01T00:00:05+00:00")
    change = plan(desired(spec), chained(observed(stopped, records=(forged,)), stopped.submission_id)).changes[-1]
    assert change.action is Action.DRIFT and "stopped outside argus" in change.reason
    assert change.current.failure is None and not change.current.stop_asked  # the record's claims count for nothing
    forged_preempted = record_of(stopped, "STOPPED", failure="preempted", stop_asked="x")
    preempted = plan(desired(spec), chained(observed(stopped, records=(forged_preempted,)), stopped.submission_id))
    assert preempted.changes[-1].action is Action.DRIFT  # no new attempt "resuming from a preemption"


def test_a_deadline_stop_the_chain_records_is_no_drift_whatever_the_record_says():
    spec = job("train", max_runtime="5s", on_drift="restart")
    stopped = run_of(spec, "STOPPED", started=START * 1000)
    cleared = record_of(stopped, "STOPPED")  # the run cleared stop_asked and its failure class
    state = chained(observed(stopped, records=(cleared,)), stopped.submission_id,
                    stops={stopped.submission_id: "deadline"})
    change = plan(desired(spec), state).changes[-1]
    assert change.action is Action.NOOP and not any(isinstance(s, SubmitStep) for s in change.steps)
    assert change.current.failure == "deadline" and change.current.health == "STOPPED (deadline)"
    retried = plan(desired(job("train", max_runtime="5s", retry={"max_attempts": 2, "on": ["deadline"]})), state)
    assert retried.changes[-1].action is Action.RETRY  # retry.on: [deadline] still sees argus's deadline stop


def test_a_registered_run_whose_record_is_gone_is_stopped_at_its_deadline():
    spec = job("train", max_runtime="10s")
    running = run_of(spec, "RUNNING", started=START * 1000)
    hidden = observed(running, unrecorded=(running.submission_id,))
    change = plan(desired(spec), chained(hidden, running.submission_id, now=START + 11)).changes[-1]
    assert change.action is Action.DEADLINE
    assert change.steps == (StopStep(cluster="c", submission_id=running.submission_id, deadline=START + 10.0),)
    result = plan(desired(spec), chained(hidden, running.submission_id, now=START + 5))
    assert not result.errors and result.changes[-1].action is Action.NOOP  # in sync: nothing submitted beside it
    unregistered = plan(desired(spec), chained(hidden, now=START + 11))  # not in the chain: not argus's, never stopped
    assert not any(isinstance(s, StopStep) for c in unregistered.changes for s in c.steps)


def test_on_drift_restart_restarts_at_most_the_bound_then_reports():
    spec = job("steady", on_drift="restart")

    def after(drifted: int):
        runs = [run_of(spec, "STOPPED", attempt=n, started=(START + n) * 1000) for n in range(1, drifted + 1)]
        return plan(desired(spec), chained(observed(*runs), *(r.submission_id for r in runs))).changes[-1]

    for drifted in range(1, MAX_DRIFT_RESTARTS + 1):
        change = after(drifted)
        assert change.action is Action.RETRY and change.steps[-1].attempt == drifted + 1
    spent = after(MAX_DRIFT_RESTARTS + 1)
    assert spent.action is Action.DRIFT and not spent.steps and "left so" in spent.reason


def test_argus_own_stop_for_a_plan_is_no_drift_and_gives_no_class():
    spec = job("halted")
    stopped = run_of(spec, "STOPPED", started=START * 1000)
    forged = record_of(stopped, "STOPPED", failure="deadline")
    state = chained(observed(stopped, records=(forged,)), stopped.submission_id, stops={stopped.submission_id: "plan"})
    change = plan(desired(spec), state).changes[-1]
    assert change.action is Action.NOOP and change.current.failure is None  # stopped by argus, not at a deadline
