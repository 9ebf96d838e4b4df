"""CI and pre-commit with a shared cluster file (`include:`): a change to it touches every workspace that
includes it, on a real git repository with two teams and a third that does not include it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specs.load.workspaces import affected
from tests.support.repos import git

CLUSTER = "kind: Cluster\nname: h20\naddress: http://127.0.0.1:1\nshared_root: /mnt/shared\n"
JOB = "kind: Job\nname: train\ncluster: h20\nworkload: command\nentrypoint: [python3, train.py]\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "platform").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "platform" / "clusters.yaml").write_text(CLUSTER)
    for team, include in (("nlp", True), ("vision", True), ("audio", False)):
        (repo / "teams" / team).mkdir(parents=True)
        listed = "include: [../../platform/clusters.yaml]\n" if include else ""
        (repo / "teams" / team / "argus.yaml").write_text(f"kind: Workspace\nname: {team}\n{listed}")
        (repo / "teams" / team / "train.yaml").write_text(JOB)
    (repo / "teams" / "audio" / "cluster.yaml").write_text(CLUSTER)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "three teams, two share a cluster")
    git(repo, "checkout", "-qb", "pr")
    return repo


def listed(argus, *args) -> list[str]:
    done = argus("workspaces", *args, "--json")
    assert done.code == 0, done.err
    return [row["dir"] for row in json.loads(done.out)]


def test_a_change_to_the_shared_file_affects_every_workspace_including_it(repo: Path, argus, monkeypatch):
    (repo / "platform" / "clusters.yaml").write_text(CLUSTER.replace("127.0.0.1:1", "127.0.0.1:2"))
    git(repo, "commit", "-qam", "the shared cluster moves")
    monkeypatch.chdir(repo)
    assert listed(argus, "--changed-from", "main") == ["teams/nlp", "teams/vision"]
    assert listed(argus, "teams", "--changed-from", "main") == ["teams/nlp", "teams/vision"]  # the file lies outside
    checked = argus("validate", "--changed-from", "main", "--json")
    assert checked.code == 0 and sorted(json.loads(checked.out)) == ["teams/nlp", "teams/vision"]


def test_a_change_through_a_symlink_or_a_deletion_affects_them_too(repo: Path):
    (repo / "platform" / "real.yaml").write_text(CLUSTER)
    (repo / "platform" / "clusters.yaml").unlink()
    (repo / "platform" / "clusters.yaml").symlink_to("real.yaml")
    both = [repo / "teams" / "nlp", repo / "teams" / "vision"]
    assert affected(repo, ["platform/real.yaml"]) == both  # what git names when the target is edited
    assert affected(repo, ["platform/clusters.yaml"]) == both  # the link itself, retargeted or deleted
    assert affected(repo, ["platform"]) == both  # a directory replaced
    assert affected(repo, ["platform/other.yaml", "README.md"]) == []


def test_an_include_leading_out_of_the_repository_marks_nothing(repo: Path, tmp_path: Path):
    (tmp_path / "outside.yaml").write_text(CLUSTER)
    (repo / "teams" / "nlp" / "argus.yaml").write_text("kind: Workspace\nname: nlp\ninclude: [../../../outside.yaml]\n")
    assert affected(repo, [tmp_path / "outside.yaml"]) == []  # CI plans it when its argus.yaml changes, and fails


def test_pre_commit_validates_the_workspaces_a_staged_shared_file_is_included_by(repo: Path, argus, monkeypatch):
    monkeypatch.chdir(repo)
    good = argus("validate", "--files", "platform/clusters.yaml")
    assert good.code == 0, good.err
    assert [line for line in good.out.splitlines() if line.startswith("==")] == ["== teams/nlp ==",
                                                                              "== teams/vision =="]
    (repo / "platform" / "clusters.yaml").write_text(CLUSTER + "---\n" + JOB)
    bad = argus("validate", "--files", "platform/clusters.yaml")
    assert bad.code == 1
    assert bad.err.count("platform/clusters.yaml:6: kind: a Job in a shared file") == 2
