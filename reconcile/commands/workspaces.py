"""argus workspaces: list the workspaces under a root, or those a change touched (CI's matrix). Offline.

`--json` is the interface the generated CI builds its matrix from (docs/workspaces.md): a list of
{"dir", "name", "slug"}, `dir` relative to the git repository's root (to ROOT outside git), and
`"removed": true` added for a workspace whose argus.yaml the change deleted.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from specs.diagnostics import Diagnostic, printable
from specs.errors import ArgusError
from specs.load.workspaces import SameName, TooManyDirectories, affected, discover, same_names, slugs, workspace_name
from specs.parse.reading import WORKSPACE_FILE


@dataclass(frozen=True)
class Found:
    """One workspace: its directory, as shown (relative to the repository) and on disk."""

    shown: str
    path: Path
    removed: bool = False
    twin: Diagnostic | None = None
    """Set when another workspace of its repository gives the same `name:` (with_twins): it is refused."""


def run(root: Path, changed_from: str | None, as_json: bool) -> int:
    # Slugs are made unique among every workspace of the repository, not only those listed, so a plan run
    # and the apply run after it (each listing what its diff changed) give a workspace the same artifact,
    # concurrency group and environment. The one walk of the repository serves the listing too.
    _, _, base = located(root)
    everyone = discover(base)
    if twins := same_names(everyone, base):
        raise SameName(list(twins.values()))
    found = find(root, changed_from, everyone)
    names = slugs({shown(path, base) for path in everyone} | {f.shown for f in found})
    rows = [{"dir": f.shown, "name": workspace_name(f.path) if not f.removed else "", "slug": names[f.shown],
             **({"removed": True} if f.removed else {})} for f in found]
    if as_json:
        typer.echo(json.dumps(rows))
        return EXIT_OK
    if not rows:
        typer.echo(f"No workspace changed since {changed_from}." if changed_from else f"No workspace under {root}.")
    for row in rows:
        label = "removed: its argus.yaml was deleted" if row.get("removed") else f"workspace {row['name']!r}"
        typer.echo(f"{printable(str(row['dir']))}  ({printable(label)})")
    return EXIT_OK


def find(root: Path, changed_from: str | None, everyone: list[Path] | None = None) -> list[Found]:
    """The workspaces under `root` (every one, or those changed since the ref), named from the repository.
    `everyone`: discover() of the repository's root, when the caller has walked it already."""
    from state.code.gitinfo import changed_since

    top, repository, base = located(root)
    walked = everyone if everyone is not None and top == base else None
    if changed_from is None:
        paths = walked if walked is not None else discover(top)
    elif repository is None:
        raise ArgusError(f"--changed-from needs a git repository, and {root} is not in one")
    else:
        paths = affected(top, [repository / name for name in changed_since(repository, changed_from)], walked)
    return [Found(shown(path, base), path, not (path / WORKSPACE_FILE).is_file()) for path in paths]


def with_twins(found: list[Found]) -> list[Found]:
    """The workspaces, each whose `name:` another workspace of its git repository (every one, listed or not:
    a copy is refused beside the original it copies) gives too marked with that error. Outside git, among
    those listed. A repository too large to walk is not checked here: the name's claim on the shared root
    still refuses a copy (state.claims)."""
    from state.code.gitinfo import repository_root

    groups: dict[Path | None, list[Found]] = {}
    for workspace in found:
        groups.setdefault(repository_root(workspace.path), []).append(workspace)
    twins: dict[Path, Diagnostic] = {}
    for top, group in groups.items():
        paths = [w.path for w in group if not w.removed]
        base = top or Path(os.path.commonpath(paths)) if paths else None
        if base is None:
            continue
        try:
            twins.update(same_names(discover(top) if top is not None else paths, base))
        except TooManyDirectories:
            continue
    return [replace(w, twin=twins.get(w.path)) for w in found]


def located(root: Path) -> tuple[Path, Path | None, Path]:
    """`root` resolved, the git repository holding it (or None), and the base its workspaces are named from."""
    from state.code.gitinfo import repository_root

    top = root.resolve()
    if not top.is_dir():
        raise ArgusError(f"{root}: no such directory")
    repository = repository_root(top)
    return top, repository, repository or top


def found_at(directory: Path) -> Found:
    """The one workspace at `directory`, named from its repository."""
    from state.code.gitinfo import repository_root

    path = directory.resolve()
    return Found(shown(path, repository_root(path) or path), path)


def shown(path: Path, base: Path) -> str:
    """`path` relative to `base` in git's spelling (`teams/nlp`; `.` for base itself)."""
    return Path(os.path.relpath(path, base)).as_posix()
