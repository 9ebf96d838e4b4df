"""At most once, anchored in argus's own chain (issue 36), on the real test cluster: a job that can write
the shared root and call Ray's Jobs API deletes finished runs from Ray with their records and run index,
or submits Ray rows with argus's labels plus records. argus's audit log registers every submission before
Ray is asked, so nothing deleted is submitted again and nothing forged releases a follower, counts as a
predecessor's attempt or shows as a success."""

from __future__ import annotations

import json
import shutil
import urllib.request

from specs.load.loader import load_workspace
from specs.workloads.submission import RunId, labels, resolve
from state.observed import RunRecord, RunStatus
from state.runs import records
from tests.support.cluster import QUICK, sdk, wait_for
from tests.support.loops import runs_of


def test_runs_deleted_from_ray_with_their_records_and_index_are_never_submitted_again(workspace, argus) -> None:
    workspace.job("prep", QUICK)
    workspace.job("train", QUICK, extra="after: [prep]\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [prep] = runs_of(workspace, "prep")
    wait_for(workspace.address, prep, {"SUCCEEDED"})
    assert argus("serve", workspace.root, "--once").code == 0  # releases the follower
    [train] = runs_of(workspace, "train")
    wait_for(workspace.address, train, {"SUCCEEDED"})
    for sid in (prep, train):  # what any job on the cluster may do: Ray allows DELETE of a finished job
        _delete_from_ray(workspace.address, sid)
        shutil.rmtree(workspace.shared / "jobs" / sid)
    shutil.rmtree(workspace.shared / ".argus" / "runs")
    assert runs_of(workspace, "prep") == runs_of(workspace, "train") == []

    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err
    assert argus("serve", workspace.root, "--once").code == 0
    assert runs_of(workspace, "prep") == runs_of(workspace, "train") == []  # nothing was submitted again
    shown = argus("plan", workspace.root)
    assert "neither cluster 'local' nor a record on the shared root remembers it" in shown.out + shown.err


def test_a_forged_succeeded_predecessor_releases_no_follower_and_shows_as_no_success(workspace, argus) -> None:
    workspace.job("other", QUICK)
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # the log is the registry from here on
    workspace.job("prep", QUICK, extra="state: stopped\n")  # never runs
    workspace.job("train", QUICK, extra="after: [prep]\n")
    forged = _forge(workspace, "prep", attempt=1)

    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err
    assert f"Ray lists {forged}" in applied.out + applied.err and "argus never submitted it" in applied.out
    assert argus("serve", workspace.root, "--once").code == 0
    assert runs_of(workspace, "train") == []  # not released
    status = json.loads(argus("status", workspace.root, "--format", "json").out)
    [row] = [r for r in status["jobs"] if r["address"] == "job.prep"]
    assert row["submission_id"] is None and "SUCCEEDED" not in json.dumps(row), row


def test_a_forged_later_attempt_of_a_predecessor_reruns_no_follower(workspace, argus) -> None:
    workspace.job("prep", QUICK)
    workspace.job("train", QUICK, extra="after: [prep]\nrerun_with_predecessors: true\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [prep] = runs_of(workspace, "prep")
    wait_for(workspace.address, prep, {"SUCCEEDED"})
    assert argus("serve", workspace.root, "--once").code == 0
    [train] = runs_of(workspace, "train")
    wait_for(workspace.address, train, {"SUCCEEDED"})
    _forge(workspace, "prep", attempt=2)

    assert argus("serve", workspace.root, "--once").code == 0
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err
    assert runs_of(workspace, "train") == [train]  # not run again for the forgery


def _forge(workspace, job: str, attempt: int) -> str:
    """A Ray row with argus's labels for the job's current spec, succeeded, and a record saying so."""
    desired = load_workspace(workspace.root)
    spec = desired.jobs[job]
    run = RunId.of(resolve(desired.workspace, desired.cluster_of(spec), spec, None), attempt)
    client = sdk(workspace.address)
    client.submit_job(entrypoint="true", submission_id=run.submission_id, metadata=labels(run, "c0ffee", "forged"),
                      entrypoint_num_cpus=0.1)
    wait_for(workspace.address, run.submission_id, {"SUCCEEDED"})
    records.write_status(str(workspace.shared), RunRecord(
        submission_id=run.submission_id, workspace=run.workspace, job=job, cluster="local", spec_hash=run.spec_hash,
        attempt=attempt, status=RunStatus.SUCCEEDED, submitted_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:00:00+00:00", plan_id="forged", commit="c0ffee"))
    return run.submission_id


def _delete_from_ray(address: str, submission_id: str) -> None:
    request = urllib.request.Request(f"{address}/api/jobs/{submission_id}", method="DELETE")
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200


def test_housekeeping_never_trades_argus_run_for_a_forged_row(workspace, argus) -> None:
    """The attack: a later attempt forged (a Ray row with argus's labels, a record and a driver log) would be the
    newest finished run of the job, so pruning Ray's table down to one would delete argus's own run and keep
    the forgery. Only runs argus's chain holds are pruned: argus's run stays listed."""
    workspace.job("prep", QUICK)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [prep] = runs_of(workspace, "prep")
    wait_for(workspace.address, prep, {"SUCCEEDED"})
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # its driver log kept on the shared root
    forged = _forge(workspace, "prep", attempt=2)
    log = workspace.shared / "jobs" / forged / "logs" / "driver.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("forged\n")

    applied = argus("apply", workspace.root, "--auto-approve", "--keep-finished", "1")
    assert applied.code == 0, applied.out + applied.err
    listed = {j.submission_id for j in sdk(workspace.address).list_jobs()}
    assert prep in listed  # argus's own run was not deleted to make room for the forgery
