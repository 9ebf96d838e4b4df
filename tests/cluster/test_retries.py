"""Failed runs are classified from their logs, kept on NFS, and retried only when their class allows."""

from __future__ import annotations

import json

from state.audit import log as audit
from state.runs.failures import ADVICE
from tests.support.cluster import jobs_of, sdk, wait_for

NCCL = ("import sys; print('[rank0]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
        "OpType=ALLREDUCE) ran for 600012 milliseconds before timing out.'); sys.exit(1)")
BUG = "import sys; print('Traceback (most recent call last):'); print('KeyError: 1'); sys.exit(1)"
POLICY = "retry: {max_attempts: 2, on: [nccl_timeout, node_lost]}\n"
SECRET = "s3cret-echoed-by-the-run"
WATCHDOG = "[rank0]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE)"
PADDED = WATCHDOG + " peer " + "x" * (290 - len(WATCHDOG) - len(" peer  token "))
"""The secret after it starts at character 290: a line cut to 300 before masking would keep 10 of its characters."""
ECHOES_SECRET = ("import os, sys; print('step 1'); "
                 "print('" + PADDED + " token ' + os.environ['TOKEN'] + ' ' + 'y' * 40); "
                 "print('[rank0]: terminate called'); sys.exit(1)")
OOM_LINE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.41 GiB for"
OOM = f"import os, sys; print('{OOM_LINE} ' + os.environ['TOKEN']); sys.exit(1)"


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


def test_status_explains_a_failed_run_with_advice_and_the_line_that_matched(workspace, argus, monkeypatch):
    """Recorded by apply (Ray still knows the run) and settled by status (Ray forgot it first): both
    records hold the class, the advice and the matched line, with the secret the run echoed masked."""
    monkeypatch.setenv("JOB_NCCL_TOKEN", SECRET)
    secret_env = "env: {TOKEN: '${env:JOB_NCCL_TOKEN}'}\n"
    workspace.allow("JOB_NCCL_TOKEN")
    workspace.job("hung", ["python3", "-c", ECHOES_SECRET], extra=secret_env)
    workspace.job("forgotten", ["python3", "-c", OOM], extra=secret_env)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    sid = {j.metadata["argus.job"]: j.submission_id for j in jobs_of(workspace.address, workspace.name)}
    for run in sid.values():
        wait_for(workspace.address, run, {"FAILED"})
    sdk(workspace.address).delete_job(sid["forgotten"])

    assert argus("status", workspace.root).code == 0  # settles the forgotten run's record from its exit.json
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # records the run Ray still knows
    hung, forgotten = (json.loads((workspace.shared / "jobs" / sid[job] / "status.json").read_text())
                       for job in ("hung", "forgotten"))
    assert (hung["failure"], hung["advice"]) == ("nccl_timeout", ADVICE["nccl_timeout"])
    assert hung["evidence"] == [f"{PADDED} token *** {'y' * 5}…"]
    assert (forgotten["status"], forgotten["failure"], forgotten["advice"]) == ("FAILED", "oom", ADVICE["oom"])
    assert forgotten["evidence"] == [f"{OOM_LINE} ***"]

    human = argus("status", workspace.root).out
    assert "    failure: nccl_timeout" in human and "NCCL_SOCKET_IFNAME" in human
    assert f"    log:     {PADDED} token ***" in human
    assert "    failure: oom" in human and "actor_rollout_ref.rollout.gpu_memory_utilization" in human
    rows = {r["address"]: r for r in json.loads(argus("status", workspace.root, "--format", "json").out)["jobs"]}
    assert (rows["job.hung"]["failure"], rows["job.hung"]["advice"]) == ("nccl_timeout", ADVICE["nccl_timeout"])
    assert rows["job.hung"]["evidence"] == hung["evidence"]
    assert rows["job.forgotten"]["health"] == "forgotten (FAILED)" and rows["job.forgotten"]["failure"] == "oom"
    assert SECRET[:4] not in human + json.dumps(rows) + json.dumps(hung) + json.dumps(forgotten)
