"""max_runtime in the loop, from plain data: `choose` stops a run at its deadline with --sync off, the
`deadline` event has one key however it is seen, /metrics shows each deadline and counts the stops."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from reconcile.model import Action, Change, Plan, RunView, StopStep, SubmitStep
from reconcile.report import TurnReport
from reconcile.serve.choice import choose
from reconcile.serve.events import Clock, deadline_events
from reconcile.serve.metrics import Metrics
from specs.diagnostics import Diagnostic
from specs.workloads.submission import RunId, resolve
from state.observed import RunStatus
from tests.support.planning import desired, job

NOW = 1_800_000_000.0
CLOCK = Clock(now=NOW, pending_alert=600, stall_alert=1800)
SID = "ws.hung.h.1"


def running(status: RunStatus = RunStatus.RUNNING, **fields: object) -> RunView:
    return RunView(submission_id=SID, cluster="c", spec_hash="h", attempt=1, status=status, on_ray=True,
                   started_at=NOW - 100, **fields)


def at_deadline() -> Change:
    return Change(address="job.hung", action=Action.DEADLINE, reason="passed its max_runtime", current=running(),
                  steps=(StopStep(cluster="c", submission_id=SID, deadline=NOW - 10),), deadline_at=NOW - 10)


def test_the_loop_stops_a_run_at_its_deadline_without_sync_auto_but_not_from_an_unmerged_checkout():
    stop = at_deadline()
    submit = Change(address="job.other", action=Action.SUBMIT, reason="new")
    plan = Plan(workspace="ws", changes=(stop, submit))
    assert choose(plan, sync_auto=False) == [stop]
    assert choose(plan, sync_auto=False, may_retry=False) == []
    held = Diagnostic(severity="error", address="job.hung", message="bad")
    assert choose(plan.model_copy(update={"diagnostics": (held,)}), sync_auto=False) == []
    # an error on the cluster (a file on the shared root a job can write: the audit log, an identity, a claim)
    # holds back every start there, never the stop at a deadline
    sick = Diagnostic(severity="error", address="cluster.local", message="the audit log does not verify")
    assert choose(plan.model_copy(update={"diagnostics": (sick,)}), sync_auto=True) == [stop]


def test_a_deadline_stop_is_told_with_its_limit_under_one_key_whether_the_loop_or_an_apply_stopped_it():
    by_loop = deadline_events("ws", [at_deadline()], {"job.hung"}, {}, {"hung": 5400}, CLOCK)
    seen = running(RunStatus.STOPPED, failure="deadline", stop_asked=True)
    by_apply = deadline_events("ws", [], set(), {"hung": [seen]}, {"hung": 5400}, CLOCK)
    both = deadline_events("ws", [at_deadline()], {"job.hung"}, {"hung": [seen]}, {"hung": 5400}, CLOCK)
    assert [e.key for e in by_loop] == [e.key for e in by_apply] == [e.key for e in both] == ["ws:deadline:" + SID]
    assert by_loop[0].summary == f"job.hung: run {SID} stopped at its max_runtime of 1h30m"
    assert by_loop[0].failure == "deadline" and by_loop[0].advice
    assert deadline_events("ws", [at_deadline()], set(), {}, {}, CLOCK) == []  # chosen but not carried out
    forged = running(RunStatus.RUNNING, failure="deadline")  # a record (job-writable) saying so while it runs
    assert deadline_events("ws", [], set(), {"hung": [forged]}, {}, CLOCK) == []
    stopped_by_hand = running(RunStatus.STOPPED, failure="deadline")  # no stop of argus's own: not its deadline
    assert deadline_events("ws", [], set(), {"hung": [stopped_by_hand]}, {}, CLOCK) == []


def test_metrics_show_each_active_runs_deadline_and_count_the_stops():
    metrics = Metrics()
    shown = Change(address="job.hung", action=Action.NOOP, reason="RUNNING", current=running(), deadline_at=NOW + 60)
    metrics.record(TurnReport(workspace="ws", started_at=NOW, finished_at=NOW + 1, ok=True, interval=2, sync="off",
                              plan=Plan(workspace="ws", changes=(shown,)), runs={"hung": [running()]}))
    key = ("argus_run_deadline_timestamp_seconds", (("cluster", "c"), ("job", "hung"), ("workspace", "ws")))
    assert samples(metrics)[key] == NOW + 60
    for _turn in range(2):  # the turn that stopped it, and one that only saw it stopped
        applied = ("job.hung",) if _turn == 0 else ()
        metrics.record(TurnReport(workspace="ws", started_at=NOW, finished_at=NOW + 1, ok=True, interval=2,
                                  sync="off", plan=Plan(workspace="ws", changes=(at_deadline(),)), applied=applied))
    assert samples(metrics)[("argus_deadline_stops_total", (("job", "hung"), ("workspace", "ws")))] == 1


def samples(metrics: Metrics) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(metrics.exposition().decode()) for s in family.samples}


def retry_on(cluster: str, name: str) -> Change:
    spec = job(name)
    sub = resolve(desired(spec).workspace, desired(spec).cluster_of(spec), spec).model_copy(update={"cluster": cluster})
    run = RunId.of(sub, 2)
    return Change(address=f"job.{name}", action=Action.RETRY, reason="failed: retried",
                  steps=(SubmitStep(cluster=cluster, submission_id=run.submission_id, spec_hash=run.spec_hash,
                                    attempt=2, submission=sub),))


def test_an_error_on_one_cluster_holds_back_only_that_clusters_retries():
    """Issue 36: one sick cluster never holds back another's changes, in the loop as in apply."""
    stop, on_a, on_b = at_deadline(), retry_on("a", "x"), retry_on("b", "y")
    plan = Plan(workspace="ws", changes=(stop, on_a, on_b))
    sick = Diagnostic(severity="error", address="cluster.a", message="the audit log does not verify")
    assert choose(plan.model_copy(update={"diagnostics": (sick,)}), sync_auto=False) == [stop, on_b]
    dirs = Diagnostic(severity="error", address="dirs.b", message="the root looks unmounted")
    assert choose(plan.model_copy(update={"diagnostics": (dirs,)}), sync_auto=True) == [stop, on_a]
    everywhere = Diagnostic(severity="error", address="workspace", message="claimed elsewhere")
    assert choose(plan.model_copy(update={"diagnostics": (everywhere,)}), sync_auto=False) == [stop]
