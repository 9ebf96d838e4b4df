"""Ray forgets every job when its head restarts; argus must not submit finished runs again.

A run that ended while no argus ran keeps its own record (exit.json, driver.log): after the
restart it is shown finished with its log, and a `retry: {on: [lost]}` policy does not run it again.
"""

from __future__ import annotations

import shlex

from state.ray import local
from state.runs import records
from tests.support.cluster import QUICK, SLEEP, gated, jobs_of, start_cluster, wait_for
from tests.support.workspace import make_workspace


def test_runs_survive_a_head_restart_as_forgotten_or_lost(tmp_path, argus):
    state_dir = tmp_path / "cluster"
    cluster = start_cluster(state_dir)
    try:
        ws = make_workspace(tmp_path / "ws", "restart", cluster.address)
        ws.job("done", QUICK)
        ws.job("busy", SLEEP)
        assert argus("apply", ws.root, "--auto-approve").code == 0
        ids = {j.metadata["argus.job"]: j.submission_id for j in jobs_of(cluster.address, ws.name)}
        wait_for(cluster.address, ids["done"], {"SUCCEEDED"})
        wait_for(cluster.address, ids["busy"], {"RUNNING"})
        gate = tmp_path / "quiet-may-end"
        ws.job("quiet", ["sh", "-c", f"echo quiet run says hi; {shlex.join(gated(gate))}"],
               "retry: {max_attempts: 3, on: [lost]}\n")
        assert argus("apply", ws.root, "--auto-approve").code == 0  # records the statuses, submits quiet
        quiet = next(j.submission_id for j in jobs_of(cluster.address, ws.name) if j.metadata["argus.job"] == "quiet")
        wait_for(cluster.address, quiet, {"RUNNING"})
        gate.touch()  # quiet ends while no argus runs: its record on NFS still says PENDING
        wait_for(cluster.address, quiet, {"SUCCEEDED"})
        assert records.read_record(str(ws.shared), quiet).status == "PENDING"
        ws.job("after", QUICK)
        assert argus("plan", ws.root, "-o", tmp_path / "before-restart.json").code == 0
        ws.remove("jobs/after.yaml")

        local.down(state_dir)
        cluster = local.up(state_dir, dashboard_port=cluster.dashboard_port, cpus_per_node=8,
                           worker_resources={"worker_node": 8.0})
        assert jobs_of(cluster.address, ws.name) == []
        ws.job("after", QUICK)
        # The restart decided nothing new: the reviewed plan submits `after`, and only `after`.
        applied = argus("apply", tmp_path / "before-restart.json", "--dir", ws.root)
        assert applied.code == 0, applied.out + applied.err
        assert [j.metadata["argus.job"] for j in jobs_of(cluster.address, ws.name)] == ["after"]

        plan = argus("plan", ws.root, "--detailed-exitcode")
        assert plan.code == 0, plan.out + plan.err
        assert "No changes." in plan.out
        assert "forgotten (SUCCEEDED)" in plan.out
        assert "lost (last seen RUNNING)" in plan.out and "no longer knows it" in plan.out
        assert "the head of cluster 'local' restarted since argus submitted there" in plan.out
        assert argus("apply", ws.root, "--auto-approve").code == 0
        assert [j.metadata["argus.job"] for j in jobs_of(cluster.address, ws.name)] == ["after"]
        status = argus("status", ws.root)
        assert "forgotten (SUCCEEDED)" in status.out
        quiet_row = next(line for line in status.out.splitlines() if "job.quiet" in line)
        assert "forgotten (SUCCEEDED)" in quiet_row, status.out
        assert all(j.metadata["argus.job"] != "quiet" for j in jobs_of(cluster.address, ws.name)), "quiet ran twice"
        logs = argus("logs", "quiet", ws.root)
        assert logs.code == 0 and "quiet run says hi" in logs.out, logs.out + logs.err
        # status and plan settled the record from the run's exit.json.
        assert records.read_record(str(ws.shared), quiet).status == "SUCCEEDED"
    finally:
        local.down(state_dir)
