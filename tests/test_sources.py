"""Sources and snapshots on real git repositories and directories, without Ray."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from specs.models import CodeSnapshot
from state import snapshots
from state.sources import resolve_source


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
    source = resolve_source(snapshot, str(shared), str(shared))
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
    assert missing.error_field == "git.ref" and "ref 'v9' not found" in missing.error
    nowhere = resolve_source(spec("n", tmp_path / "nope"), str(shared), str(shared))
    assert nowhere.error_field == "git.url" and "does not appear to be a git repository" in nowhere.error


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
