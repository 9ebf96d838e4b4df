"""argus's pre-commit hook at a monorepo's root, run as pre-commit runs it: its entry with the staged file
names (those its `files` pattern matches) as arguments, from the repository's root. Ray cannot be
imported in that process (a `ray` package that refuses shadows the real one), as in pre-commit's own
environment, which installs argus without the `local` extra."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[2]
GOOD_JOB = "kind: Job\nname: {name}\ncluster: local\nworkload: command\nentrypoint: echo hi\n"
BAD_JOB = "kind: Job\nname: broken\ncluster: local\nworkload: command\nentrypoint: echo hi\ncolour: red\n"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def hook() -> dict:
    [only] = YAML(typ="safe").load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert only["pass_filenames"] is True and only["language"] == "python" and only["require_serial"] is True
    return only


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "mono"
    repo.mkdir()
    _git(repo, "init", "-q")
    for team in ("nlp", "vision"):
        base = repo / "teams" / team
        (base / "jobs").mkdir(parents=True)
        (base / "argus.yaml").write_text(f"kind: Workspace\nname: {team}\n")
        (base / "cluster.yaml").write_text("kind: Cluster\nname: local\naddress: http://127.0.0.1:9\n"
                                           "shared_root: .shared\n")
        (base / "jobs" / "train.yaml").write_text(GOOD_JOB.format(name="train"))
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "ci.yml").write_text("on: push\n")  # a YAML file in no workspace
    return repo


def _run_hook(hook: dict, repo: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """pre-commit's way: the staged names matching `files`, after the entry's words, from the root."""
    staged = _git(repo, "diff", "--staged", "--name-only", "--diff-filter=ACMRTUXB", "-z").split("\0")
    files = [name for name in staged if name and re.search(hook["files"], name)]
    refusing = tmp_path / "no-ray"
    (refusing / "ray").mkdir(parents=True, exist_ok=True)
    (refusing / "ray" / "__init__.py").write_text("raise ImportError('the hook imported ray')\n")
    env = {**os.environ, "PYTHONPATH": str(refusing), "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
           f"{os.environ['PATH']}"}
    return subprocess.run([*shlex.split(hook["entry"]), *files], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_hook_validates_each_touched_workspace_and_names_files_from_the_root(hook, repo, tmp_path):
    _git(repo, "add", "-A")
    clean = _run_hook(hook, repo, tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert "== teams/nlp ==" in clean.stdout and "== teams/vision ==" in clean.stdout
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "two teams")

    (repo / "teams" / "vision" / "jobs" / "x.yaml").write_text(BAD_JOB)
    _git(repo, "add", "teams/vision/jobs/x.yaml")
    caught = _run_hook(hook, repo, tmp_path)
    assert caught.returncode == 1
    assert "teams/vision/jobs/x.yaml:6: colour: unknown key" in caught.stderr, caught.stderr
    assert "the hook imported ray" not in caught.stderr and "Traceback" not in caught.stderr
    assert "== teams/nlp ==" not in caught.stdout  # nlp was not touched: not validated


def test_an_error_in_the_other_workspace_is_caught_too_and_each_is_named(hook, repo, tmp_path):
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "two teams")
    (repo / "teams" / "nlp" / "jobs" / "train.yaml").write_text(GOOD_JOB.format(name="train") + "cluster: gone\n")
    (repo / "teams" / "vision" / "jobs" / "x.yaml").write_text(BAD_JOB)
    _git(repo, "add", "-A")
    caught = _run_hook(hook, repo, tmp_path)
    assert caught.returncode == 1
    assert "teams/nlp/jobs/train.yaml:6" in caught.stderr and "teams/vision/jobs/x.yaml:6" in caught.stderr
    assert "2 of 2 workspaces failed: teams/nlp, teams/vision." in caught.stderr


def test_a_commit_touching_no_workspace_passes(hook, repo, tmp_path):
    (repo / "teams" / "vision" / "jobs" / "x.yaml").write_text(BAD_JOB)  # broken, but not in this commit
    _git(repo, "add", ".github")
    passed = _run_hook(hook, repo, tmp_path)
    assert passed.returncode == 0, passed.stderr
    assert "== teams/vision ==" not in passed.stdout
