"""Workspaces in a repository: every directory holding argus.yaml, found Atlantis-style from a root.

A monorepo gives each team a directory (`teams/nlp`, `teams/vision`) with its own argus.yaml. CI plans
only the workspaces a change touches (`affected`), pre-commit validates the ones its files lie in
(`owner`), and every command that takes several DIRs expands a repository root into its workspaces
(`discover`). Everything here reads only names of directories (and one small argus.yaml for the
name): a pull request controls the tree, so symlinked directories are never followed, argus's own
state (a directory holding `.argus/`, i.e. a shared root) is never entered, and the walk is bounded.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from specs.address import WORKSPACE
from specs.diagnostics import Diagnostic, Where
from specs.errors import ArgusError, SpecError
from specs.parse.reading import MAX_FILE_BYTES, STATE_DIR, WORKSPACE_FILE, folder_is_state, read_at_most

SKIPPED = frozenset({"node_modules", "__pycache__", "venv"})
"""Never descended into, besides every hidden directory (.git, .venv, .shared, .argus): they hold no
workspace, and in a large repository they hold most of the directories."""
MAX_DIRECTORIES = 100_000
"""A repository with more directories is walked from a narrower ROOT; the bound keeps one command's walk
to about a second whatever a pull request adds."""
SLUG_LENGTH = 48


class TooManyDirectories(ArgusError):
    """A walk for workspaces past MAX_DIRECTORIES."""


def discover(root: Path) -> list[Path]:
    """Every directory at or under `root` that holds argus.yaml (root / its relative path), sorted.
    A workspace's own subdirectories are searched too: a nested workspace is a workspace of its own
    (the loader leaves its files out of the outer one)."""
    found: list[Path] = []
    pending = [root]
    visited = 0
    while pending:
        folder = pending.pop()
        visited += 1
        if visited > MAX_DIRECTORIES:
            raise TooManyDirectories(f"{root}: more than {MAX_DIRECTORIES} directories to search for {WORKSPACE_FILE}; "
                             "pass the directory that holds the workspaces (e.g. `teams`) instead")
        children, holds_workspace = _listing(folder)
        if holds_workspace:
            found.append(folder)
        pending.extend(children)
    return sorted(found, key=lambda path: path.relative_to(root).parts)


def _listing(folder: Path) -> tuple[list[Path], bool]:
    """The subdirectories worth searching, and whether `folder` holds a regular argus.yaml."""
    try:
        with os.scandir(folder) as listed:
            entries = list(listed)
    except OSError:
        return [], False  # unreadable: nothing to find there, as git would see nothing either
    names = {entry.name for entry in entries}
    workspace = next((e for e in entries if e.name == WORKSPACE_FILE), None)
    holds_workspace = workspace is not None and workspace.is_file(follow_symlinks=False)
    # `argus init` writes the editor schema into the workspace's own .argus/: a folder holding argus.yaml
    # is a workspace, whatever else it holds; only one without it is taken for a shared root.
    if STATE_DIR in names and not holds_workspace and folder_is_state(folder):
        return [], False  # a shared root: any job writes there
    children = [Path(entry.path) for entry in entries
                if not entry.name.startswith(".") and entry.name not in SKIPPED
                and entry.is_dir(follow_symlinks=False)]
    return children, holds_workspace


def owner(workspaces: Iterable[Path], path: Path) -> Path | None:
    """The deepest of `workspaces` that holds `path` (both absolute, or both relative to one root)."""
    holding = [w for w in workspaces if path == w or w in path.parents]
    return max(holding, key=lambda w: len(w.parts), default=None)


def affected(root: Path, changed_paths: Iterable[str | Path], existing: list[Path] | None = None) -> list[Path]:
    """The workspaces under `root` that the changed paths (relative to `root`, or absolute) touch, sorted.

    A path belongs to the deepest workspace holding it, as the loader reads it. A deleted argus.yaml
    (the path names one that no longer exists) makes its directory affected too, although discover no
    longer finds it: that workspace's jobs still run on the cluster, and whoever plans it must be told
    (`argus plan` says what to do, see docs/workspaces.md); the files it held now belong to the
    workspace around it, if any, which is affected as well. A changed file that workspaces `include:` (a shared
    Cluster) makes each of them affected. `existing`: discover(root), when already walked."""
    existing = discover(root) if existing is None else existing
    changed_paths = [root / changed for changed in changed_paths]
    hit = set(including(existing, changed_paths))  # a shared file may lie outside `root`, and every workspace
    for path in changed_paths:
        if root not in path.parents:
            continue  # outside the root asked about (git names every path of the repository)
        if (found := owner(existing, path.parent if path.name == WORKSPACE_FILE else path)) is not None:
            hit.add(found)
        if path.name == WORKSPACE_FILE and not path.is_file():
            hit.add(path.parent)  # a removed workspace
    return sorted(hit, key=lambda path: path.relative_to(root).parts)


def workspace_name(directory: Path) -> str:
    """The `name:` of the Workspace in directory/argus.yaml, or "" when it cannot be read (validate says why).
    Read as the loader reads specs: no link followed, no FIFO waited on, at most a spec file's size."""
    return name_at(directory)[0]


def name_at(directory: Path) -> tuple[str, int]:
    """workspace_name, and the line of its `name:` in argus.yaml (1 when it cannot be told)."""
    found = _workspace_document(directory)
    name = found.get("name") if found is not None else None
    if not (isinstance(name, str) and name.isprintable() and name):
        return "", 1
    return name, _line_of(found, "name")


def included(directory: Path) -> set[Path]:
    """The files directory/argus.yaml's `include:` names that the loader would read (or that a change just
    deleted), each as spelt (normalised) and as resolved. Read like the name: one bounded file, no link."""
    from specs.kinds.models import MAX_INCLUDES
    from specs.load.includes import repository_of, resolve

    found = _workspace_document(directory)
    entries = found.get("include") if found is not None else None
    root = directory.resolve()
    repository = repository_of(root)
    if not isinstance(entries, list) or repository is None:
        return set()
    paths: set[Path] = set()
    for entry in entries[:MAX_INCLUDES]:
        if isinstance(entry, str) and entry.isprintable() and entry and not entry.startswith("/"):
            target, problem = resolve(root, repository, entry)
            paths |= {target, Path(os.path.normpath(root / entry))} if problem is None else set()
    return paths


def including(workspaces: Iterable[Path], paths: Iterable[Path]) -> list[Path]:
    """Of `workspaces`, those that include one of `paths` (absolute), or a file under one (a directory
    replaced, a symlinked directory retargeted)."""
    changed = {Path(os.path.normpath(path)) for path in paths}
    return [w for w in workspaces if any(i in changed or not changed.isdisjoint(i.parents) for i in included(w))]


def _workspace_document(directory: Path) -> Any:
    """The one Workspace document of directory/argus.yaml (ruamel's, with line marks), or None. Read as the
    loader reads specs: no link followed, no FIFO waited on, at most a spec file's size."""
    from specs.parse.safe_yaml import load_documents

    try:
        fd = os.open(directory / WORKSPACE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        data = read_at_most(fd, MAX_FILE_BYTES + 1) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    finally:
        os.close(fd)
    try:
        documents = load_documents(data.decode("utf-8")) if 0 < len(data) <= MAX_FILE_BYTES else []
    except Exception:  # noqa: BLE001 - any YAML or decoding problem: validate reports it with its line
        return None
    found = [d for d in documents if hasattr(d, "get") and d.get("kind") == "Workspace"]
    return found[0] if len(found) == 1 else None


def _line_of(document: object, key: str) -> int:
    try:
        return int(document.lc.key(key)[0]) + 1  # type: ignore[attr-defined]  # ruamel's round-trip marks
    except (AttributeError, KeyError, TypeError, IndexError):
        return 1


class SameName(SpecError):
    """Two workspace directories give one `name:`: on a shared root they would be one workspace, sharing
    runs, apply lock, audit log and queue (the copy adopting the other's runs)."""


def same_names(workspaces: Iterable[Path], base: Path) -> dict[Path, Diagnostic]:
    """Per workspace whose `name:` another of `workspaces` gives too: an error at its `name:` line (files named
    relative to `base`, the repository's root) naming the other's `name:` line."""
    named: dict[str, list[tuple[Path, Where]]] = {}
    for path in workspaces:
        name, line = name_at(path)
        if name:
            shown = Path(os.path.relpath(path / WORKSPACE_FILE, base)).as_posix()
            named.setdefault(name, []).append((path, Where(shown, line)))
    found = {}
    for name, places in named.items():
        for path, where in places if len(places) > 1 else ():
            others = ", ".join(str(w) for p, w in places if p != path)
            found[path] = Diagnostic(
                severity="error", address=WORKSPACE, where=where, field="name",
                message=f"workspace name {name!r} is also the `name:` of {others}: on a shared root the two would "
                        "be one workspace (one's runs adopted by the other, one apply lock, audit log and queue)",
                hint="give each workspace its own `name:`; a workspace that moved keeps only its new directory "
                     "(then `argus claim DIR --move-from OLD_DIR`, docs/workspaces.md)")
    return found


def slug(directory: str) -> str:
    """`teams/vision` as `teams-vision`: [a-z0-9-] only, for artifact, concurrency-group and environment
    names. The repository root's workspace is `root`."""
    text = re.sub(r"[^a-z0-9]+", "-", directory.lower()).strip("-") or "root"
    return text[:SLUG_LENGTH].strip("-")


def slugs(directories: Iterable[str]) -> dict[str, str]:
    """Each directory's slug, unique among them: where two directories would share one (`a/b`, `a-b`),
    or one was cut short, each of those gets a short hash of its own directory name appended."""
    directories = list(directories)
    plain = {d: slug(d) for d in directories}
    counts: dict[str, int] = {}
    for text in plain.values():
        counts[text] = counts.get(text, 0) + 1
    return {d: text if counts[text] == 1 and len(slug_source(d)) <= SLUG_LENGTH
            else f"{text}-{hashlib.sha256(d.encode()).hexdigest()[:8]}" for d, text in plain.items()}


def slug_source(directory: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", directory.lower()).strip("-")
