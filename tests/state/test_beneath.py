"""Symlinks planted on the shared filesystem never lead argus's deletes, chmods or exports elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from specs.errors import ArgusError
from specs.kinds.models import CodeSnapshot
from state import beneath
from state.code import snapshots
from state.code.cache import cache_root
from state.code.sources import resolve_source


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A directory outside the shared root that argus must never touch."""
    path = tmp_path / "victim"
    (path / "inner").mkdir(parents=True)
    (path / "keep.txt").write_text("mine\n")
    path.chmod(0o700)
    (path / "inner").chmod(0o700)
    return path


def source_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "src"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    (repo / "a.py").write_text("A = 1\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "c"], cwd=repo, check=True)
    return repo


def untouched(victim: Path) -> bool:
    modes = {victim.stat().st_mode & 0o777, (victim / "inner").stat().st_mode & 0o777}
    return modes == {0o700} and (victim / "keep.txt").read_text() == "mine\n"


def test_a_planted_leftover_symlink_is_removed_not_followed(tmp_path: Path, victim: Path):
    repo = source_repo(tmp_path)
    shared = tmp_path / "shared"
    spec = CodeSnapshot(kind="CodeSnapshot", name="foo", cluster="c", git={"url": str(repo), "ref": "main"})
    parent = shared / "common" / "code" / "src"
    parent.mkdir(parents=True)
    os.symlink(victim, parent / ".tmp-foo.planted")
    source = resolve_source(spec, str(shared), cache_root())
    assert snapshots.materialize(spec, source, "ws", str(shared), str(shared), parent / "foo") == "created"
    assert untouched(victim) and not (parent / ".tmp-foo.planted").exists()


def test_an_export_through_a_symlinked_repo_directory_is_refused(tmp_path: Path, victim: Path):
    shared = tmp_path / "shared"
    (shared / "common" / "code").mkdir(parents=True)
    os.symlink(victim, shared / "common" / "code" / "src")
    spec = CodeSnapshot(kind="CodeSnapshot", name="foo", cluster="c", path=str(tmp_path))
    with pytest.raises(ArgusError, match="leads outside the shared root"):
        snapshots.materialize(spec, resolve_source(spec, str(tmp_path), cache_root()), "ws", str(tmp_path),
                              str(shared), shared / "common" / "code" / "src" / "foo")
    assert untouched(victim) and sorted(p.name for p in victim.iterdir()) == ["inner", "keep.txt"]


def test_a_delete_never_follows_a_swapped_component(tmp_path: Path, victim: Path):
    shared = tmp_path / "shared"
    (shared / "common").mkdir(parents=True)
    os.symlink(victim.parent, shared / "common" / "code")  # common/code swapped for a symlink
    with pytest.raises(beneath.NotBeneath):
        snapshots.delete(str(shared), "common/code/victim/inner")
    with pytest.raises(beneath.NotBeneath):
        snapshots.delete(str(shared), "../victim")
    assert untouched(victim)


def test_symlinks_inside_a_deleted_snapshot_are_unlinked_not_followed(tmp_path: Path, victim: Path):
    shared = tmp_path / "shared"
    snap = shared / "common" / "code" / "r" / "s"
    (snap / "sub").mkdir(parents=True)
    os.symlink(victim, snap / "sub" / "link")
    snap.chmod(0o555)
    snapshots.delete(str(shared), "common/code/r/s")
    assert not snap.exists() and untouched(victim)


def test_stored_snapshots_ignore_symlinks_odd_names_and_mismatched_manifests(tmp_path: Path, victim: Path):
    shared = tmp_path / "shared"
    base = shared / "common" / "code"
    manifest = {"workspace": "ws", "name": "s", "repo": "r", "source": {"path": "x"}, "commit": "1" * 40,
                "digest": "2" * 64, "files": 0, "bytes": 0, "created_at": "t", "created_by": "t"}
    for rel, claims in (("r/s", manifest), ("r/Odd.Name", manifest), ("other/s", manifest)):
        (base / rel).mkdir(parents=True)
        (base / rel / ".argus-snapshot.json").write_text(json.dumps(claims))
    (victim / ".argus-snapshot.json").write_text(json.dumps(manifest))
    os.symlink(victim, base / "r" / "linked")
    assert list(snapshots.stored(str(shared))) == ["common/code/r/s"]


def test_a_symlinked_object_store_is_refused(tmp_path: Path, victim: Path):
    repo = source_repo(tmp_path)
    shared = tmp_path / "shared"
    (shared / ".argus").mkdir(parents=True)
    os.symlink(victim, shared / ".argus" / "objects")  # planted by a job: exports would land in victim
    spec = CodeSnapshot(kind="CodeSnapshot", name="foo", cluster="c", git={"url": str(repo), "ref": "main"})
    with pytest.raises(ArgusError, match="leads outside argus's object store"):
        snapshots.materialize(spec, resolve_source(spec, str(shared), cache_root()), "ws", str(shared),
                              str(shared), shared / "common" / "code" / "src" / "foo")
    assert sorted(p.name for p in victim.iterdir()) == ["inner", "keep.txt"] and untouched(victim)
