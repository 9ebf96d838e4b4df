"""Code snapshots on the shared filesystem: materialize, list, verify, delete.

A snapshot is built in a temp dir beside its final place and renamed into place in one step, so
an interrupted apply leaves no half snapshot. Files are stored once in a content-addressed store
under <shared_root>/.argus/objects/ and hard-linked into every snapshot that has them.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from specs.errors import ArgusError
from specs.kinds.models import CodeSnapshot
from state import beneath
from state.code.cache import cache_root
from state.code.sources import digest_of, directory_entries, entries
from state.observed import Manifest, SourceState
from state.runs.records import now

MANIFEST = ".argus-snapshot.json"


MAX_MANIFEST_BYTES = 1024 * 1024
"""A manifest is a few hundred bytes of JSON."""


def read_manifest(directory: Path) -> Manifest | None:
    """The manifest of the snapshot in <root>/common/code/<repo>/<name>, read as a regular file beneath
    the root (no link on the way, a FIFO or a big file refused unread); None when it is not one argus wrote."""
    root, rel = (directory.parents[3], "/".join(directory.parts[-4:])) if directory.parts[-4:-2] == (
        "common", "code") else (directory, ".")
    try:
        raw = beneath.read_regular(root, f"{rel}/{MANIFEST}", MAX_MANIFEST_BYTES)
        return Manifest.model_validate(json.loads(raw)) if raw is not None else None
    except (OSError, ValueError, RecursionError, ValidationError):
        return None


def stored(shared_root: str) -> dict[str, Manifest]:
    """Every snapshot under common/code/<repo>/<name>/ with a readable manifest, by relative path."""
    base = Path(shared_root) / "common" / "code"
    if base.resolve() != Path(shared_root).resolve() / "common" / "code":
        return {}  # common/ or common/code/ is a symlink: nothing there is a snapshot argus made
    found = {}
    for directory in sorted(base.glob("*/*")):
        manifest = read_manifest(directory) if _could_be_ours(directory) else None
        if manifest is not None and (manifest.repo, manifest.name) == (directory.parent.name, directory.name):
            found[directory.relative_to(shared_root).as_posix()] = manifest
    return found


def _could_be_ours(directory: Path) -> bool:
    """Only a real directory named as argus names snapshots: the shared root is writable by every job,
    and a symlink or an odd name planted there must never become a path argus deletes."""
    names = (directory.parent.name, directory.name)
    return (all(re.fullmatch(r"[a-z0-9][a-z0-9-]*", n) for n in names)
            and not directory.is_symlink() and not directory.parent.is_symlink() and directory.is_dir())


def verify(directory: Path, manifest: Manifest) -> str | None:
    """None when the files match the manifest's digest, else what is wrong."""
    found = [(p, m, hashlib.sha256(d).hexdigest()) for p, m, d in directory_entries(directory, {MANIFEST})]
    if digest_of(found) == manifest.digest:
        return None
    return f"its {len(found)} files no longer match digest {manifest.digest[:12]} (modified on disk?)"


def materialize(snapshot: CodeSnapshot, source: SourceState, workspace: str, workspace_root: str,
                shared_root: str, target: Path, progress: Callable[[str], None] | None = None) -> str:
    """Export the source into target atomically. Returns "created", or "exists" if already there."""
    existing = read_manifest(target)
    if existing is not None and existing.digest == source.digest:
        return "exists"
    if target.exists():
        owner = f" (workspace {existing.workspace!r}'s, commit {existing.commit[:12]})" if existing else ""
        raise ArgusError(f"{target} already exists with other content{owner}; snapshots are immutable: "
                         f"give workspace {workspace!r}'s code.{snapshot.name} a new name")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.parent.resolve() != Path(shared_root).resolve() / target.parent.relative_to(shared_root):
        raise ArgusError(f"{target.parent} leads outside the shared root (a symlink planted on the shared "
                         f"filesystem?): not exporting code.{snapshot.name} there. Remove the symlink.")
    # Names cannot contain ".", so this prefix matches only this snapshot's leftovers.
    for stale in target.parent.glob(f".tmp-{snapshot.name}.*"):  # left by an interrupted apply
        remove_tree(stale)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{snapshot.name}.", dir=target.parent))
    try:
        written = _export(entries(snapshot, source, workspace_root, cache_root()), tmp, Path(shared_root),
                          lambda n: progress and progress(f"  exported {n}/{source.files} files"))
        if digest_of(written) != source.digest:
            raise ArgusError(f"code.{snapshot.name}: the source changed since the plan; run `argus plan` again")
        _write_manifest(tmp, _manifest(snapshot, source, workspace, len(written)))
        _seal(tmp)
        os.rename(tmp, target)
    finally:
        if tmp.exists():
            remove_tree(tmp)
    return "created"


def delete(shared_root: str, rel: str) -> None:
    """Remove a snapshot: first move it aside, so no reader ever sees half of it. Every directory
    from the shared root down is opened without following symlinks (state.beneath)."""
    beneath.remove_beneath(shared_root, rel, f".tmp-{Path(rel).name}.delete-{os.getpid()}")


def remove_tree(path: Path) -> None:
    """rmtree that first makes sealed (read-only) directories writable again; a symlink (planted
    where argus's leftovers go) is removed itself, never followed."""
    if path.is_symlink():
        path.unlink(missing_ok=True)
        return
    beneath.unseal_path(path)
    shutil.rmtree(path, ignore_errors=True)


def _seal(root: Path) -> None:
    """Directories read-only too: nothing (a job's __pycache__, a stray log) can add files."""
    for folder, dirs, _ in os.walk(root, topdown=False):
        for name in dirs:
            if not (Path(folder) / name).is_symlink():
                os.chmod(Path(folder) / name, 0o555)
    os.chmod(root, 0o555)


def _export(files, into: Path, shared_root: Path, progress: Callable[[int], object]) -> list[tuple[str, str, str]]:
    written = []
    for count, (rel, mode, data) in enumerate(files, start=1):
        if count % 1000 == 0:
            progress(count)
        dest = into / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        sha = hashlib.sha256(data).hexdigest()
        if mode == "120000":
            os.symlink(os.fsdecode(data), dest)
        else:
            _link_or_copy(_stored_object(shared_root, sha, mode, data), dest)
        written.append((rel, mode, sha))
    return written


def _link_or_copy(source: Path, dest: Path) -> None:
    """Hard-link; copy where the filesystem or kernel refuses (other owner, too many links)."""
    try:
        os.link(source, dest)
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EACCES, errno.EMLINK, errno.EXDEV):
            raise
        shutil.copy2(source, dest)


def _stored_object(shared_root: Path, sha: str, mode: str, data: bytes) -> Path:
    """The one read-only copy of this content and mode; every snapshot hard-links to it.

    An existing object is re-hashed before reuse: a write through any hard link changes it for
    every snapshot, and a damaged object must not spread into a new one.
    """
    store, expected = shared_root / ".argus" / "objects", shared_root.resolve() / ".argus" / "objects"
    path = store / sha[:2] / f"{sha}.{mode}"
    if store.resolve() == expected:
        path.parent.mkdir(parents=True, exist_ok=True)
    if path.parent.resolve() != expected / sha[:2] or path.is_symlink():
        raise ArgusError(f"{path.parent} leads outside argus's object store (a symlink planted on the shared "
                         "filesystem?): not writing there. Remove it and apply again.")
    if path.exists() and hashlib.sha256(path.read_bytes()).hexdigest() == sha:
        return path
    if path.exists():
        os.replace(path, path.with_name(f"{path.name}.damaged-{os.getpid()}"))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".incoming-")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, 0o555 if mode == "100755" else 0o444)
    os.replace(tmp, path)
    return path


def _manifest(snapshot: CodeSnapshot, source: SourceState, workspace: str, files: int) -> Manifest:
    from state.audit.log import actor  # only making a snapshot needs it: a plan is spared importing the audit log

    # Where the code came from, not how argus was let in: not even a token's variable name.
    origin = {"git": snapshot.git.model_dump(exclude={"token"})} if snapshot.git else {"path": snapshot.path}
    return Manifest(workspace=workspace, name=snapshot.name, repo=snapshot.repo_dir, source=origin,
                    commit=source.commit or "", digest=source.digest or "", dirty=source.dirty, files=files,
                    bytes=source.bytes, created_at=now(), created_by=actor())


def _write_manifest(directory: Path, manifest: Manifest) -> None:
    path = directory / MANIFEST
    path.write_text(json.dumps(manifest.model_dump(), indent=2, sort_keys=True) + "\n")
    with contextlib.suppress(OSError):
        path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
