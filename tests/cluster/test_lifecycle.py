"""The job lifecycle against a real two-node Ray cluster: submit, sync, replace, stop, protect."""

from __future__ import annotations

import json
import re
import time
from types import SimpleNamespace

import pytest

from state.audit import log as audit
from tests.support.cluster import QUICK, SLEEP, jobs_of, sdk, wait_for

NOT_FAILED = {"failure": None, "advice": None, "evidence": []}
"""What `argus status --format json` says of a job whose current run did not fail."""


def test_apply_then_plan_again_has_no_changes(workspace, argus):
    workspace.job("hello", QUICK)
    first = argus("apply", workspace.root, "--auto-approve")
    assert first.code == 0, first.out + first.err
    assert "+ job.hello" in first.out
    table = first.out.split("Apply complete")[1]
    assert "ADDRESS" in table and "job.hello" in table and "submitted (" in table
    [job] = jobs_of(workspace.address, workspace.name)
    wait_for(workspace.address, job.submission_id, {"SUCCEEDED"})

    again = argus("plan", workspace.root, "--detailed-exitcode")
    assert again.code == 0, again.out
    assert "No changes." in again.out
    assert "finished SUCCEEDED" in again.out
    assert len(jobs_of(workspace.address, workspace.name)) == 1


def test_detailed_exitcode_is_2_with_changes_and_0_without(workspace, argus):
    workspace.job("sleeper", SLEEP)
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 2
    assert argus("plan", workspace.root).code == 0
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 0
    workspace.remove("jobs/sleeper.yaml")
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 1  # no jobs at all: a broken checkout?
    assert argus("plan", workspace.root, "--detailed-exitcode", "--allow-empty").code == 2
    assert argus("apply", workspace.root, "--auto-approve", "--allow-empty").code == 0
    assert jobs_of(workspace.address, workspace.name)[0].status.value == "STOPPED"


def test_submission_carries_labels_and_driver_lands_on_worker_node(workspace, argus, ray_cluster):
    workspace.job("where", QUICK)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [job] = jobs_of(workspace.address, workspace.name)
    wait_for(workspace.address, job.submission_id, {"SUCCEEDED"})
    info = sdk(workspace.address).get_job_info(job.submission_id)
    meta = info.metadata
    assert meta["argus.job"] == "where" and meta["argus.attempt"] == "1"
    [start] = [e for e in audit.read(str(workspace.shared), workspace.name) if e["event"] == "apply.start"]
    assert re.fullmatch("[0-9a-f]{64}", meta["argus.spec_hash"])
    assert (meta["argus.plan"], meta["argus.commit"]) == (start["plan_id"], "none")  # the workspace is not in git
    assert job.submission_id == f"{workspace.name}.where.{meta['argus.spec_hash'][:12]}.1"
    nodes = {n.node_id: n for n in _nodes(ray_cluster.address)}
    assert "worker_node" in nodes[info.driver_node_id].resources


def test_changed_spec_replaces_the_running_run(workspace, argus):
    workspace.job("trainer", SLEEP)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [old] = jobs_of(workspace.address, workspace.name)
    wait_for(workspace.address, old.submission_id, {"RUNNING"})

    workspace.job("trainer", ["python3", "-c", "import time; time.sleep(121)"])
    plan = argus("plan", workspace.root)
    assert "-/+ job.trainer" in plan.out and "is RUNNING" in plan.out
    assert "~ entrypoint:" in plan.out
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.out + applied.err

    runs = {j.submission_id: j for j in jobs_of(workspace.address, workspace.name)}
    assert runs[old.submission_id].status.value == "STOPPED"
    [new_id] = set(runs) - {old.submission_id}
    assert runs[new_id].status.value in ("PENDING", "RUNNING")
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 0


def test_removed_spec_and_state_stopped_stop_the_run(workspace, argus):
    workspace.job("a", SLEEP)
    workspace.job("b", SLEEP)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    ids = {j.metadata["argus.job"]: j.submission_id for j in jobs_of(workspace.address, workspace.name)}

    workspace.remove("jobs/a.yaml")
    workspace.job("b", SLEEP, extra="state: stopped\n")
    plan = argus("plan", workspace.root)
    assert "- job.a" in plan.out and "spec removed" in plan.out
    assert "- job.b" in plan.out and "state: stopped" in plan.out
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    for sid in ids.values():
        assert sdk(workspace.address).get_job_status(sid).value == "STOPPED"
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 0


def test_protect_turns_a_stop_into_a_plan_error(workspace, argus):
    workspace.job("precious", SLEEP, extra="protect: true\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    workspace.job("precious", SLEEP, extra="protect: true\nstate: stopped\n")
    plan = argus("plan", workspace.root)
    assert plan.code == 1
    assert "jobs/precious.yaml:6" in plan.out and "protected" in plan.out
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 1
    [job] = jobs_of(workspace.address, workspace.name)
    assert job.status.value in ("PENDING", "RUNNING")


def test_jobs_of_others_are_never_touched(workspace, argus, tmp_path):
    from tests.support.workspace import make_workspace

    client = sdk(workspace.address)
    by_hand = client.submit_job(entrypoint="sleep 120")
    other = make_workspace(tmp_path / "other", workspace.name + "-other", workspace.address)
    other.job("shared-name", SLEEP)
    assert argus("apply", other.root, "--auto-approve").code == 0

    workspace.job("shared-name", QUICK)
    plan = argus("plan", workspace.root)
    assert "Not managed by this workspace (never touched):" in plan.out  # ours by hand, the other workspace's
    assert re.search(rf"workspace {re.escape(other.name)}: 1 (running|pending) on local", plan.out)
    assert f"not submitted by argus, on local: {by_hand} " in plan.out
    assert "+ job.shared-name" in plan.out and "no run of this spec yet" in plan.out
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    workspace.remove("jobs/shared-name.yaml")
    assert argus("apply", workspace.root, "--auto-approve", "--allow-empty").code == 0
    assert str(client.get_job_status(by_hand).value) in ("PENDING", "RUNNING")
    [theirs] = jobs_of(workspace.address, other.name)
    assert theirs.status.value in ("PENDING", "RUNNING")
    client.stop_job(by_hand)
    client.stop_job(theirs.submission_id)


def test_apply_twice_submits_once_and_submit_is_idempotent(workspace, argus):
    from reconcile.commands.common import load
    from reconcile.execute.applier import ApplyContext, apply_plan
    from reconcile.execute.cycle import connect, observe_and_plan
    from state.code.gitinfo import GitInfo

    workspace.job("once", SLEEP)
    desired = load(workspace.root)
    ray = connect(desired, 10)
    _, plan = observe_and_plan(desired, ray)
    ctx = ApplyContext(desired, ray, GitInfo("abc", False), "plan1", echo=lambda _: None)
    apply_plan(plan, ctx)
    apply_plan(plan, ctx)  # the same steps again: Ray says "already exists", and it is ours
    assert ctx.outcomes[-1][0] == "job.once" and ctx.outcomes[-1][2].startswith("exists")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    assert len(jobs_of(workspace.address, workspace.name)) == 1


def test_records_and_audit_log_on_the_shared_root(workspace, argus):
    workspace.job("recorded", QUICK, extra="env: {GREETING: hello}\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [job] = jobs_of(workspace.address, workspace.name)
    base = workspace.shared / "jobs" / job.submission_id
    for rel in ("config/ray_config.yaml", "config/jobspec.yaml", "config/submit_payload.json", "logs/submit.out"):
        assert (base / rel).is_file(), rel
    payload = json.loads((base / "config/submit_payload.json").read_text())
    # a command job is told its own checkpoint directory (what `${job:recorded.checkpoint_dir}` names)
    checkpoints = f"{workspace.shared}/outputs/{workspace.name}/checkpoints/recorded/run-1"
    assert payload["runtime_env"] == {"env_vars": {"GREETING": "hello", "ARGUS_CHECKPOINT_DIR": checkpoints}}
    status = json.loads((base / "status.json").read_text())
    assert status["status"] == "PENDING" and status["job"] == "recorded"

    events = audit.read(str(workspace.shared), workspace.name)
    # the first apply claims the workspace's name on the root (state.claims) before any step
    assert [e["event"] for e in events if e["event"] != "action"] == [
        "apply.start", "claim", "registry.adopted", "run.submitting", "apply.end"]
    [action] = [e for e in events if e.get("step") == "submit"]
    assert action["submission_id"] == job.submission_id and action["outcome"] == "submitted"
    for key in ("time", "actor", "host", "commit", "dirty", "plan_id", "address", "action"):
        assert key in action, key

    wait_for(workspace.address, job.submission_id, {"SUCCEEDED"})
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # refreshes the record
    assert json.loads((base / "status.json").read_text())["status"] == "SUCCEEDED"
    assert argus("audit", "verify", workspace.root).code == 0


def test_status_and_logs(workspace, argus):
    workspace.job("talker", QUICK)
    workspace.job("later", SLEEP, extra="state: stopped\n")
    status = argus("status", workspace.root)
    assert _row(status.out, "job.talker") == ["job.talker", "missing", "-", "-"]
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [job] = jobs_of(workspace.address, workspace.name)
    wait_for(workspace.address, job.submission_id, {"SUCCEEDED"})
    status = argus("status", workspace.root)
    assert _row(status.out, "job.talker") == ["job.talker", "in sync", "SUCCEEDED", job.submission_id]
    assert _row(status.out, "job.later") == ["job.later", "in sync", "-", "-"]  # stopped, and nothing runs
    logs = argus("logs", "talker", workspace.root)
    assert logs.code == 0 and "hello from argus" in logs.out
    as_json = json.loads(argus("logs", "talker", workspace.root, "--json").out)
    assert (as_json["address"], as_json["submission_id"], as_json["status"]) == (
        "job.talker", job.submission_id, "SUCCEEDED")
    assert "hello from argus" in as_json["logs"]
    assert json.loads(argus("status", workspace.root, "--json").out)["jobs"] == [
        {"address": "job.later", "sync": "in sync", "health": None, "submission_id": None, **NOT_FAILED},
        {"address": "job.talker", "sync": "in sync", "health": "SUCCEEDED", "submission_id": job.submission_id,
         **NOT_FAILED}]
    missing = argus("logs", "later", workspace.root)
    assert missing.code == 1 and "job.later has no run yet" in missing.err


def _row(table: str, address: str) -> list[str]:
    """One job's row of `argus status`: its columns (JOB, SYNC, HEALTH, RUN)."""
    [line] = [x for x in table.splitlines() if x.startswith(address + " ")]
    return re.split(r"\s{2,}", line.strip())


def _nodes(address: str):
    from state.ray.client import RayClient

    return RayClient("local", address).alive_nodes()


def test_status_watch_ends_when_runs_finish_and_logs_follow_streams(workspace, argus, tmp_path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    from reconcile.commands import status as status_command

    release = tmp_path / "release"  # the gate job runs until this file exists
    workspace.job("ticker", ["python3", "-c",
                             "import time; [print('tick', i, flush=True) or time.sleep(1) for i in range(3)]"])
    workspace.job("gate", ["python3", "-c", "import os, time; "
                           f"[time.sleep(0.1) for _ in iter(lambda: os.path.exists({str(release)!r}), True)]"])
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    followed = argus("logs", "ticker", workspace.root, "--follow")
    assert followed.code == 0 and all(f"tick {i}" in followed.out for i in range(3))

    def open_the_gate(seconds: float) -> None:  # between the watch's first and second look
        release.touch()
        time.sleep(seconds)

    monkeypatch.setattr(status_command, "time", SimpleNamespace(sleep=open_the_gate))
    watched = argus("status", workspace.root, "--watch", "0.5")
    assert watched.code == 0
    tables = watched.out.split("-- refreshing every 0.5s until every run has finished (^C to stop) --")
    assert len(tables) >= 2  # it looked again after the gate opened
    assert _row(tables[0], "job.gate")[2] in ("PENDING", "RUNNING")
    assert _row(tables[-1], "job.gate")[1:3] == ["in sync", "SUCCEEDED"]
    assert _row(tables[-1], "job.ticker")[1:3] == ["in sync", "SUCCEEDED"]
