"""Ownership is proven, not claimed: on a real cluster, jobs submitted by hand with copied, forged or
squatting argus labels are listed as claims, warned about, never stopped, never adopted, never a crash."""

from __future__ import annotations

import json

from tests.support.cluster import SLEEP, jobs_of, sdk, wait_for

ENTRY = "python3 -c 'import time; time.sleep(120)'"


def test_hand_submitted_copies_of_argus_labels_are_claims_never_stopped(workspace, argus):
    workspace.job("real", SLEEP)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [real] = jobs_of(workspace.address, workspace.name)
    client = sdk(workspace.address)
    copied = client.submit_job(entrypoint=ENTRY, submission_id="handmade-copy", metadata=dict(real.metadata))
    forged = client.submit_job(entrypoint=ENTRY, submission_id="handmade-forged",
                               metadata={**real.metadata, "argus.attempt": "one"})
    for sid in (real.submission_id, copied, forged):
        wait_for(workspace.address, sid, {"RUNNING"})

    plan = argus("plan", workspace.root)
    assert plan.code == 0, plan.out + plan.err  # warnings, not errors; and never exit 3
    assert f"handmade-copy on cluster 'local' claims to be {workspace.name}/real" in plan.out
    assert "handmade-forged" in plan.out and "claims to be" in plan.out
    as_json = json.loads(argus("plan", workspace.root, "--format", "json").out)
    claims = {j["submission_id"]: j["claims"] for j in as_json["unmanaged"]}
    assert claims["handmade-copy"] == f"{workspace.name}/real"

    workspace.remove("jobs/real.yaml")  # the spec is gone: argus stops its own run, and only that
    applied = argus("apply", workspace.root, "--auto-approve", "--allow-empty")
    assert applied.code == 0, applied.out + applied.err
    assert wait_for(workspace.address, real.submission_id, {"STOPPED"}) == "STOPPED"
    for sid in (copied, forged):
        assert client.get_job_info(sid).status.value == "RUNNING", f"{sid} was stopped by argus"
    status = argus("status", workspace.root)
    assert status.code == 0, status.out + status.err


def test_a_job_squatting_the_id_argus_would_submit_is_never_adopted(workspace, argus):
    workspace.job("next", SLEEP)
    planned = json.loads(argus("plan", workspace.root, "--format", "json").out)
    [step] = [s for c in planned["changes"] for s in c["steps"] if c["address"] == "job.next"]
    labels = {"argus.workspace": workspace.name, "argus.job": "next", "argus.spec_hash": step["spec_hash"],
              "argus.attempt": "1"}
    client = sdk(workspace.address)
    client.submit_job(entrypoint=ENTRY, submission_id=step["submission_id"], metadata=labels)
    wait_for(workspace.address, step["submission_id"], {"RUNNING"})

    plan = argus("plan", workspace.root)
    assert plan.code == 1, plan.out + plan.err
    assert step["submission_id"] in plan.out and "will not adopt" in plan.out
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 1
    record = workspace.shared / "jobs" / step["submission_id"] / "status.json"
    assert not record.exists(), "argus recorded a job it did not submit as its own run"
    workspace.job("next", SLEEP, "state: stopped\n")
    stopped = argus("apply", workspace.root, "--auto-approve")
    assert stopped.code == 0, stopped.out + stopped.err
    assert client.get_job_info(step["submission_id"]).status.value == "RUNNING", "argus stopped a job not its own"
