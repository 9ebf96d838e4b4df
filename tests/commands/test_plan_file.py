"""A saved plan outside `argus plan`: `argus show PLAN.json` renders it with no cluster, and `argus apply
PLAN.json` finds the workspace the plan names in the repository it runs in, refusing any other."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reconcile import saved
from reconcile.commands.plan_file import workspace_of
from reconcile.model import Action, Change, Plan
from specs.errors import ArgusError
from state.code.repository import location_of, normalized
from tests.support.cluster import QUICK, jobs_of

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
TOKEN_URL = "https://x-access-token:ghs_SECRET123@github.com/acme/ml.git"


def git(repo: Path, *args: str) -> None:
    subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True)


def repository(root: Path, origin: str = TOKEN_URL, workspaces: tuple[str, ...] = ("teams/nlp",)) -> Path:
    """A real git repository with a workspace (argus.yaml) in each directory named."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "remote", "add", "origin", origin)
    for rel in workspaces:
        (root / rel).mkdir(parents=True)
        (root / rel / "argus.yaml").write_text(f"kind: Workspace\nname: {rel.rsplit('/', 1)[-1]}\n")
    return root


def stored(path: Path, workspace_dir: str = "teams/nlp", origin: str = "github.com/acme/ml", **fields) -> dict:
    plan = Plan(workspace="nlp", changes=(
        Change(address="job.bert", action=Action.SUBMIT, reason="never ran <b>x</b>"),
        Change(address="job.gpt", action=Action.NOOP, reason="gpt-a1 is RUNNING")))
    values = {"format_version": saved.FORMAT_VERSION, "argus_version": "0.1.0", "workspace": "nlp",
              "plan_id": "3f2a9c1b7d0e", "created_at": "2026-11-22T09:00:00+00:00", "desired_digest": "d" * 64,
              "commit": "c" * 40, "plan": plan, "workspace_dir": workspace_dir, "repository": origin, **fields}
    saved.write(path, saved.SavedPlan(**values))
    return json.loads(path.read_text())


def reseal(path: Path, data: dict) -> None:
    """What a forger who read saved.py does after editing: recompute the plain seal."""
    path.write_text(json.dumps({**data, "digest": saved.written_digest(data)}))


def test_show_renders_a_saved_plan_in_each_format_without_a_cluster(tmp_path, argus):
    stored(tmp_path / "plan.json")
    human = argus("show", tmp_path / "plan.json")
    as_json = argus("show", tmp_path / "plan.json", "--format", "json")
    markdown = argus("show", tmp_path / "plan.json", "--format", "markdown")
    assert human.code == 0, human.err
    assert human.out.startswith("Saved plan 3f2a9c1b7d0e of workspace nlp at teams/nlp of github.com/acme/ml, "
                                "made 2026-11-22T09:00:00+00:00 at cccccccccccc by argus 0.1.0.")
    assert "job.bert" in human.out and "never ran" in human.out
    data = json.loads(as_json.out)
    assert data["workspace"] == "nlp" and data["summary"]["submit"] == 1
    assert [c["address"] for c in data["changes"]] == ["job.bert", "job.gpt"]
    assert markdown.code == 0 and "### argus plan for `nlp`" in markdown.out and "&lt;b&gt;" in markdown.out


def test_show_refuses_a_tampered_or_invalid_file_and_changes_nothing(tmp_path, argus, monkeypatch):
    data = stored(tmp_path / "plan.json")
    data["plan"]["changes"][0]["reason"] = "reviewed, honest"
    (tmp_path / "edited.json").write_text(json.dumps(data))
    edited = argus("show", tmp_path / "edited.json")
    assert edited.code == 1 and "was edited after argus wrote it" in edited.err and edited.out == ""
    data["plan"]["changes"][0]["steps"] = [{"kind": "mkdir", "cluster": "local", "path": "/etc/argus-was-here"}]
    (tmp_path / "invalid.json").write_text(json.dumps(data))  # its shape is refused before its seal is read
    invalid = argus("show", tmp_path / "invalid.json", "--json")
    assert invalid.code == 1 and "is not a valid saved plan" in json.loads(invalid.out)["error"]
    (tmp_path / "junk.json").write_text("{not json")
    junk = argus("show", tmp_path / "junk.json")
    assert junk.code == 1 and "Cannot read the saved plan" in junk.err
    missing = argus("show", tmp_path / "nowhere.json")
    assert missing.code == 1 and "nowhere.json" in missing.err

    data["plan"]["changes"][0]["steps"] = [{"kind": "mkdir", "cluster": "local", "path": "jobs"}]
    reseal(tmp_path / "forged.json", data)  # a plain seal can be recomputed: shown, and still only shown
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    forged = argus("show", tmp_path / "forged.json")
    assert forged.code == 0 and "job.bert" in forged.out, forged.err
    assert sorted(tmp_path.rglob("*")) == before, "show never carries out a step"


def test_a_plan_records_where_its_workspace_is_and_never_a_token(tmp_path):
    repo = repository(tmp_path / "repo")
    where = location_of(repo / "teams" / "nlp")
    assert (where.repository, where.directory) == ("github.com/acme/ml", "teams/nlp")
    assert location_of(repo).directory == "." and location_of(tmp_path).directory == ""
    assert normalized("git@GitHub.com:acme/ml.git") == normalized(TOKEN_URL) == "github.com/acme/ml"
    assert normalized("/srv/git/ml") == "", "a local path is no identity across machines"


def test_apply_finds_the_workspace_from_the_current_repository_or_the_plan_files(tmp_path, monkeypatch):
    repo = repository(tmp_path / "repo", workspaces=("teams/nlp", "teams/vision"))
    plan_file = repo / "plan.json"
    stored(plan_file)
    record = saved.read(plan_file)
    monkeypatch.chdir(repo / "teams" / "vision")
    assert workspace_of(plan_file, record, Path.cwd()) == (repo / "teams" / "nlp").resolve()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert workspace_of(plan_file, record, elsewhere) == (repo / "teams" / "nlp").resolve(), "the plan file's repo"
    stored(elsewhere / "plan.json")
    with pytest.raises(ArgusError, match="neither the current directory nor the plan file is in a git repository"):
        workspace_of(elsewhere / "plan.json", saved.read(elsewhere / "plan.json"), elsewhere)
    other = repository(tmp_path / "other", origin="git@github.com:acme/other.git")
    with pytest.raises(ArgusError, match="is a checkout of github.com/acme/other: run it in a checkout of "
                                         "github.com/acme/ml, or pass --dir"):
        workspace_of(plan_file, record, other)
    old = saved.SavedPlan.model_validate({**json.loads(plan_file.read_text()), "workspace_dir": ""})
    assert workspace_of(plan_file, old, elsewhere) == elsewhere, "no recorded directory: the current one"


FORGED_DIRS = ["../outside", "/etc", "teams/../../outside", "link", "teams\\nlp", "teams/x", "teams"]


@pytest.mark.parametrize("planted", FORGED_DIRS)
def test_a_forged_workspace_directory_never_leaves_the_repository(tmp_path, planted):
    repo = repository(tmp_path / "repo")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "argus.yaml").write_text("kind: Workspace\nname: nlp\n")
    (repo / "link").symlink_to(outside)
    data = stored(repo / "plan.json")
    reseal(repo / "plan.json", {**data, "workspace_dir": planted})
    with pytest.raises(ArgusError, match="has no such workspace directory"):
        workspace_of(repo / "plan.json", saved.read(repo / "plan.json"), repo)


def test_an_older_format_is_read_and_cannot_smuggle_a_location(tmp_path):
    data = stored(tmp_path / "plan.json")
    old = {k: v for k, v in data.items() if k not in saved.LOCATION_FIELDS}
    reseal(tmp_path / "v2.json", {**old, "format_version": 2})
    assert saved.read(tmp_path / "v2.json").workspace_dir == ""
    v2 = json.loads((tmp_path / "v2.json").read_text())
    (tmp_path / "smuggled.json").write_text(json.dumps({**v2, "workspace_dir": "../x", "repository": "evil/x"}))
    smuggled = saved.read(tmp_path / "smuggled.json")
    assert (smuggled.workspace_dir, smuggled.repository) == ("", ""), "a version 2 file has no location to believe"


def test_apply_of_a_plan_file_from_the_repository_root_and_from_elsewhere(workspace, argus, tmp_path, monkeypatch):
    """workspace.root is tmp_path/ws: tmp_path is the repository, ws its workspace."""
    workspace.job("located", QUICK)
    (tmp_path / ".gitignore").write_text("ws/.shared/\n*.json\n")
    repository(tmp_path, workspaces=())
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "one")
    made = argus("plan", workspace.root, "-o", tmp_path / "plan.json")
    assert made.code == 0, made.out + made.err
    data = json.loads((tmp_path / "plan.json").read_text())
    assert (data["format_version"], data["workspace_dir"], data["repository"]) == (3, "ws", "github.com/acme/ml")
    assert "SECRET" not in (tmp_path / "plan.json").read_text(), "the origin's token is never recorded"

    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(tmp_path), str(clone))
    (clone / "ws" / "argus.yaml").write_text("kind: Workspace\nname: not-the-planned-one\n")
    monkeypatch.chdir(clone)
    wrong = argus("apply", tmp_path / "plan.json")
    assert wrong.code == 1 and f"is a plan of workspace {workspace.name!r}, not of 'not-the-planned-one'" in wrong.err
    assert jobs_of(workspace.address, workspace.name) == [], "the refused plan submitted nothing"

    monkeypatch.chdir(tmp_path)
    applied = argus("apply", "plan.json")
    assert applied.code == 0, applied.out + applied.err
    assert f"applying it at {workspace.root.resolve()}" in applied.err
    [job] = jobs_of(workspace.address, workspace.name)
    assert job.metadata["argus.plan"] == data["plan_id"]
    monkeypatch.chdir(tmp_path.parent)  # outside any repository: the plan file's repository is used
    again = argus("apply", tmp_path / "plan.json")
    assert again.code == 0 and "No changes." in again.out, again.out + again.err
    assert len(jobs_of(workspace.address, workspace.name)) == 1
