"""status and logs observe only what they need: Ray's jobs, argus's records and snapshot manifests.

Never git, a working copy, Hydra or verl's file checks: those belong to plan and apply.
"""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cluster import jobs_of, wait_for

ROOT = Path(__file__).resolve().parents[2]
MAKE_REPO = ROOT / "examples" / "multi-version" / "make-repo.sh"
NOT_FAILED = {"failure": None, "advice": None, "evidence": []}
SOURCES_AND_CHECKS = ("state.code.sources", "state.code.safegit", "state.code.workcopy", "state.code.gitinfo",
                      "state.verl.checks")
PPO = """
    kind: Job
    name: ppo
    cluster: local
    code: code-a
    workload: ppo
    model: Qwen/Qwen2.5-0.5B-Instruct
    data: {train: /nowhere/train.parquet, val: /nowhere/test.parquet}
    trainer: {nnodes: 1, n_gpus_per_node: 1, total_training_steps: 1}
    """


class Forbidden(Exception):
    """Raised by every function status and logs must never call."""


def test_status_and_logs_run_without_git_or_hydra(workspace, argus, monkeypatch: pytest.MonkeyPatch):
    repo = workspace.root.parent / "marker"
    subprocess.run([MAKE_REPO, repo], check=True, capture_output=True)
    _snapshot(workspace, "code-a", repo, "v1")
    workspace.job("on-a", ["python3", "-m", "show_marker"], extra="code: code-a\n")
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [ran] = jobs_of(workspace.address, workspace.name)
    wait_for(workspace.address, ran.submission_id, {"SUCCEEDED"})
    _snapshot(workspace, "code-b", repo, "v2")  # not materialized: only a fetch could tell its digest
    workspace.job("on-b", ["python3", "-m", "show_marker"], extra="code: code-b\n")
    workspace.write("jobs/ppo.yaml", PPO)  # a verl job: plan composes its Hydra config
    before = _full_plan_status(workspace.root)

    git_ran = _unavailable_git_and_hydra(monkeypatch, workspace.root.parent)
    status = argus("status", workspace.root, "--json")
    assert status.code == 0, status.err
    assert json.loads(status.out)["jobs"] == before == [
        {"address": "job.on-a", "sync": "in sync", "health": "SUCCEEDED", "submission_id": ran.submission_id,
         **NOT_FAILED},
        {"address": "job.on-b", "sync": "missing", "health": None, "submission_id": None, **NOT_FAILED},
        {"address": "job.ppo", "sync": "missing", "health": None, "submission_id": None, **NOT_FAILED}]
    human = argus("status", workspace.root)
    assert human.code == 0 and f"job.on-a  in sync  SUCCEEDED  {ran.submission_id}" in human.out.splitlines()
    logs = argus("logs", "on-a", workspace.root, "--json")
    assert logs.code == 0, logs.err
    shown = json.loads(logs.out)
    assert (shown["submission_id"], shown["status"]) == (ran.submission_id, "SUCCEEDED")
    assert "MARKER=codeA" in shown["logs"]
    assert not git_ran.exists()

    refused = argus("plan", workspace.root)  # the same restrictions do stop plan: they are real
    assert refused.code == 3 and "Forbidden: state." in refused.err


def _snapshot(workspace, name: str, repo: Path, ref: str) -> None:
    workspace.write(f"code/{name}.yaml", f"kind: CodeSnapshot\nname: {name}\ncluster: local\n"
                                         f"git: {{url: {repo}, ref: {ref}}}\n")


def _full_plan_status(root: Path) -> list[dict]:
    """The job rows `argus status` showed when it observed like plan: sources resolved, configs checked."""
    from reconcile.commands.common import load
    from reconcile.execute.cycle import connect, observe_and_plan
    from reconcile.views.machine import status_json

    desired = load(root)
    _, plan = observe_and_plan(desired, connect(desired, 10))
    return json.loads(status_json(plan, set(desired.jobs)))["jobs"]


def _unavailable_git_and_hydra(monkeypatch: pytest.MonkeyPatch, scratch: Path) -> Path:
    """Every function of the source and config modules raises, no git binary works, Hydra cannot be
    imported. Returns the file a git process would create."""
    for name in SOURCES_AND_CHECKS:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if inspect.isfunction(value) and value.__module__ == name:
                _replace_everywhere(monkeypatch, value, _raiser(f"{name}.{attr}"))
    fake_bin, marker = scratch / "fake-bin", scratch / "git-ran"
    fake_bin.mkdir()
    (fake_bin / "git").write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    (fake_bin / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}:{Path(sys.executable).parent}:/usr/bin:/bin")
    for module in [m for m in sys.modules if m == "hydra" or m.startswith("hydra.")] or ["hydra"]:
        monkeypatch.setitem(sys.modules, module, None)
    return marker


def _replace_everywhere(monkeypatch: pytest.MonkeyPatch, original, replacement) -> None:
    """Also where argus bound the function by `from module import name`."""
    for module in list(sys.modules.values()):
        if module is None or getattr(module, "__name__", "").split(".")[0] not in ("specs", "state", "reconcile"):
            continue
        for attr, value in list(vars(module).items()):
            if value is original:
                monkeypatch.setattr(module, attr, replacement)


def _raiser(name: str):
    def forbidden(*_args, **_kwargs):
        raise Forbidden(name)

    return forbidden
