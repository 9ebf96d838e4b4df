"""--target, --replace and the empty-desired-state guard, against a real cluster."""

from __future__ import annotations

from tests.support.cluster import QUICK, SLEEP, jobs_of, wait_for


def test_target_limits_plan_and_apply_to_the_job(workspace, argus):
    workspace.job("first", QUICK)
    workspace.job("second", QUICK)
    plan = argus("plan", workspace.root, "--target", "job.first")
    assert "+ job.first" in plan.out and "job.second" not in plan.out and "+ dirs.local" in plan.out
    assert argus("apply", workspace.root, "--auto-approve", "--target", "job.first").code == 0
    assert [j.metadata["argus.job"] for j in jobs_of(workspace.address, workspace.name)] == ["first"]
    unknown = argus("plan", workspace.root, "--target", "job.nope")
    assert unknown.code == 1 and "--target job.nope: no such address" in unknown.err


def test_replace_forces_a_new_attempt_of_an_unchanged_job(workspace, argus):
    workspace.job("again", SLEEP)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [first] = jobs_of(workspace.address, workspace.name)
    wait_for(workspace.address, first.submission_id, {"RUNNING"})
    workspace.job("other", SLEEP)
    plan = argus("plan", workspace.root, "--replace", "job.again")
    assert "-/+ job.again" in plan.out and "forced by --replace" in plan.out
    assert "+ job.other" in plan.out and "Limited by" not in plan.out  # the whole plan, with the new attempt
    workspace.remove("jobs/other.yaml")
    assert argus("apply", workspace.root, "--auto-approve", "--replace", "job.again").code == 0
    runs = {j.submission_id: j for j in jobs_of(workspace.address, workspace.name)}
    assert runs[first.submission_id].status.value == "STOPPED"
    [second] = [j for sid, j in runs.items() if sid != first.submission_id]
    assert second.submission_id == first.submission_id[:-1] + "2" and second.metadata["argus.attempt"] == "2"
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 0


def test_an_empty_desired_state_does_not_stop_everything_by_accident(workspace, argus):
    workspace.job("keeper", SLEEP)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    workspace.remove("jobs/keeper.yaml")
    refused = argus("apply", workspace.root, "--auto-approve")
    assert refused.code == 1 and "pass --allow-empty" in refused.out
    [job] = jobs_of(workspace.address, workspace.name)
    assert job.status.value in ("PENDING", "RUNNING")
    assert argus("apply", workspace.root, "--auto-approve", "--allow-empty").code == 0
    assert jobs_of(workspace.address, workspace.name)[0].status.value == "STOPPED"
