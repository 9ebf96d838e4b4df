"""argus doctor against real clusters: one whose worker shares the root (exit 0, the right lines), one whose
worker has another directory at the root's path (exit 1, saying so), one where no node can take a driver (no
probe submitted). Every time: no probe left in Ray's table, nothing left under the root."""

from __future__ import annotations

import json
import os
from pathlib import Path

from state.ray import local
from tests.support.cluster import sdk, wait_for
from tests.support.unshared import start_unshared
from tests.support.workspace import make_workspace


def probes(address: str) -> list:
    return [job for job in sdk(address).list_jobs() if (job.submission_id or "").startswith("argus-doctor-")]


def tree(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*")) if root.exists() else ["<absent>"]


def test_a_cluster_that_shares_its_root_passes_with_the_right_lines(workspace, argus):
    (workspace.shared / ".argus" / "audit").mkdir(parents=True)  # a root argus has used: its folders are checked
    before = tree(workspace.shared)

    result = argus("doctor", workspace.root)

    assert result.code == 0, result.out + result.err
    lines = result.out.splitlines()
    assert lines[0] == f"cluster local at {workspace.address}, shared root {workspace.shared}"
    for expected in ("ok    dashboard    Ray 2.60.0 answers", "ok    probe        the probe argus-doctor-",
                     "ok    shared-root  worker 127.0.0.3 and argus share the root", "ok    clock        the head's",
                     "ok    cleanup      the probe argus-doctor-", "warn  gpus         Ray sees no GPU",
                     "warn  auth         the dashboard requires no token",
                     "warn  keys         ARGUS_AUDIT_KEY and ARGUS_ROOT_KEY not set: a job that can write"):
        assert any(line.startswith("  " + expected) for line in lines), (expected, result.out)
    [state] = [line for line in lines if " argus-state " in line]
    assert state.startswith("  warn") and "as uid 0" in state and ".argus, .argus/audit" in state
    assert "run Ray's nodes (and so every job) as a Unix user other than argus's" in state
    assert lines[-1] == "Verdict: ready: every check passed (4 warnings)."
    assert probes(workspace.address) == []
    assert tree(workspace.shared) == before


def test_json_says_the_same_with_the_facts(workspace, argus):
    result = argus("doctor", workspace.root, "--json")

    assert result.code == 0, result.out + result.err
    answer = json.loads(result.out)
    [cluster] = answer["clusters"]
    assert answer["ok"] is True and cluster["ok"] is True and cluster["cluster"] == "local"
    levels = {check["check"]: check["level"] for check in cluster["checks"]}
    assert levels["shared-root"] == "ok" and levels["probe"] == "ok" and levels["argus-state"] == "warn"
    assert levels["keys"] == "warn"  # the tests run argus without its keys
    assert levels["stack-dumps"] == "ok" and cluster["facts"]["stack_dumps"]["profiling"] is True  # argus local's head
    probe = cluster["facts"]["probe"]
    assert probe["sees_argus_file"] and probe["wrote_answer"] and probe["argus_read_answer"] and probe["deleted"]
    assert probe["uid"] == str(os.geteuid()) and probe["node"] == local.WORKER_IP
    assert cluster["facts"]["token_required"] is False and cluster["facts"]["ray_version"] == "2.60.0"
    assert probes(workspace.address) == [] and tree(workspace.shared) == []  # as the probe found it


def test_a_worker_whose_root_is_another_directory_fails_and_leaves_nothing(tmp_path, argus):
    ws_root, other = tmp_path / "ws", tmp_path / "elsewhere"
    other.mkdir()
    (ws_root / ".shared").mkdir(parents=True)
    cluster = start_unshared(tmp_path / "cluster", ws_root / ".shared", other)
    try:
        ws = make_workspace(ws_root, "doctor-unshared", cluster.address)

        result = argus("doctor", ws.root)

        assert result.code == 1, result.out + result.err
        [line] = [line for line in result.out.splitlines() if " shared-root " in line]
        assert line.startswith("  FAIL  shared-root  the worker's root is not argus's: on worker 127.0.0.3")
        assert "Mount the same filesystem at the shared root on every node" in line
        assert "argus-state" not in result.out  # the worker's answers are of another directory: not told as the root's
        assert result.out.splitlines()[-1].startswith("Verdict: NOT READY: local failed a check")
        assert probes(cluster.address) == []
        assert tree(ws.shared) == [] and tree(other) == []
    finally:
        local.down(tmp_path / "cluster")


def test_no_node_for_the_driver_is_a_failure_and_no_probe_is_submitted(workspace, argus):
    workspace.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: {workspace.address}
        shared_root: .shared
        job_defaults:
          entrypoint_resources: {{no_such_node: 1}}
        """)

    result = argus("doctor", workspace.root)

    assert result.code == 1
    assert "  FAIL  probe        no alive node offers what the cluster's job_defaults ask for a driver " \
           "(no_such_node: 1)" in result.out
    assert probes(workspace.address) == [] and tree(workspace.shared) == []  # as the probe found it


def test_a_probe_that_cannot_start_in_time_fails_and_the_next_doctor_deletes_it(workspace, argus):
    client = sdk(workspace.address)
    blocker = client.submit_job(entrypoint="sleep 120", entrypoint_resources={"worker_node": 1})
    workspace.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: {workspace.address}
        shared_root: .shared
        job_defaults:
          entrypoint_resources: {{worker_node: 8}}
        """)
    try:
        wait_for(workspace.address, blocker, {"RUNNING"})
        result = argus("doctor", workspace.root, "--timeout", "3")

        assert result.code == 1
        assert "  FAIL  probe        the probe argus-doctor-" in result.out and "did not start within 3s" in result.out
        [left] = probes(workspace.address)
        assert left.status.value == "PENDING" and "the next `argus doctor` deletes it" in result.out
        assert tree(workspace.shared) == []  # its directory is gone: when it starts it finds nothing to answer
    finally:
        client.stop_job(blocker)
    wait_for(workspace.address, left.submission_id, {"STOPPED", "SUCCEEDED", "FAILED"})
    workspace.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: {workspace.address}
        shared_root: .shared
        """)
    again = argus("doctor", workspace.root)
    assert again.code == 0, again.out
    assert probes(workspace.address) == []
    assert tree(workspace.shared) == []


def test_the_probe_is_never_a_run_of_any_workspace():
    from state.observed import RayJob

    probe = RayJob(submission_id="argus-doctor-0123456789abcdef", status="RUNNING",
                   metadata={"argus.doctor": "0123456789abcdef"})
    assert probe.run_id is None and probe.workspace is None


def test_with_argus_keys_set_the_keys_check_passes(workspace, argus, monkeypatch):
    monkeypatch.setenv("ARGUS_AUDIT_KEY", "k" * 32)
    monkeypatch.setenv("ARGUS_ROOT_KEY", "r" * 32)
    result = argus("doctor", workspace.root)
    assert result.code == 0, result.out + result.err
    [keys] = [line for line in result.out.splitlines() if " keys " in line]
    assert keys.startswith("  ok    keys") and "k" * 32 not in result.out + result.err
