"""The GitHub action's script, run locally: comment bodies and exit codes for plan, apply and drift."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.cluster import QUICK, jobs_of

SCRIPT = Path(__file__).resolve().parents[2] / ".github" / "actions" / "argus" / "run.sh"


def run(mode: str, workspace, out: Path, **env: str) -> subprocess.CompletedProcess:
    env |= {"OUT_DIR": str(out), "ARGUS": str(Path(sys.executable).with_name("argus")), "PATH": "/usr/bin:/bin",
            "HOME": str(out)}
    return subprocess.run(["bash", SCRIPT, mode, str(workspace.root)], capture_output=True, text=True, env=env)


def test_plan_comment_apply_and_drift(workspace, tmp_path):
    out = tmp_path / "argus-out"
    workspace.job("ci", QUICK)
    planned = run("plan", workspace, out)
    assert planned.returncode == 0, planned.stderr
    body = (out / "comment.md").read_text()
    assert body.startswith(f"<!-- argus-plan: {workspace.root} -->\n### argus plan for `{workspace.name}`")
    assert "| `+` | `job.ci` | submit |" in body and (out / "plan.json").exists()

    applied = run("apply", workspace, out)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert len(jobs_of(workspace.address, workspace.name)) == 1
    again = run("apply", workspace, out)  # a re-run of the apply job: every decision is done, no second run
    assert again.returncode == 0 and "No changes." in again.stdout, again.stdout + again.stderr
    assert len(jobs_of(workspace.address, workspace.name)) == 1

    assert run("drift", workspace, out).returncode == 0
    workspace.job("ci", QUICK, extra="run: 2\n")
    drifted = run("drift", workspace, out)
    assert drifted.returncode == 2 and "job.ci" in (out / "comment.md").read_text()


def test_an_invalid_workspace_fails_with_a_comment_saying_why(workspace, tmp_path):
    out = tmp_path / "argus-out"
    workspace.job("bad", QUICK, extra="colour: blue\n")
    failed = run("plan", workspace, out)
    assert failed.returncode == 1
    body = (out / "comment.md").read_text()
    assert "### argus validate failed" in body and "jobs/bad.yaml:6: colour: unknown key" in body


def test_a_fork_is_validated_never_planned_and_no_older_file_survives(workspace, tmp_path):
    out = tmp_path / "argus-out"
    workspace.job("ci", QUICK)
    assert run("plan", workspace, out).returncode == 0 and (out / "plan.json").exists()
    validated = run("validate", workspace, out, ARGUS_WORKSPACE="infra/argus")
    assert validated.returncode == 0, validated.stderr
    body = (out / "comment.md").read_text()
    assert body.startswith("<!-- argus-plan: infra/argus -->\n### argus validate passed")
    assert not (out / "plan.json").exists()  # a self-hosted runner's leftover plan is never uploaded again
    assert jobs_of(workspace.address, workspace.name) == []
