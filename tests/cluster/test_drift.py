"""Drift on the real test cluster: a run stopped outside argus (`ray job stop`, as the dashboard
does) is shown as drift, `plan --detailed-exitcode` exits 2, `argus serve` tells it once and leaves
it stopped; `on_drift: restart` starts it again, once. A run argus stopped itself is no drift."""

from __future__ import annotations

from tests.support.cluster import SLEEP, sdk, wait_for
from tests.support.loops import runs_of


def _stop_outside_argus(workspace, submission_id: str) -> None:
    wait_for(workspace.address, submission_id, {"RUNNING"})
    assert sdk(workspace.address).stop_job(submission_id)  # Ray's REST API, as `ray job stop` and the dashboard
    wait_for(workspace.address, submission_id, {"STOPPED"})


def _drift_events(events: list[dict], submission_id: str) -> list[dict]:
    return [e for e in events if e["kind"] == "drift" and e.get("submission_id") == submission_id]


def test_a_run_stopped_outside_argus_is_drift_told_once_and_left_stopped(workspace, argus, hook):
    url, events = hook
    workspace.job("trainer", SLEEP)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [run] = runs_of(workspace, "trainer")
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 0  # running: in sync
    _stop_outside_argus(workspace, run)

    plan = argus("plan", workspace.root, "--detailed-exitcode")
    assert plan.code == 2, plan.out + plan.err
    assert "stopped outside argus" in plan.out and "job.trainer" in plan.out
    assert "match the desired state" not in plan.out
    status = argus("status", workspace.root)
    assert "drifted" in status.out and "stopped outside argus" in status.out, status.out

    for _ in range(2):  # a loop that turns twice, then one restarted: still one event
        turn = argus("serve", workspace.root, "--once", "--notify", url)
        assert turn.code == 0, turn.err
    assert argus("serve", workspace.root, "--once", "--sync", "auto", "--notify", url).code == 0
    [event] = _drift_events(events, run)
    assert event["job"] == "trainer" and "stopped outside argus" in event["summary"]
    assert event["next"].startswith("nothing: it stays stopped")
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # apply has nothing to do either
    assert runs_of(workspace, "trainer") == [run]  # never started again
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 2  # drift stays drift until resolved

    workspace.job("trainer", SLEEP, extra="state: stopped\n")  # the desired state agrees: in sync
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 0


def test_a_run_argus_stopped_itself_is_not_drift(workspace, argus):
    workspace.job("halted", SLEEP)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [run] = runs_of(workspace, "halted")
    wait_for(workspace.address, run, {"RUNNING"})
    workspace.job("halted", SLEEP, extra="state: stopped\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    wait_for(workspace.address, run, {"STOPPED"})
    workspace.job("halted", SLEEP)  # wanted running again, same spec: argus's own stop is history, not drift
    plan = argus("plan", workspace.root, "--detailed-exitcode")
    assert plan.code == 0, plan.out
    assert "outside argus" not in plan.out


def test_on_drift_restart_starts_a_stopped_run_again_once(workspace, argus, hook):
    url, events = hook
    workspace.job("steady", SLEEP, extra="on_drift: restart\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [first] = runs_of(workspace, "steady")
    _stop_outside_argus(workspace, first)

    plan = argus("plan", workspace.root, "--detailed-exitcode")
    assert plan.code == 2 and "on_drift: restart" in plan.out, plan.out
    turn = argus("serve", workspace.root, "--once", "--notify", url)  # sync off: restarts as it retries
    assert turn.code == 0, turn.err
    second = first.removesuffix(".1") + ".2"
    assert runs_of(workspace, "steady") == [first, second]
    wait_for(workspace.address, second, {"RUNNING", "PENDING"})
    for _ in range(2):
        assert argus("serve", workspace.root, "--once", "--notify", url).code == 0
    assert runs_of(workspace, "steady") == [first, second]  # once
    assert len(_drift_events(events, first)) == 1
    assert [e["submission_id"] for e in events if e["kind"] == "retried"] == [second]
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 0
