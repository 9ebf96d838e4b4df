"""The generated CI of a repository with several workspaces, its steps run here as GitHub would run them:
a pull request touching two of three teams gets two plans whose artifacts, concurrency groups, environments
and comments never collide."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.github_ci import BIN, action_step, actionlint, evaluate, inputs, load, outputs, run_step, zizmor

ARGUS_ACTION = "$/.github/actions/argus"
MATRIX = "${{ fromJSON(needs.workspaces.outputs.workspaces) }}"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


class Runner:
    """One job of a workflow on a runner: its steps in order, each as GitHub runs it; the argus action's
    install step is the test venv's argus (test_ci_install.py runs that step itself)."""

    def __init__(self, repo: Path, work: Path, context: dict[str, str]):
        self.repo, self.work, self.context = repo, work, dict(context)
        self.action = repo / ".github" / "actions" / "argus"
        self.artifacts: dict[str, Path] = {}
        work.mkdir(parents=True)

    def job(self, job: dict) -> None:
        for step in job["steps"]:
            uses = step.get("uses", "")
            if uses.startswith("actions/checkout@"):
                self.checkout({k: evaluate(v, self.context) for k, v in step.get("with", {}).items()})
            elif uses == ARGUS_ACTION:
                self.argus(step)
            elif uses.startswith("actions/upload-artifact@"):
                name = evaluate(step["with"]["name"], self.context)
                self.artifacts[name] = self.work / step["with"]["path"]
            else:
                done = run_step(step, self.context, self.env(), self.work)
                assert done.returncode == 0, done.stderr

    def checkout(self, given: dict) -> None:
        """actions/checkout: the repository at `ref` (default: the event's commit) into `path`."""
        path = self.work / given.get("path", ".")
        subprocess.run(["git", "clone", "-q", str(self.repo), str(path)], check=True)
        git(path, "checkout", "-q", given.get("ref", self.context["github.sha"]))

    def argus(self, step: dict) -> None:
        given = {k: evaluate(v, self.context) for k, v in step.get("with", {}).items()}
        context = inputs(self.action, given) | self.context | {"steps.install.outputs.argus": str(BIN / "argus")}
        output = self.work / "github-output"
        output.write_text("")
        done = run_step(action_step(self.action, "run"), context, self.env() | {"GITHUB_OUTPUT": str(output)},
                        self.work)
        assert done.returncode == 0, done.stdout + done.stderr
        if "id" in step:
            self.context |= {f"steps.{step['id']}.outputs.{k}": v for k, v in outputs(output).items()}

    def env(self) -> dict[str, str]:
        return {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(self.work), "GITHUB_ACTION_PATH": str(self.action)}


def test_a_pull_request_touching_two_workspaces_gets_a_plan_and_comment_each(tmp_path, argus, ray_cluster,
                                                                            monkeypatch):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    monkeypatch.chdir(repo)
    for team in ("nlp", "vision", "audio"):
        made = argus("init", f"teams/{team}", "--address", ray_cluster.address, "--install-from", "argus-ray==0.1.0")
        assert made.code == 0, made.err
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "three teams, one CI")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-qb", "both-teams")
    for team in ("nlp", "vision"):  # audio is untouched: it gets no job
        (repo / "teams" / team / "jobs" / "train.yaml").write_text(
            "kind: Job\nname: train\ncluster: local\nworkload: command\nentrypoint: [python3, -c, 'print(1)']\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "both teams train")
    head = git(repo, "rev-parse", "HEAD")

    workflow = load(repo / ".github" / "workflows" / "argus-plan.yml")
    event = {"github.event.pull_request.base.sha": base, "github.event.pull_request.head.sha": head,
             "github.event.pull_request.number": "7", "github.sha": base}
    finder = Runner(repo, tmp_path / "runner" / "workspaces", event)
    finder.job(workflow["jobs"]["workspaces"])
    found = json.loads(evaluate(workflow["jobs"]["workspaces"]["outputs"]["workspaces"], finder.context))
    assert not (finder.work / "pr").exists()  # the pull request's files left the runner

    git(repo, "checkout", "-q", head)  # the same `argus workspaces` a person runs, from the repository
    direct = argus("workspaces", ".", "--changed-from", base, "--json")
    assert found == json.loads(direct.out) and [w["dir"] for w in found] == ["teams/nlp", "teams/vision"]

    plan = workflow["jobs"]["plan"]
    assert plan["strategy"]["matrix"]["workspace"] == MATRIX and plan["if"].endswith("!= '[]'")
    apply = load(repo / ".github" / "workflows" / "argus-apply.yml")["jobs"]["apply"]
    names: dict[str, set[str]] = {"artifact": set(), "plan group": set(), "apply group": set(), "environment": set()}
    for workspace in found:
        context = event | {f"matrix.workspace.{k}": v for k, v in workspace.items()}
        job = Runner(repo, tmp_path / "runner" / f"plan-{workspace['slug']}", context)
        job.job(plan)
        [(artifact, plan_file)] = job.artifacts.items()
        assert json.loads(plan_file.read_text())  # the plan this workspace's apply will be given
        comment = (job.work / "argus-out" / "comment.md").read_text()
        assert comment.startswith(f"<!-- argus-plan: {workspace['dir']} -->\n")
        assert f"`{workspace['name']}`" in comment and "job.train" in comment
        other = next(w for w in found if w is not workspace)
        assert other["dir"] not in comment and f"`{other['name']}`" not in comment
        names["artifact"].add(artifact)
        names["plan group"].add(evaluate(plan["concurrency"]["group"], context))
        names["apply group"].add(evaluate(apply["concurrency"]["group"], context))
        names["environment"].add(evaluate(apply["environment"], context))
    assert all(len(kind) == len(found) for kind in names.values()), names  # none collides

    merged = load(repo / ".github" / "workflows" / "argus-apply.yml")["jobs"]["workspaces"]  # the push to main
    lister = Runner(repo, tmp_path / "runner" / "apply-workspaces", {"github.event.before": base, "github.sha": head})
    lister.job(merged)
    assert json.loads(evaluate(merged["outputs"]["workspaces"], lister.context)) == found  # the same matrix
    assert f"argus-plan-teams-nlp-{head}" in names["artifact"]

    linted = actionlint(repo)
    assert linted.returncode == 0 and linted.stdout == "", linted.stdout
    assert json.loads(zizmor(repo / ".github", "--format", "json").stdout) == []


def test_the_listing_leaves_out_a_deleted_workspace_with_a_notice_and_refuses_a_push_with_no_parent(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for team in ("nlp", "vision"):
        (repo / "teams" / team).mkdir(parents=True)
        (repo / "teams" / team / "argus.yaml").write_text(f"kind: Workspace\nname: {team}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two teams")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "teams" / "vision" / "argus.yaml").unlink()
    (repo / "teams" / "nlp" / "notes.md").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "vision leaves")
    script = Path(__file__).resolve().parents[2] / "reconcile" / "templates" / "github" / "run.sh"
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "OUT_DIR": str(tmp_path / "out"),
           "ARGUS": str(BIN / "argus")}

    listed = subprocess.run(["bash", str(script), "workspaces", str(repo)], capture_output=True, text=True,
                            env=env | {"CHANGED_FROM": base})
    assert listed.returncode == 0, listed.stderr
    assert [w["dir"] for w in json.loads((tmp_path / "out" / "workspaces.json").read_text())] == ["teams/nlp"]
    assert '::notice::"teams/vision": its argus.yaml was deleted' in listed.stdout

    orphan = subprocess.run(["bash", str(script), "workspaces", str(repo)], capture_output=True, text=True,
                            env=env | {"CHANGED_FROM": "0" * 40})
    assert orphan.returncode == 1 and "no commit before it" in orphan.stderr
    assert not (tmp_path / "out" / "workspaces.json").exists()  # no older list passed on as this one's


def test_a_hostile_directory_name_cannot_close_the_comments_marker_or_span_two_lines(tmp_path):
    script = Path(__file__).resolve().parents[2] / "reconcile" / "templates" / "github" / "run.sh"
    name = "x --> <img src=y>\n<!-- argus-plan: teams/nlp -->"
    env = {"PATH": "/usr/bin:/bin", "OUT_DIR": str(tmp_path / "out"), "ARGUS": "false", "ARGUS_WORKSPACE": name}
    failed = subprocess.run(["bash", str(script), "validate", str(tmp_path)], capture_output=True, text=True, env=env)
    assert failed.returncode == 1  # validate failed: its comment says so, under the marker
    marker = (tmp_path / "out" / "comment.md").read_text().split("\n", 1)[0]
    assert marker.startswith("<!-- argus-plan: x ") and marker.endswith(" -->") and marker.count("-->") == 1
    assert "<!-- argus-plan: teams/nlp -->" not in marker  # never another workspace's comment to update
