"""A monorepo's workspaces share one Cluster definition (`include:`), on real git repositories in temp dirs.

The included file is hostile input like every spec: each attack asserts the harm never happens (nothing
opened outside the repository, no smuggled Job in any desired state), not only that an error printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specs.diagnostics import Where
from specs.errors import SpecError
from specs.load.loader import load_workspace
from tests.support.repos import git

ARGUS = Path(sys.executable).parent / "argus"
CLUSTER = "kind: Cluster\nname: h20\naddress: http://127.0.0.1:1\nshared_root: {root}\n"
SMUGGLED = "---\nkind: Job\nname: sneaky\ncluster: h20\nworkload: command\nentrypoint: [touch, /tmp/pwned]\n"
INCLUDE = "kind: Workspace\nname: {name}\ninclude:\n  - {path}\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """teams/nlp and teams/vision, each with a job on the cluster both include from platform/clusters.yaml."""
    repo = tmp_path / "repo"
    (repo / "platform").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "platform" / "clusters.yaml").write_text(CLUSTER.format(root=tmp_path / "nfs"))
    for team in ("nlp", "vision"):
        (repo / "teams" / team).mkdir(parents=True)
        shared = INCLUDE.format(name=team, path="../../platform/clusters.yaml")
        (repo / "teams" / team / "argus.yaml").write_text(shared)
        (repo / "teams" / team / "train.yaml").write_text(
            "kind: Job\nname: train\ncluster: h20\nworkload: command\nentrypoint: [python3, train.py]\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "two teams, one cluster")
    return repo


def problems(directory: Path) -> list[str]:
    with pytest.raises(SpecError) as raised:
        load_workspace(directory)
    return [str(d) for d in raised.value.diagnostics]


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path the process opens from now on (the real os.open, watched)."""
    paths: list[str] = []
    real = os.open

    def watched(path, flags, *args, **kwargs):
        paths.append(os.fspath(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", watched)
    return paths


def test_two_workspaces_load_the_one_shared_cluster(repo: Path, tmp_path: Path):
    nlp, vision = load_workspace(repo / "teams" / "nlp"), load_workspace(repo / "teams" / "vision")
    assert nlp.clusters == vision.clusters and set(nlp.clusters) == {"h20"}
    assert nlp.shared_roots == vision.shared_roots == {"h20": str(tmp_path / "nfs")}
    assert nlp.sources["cluster.h20"].at("shared_root") == Where("../../platform/clusters.yaml", 4)
    assert nlp.included_files() == ["../../platform/clusters.yaml"]
    assert set(nlp.jobs) == set(vision.jobs) == {"train"}


def test_a_job_smuggled_into_the_shared_file_is_refused_at_its_line(repo: Path):
    shared = repo / "platform" / "clusters.yaml"
    shared.write_text(shared.read_text() + SMUGGLED)
    for team in ("nlp", "vision"):
        found = problems(repo / "teams" / team)
        assert len(found) == 1 and found[0].startswith(
            "../../platform/clusters.yaml:6: kind: a Job in a shared file: only Cluster definitions are shared")


@pytest.mark.parametrize("kind", ["Workspace", "CodeSnapshot", "Nonsense"])
def test_only_clusters_are_taken_from_a_shared_file(repo: Path, kind: str):
    (repo / "platform" / "clusters.yaml").write_text(f"kind: {kind}\nname: other\n")
    found = problems(repo / "teams" / "nlp")
    assert any(p.startswith("../../platform/clusters.yaml:1: kind:") and "only Cluster definitions" in p
               for p in found), found


def test_an_include_outside_the_repository_is_refused_and_never_opened(repo: Path, tmp_path: Path, opened):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd.yaml").write_text(CLUSTER.format(root="/mnt/stolen"))
    (repo / "teams" / "nlp" / "argus.yaml").write_text(INCLUDE.format(name="nlp", path="../../../outside/passwd.yaml"))
    found = problems(repo / "teams" / "nlp")
    assert found[0].startswith("argus.yaml:4: include.0: '../../../outside/passwd.yaml' resolves to "
                               f"{outside / 'passwd.yaml'}, outside the git repository that holds this workspace")
    assert "put the shared file in the workspace's git repository" in found[0]
    assert not [p for p in opened if p.startswith(str(outside))]
    assert not any("stolen" in p for p in found)


def test_a_symlink_inside_the_repository_to_a_file_outside_is_refused_and_never_opened(repo: Path, tmp_path: Path,
                                                                                       opened):
    outside = tmp_path / "outside.yaml"
    outside.write_text(CLUSTER.format(root="/mnt/stolen"))
    shared = repo / "platform" / "clusters.yaml"
    shared.unlink()
    shared.symlink_to(outside)
    found = problems(repo / "teams" / "vision")
    assert found[0].startswith(f"argus.yaml:4: include.0: '../../platform/clusters.yaml' resolves to {outside}, "
                               "outside the git repository")
    assert str(outside) not in opened


def test_a_symlinked_directory_leading_out_is_refused_too(repo: Path, tmp_path: Path, opened):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "clusters.yaml").write_text(CLUSTER.format(root="/mnt/stolen"))
    (repo / "platform" / "clusters.yaml").unlink()
    (repo / "platform").rmdir()
    (repo / "platform").symlink_to(tmp_path / "elsewhere")
    assert "outside the git repository" in problems(repo / "teams" / "nlp")[0]
    assert not [p for p in opened if "elsewhere" in p]


def test_a_fifo_is_refused_without_blocking(repo: Path):
    shared = repo / "platform" / "clusters.yaml"
    shared.unlink()
    os.mkfifo(shared)
    done = subprocess.run([str(ARGUS), "validate", "teams/nlp"], cwd=repo, capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "platform/clusters.yaml:1: not a regular file (a FIFO): argus reads only regular files" in done.stderr


def test_a_huge_shared_file_is_refused_unread(repo: Path, opened):
    shared = repo / "platform" / "clusters.yaml"
    shared.write_text(shared.read_text() + "# padding\n" * 100_000)
    found = problems(repo / "teams" / "nlp")
    assert found[0].startswith("../../platform/clusters.yaml:1: the file is too big")
    assert str(shared) not in opened  # refused on its size, before any byte is read


def test_a_cluster_defined_by_the_workspace_and_included_is_a_duplicate_naming_both(repo: Path, tmp_path: Path):
    (repo / "teams" / "nlp" / "cluster.yaml").write_text(CLUSTER.format(root=tmp_path / "nfs"))
    found = problems(repo / "teams" / "nlp")
    assert found == ["../../platform/clusters.yaml:2: name: duplicate Cluster 'h20' (first defined at cluster.yaml:2)"]


def test_a_relative_shared_root_in_a_shared_file_is_refused(repo: Path):
    (repo / "platform" / "clusters.yaml").write_text(CLUSTER.format(root="shared"))
    found = problems(repo / "teams" / "nlp")
    assert found[0].startswith("../../platform/clusters.yaml:4: shared_root: 'shared' is relative: a shared "
                               "Cluster's shared_root must be absolute")


def test_a_missing_file_is_an_error_at_its_include_line(repo: Path):
    (repo / "platform" / "clusters.yaml").unlink()
    found = problems(repo / "teams" / "nlp")
    assert found[0] == ("argus.yaml:4: include.0: '../../platform/clusters.yaml' does not exist (resolved: "
                        "platform/clusters.yaml); fix the path: it is relative to this workspace's root (the "
                        "directory of argus.yaml)")


def test_without_a_git_repository_nothing_is_included(tmp_path: Path):
    (tmp_path / "platform").mkdir()
    (tmp_path / "platform" / "clusters.yaml").write_text(CLUSTER.format(root="/mnt/shared"))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "argus.yaml").write_text(INCLUDE.format(name="solo", path="../platform/clusters.yaml"))
    found = problems(tmp_path / "ws")
    assert found[0].startswith("argus.yaml:4: include.0: '../platform/clusters.yaml' cannot be included: the "
                               "workspace is in no git repository")


@pytest.mark.parametrize(("path", "why"), [
    ("../../.git/config.yaml", "hidden"),
    ("clusters.yaml", "inside this workspace"),
])
def test_hidden_directories_and_the_workspace_itself_are_refused(repo: Path, path: str, why: str):
    (repo / ".git" / "config.yaml").write_text(CLUSTER.format(root="/mnt/shared"))
    (repo / "teams" / "nlp" / "clusters.yaml").write_text(CLUSTER.format(root="/mnt/shared"))
    (repo / "teams" / "nlp" / "argus.yaml").write_text(INCLUDE.format(name="nlp", path=path))
    assert why in problems(repo / "teams" / "nlp")[0]


def test_the_cli_names_the_shared_file_from_the_repository_root_and_exits_1(repo: Path, argus, monkeypatch):
    shared = repo / "platform" / "clusters.yaml"
    shared.write_text(shared.read_text() + SMUGGLED)
    monkeypatch.chdir(repo)
    for command in ("validate", "plan"):
        done = argus(command, "teams/nlp")
        assert done.code == 1, done.out + done.err
        assert "platform/clusters.yaml:6: kind: a Job in a shared file" in done.err
        assert "../" not in done.err and "sneaky" not in done.out
    monkeypatch.chdir(repo / "teams" / "vision")
    assert "../../platform/clusters.yaml:6: kind: a Job" in argus("validate").err


def test_apply_of_a_smuggled_job_does_nothing(repo: Path, tmp_path: Path, argus):
    shared = repo / "platform" / "clusters.yaml"
    shared.write_text(shared.read_text() + SMUGGLED)
    (tmp_path / "nfs").mkdir()
    done = argus("apply", repo / "teams" / "nlp", "--auto-approve")
    assert done.code == 1 and "only Cluster definitions are shared" in done.err
    assert list((tmp_path / "nfs").iterdir()) == []  # no layout, lock, audit entry or run record: nothing ran
