"""Saved plans record what was reviewed: apply plans again and runs the fresh steps only when no
decision changed; a plan file is never executed as written."""

from __future__ import annotations

import json
from pathlib import Path

from reconcile import saved
from specs.workloads.submission import spec_hash, submission_id
from tests.support.cluster import QUICK, SLEEP, gated, jobs_of, wait_for


def save(argus, workspace, path, *flags):
    result = argus("plan", workspace.root, "-o", path, *flags)
    assert result.code == 0, result.out + result.err
    return json.loads(path.read_text())


def reseal(path: Path, data: dict) -> None:
    """What a forger who read saved.py would do: recompute the seal after editing."""
    path.write_text(json.dumps({**data, "digest": saved.written_digest(data)}))


def test_a_saved_plan_applies_without_asking_and_again_changes_nothing(workspace, argus, tmp_path):
    workspace.job("saved", QUICK)
    stored = save(argus, workspace, tmp_path / "plan.json")
    assert stored["format_version"] == 3 and stored["workspace"] == workspace.name
    assert len(stored["desired_digest"]) == 64 and len(stored["digest"]) == 64
    applied = argus("apply", tmp_path / "plan.json", "--dir", workspace.root)
    assert applied.code == 0, applied.out + applied.err
    [job] = jobs_of(workspace.address, workspace.name)
    assert job.metadata["argus.plan"] == stored["plan_id"]
    again = argus("apply", tmp_path / "plan.json", "--dir", workspace.root)
    assert again.code == 0 and "No changes." in again.out, again.out + again.err
    assert len(jobs_of(workspace.address, workspace.name)) == 1


def test_a_run_finishing_between_review_and_apply_changes_no_decision(workspace, argus, tmp_path):
    gate = workspace.root.parent / "gate"
    workspace.job("short", gated(gate))
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [short] = jobs_of(workspace.address, workspace.name)
    wait_for(workspace.address, short.submission_id, {"RUNNING"})
    workspace.job("later", QUICK)
    save(argus, workspace, tmp_path / "plan.json")
    gate.touch()
    wait_for(workspace.address, short.submission_id, {"SUCCEEDED"})
    applied = argus("apply", tmp_path / "plan.json", "--dir", workspace.root)
    assert applied.code == 0, applied.out + applied.err
    assert {j.metadata["argus.job"] for j in jobs_of(workspace.address, workspace.name)} == {"short", "later"}


def test_a_decision_changed_since_review_is_refused_naming_it(workspace, argus, tmp_path):
    workspace.job("sleeper", SLEEP)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    workspace.job("added", QUICK)
    save(argus, workspace, tmp_path / "plan.json")
    workspace.job("sleeper", SLEEP, extra="run: 2\n")  # main changed it differently since the review
    refused = argus("apply", tmp_path / "plan.json", "--dir", workspace.root)
    assert refused.code == 1 and "Saved plan is stale: 1 decision(s) differ" in refused.err, refused.err
    assert "job.sleeper: reviewed no change; now `-/+ replace`" in refused.err
    [sleeper] = jobs_of(workspace.address, workspace.name)  # nothing submitted, nothing stopped
    assert sleeper.status.value in ("PENDING", "RUNNING")


def test_an_edited_entrypoint_never_runs(workspace, argus, tmp_path):
    marker = tmp_path / "MARKER"
    workspace.job("victim", QUICK)
    path = tmp_path / "plan.json"
    data = save(argus, workspace, path)
    step = next(s for c in data["plan"]["changes"] for s in c["steps"] if s["kind"] == "submit")
    step["submission"]["entrypoint"] = f"touch {marker}"
    path.write_text(json.dumps(data))
    edited = argus("apply", path, "--dir", workspace.root)
    assert edited.code == 1 and "was edited after argus wrote it" in edited.err
    assert "content does not match" in edited.err

    reseal(path, data)  # the seal recomputed: the submission no longer matches its spec hash
    resealed = argus("apply", path, "--dir", workspace.root)
    assert resealed.code == 1 and "job.victim: the submission does not match its spec hash" in resealed.err

    forged = saved.SavedPlan.model_validate(data).plan.changes  # a forger who also recomputes the identity
    sub = next(s for c in forged for s in c.steps if s.kind == "submit").submission
    step["spec_hash"] = spec_hash(sub)
    step["submission_id"] = submission_id(sub.workspace, sub.job, step["spec_hash"], 1)
    reseal(path, data)
    consistent = argus("apply", path, "--dir", workspace.root)
    assert consistent.code == 1 and "Saved plan is stale" in consistent.err and "job.victim" in consistent.err
    assert not marker.exists() and jobs_of(workspace.address, workspace.name) == []


def test_an_added_delete_step_never_deletes(workspace, argus, tmp_path):
    victim = workspace.shared / "common" / "code" / "x" / "victim"
    victim.mkdir(parents=True)
    (victim / ".argus-snapshot.json").write_text(json.dumps({
        "workspace": workspace.name, "name": "victim", "repo": "x", "source": {"path": "x"}, "commit": "1" * 40,
        "digest": "2" * 64, "files": 0, "bytes": 0, "created_at": "2026-01-01T00:00:00+00:00", "created_by": "t"}))
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace.job("one", QUICK)
    path = tmp_path / "plan.json"
    data = save(argus, workspace, path)
    for target in ("../../../outside", "common/code/x/victim"):
        delete = {"kind": "delete-snapshot", "cluster": "local", "path": target}
        data["plan"]["changes"].append({"address": "code.victim", "action": "delete", "reason": "x", "steps": [delete]})
        if target.startswith(".."):
            path.write_text(json.dumps(data))
            invalid = argus("apply", path, "--dir", workspace.root)
            assert invalid.code == 1 and "is not a valid saved plan" in invalid.err, invalid.err
            data["plan"]["changes"].pop()
        else:
            reseal(path, data)
            stale = argus("apply", path, "--dir", workspace.root)
            assert stale.code == 1 and "code.victim: reviewed `- delete`" in stale.err, stale.err
    assert victim.is_dir() and outside.is_dir() and jobs_of(workspace.address, workspace.name) == []


def test_old_formats_bad_files_and_bad_destinations_are_refused(workspace, argus, tmp_path):
    workspace.job("one", QUICK)
    data = save(argus, workspace, tmp_path / "plan.json")
    (tmp_path / "old.json").write_text(json.dumps({**data, "format_version": 1}))
    old = argus("apply", tmp_path / "old.json", "--dir", workspace.root)
    assert old.code == 1 and "format version 1" in old.err and "Run `argus plan -o` again" in old.err
    (tmp_path / "list.json").write_text("[]")
    assert "not a saved plan" in argus("apply", tmp_path / "list.json", "--dir", workspace.root).err

    as_yaml = argus("plan", workspace.root, "-o", workspace.root / "plan.yaml")
    assert as_yaml.code == 1 and "name it plan.json" in as_yaml.err and not (workspace.root / "plan.yaml").exists()
    nowhere = argus("plan", workspace.root, "-o", tmp_path / "missing" / "plan.json")
    assert nowhere.code == 1 and "does not exist" in nowhere.err and "argus plan for" not in nowhere.out

    workspace.job("one", QUICK, extra="protect: maybe\n")
    broken = argus("plan", workspace.root, "-o", tmp_path / "broken.json")
    assert broken.code == 1 and not (tmp_path / "broken.json").exists()


def test_plan_formats_on_a_real_cluster(workspace, argus):
    workspace.job("shown", QUICK, extra="env: {TOKEN: '${env:JOB_FORMAT_TOKEN}'}\n")
    workspace.allow("JOB_FORMAT_TOKEN")
    as_json = json.loads(argus("plan", workspace.root, "--format", "json").out)
    assert as_json["format_version"] == 1 and as_json["summary"]["submit"] == 1
    [change] = [c for c in as_json["changes"] if c["address"] == "job.shown"]
    assert change["action"] == "submit" and change["after"]["env_vars"]["TOKEN"] == "${env:JOB_FORMAT_TOKEN}"
    markdown = argus("plan", workspace.root, "--format", "markdown").out
    assert markdown.startswith(f"### argus plan for `{workspace.name}`")
    assert "| `+` | `job.shown` | submit |" in markdown
    status = json.loads(argus("status", workspace.root, "--format", "json").out)
    assert status["jobs"] == [{"address": "job.shown", "sync": "missing", "health": None, "submission_id": None,
                               "failure": None, "advice": None, "evidence": []}]


def test_a_replace_plan_applied_twice_asks_for_one_new_attempt(workspace, argus, tmp_path):
    workspace.job("again", QUICK)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    save(argus, workspace, tmp_path / "plan.json", "--replace", "job.again")
    for _ in range(2):  # a CI re-run of the apply job
        applied = argus("apply", tmp_path / "plan.json", "--dir", workspace.root)
        assert applied.code == 0, applied.out + applied.err
    attempts = sorted(j.metadata["argus.attempt"] for j in jobs_of(workspace.address, workspace.name))
    assert attempts == ["1", "2"] and "No changes." in applied.out


def test_a_saved_plan_whose_follower_waited_applies_once_it_is_released(workspace, argus, tmp_path):
    """The reviewed decision was "start train when prepare has succeeded": its start is not a new one."""
    gate = tmp_path / "gate"
    workspace.job("prepare", gated(gate))
    workspace.job("train", QUICK, extra="after: [prepare]\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [prepare] = jobs_of(workspace.address, workspace.name)
    stored = save(argus, workspace, tmp_path / "plan.json")
    [waiting] = [c for c in stored["plan"]["changes"] if c["address"] == "job.train"]
    assert waiting["action"] == "wait" and waiting["steps"] == [] and waiting["waiting_on"][0]["job"] == "prepare"
    gate.write_text("")
    wait_for(workspace.address, prepare.submission_id, {"SUCCEEDED"})
    applied = argus("apply", tmp_path / "plan.json", "--dir", workspace.root)
    assert applied.code == 0, applied.out + applied.err
    assert sorted(j.metadata["argus.job"] for j in jobs_of(workspace.address, workspace.name)) == ["prepare", "train"]
