"""apply asks before acting, and talks only to the address the spec names."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.support.cluster import QUICK, jobs_of


def test_apply_without_auto_approve_needs_the_word_yes(workspace, argus, monkeypatch: pytest.MonkeyPatch):
    workspace.job("asked", QUICK)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    declined = argus("apply", workspace.root)
    assert declined.code == 1 and "Apply cancelled" in declined.err
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    closed = argus("apply", workspace.root)
    assert closed.code == 1 and "--auto-approve" in closed.err
    assert jobs_of(workspace.address, workspace.name) == []

    monkeypatch.setattr("sys.stdin", io.StringIO("yes\n"))
    accepted = argus("apply", workspace.root)
    assert accepted.code == 0, accepted.err
    assert len(jobs_of(workspace.address, workspace.name)) == 1


def test_ray_address_variables_never_redirect_argus(workspace, argus, monkeypatch: pytest.MonkeyPatch):
    workspace.job("pinned", QUICK)
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:9")
    monkeypatch.setenv("RAY_API_SERVER_ADDRESS", "http://127.0.0.1:9")
    result = argus("apply", workspace.root, "--auto-approve")
    assert result.code == 0, result.err
    monkeypatch.delenv("RAY_ADDRESS")  # Ray's own client obeys these: the check below must not
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS")
    assert len(jobs_of(workspace.address, workspace.name)) == 1


def test_secret_values_reach_the_job_and_nothing_else(workspace, argus, ray_cluster,
                                                     monkeypatch: pytest.MonkeyPatch):
    from tests.support.cluster import wait_for

    secret = "s3cr3t-value-7f9a1c"
    workspace.job("secretive", ["python3", "-c", "import os; print('token length', len(os.environ['TOKEN']))"],
                  extra="env: {TOKEN: '${env:JOB_TEST_TOKEN}'}\n")
    workspace.allow("JOB_TEST_TOKEN")
    missing = argus("apply", workspace.root, "--auto-approve")
    assert missing.code == 1 and "JOB_TEST_TOKEN" in missing.err
    assert jobs_of(workspace.address, workspace.name) == []

    monkeypatch.setenv("JOB_TEST_TOKEN", secret)
    plan = argus("plan", workspace.root)
    formats = [argus("plan", workspace.root, "--format", f).out for f in ("json", "markdown")]
    saved = workspace.root.parent / "saved-plan.json"
    assert argus("plan", workspace.root, "-o", saved).code == 0
    applied = argus("apply", workspace.root, "--auto-approve")
    assert applied.code == 0, applied.err
    [job] = jobs_of(workspace.address, workspace.name)
    wait_for(workspace.address, job.submission_id, {"SUCCEEDED"})
    logs = argus("logs", "secretive", workspace.root)
    assert f"token length {len(secret)}" in logs.out
    status = argus("status", workspace.root)
    for output in (plan.out, plan.err, applied.out, applied.err, status.out, *formats, saved.read_text()):
        assert secret not in output
    monkeypatch.setenv("JOB_TEST_TOKEN", "rotated-" + secret)
    assert argus("plan", workspace.root, "--detailed-exitcode").code == 0  # a new secret value is no new run
    written = [p for p in workspace.shared.rglob("*") if p.is_file()]
    assert written and not [p for p in written if secret in p.read_text(errors="replace")]
    assert not (workspace.shared / "jobs" / job.submission_id / ".secrets.env").exists()
    assert "${env:JOB_TEST_TOKEN}" in (workspace.shared / "jobs" / job.submission_id / "status.json").read_text()
    _never_in_ray(secret, workspace.address, job.submission_id, Path(ray_cluster.temp_dir))


def _never_in_ray(secret: str, address: str, submission_id: str, ray_dir: Path) -> None:
    """Ray's job table (SDK), its dashboard's API and every file of its session (logs, GCS) lack the value."""
    import requests

    from tests.support.cluster import sdk

    client = sdk(address)
    table = repr(client.list_jobs())  # every field of every job, as Ray's SDK gives it
    assert submission_id in table and secret not in table
    assert "TOKEN" not in repr(client.get_job_info(submission_id).runtime_env)
    for route in ("/api/jobs/", f"/api/jobs/{submission_id}", "/api/v0/tasks", "/api/v0/actors",
                  "/nodes?view=summary"):
        answer = requests.get(address + route, timeout=30)
        assert answer.ok and secret not in answer.text, route
    files = [p for p in ray_dir.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.name == f"job-driver-{submission_id}.log" for p in files), "Ray's logs were not searched"
    assert not [p for p in files if secret.encode() in p.read_bytes()]
