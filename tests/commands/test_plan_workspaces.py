"""Several workspaces in one repository (`teams/nlp`, `teams/vision`) on one real cluster, planned,
validated and shown from the repository's root (Atlantis-style). Nothing is applied: plans only read
the cluster, so these tests run no Ray job."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reconcile.commands.several import worst
from tests.support.cluster import QUICK
from tests.support.workspace import Workspace, make_workspace


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a", *args],
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def teams(tmp_path: Path, ray_cluster, request, monkeypatch) -> dict[str, Workspace]:
    repo = tmp_path / "mono"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    tag = request.node.name.replace("_", "-")[5:25].strip("-")
    made = {team: make_workspace(repo / "teams" / team, f"{team}-{tag}", ray_cluster.address)
            for team in ("nlp", "vision")}
    for team, workspace in made.items():
        workspace.job(f"{team}-train", QUICK)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "two teams")
    monkeypatch.chdir(repo)
    return made


def test_plan_at_the_root_plans_every_workspace_under_its_directory(teams, argus):
    plan = argus("plan", "--detailed-exitcode")
    assert plan.code == 2, plan.err
    nlp, vision = plan.out.index("== teams/nlp =="), plan.out.index("== teams/vision ==")
    assert nlp < plan.out.index("+ job.nlp-train") < vision < plan.out.index("+ job.vision-train")
    assert "job.vision-train" not in plan.out[:vision]

    gathered = json.loads(argus("plan", "--json").out)
    assert list(gathered) == ["teams/nlp", "teams/vision"]
    assert gathered["teams/vision"]["workspace"] == teams["vision"].name
    assert [c["address"] for c in gathered["teams/nlp"]["changes"] if c["address"].startswith("job.")] == [
        "job.nlp-train"]
    markdown = argus("plan", ".", "--format", "markdown").out
    assert "## teams/nlp" in markdown and "## teams/vision" in markdown

    status = argus("status", "teams/vision", "teams/nlp")  # several DIRs, each a workspace
    assert status.out.index("== teams/nlp ==") < status.out.index("== teams/vision ==")
    assert "nlp-train" in status.out and "vision-train" in status.out


def test_changed_from_plans_only_what_the_branch_touched(teams, argus):
    _git(Path.cwd(), "checkout", "-qb", "pr")
    teams["vision"].job("vision-eval", QUICK)
    _git(Path.cwd(), "add", "-A")
    _git(Path.cwd(), "commit", "-qm", "vision: eval")
    plan = argus("plan", ".", "--changed-from", "main", "--detailed-exitcode")
    assert plan.code == 2 and "== teams/vision ==" in plan.out and "+ job.vision-eval" in plan.out
    assert "teams/nlp" not in plan.out and "nlp-train" not in plan.out
    nothing = argus("plan", "--changed-from", "HEAD", "--detailed-exitcode")
    assert nothing.code == 0 and "No workspace to check." in nothing.err

    _git(Path.cwd(), "rm", "-q", "teams/nlp/argus.yaml")  # the team leaves without stopping its jobs
    _git(Path.cwd(), "commit", "-qm", "nlp leaves")
    refused = argus("plan", "--changed-from", "main", "--json")
    assert refused.code == 1
    gathered = json.loads(refused.out)
    assert gathered["teams/nlp"]["kind"] == "RemovedWorkspace" and "--allow-empty" in gathered["teams/nlp"]["error"]
    assert gathered["teams/vision"]["workspace"] == teams["vision"].name  # the other is still planned


def test_an_error_in_one_workspace_names_its_file_from_the_root_and_the_other_is_still_planned(teams, argus):
    teams["vision"].write("jobs/broken.yaml", "kind: Job\nname: broken\ncluster: nowhere\nworkload: command\n"
                                              "entrypoint: echo\n")
    plan = argus("plan", "--detailed-exitcode")
    assert plan.code == 1
    assert "teams/vision/jobs/broken.yaml:3: cluster: no Cluster named 'nowhere'" in plan.err
    assert "+ job.nlp-train" in plan.out and "1 of 2 workspaces failed: teams/vision." in plan.err
    alone = argus("validate", "teams/vision")  # one DIR from the root: the same names
    assert alone.code == 1 and "teams/vision/jobs/broken.yaml:3:" in alone.err


def test_a_plan_error_names_its_file_from_the_root_and_plan_json_from_the_workspace(teams, argus, tmp_path):
    teams["nlp"].write("code/nowhere.yaml", f"kind: CodeSnapshot\nname: nowhere\ncluster: local\ngit:\n"
                                            f"  url: {tmp_path / 'no-such-repo'}\n  ref: v1\n")
    plan = argus("plan", "teams/nlp")
    assert plan.code == 1 and "teams/nlp/code/nowhere.yaml:5: git failed:" in plan.out
    data = json.loads(argus("plan", "teams/nlp", "--json").out)
    assert [d["where"] for d in data["diagnostics"] if d["severity"] == "error"] == ["code/nowhere.yaml:5"]


def test_out_with_several_workspaces_is_refused_and_writes_nothing(teams, argus, tmp_path):
    out = tmp_path / "both.plan"
    refused = argus("plan", "-o", out)
    assert refused.code == 1 and "saves one workspace's plan" in refused.err and not out.exists()


def test_the_worst_exit_code_wins():
    assert worst([0, 0]) == 0 and worst([0, 2]) == 2 and worst([2, 1, 0]) == 1 and worst([]) == 0
    assert worst([2, 130]) == 130
