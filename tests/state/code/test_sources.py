"""Sources and snapshots on real git repositories and directories, without Ray."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from specs.kinds.models import CodeSnapshot
from state.code import snapshots, sources
from state.code.cache import cache_root
from state.code.sources import resolve_source


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args], cwd=repo,
                          check=True, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with the awkward cases: symlinks (to a file and a dir), an executable, an empty
    file, nesting, and a file name that is not UTF-8."""
    path = tmp_path / "src"
    (path / "pkg" / "deep").mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "pkg" / "__init__.py").write_text("")
    (path / "pkg" / "deep" / "mod.py").write_text("X = 1\n")
    (path / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (path / "run.sh").chmod(0o755)
    os.symlink("pkg/deep/mod.py", path / "link-to-file")
    os.symlink("pkg", path / "link-to-dir")
    (path / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin-1 name\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "one")
    git(path, "tag", "v1")
    return path


def spec(name: str, url: Path, ref: str = "v1") -> CodeSnapshot:
    return CodeSnapshot(kind="CodeSnapshot", name=name, cluster="c", git={"url": str(url), "ref": ref})


def make(snapshot: CodeSnapshot, shared: Path) -> Path:
    source = resolve_source(snapshot, str(shared), cache_root())
    assert source.error is None, source.error
    target = shared / "common" / "code" / snapshot.repo_dir / snapshot.name
    assert snapshots.materialize(snapshot, source, "ws", str(shared), str(shared), target) == "created"
    return target


def test_plan_time_digest_matches_the_exported_directory(repo: Path, tmp_path: Path):
    shared = tmp_path / "shared"
    target = make(spec("awkward", repo), shared)
    manifest = snapshots.read_manifest(target)
    assert manifest.files == 6 and manifest.commit == git(repo, "rev-parse", "v1")
    assert snapshots.verify(target, manifest) is None
    assert os.readlink(target / "link-to-dir") == "pkg"
    assert os.access(target / "run.sh", os.X_OK)
    assert target.stat().st_mode & 0o777 == 0o555 and (target / "pkg").stat().st_mode & 0o777 == 0o555


def test_head_means_the_sources_head_and_bad_refs_say_so(repo: Path, tmp_path: Path):
    shared = tmp_path / "shared"
    assert resolve_source(spec("h", repo, "HEAD"), str(shared), str(shared)).commit == git(repo, "rev-parse", "HEAD")
    missing = resolve_source(spec("m", repo, "v9"), str(shared), str(shared))
    assert (missing.error.address, missing.error.field) == ("code.m", "git.ref")
    assert missing.error.where is None and "ref 'v9' not found" in missing.error.message  # the planner locates it
    nowhere = resolve_source(spec("n", tmp_path / "nope"), str(shared), str(shared))
    assert nowhere.error.field == "git.url" and "does not appear to be a git repository" in nowhere.error.message


def test_a_damaged_stored_file_is_not_linked_into_a_new_snapshot(repo: Path, tmp_path: Path):
    shared = tmp_path / "shared"
    first = make(spec("first", repo), shared)
    victim = first / "pkg" / "deep" / "mod.py"
    victim.chmod(0o644)
    victim.write_text("X = 'evil'\n")  # through the hard link: the stored object changes too
    second = make(spec("second", repo), shared)
    assert snapshots.verify(second, snapshots.read_manifest(second)) is None
    assert "no longer match" in snapshots.verify(first, snapshots.read_manifest(first))


def test_prune_removes_sealed_snapshots(repo: Path, tmp_path: Path):
    target = make(spec("gone", repo), tmp_path / "shared")
    snapshots.delete(str(tmp_path / "shared"), target.relative_to(tmp_path / "shared").as_posix())
    assert not target.exists() and not list(target.parent.glob(".tmp-*"))


def path_spec(where: Path, allow_dirty: bool = False) -> CodeSnapshot:
    return CodeSnapshot(kind="CodeSnapshot", name="wc", cluster="c", path=str(where), allow_dirty=allow_dirty)


def test_a_working_copy_is_dirty_only_when_its_files_differ_from_head(repo: Path, tmp_path: Path):
    """Decided by content digests (no `git status`): timestamps and ignored files do not count."""
    shared = str(tmp_path / "shared")
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-qm", "ignore logs")

    def dirty() -> bool:
        return resolve_source(path_spec(repo, allow_dirty=True), str(tmp_path), shared).dirty

    os.utime(repo / "run.sh", (1, 1))
    (repo / "train.log").write_text("ignored\n")
    assert not dirty()
    (repo / "new.py").write_text("untracked\n")
    assert dirty()
    (repo / "new.py").unlink()
    (repo / "run.sh").chmod(0o644)
    assert dirty()
    (repo / "run.sh").chmod(0o755)
    (repo / "pkg" / "__init__.py").unlink()
    assert dirty()
    git(repo, "checkout", "-q", "--", "pkg/__init__.py")
    clean = resolve_source(path_spec(repo), str(tmp_path), shared)
    assert clean.error is None and not clean.dirty and clean.commit == git(repo, "rev-parse", "HEAD")


def test_a_linked_worktree_is_a_working_copy(repo: Path, tmp_path: Path):
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked), "v1")
    state = resolve_source(path_spec(linked), str(tmp_path), str(tmp_path / "shared"))
    assert state.error is None and state.commit == git(repo, "rev-parse", "v1")
    same = resolve_source(spec("g", repo), str(tmp_path), str(tmp_path / "shared"))
    assert state.digest == same.digest


def test_a_commit_id_must_be_on_a_branch_or_tag_of_the_source(repo: Path, tmp_path: Path):
    shared = tmp_path / "shared"
    v1 = git(repo, "rev-parse", "v1")
    assert resolve_source(spec("id", repo, v1), str(tmp_path), str(shared)).commit == v1
    stray = git(repo, "commit-tree", f"{v1}^{{tree}}", "-m", "on no branch")
    cache = sources.checked_cache(str(shared), str(repo))
    shutil.copytree(repo / ".git" / "objects", cache / "objects", dirs_exist_ok=True)  # planted in the cache
    refused = resolve_source(spec("stray", repo, stray), str(tmp_path), str(shared))
    assert refused.error.field == "git.ref" and "not found" in refused.error.message


def test_the_git_cache_is_kept_between_fetches(repo: Path, tmp_path: Path):
    shared = tmp_path / "shared"
    first = resolve_source(spec("a", repo), str(tmp_path), str(shared))
    cache = sources.checked_cache(str(shared), str(repo))
    packs = sorted(p.name for p in (cache / "objects").rglob("*") if p.is_file())
    assert b"refs/tags/v1" in (cache / "packed-refs").read_bytes()
    again = resolve_source(spec("a", repo), str(tmp_path), str(shared))
    assert (first.commit, first.digest) == (again.commit, again.digest)
    assert sorted(p.name for p in (cache / "objects").rglob("*") if p.is_file()) == packs  # nothing fetched again


def test_the_workspace_commit_looks_only_at_the_workspace_directory(repo: Path):
    from state.code.gitinfo import desired_commit

    workspace = repo / "pkg"
    assert desired_commit(str(workspace)) == desired_commit(str(repo))
    assert not desired_commit(str(workspace)).dirty
    (repo / "run.sh").write_text("#!/bin/sh\necho changed\n")
    assert desired_commit(str(repo)).dirty and not desired_commit(str(workspace)).dirty
    (workspace / "extra.py").write_text("")
    assert desired_commit(str(workspace)).dirty


def test_an_included_file_edited_but_not_committed_makes_the_workspace_dirty(repo: Path):
    from state.code.gitinfo import desired_commit

    workspace = repo / "pkg"
    (repo / "run.sh").write_text("#!/bin/sh\necho changed\n")  # the file it includes (a shared cluster, say)
    assert not desired_commit(str(workspace)).dirty
    assert desired_commit(str(workspace), ["../run.sh"]).dirty
    (repo / "run.sh").write_text("#!/bin/sh\necho hi\n")  # as committed again: the same content is clean
    assert not desired_commit(str(workspace), ["../run.sh"]).dirty
