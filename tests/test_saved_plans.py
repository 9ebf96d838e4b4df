"""Saved plans: applied exactly, or refused as stale when anything they were made from moved."""

from __future__ import annotations

import json

from conftest import QUICK, SLEEP, jobs_of, sdk, wait_for


def save(argus, workspace, path, *flags):
    result = argus("plan", workspace.root, "-o", path, *flags)
    assert result.code == 0, result.out + result.err
    return json.loads(path.read_text())


def test_a_saved_plan_applies_exactly_without_asking(workspace, argus, tmp_path):
    workspace.job("saved", QUICK)
    saved = save(argus, workspace, tmp_path / "plan.json")
    assert saved["format_version"] == 1 and saved["workspace"] == workspace.name and saved["fingerprint"]
    applied = argus("apply", tmp_path / "plan.json", "--dir", workspace.root)
    assert applied.code == 0, applied.out + applied.err
    [job] = jobs_of(workspace.address, workspace.name)
    assert job.metadata["argus.plan"] == saved["plan_id"]
    again = argus("apply", tmp_path / "plan.json", "--dir", workspace.root)
    assert again.code == 1 and "Saved plan is stale" in again.err and "was applied since" in again.err
    assert len(jobs_of(workspace.address, workspace.name)) == 1


def test_a_plan_goes_stale_when_a_managed_job_changes(workspace, argus, tmp_path):
    workspace.job("short", ["python3", "-c", "import time; time.sleep(4)"])
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [short] = jobs_of(workspace.address, workspace.name)
    wait_for(workspace.address, short.submission_id, {"RUNNING"})
    workspace.job("later", QUICK)
    save(argus, workspace, tmp_path / "finishes.json")
    wait_for(workspace.address, short.submission_id, {"SUCCEEDED"})
    finished = argus("apply", tmp_path / "finishes.json", "--dir", workspace.root)
    assert finished.code == 1 and "Saved plan is stale: the clusters or the shared filesystem changed" in finished.err

    workspace.job("sleeper", SLEEP)
    workspace.remove("jobs/later.yaml")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    sleeper = next(j for j in jobs_of(workspace.address, workspace.name) if j.metadata["argus.job"] == "sleeper")
    wait_for(workspace.address, sleeper.submission_id, {"RUNNING"})
    save(argus, workspace, tmp_path / "stopped.json")
    sdk(workspace.address).stop_job(sleeper.submission_id)  # someone stops a managed job by hand
    wait_for(workspace.address, sleeper.submission_id, {"STOPPED"})
    stopped = argus("apply", tmp_path / "stopped.json", "--dir", workspace.root)
    assert stopped.code == 1 and "Saved plan is stale" in stopped.err


def test_another_applied_plan_and_bad_files_are_refused(workspace, argus, tmp_path):
    workspace.job("one", QUICK)
    save(argus, workspace, tmp_path / "first.json")
    save(argus, workspace, tmp_path / "second.json")
    assert argus("apply", tmp_path / "first.json", "--dir", workspace.root).code == 0
    second = argus("apply", tmp_path / "second.json", "--dir", workspace.root)
    assert second.code == 1 and "was applied since" in second.err

    future = json.loads((tmp_path / "first.json").read_text()) | {"format_version": 99}
    (tmp_path / "future.json").write_text(json.dumps(future))
    refused = argus("apply", tmp_path / "future.json", "--dir", workspace.root)
    assert refused.code == 1 and "format version 99" in refused.err

    workspace.job("one", QUICK, extra="protect: maybe\n")
    broken = argus("plan", workspace.root, "-o", tmp_path / "broken.json")
    assert broken.code == 1 and not (tmp_path / "broken.json").exists()


def test_plan_formats_on_a_real_cluster(workspace, argus):
    workspace.job("shown", QUICK, extra="env: {TOKEN: '${env:ARGUS_FORMAT_TOKEN}'}\n")
    as_json = json.loads(argus("plan", workspace.root, "--format", "json").out)
    assert as_json["format_version"] == 1 and as_json["summary"]["submit"] == 1
    [change] = [c for c in as_json["changes"] if c["address"] == "job.shown"]
    assert change["action"] == "submit" and change["after"]["env_vars"]["TOKEN"] == "${env:ARGUS_FORMAT_TOKEN}"
    markdown = argus("plan", workspace.root, "--format", "markdown").out
    assert markdown.startswith(f"### argus plan for `{workspace.name}`")
    assert "| `+` | `job.shown` | submit |" in markdown
    status = json.loads(argus("status", workspace.root, "--format", "json").out)
    assert status["jobs"] == [{"address": "job.shown", "sync": "missing", "health": None, "submission_id": None}]
