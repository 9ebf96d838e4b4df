"""Failed runs are classified from their logs, kept on NFS, and retried only when their class allows."""

from __future__ import annotations

import json

from conftest import jobs_of, wait_for

from state import audit

NCCL = ("import sys; print('[rank0]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
        "OpType=ALLREDUCE) ran for 600012 milliseconds before timing out.'); sys.exit(1)")
BUG = "import sys; print('Traceback (most recent call last):'); print('KeyError: 1'); sys.exit(1)"
POLICY = "retry: {max_attempts: 2, on: [nccl_timeout, node_lost]}\n"


def test_a_retryable_failure_is_retried_then_recorded(workspace, argus):
    workspace.job("flaky", ["python3", "-c", NCCL], extra=POLICY)
    workspace.job("buggy", ["python3", "-c", BUG], extra=POLICY)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    first = {j.metadata["argus.job"]: j.submission_id for j in jobs_of(workspace.address, workspace.name)}
    for sid in first.values():
        wait_for(workspace.address, sid, {"FAILED"})

    plan = argus("plan", workspace.root)
    assert "+ retry job.flaky" in plan.out and f"attempt 2/2: {first['flaky']} nccl_timeout" in plan.out
    assert "retry job.buggy" not in plan.out
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    second = next(j.submission_id for j in jobs_of(workspace.address, workspace.name)
                  if j.metadata["argus.job"] == "flaky" and j.submission_id != first["flaky"])
    assert second.endswith(".2")
    wait_for(workspace.address, second, {"FAILED"})
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # keeps logs and classes

    assert argus("plan", workspace.root, "--detailed-exitcode").code == 0  # attempts exhausted
    status = argus("status", workspace.root).out
    assert "FAILED (nccl_timeout)" in status and "FAILED (user_code)" in status
    record = json.loads((workspace.shared / "jobs" / second / "status.json").read_text())
    assert record["failure"] == "nccl_timeout" and record["attempt"] == 2
    assert "Watchdog caught" in (workspace.shared / "jobs" / second / "logs" / "driver.log").read_text()
    finished = [e for e in audit.read(str(workspace.shared), workspace.name) if e["event"] == "run.finished"]
    assert {(e["address"], e["failure"]) for e in finished} >= {("job.flaky", "nccl_timeout"),
                                                               ("job.buggy", "user_code")}


def test_old_finished_runs_leave_rays_table_but_not_argus_records(workspace, argus):
    for run in range(1, 6):
        workspace.job("repeat", ["python3", "-c", "print('round')"], extra=f"run: {run}\n")
        assert argus("apply", workspace.root, "--auto-approve").code == 0
        for job in jobs_of(workspace.address, workspace.name):
            wait_for(workspace.address, job.submission_id, {"SUCCEEDED"})
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # keeps the last logs, then prunes
    assert argus("apply", workspace.root, "--auto-approve", "--keep-finished", "2").code == 0
    on_ray = jobs_of(workspace.address, workspace.name)
    assert len(on_ray) == 2
    kept = sorted((workspace.shared / "jobs").glob("*/logs/driver.log"))
    assert len(kept) == 5 and all("round" in p.read_text() for p in kept)
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 0
