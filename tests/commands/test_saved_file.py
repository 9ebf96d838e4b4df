"""The saved-plan file itself, without a cluster: its seal, its signature, and malformed content."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from reconcile import saved
from reconcile.model import Plan
from specs.errors import ArgusError


def write(path: Path) -> dict:
    saved.write(path, saved.SavedPlan(format_version=2, argus_version="t", workspace="ws", plan_id="p1",
                                      created_at="t", desired_digest="d" * 64, commit="c" * 40,
                                      plan=Plan(workspace="ws", changes=())))
    return json.loads(path.read_text())


def test_with_a_plan_key_only_its_holder_writes_plans_apply_accepts(tmp_path, monkeypatch):
    monkeypatch.setenv(saved.PLAN_KEY, "k1")
    data = write(tmp_path / "plan.json")
    assert data["seal"] == "hmac-sha256" and saved.read(tmp_path / "plan.json").plan_id == "p1"
    forged = {**data, "plan": {**data["plan"], "options": {"prune": True}}}
    unkeyed = saved.SavedPlan.model_validate(forged).model_copy(update={"seal": "sha256"})
    (tmp_path / "forged.json").write_text(json.dumps({**unkeyed.model_dump(mode="json"),
                                                      "digest": saved.content_digest(unkeyed)}))
    with pytest.raises(ArgusError, match="it is not signed, and ARGUS_PLAN_KEY is set here"):
        saved.read(tmp_path / "forged.json")
    monkeypatch.setenv(saved.PLAN_KEY, "another key")
    with pytest.raises(ArgusError, match="does not match its seal"):
        saved.read(tmp_path / "plan.json")
    monkeypatch.delenv(saved.PLAN_KEY)
    with pytest.raises(ArgusError, match="signed with ARGUS_PLAN_KEY, which is not set here"):
        saved.read(tmp_path / "plan.json")


def test_malformed_files_are_user_errors_not_crashes(tmp_path):
    data = write(tmp_path / "plan.json")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ArgusError, match="Cannot read the saved plan"):
        saved.read(deep)
    sub = {"workspace": "", "cluster": "c", "shared_root": "s", "job": "a b", "run": 1, "entrypoint": "x",
           "env_vars": {}, "entrypoint_num_cpus": None, "entrypoint_num_gpus": None, "entrypoint_memory": None,
           "entrypoint_resources": {}}
    step = {"kind": "submit", "cluster": "c", "submission_id": "x.1", "spec_hash": "a", "attempt": 10**150,
            "submission": sub}
    data["plan"]["changes"] = [{"address": "job.a", "action": "submit", "reason": "", "steps": [step]}]
    model = saved.SavedPlan.model_validate(data)
    (tmp_path / "odd.json").write_text(json.dumps({**data, "digest": saved.content_digest(model)}))
    with pytest.raises(ArgusError, match="job.a: the submission does not match its spec hash"):
        saved.read(tmp_path / "odd.json")


def _sealed_as_written(data: dict) -> dict:
    """The file an earlier argus wrote: a plain sha256 over exactly what the file holds."""
    body = {key: value for key, value in data.items() if key != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert digest == saved.written_digest(data)
    return {**body, "digest": digest}


def test_a_plan_an_earlier_argus_wrote_is_read_and_any_edit_of_it_is_refused(tmp_path):
    data = write(tmp_path / "plan.json")
    # an earlier argus's change: none of the fields added since (deadline_at, waiting_on, ...)
    data["plan"]["changes"] = [{"address": "job.a", "action": "no-op", "reason": "in sync", "steps": []}]
    older = tmp_path / "older.json"
    older.write_text(json.dumps(_sealed_as_written(data)))
    read = saved.read(older)
    assert read.plan.changes[0].address == "job.a" and read.plan.changes[0].deadline_at is None
    edited = json.loads(older.read_text())
    edited["plan"]["changes"][0]["reason"] = "edited"
    older.write_text(json.dumps(edited))
    with pytest.raises(ArgusError, match="does not match its seal"):
        saved.read(older)
