"""`argus workspaces`: the list CI builds its matrix from, on a real git repository with two teams."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "ci@example.com")
    _git(repo, "config", "user.name", "ci")
    for team in ("nlp", "vision"):
        (repo / "teams" / team / "jobs").mkdir(parents=True)
        (repo / "teams" / team / "argus.yaml").write_text(f"kind: Workspace\nname: {team}\n")
        (repo / "teams" / team / "jobs" / "a.yaml").write_text("kind: Job\n")
    (repo / "README.md").write_text("two teams\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "two teams")
    return repo


def test_json_lists_every_workspace_relative_to_the_repository(repo, argus, monkeypatch):
    expected = [{"dir": "teams/nlp", "name": "nlp", "slug": "teams-nlp"},
                {"dir": "teams/vision", "name": "vision", "slug": "teams-vision"}]
    listed = argus("workspaces", repo, "--json")
    assert listed.code == 0 and json.loads(listed.out) == expected
    monkeypatch.chdir(repo / "teams" / "vision")  # from anywhere in the repository, the same dirs
    assert json.loads(argus("workspaces", "..", "--json").out) == expected
    human = argus("workspaces", "..")
    assert human.out.splitlines() == ["teams/nlp  (workspace 'nlp')", "teams/vision  (workspace 'vision')"]


def test_changed_from_lists_only_what_the_branch_touched(repo, argus, monkeypatch):
    monkeypatch.chdir(repo)
    _git(repo, "checkout", "-qb", "pr")
    (repo / "teams" / "vision" / "jobs" / "b.yaml").write_text("kind: Job\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "vision only")
    _git(repo, "checkout", "-q", "main")  # main moves on meanwhile: REF...HEAD counts from the merge base
    (repo / "teams" / "nlp" / "jobs" / "c.yaml").write_text("kind: Job\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "nlp on main")
    _git(repo, "checkout", "-q", "pr")
    changed = argus("workspaces", "--changed-from", "main", "--json")
    assert changed.code == 0, changed.err
    assert json.loads(changed.out) == [{"dir": "teams/vision", "name": "vision", "slug": "teams-vision"}]

    _git(repo, "rm", "-rq", "teams/nlp")
    _git(repo, "commit", "-qm", "nlp leaves")
    both = json.loads(argus("workspaces", "--changed-from", "main", "--json").out)
    assert both == [{"dir": "teams/nlp", "name": "", "slug": "teams-nlp", "removed": True},
                    {"dir": "teams/vision", "name": "vision", "slug": "teams-vision"}]
    assert json.loads(argus("workspaces", "--changed-from", "HEAD", "--json").out) == []
    assert argus("workspaces", "--changed-from", "HEAD").out == "No workspace changed since HEAD.\n"


def test_changed_from_refuses_what_git_would_read_as_an_option(repo, argus, monkeypatch, tmp_path):
    monkeypatch.chdir(repo)
    marker = tmp_path / "written"
    refused = argus("workspaces", f"--changed-from=--output={marker}", "--json")
    assert refused.code == 1 and "not a git revision" in refused.err
    assert not marker.exists()
    unknown = argus("workspaces", "--changed-from", "no-such-branch")
    assert unknown.code == 1 and "git diff no-such-branch...HEAD" in unknown.err and "fetch-depth: 0" in unknown.err


def test_changed_from_outside_git_is_refused(tmp_path, argus):
    (tmp_path / "argus.yaml").write_text("kind: Workspace\nname: solo\n")
    assert json.loads(argus("workspaces", tmp_path, "--json").out) == [{"dir": ".", "name": "solo", "slug": "root"}]
    refused = argus("workspaces", tmp_path, "--changed-from", "main")
    assert refused.code == 1 and "needs a git repository" in refused.err


def test_a_directory_name_cannot_forge_lines_of_the_listing_or_of_a_heading(tmp_path, argus, monkeypatch):
    evil = tmp_path / "teams" / "x\n== teams/nlp ==\x1b[2J"
    evil.mkdir(parents=True)
    (evil / "argus.yaml").write_text("kind: Workspace\nname: evil\n")
    listed = argus("workspaces", tmp_path)
    assert listed.out.count("\n") == 1 and "\x1b" not in listed.out
    monkeypatch.chdir(tmp_path)
    checked = argus("validate", ".", "--json")  # a repository root: keyed by the directory, as data
    assert list(json.loads(checked.out)) == ["teams/x\n== teams/nlp ==\x1b[2J"]
    headed = argus("validate", ".")
    assert headed.out.splitlines()[0] == "== teams/x\\n== teams/nlp ==\\u001b[2J ==" and "\x1b" not in headed.out


def test_validate_changed_from_checks_only_the_touched_workspaces(repo, argus, monkeypatch):
    monkeypatch.chdir(repo)
    (repo / "teams" / "nlp" / "jobs" / "a.yaml").unlink()  # nlp becomes valid; vision's job stays broken
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "nlp: no job yet")
    checked = argus("validate", "--changed-from", "HEAD~1", "--json")
    assert checked.code == 0, checked.out
    assert json.loads(checked.out) == {"teams/nlp": {"valid": True, "workspace": "nlp",
                                                     "counts": {"clusters": 0, "code_snapshots": 0, "jobs": 0}}}
    everything = argus("validate")  # the root: every workspace, vision's broken job named from the root
    assert everything.code == 1 and "teams/vision/jobs/a.yaml:1" in everything.err


def test_a_slug_is_the_same_whichever_workspaces_a_diff_lists(repo, argus, monkeypatch):
    """teams/nlp and teams-nlp would share `teams-nlp`: each gets its hash whether or not the other changed, so a
    plan run and the apply run after it (each listing its own diff) name one workspace's artifact alike."""
    monkeypatch.chdir(repo)
    (repo / "teams-nlp").mkdir()
    (repo / "teams-nlp" / "argus.yaml").write_text("kind: Workspace\nname: nlp2\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "a look-alike")
    every = {row["dir"]: row["slug"] for row in json.loads(argus("workspaces", "--json").out)}
    assert every["teams/nlp"] != every["teams-nlp"] and every["teams/nlp"].startswith("teams-nlp-")
    (repo / "teams" / "nlp" / "jobs" / "d.yaml").write_text("kind: Job\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "nlp alone")
    alone = json.loads(argus("workspaces", "--changed-from", "HEAD~1", "--json").out)
    assert [(row["dir"], row["slug"]) for row in alone] == [("teams/nlp", every["teams/nlp"])]
