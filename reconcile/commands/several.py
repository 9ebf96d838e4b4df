"""Several workspaces in one command: `argus validate|plan|status DIR [DIR ...]`, a repository root standing
for every workspace under it (docs/workspaces.md).

One DIR holding argus.yaml is today's single-workspace command, its output unchanged. Otherwise each
workspace's output is headed by its directory (relative to the git repository's root), an error in one
does not stop the others, and the exit code is the worst of them. With --json the outputs become one
object keyed by directory, an error standing as the error object the boundary would print.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from reconcile.boundary import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, contained, error_object
from reconcile.commands.workspaces import Found, find, found_at, with_twins
from specs.diagnostics import printable
from specs.errors import ArgusError
from specs.load.workspaces import SameName, TooManyDirectories, discover, including
from specs.parse.reading import WORKSPACE_FILE


class RemovedWorkspace(ArgusError):
    """A workspace whose argus.yaml the change deleted: its jobs still run, and nothing can plan their stop."""


def expand(directories: list[Path], changed_from: str | None = None) -> list[Found] | None:
    """The workspaces the DIRs stand for; None for one DIR that is a workspace (or holds none: the
    single-workspace command then says what is missing) and no --changed-from."""
    if changed_from is None and len(directories) == 1:
        only = directories[0]
        if (only / WORKSPACE_FILE).is_file() or not only.is_dir():
            return None
        return with_twins(find(only, None)) or None
    found: dict[Path, Found] = {}
    for directory in directories:
        if changed_from is None and (directory / WORKSPACE_FILE).is_file():
            listed = [found_at(directory)]
        else:
            listed = find(directory, changed_from)
            if not listed and changed_from is None:
                raise ArgusError(f"{directory}: no {WORKSPACE_FILE} in it or in any directory under it")
        found.update((workspace.path, workspace) for workspace in listed)
    return with_twins(sorted(found.values(), key=lambda workspace: Path(workspace.shown).parts))


def owners(files: list[Path]) -> list[Found]:
    """The workspaces holding the files (pre-commit's staged names): for each, the nearest directory above it
    holding argus.yaml, within its git repository. A file in no workspace (a workflow, a README) is none's."""
    found: dict[Path, Found] = {}
    for file in files:
        if (holder := _holder(file)) is not None and holder not in found:
            found[holder] = found_at(holder)
    for holder in _includers(files):
        found.setdefault(holder, found_at(holder))
    return with_twins(sorted(found.values(), key=lambda workspace: Path(workspace.shown).parts))


def _includers(files: list[Path]) -> set[Path]:
    """The workspaces of the files' repositories that `include:` one of them (a shared Cluster's file lies
    in no workspace of its own, yet a commit to it changes every workspace that includes it)."""
    from state.code.gitinfo import repository_root

    by_repository: dict[Path, list[Path]] = {}
    for file in files:
        folder = file.absolute().parent.resolve()  # the file itself unresolved: a changed link is what changed
        if (top := repository_root(folder)) is not None:
            by_repository.setdefault(top, []).append(folder / file.name)
    found: set[Path] = set()
    for top, paths in by_repository.items():
        try:
            found.update(including(discover(top), paths))
        except TooManyDirectories:
            continue  # too large to walk here: CI's `--changed-from` plan still finds them
    return found


def _holder(file: Path) -> Path | None:
    from state.code.gitinfo import repository_root

    folder = (file if file.is_dir() else file.absolute().parent).resolve()
    top = repository_root(folder)
    for candidate in (folder, *folder.parents):
        if (candidate / WORKSPACE_FILE).is_file() and not (candidate / WORKSPACE_FILE).is_symlink():
            return candidate
        if candidate == top:
            return None
    return None


def run_each(found: list[Found], one: Callable[[Path], int], output_format: str = "human") -> int:
    """Run `one` on every workspace: headed (human, markdown) or gathered into one JSON object."""
    codes: list[int] = []
    gathered: dict[str, Any] = {}
    for workspace in found:
        if output_format == "json":
            code, gathered[workspace.shown] = _captured(workspace, one)
        else:
            heading = f"## {workspace.shown}" if output_format == "markdown" else f"== {workspace.shown} =="
            typer.echo(printable(heading))
            code = _guarded(workspace, one)
        codes.append(code)
    if output_format == "json":
        typer.echo(json.dumps(gathered))
    failed = [w.shown for w, code in zip(found, codes, strict=True) if code not in (EXIT_OK, EXIT_CHANGES)]
    if failed:
        typer.echo(f"{len(failed)} of {len(found)} workspaces failed: {printable(', '.join(failed))}.", err=True)
    elif not found:
        typer.echo("No workspace to check.", err=True)
    return worst(codes)


def worst(codes: list[int]) -> int:
    """1 (or another failure's code) if any failed, else 2 if any has changes, else 0."""
    failures = [code for code in codes if code not in (EXIT_OK, EXIT_CHANGES)]
    if failures:
        return EXIT_ERROR if EXIT_ERROR in failures else max(failures)
    return EXIT_CHANGES if EXIT_CHANGES in codes else EXIT_OK


def _guarded(workspace: Found, one: Callable[[Path], int]) -> int:
    return contained(lambda: one(_present(workspace)))[0]


def _captured(workspace: Found, one: Callable[[Path], int]) -> tuple[int, Any]:
    """The command's one JSON document (stdout caught for it), or the error object in its place."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code, err = contained(lambda: one(_present(workspace)))
    if err is not None:
        return code, error_object(err)
    text = buffer.getvalue().strip()
    return code, json.loads(text) if text else None


def alone(directory: Path) -> None:
    """One workspace given alone (the single-workspace command): refused as with_twins refuses it."""
    if (directory / WORKSPACE_FILE).is_file() and (twin := with_twins([found_at(directory)])[0].twin) is not None:
        raise SameName([twin])


def _present(workspace: Found) -> Path:
    if workspace.twin is not None:
        raise SameName([workspace.twin])
    if workspace.removed:
        raise RemovedWorkspace(
            f"{workspace.shown}: its {WORKSPACE_FILE} was deleted, but the jobs it started keep running and nothing "
            f"can plan their stop. Restore {WORKSPACE_FILE}, delete the job specs and `argus apply --allow-empty` "
            "first; delete the workspace once its jobs are stopped (docs/workspaces.md).")
    return workspace.path
