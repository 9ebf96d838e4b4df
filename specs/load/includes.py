"""Shared cluster definitions: the files a Workspace's `include:` names, read as hostile input.

A monorepo's teams share one `kind: Cluster` (say platform/clusters.yaml) instead of copies that must
agree. A pull request's author controls `include:` as much as any spec, so an included file is read
as the walk reads the workspace's own (specs/parse/reading.py: no FIFO waited on, size-capped, UTF-8, within
the walk's budget) and only where it lies, symlinks resolved, inside the git repository that holds the
workspace: never in a hidden directory (.git) or a shared root (any job writes there), never inside the
workspace itself (its walk reads that already). Only Clusters are taken from it: a Job, a snapshot or
a Workspace belongs to one workspace. Diagnostics name the file as `include:` spells it
(`../../platform/clusters.yaml:3`), which is what the person reading them wrote.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from specs.address import WORKSPACE
from specs.desired import Source
from specs.diagnostics import Diagnostic
from specs.kinds.models import Workspace
from specs.parse.nodes import Walked
from specs.parse.reading import SpecFile, Walk, folder_is_state

SHARED_KIND = "Cluster"
MOVE_IN = ("put the shared file in the workspace's git repository (e.g. platform/clusters.yaml at its root) "
           "and name it relative to this workspace, or copy the Cluster into the workspace")


def files(walk: Walk, workspace: Workspace | None, source: Source | None) -> list[SpecFile]:
    """The included files to read, in `include:` order; for each that cannot be, an error at its line."""
    if workspace is None or source is None or not workspace.include:
        return []
    repository = repository_of(walk.root)
    found: dict[Path, SpecFile] = {}
    for index, entry in enumerate(workspace.include):
        spec = _one(walk, repository, entry, f"include.{index}", source, found)
        if spec is not None:
            found[spec.path] = spec
    return list(found.values())


def refused(walked: Walked, rel: str) -> list[Diagnostic]:
    """Why a document of an included file is not taken (located at its line); none for a shared Cluster."""
    document = walked.value
    if not isinstance(document, dict):
        return []  # the loader says what a resource must be
    kind = document.get("kind")
    if kind != SHARED_KIND:
        shown = f"a {kind}" if isinstance(kind, str) and kind.isprintable() else "this document"
        return [Diagnostic.in_file(rel, walked.lines.get("kind", walked.line), "kind",
                                   f"{shown} in a shared file: only Cluster definitions are shared (included); a "
                                   f"{kind if kind in ('Job', 'CodeSnapshot') else 'resource'} belongs to one "
                                   "workspace", hint="move it into the files of the workspace it belongs to")]
    shared_root = document.get("shared_root")
    if isinstance(shared_root, str) and not shared_root.startswith("/"):
        return [Diagnostic.in_file(rel, walked.lines.get("shared_root", walked.line), "shared_root",
                                   f"{shared_root!r} is relative: a shared Cluster's shared_root must be absolute, "
                                   "the NFS mount every workspace and node sees at the same path (a relative one "
                                   "would be read from each including workspace, a different directory per team)",
                                   hint="write the mount's absolute path, e.g. /mnt/shared")]
    return []


def repository_of(path: Path) -> Path | None:
    """The nearest directory at or above `path` (resolved) holding `.git` (a directory, or a worktree's
    file), as git finds its working tree; None outside any repository."""
    for folder in (path, *path.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None


def resolve(root: Path, repository: Path, entry: str) -> tuple[Path, str | None]:
    """The included file `entry` of the workspace at `root`, resolved, and why it may not be read (None if
    it may). Nothing outside the repository is even looked at beyond resolving the name."""
    target = Path(os.path.realpath(root / entry))
    if not _under(target, repository):
        return target, (f"{entry!r} resolves to {target}, outside the git repository that holds this workspace "
                        f"({repository}): argus reads shared files only from the workspace's own repository")
    if _under(target, root):
        return target, f"{entry!r} lies inside this workspace, which reads it anyway: remove it from `include`"
    if any(part.startswith(".") for part in target.relative_to(repository).parts):
        return target, f"{entry!r} is hidden or lies in a hidden directory (like .git), which argus never reads"
    if any(folder_is_state(folder) for folder in target.parents if _under(folder, repository)):
        return target, f"{entry!r} lies in a shared root (a directory holding .argus/): any job writes there"
    return target, None


def _one(walk: Walk, repository: Path | None, entry: str, field: str, source: Source,
         found: dict[Path, SpecFile]) -> SpecFile | None:
    if repository is None:
        return _error(walk, source, field, f"{entry!r} cannot be included: the workspace is in no git repository, "
                                           "and an included file must lie in the workspace's own", MOVE_IN)
    target, problem = resolve(walk.root, repository, entry)
    if problem is not None:
        return _error(walk, source, field, problem, MOVE_IN)
    try:
        info = os.stat(target)
    except OSError:
        return _error(walk, source, field, f"{entry!r} does not exist (resolved: {target.relative_to(repository)})",
                      "fix the path: it is relative to this workspace's root (the directory of argus.yaml)")
    if target in found:
        return _error(walk, source, field, f"{entry!r} is the file {found[target].rel!r} names already",
                      "remove one of the two")
    return walk.other_file(_shown(walk.root, entry, target), target, info)


def _shown(root: Path, entry: str, target: Path) -> str:
    """The file's name in diagnostics: as `include:` spells it (normalised), unless a symlinked directory
    makes that spelling lead elsewhere than the file read; then the path of the file read."""
    rel = posixpath.normpath(entry)
    return rel if os.path.realpath(root / rel) == str(target) else os.path.relpath(target, root)


def _error(walk: Walk, source: Source, field: str, message: str, hint: str) -> None:
    walk.diagnostics.append(Diagnostic(severity="error", address=WORKSPACE, field=field, message=message,
                                       hint=hint).located(source))


def _under(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents

