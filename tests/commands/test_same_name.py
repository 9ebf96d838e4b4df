"""One name, one workspace, in one checkout: a copied team directory (same `name:`) is an error naming both
`name:` lines, for `argus workspaces`, `validate` and `plan`, alone or over the repository; `argus serve` of
the repository refuses only the two and serves the others."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.workspace import make_workspace

NLP = "teams/nlp/argus.yaml:2"
COPY = "teams/nlp-copy/argus.yaml:2"
"""Where each `name:` is (tests.support.workspace writes `kind:` first)."""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path, ray_cluster) -> Path:
    """Two teams on the session's cluster, and a copy of nlp's directory left with nlp's name."""
    repo = tmp_path / "repo"
    for name in ("nlp", "vision"):
        make_workspace(repo / "teams" / name, f"same-name-{name}", ray_cluster.address)
    shutil.copytree(repo / "teams" / "nlp", repo / "teams" / "nlp-copy")
    _git(repo, "init", "-q", "-b", "main")
    return repo


def _names_both(text: str) -> bool:
    return NLP in text and COPY in text


def test_workspaces_of_the_repository_names_both_name_lines_and_exits_1(repo, argus):
    listed = argus("workspaces", repo, "--json")
    assert listed.code == 1
    assert _names_both(listed.out) and "same-name-nlp" in listed.out
    human = argus("workspaces", repo / "teams" / "vision")  # any ROOT of the repository: the copy is refused
    assert human.code == 1 and _names_both(human.err), human.err


def test_validate_refuses_the_two_and_checks_the_others(repo, argus, monkeypatch):
    monkeypatch.chdir(repo)
    result = argus("validate", ".")
    assert result.code == 1
    assert "Valid: workspace 'same-name-vision'" in result.out
    assert "2 of 3 workspaces failed: teams/nlp, teams/nlp-copy" in result.err
    assert _names_both(result.err), result.err
    alone = argus("validate", "teams/nlp-copy")  # the copy alone is refused too, naming the original
    assert alone.code == 1 and _names_both(alone.err), alone.err
    assert argus("validate", "teams/vision").code == 0


def test_validate_of_the_files_pre_commit_names_refuses_the_copy(repo, argus, monkeypatch):
    monkeypatch.chdir(repo)
    result = argus("validate", "--files", "teams/nlp-copy/argus.yaml", "teams/vision/cluster.yaml")
    assert result.code == 1 and _names_both(result.err), result.err
    assert "Valid: workspace 'same-name-vision'" in result.out


def test_plan_refuses_the_copy_before_reading_any_cluster(repo, argus, monkeypatch):
    monkeypatch.chdir(repo)
    alone = argus("plan", "teams/nlp-copy")
    assert alone.code == 1 and _names_both(alone.err), alone.err
    every = argus("plan", ".", "--format", "json")
    assert every.code == 1
    assert "SameName" in every.out and "same-name-vision" in every.out
    assert not (repo / "teams" / "nlp-copy" / ".shared").exists() or not any(
        (repo / "teams" / "nlp-copy" / ".shared").rglob("*.json")), "the copy's plan wrote nothing"


def test_serve_of_the_repository_serves_the_others_and_refuses_the_two(repo, argus):
    result = argus("serve", repo, "--once")
    assert result.code == 0, result.err
    served = re.findall(r"workspace=(\S+)", result.err)
    assert set(served) == {"same-name-vision"}, result.err
    assert "not serving teams/nlp-copy" in result.err and "not serving teams/nlp:" in result.err
    assert _names_both(result.err)


def test_serve_of_only_the_two_is_an_error(repo, argus):
    result = argus("serve", repo / "teams" / "nlp", repo / "teams" / "nlp-copy", "--once")
    assert result.code == 1
    assert "same-name-nlp" in result.err
