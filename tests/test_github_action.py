"""The GitHub action's script, run locally: comment bodies and exit codes for plan, apply and drift."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import QUICK, jobs_of

SCRIPT = Path(__file__).resolve().parents[1] / ".github" / "actions" / "argus" / "run.sh"


def run(mode: str, workspace, out: Path) -> subprocess.CompletedProcess:
    env = {"OUT_DIR": str(out), "ARGUS": str(Path(sys.executable).with_name("argus")), "PATH": "/usr/bin:/bin",
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
    assert run("apply", workspace, out).returncode == 1  # the same plan again is stale

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
