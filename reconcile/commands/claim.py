"""argus claim DIR [--move-from OLD]: claim the workspace's name on its shared roots for this repository and
directory, or move a claim here after a rename or a split (docs/workspaces.md, "One name, one workspace").

The first apply claims a name by itself; this command is the one way to change who owns it. A move names
the owner it moves from (so a copy cannot take a name by accident), is shown and confirmed ('yes', or
--yes), happens under the workspace's apply lock, and is recorded in each root's audit log with the old
owner and the new.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import load
from specs.desired import DesiredState
from specs.diagnostics import plain
from specs.errors import ArgusError
from state.observed import ClaimSeen, Owner


@dataclass(frozen=True)
class Rewrite:
    """One root's claim to write, and what it replaces."""

    root: str
    seen: ClaimSeen

    def describe(self, ours: Owner) -> str:
        if self.seen.problem is not None:
            return f"{self.root}: replace a claim that cannot be trusted ({self.seen.problem}) with {ours}"
        if self.seen.owner is not None:
            return f"{self.root}: move the claim from {self.seen.owner} to {ours}"
        return f"{self.root}: claim the name for {ours}"


def run(directory: Path, move_from: str | None, yes: bool) -> int:
    from reconcile.commands.apply import confirm
    from state import claims
    from state.queue import lock

    desired = load(directory)
    name, ours = desired.workspace.name, claims.owner_of(desired.root)
    todo = [r for root in _roots(desired) if (r := _rewrite(desired, root, ours, move_from)) is not None]
    if not todo:
        typer.echo(f"Workspace name {name!r} is claimed for {plain(str(ours))} on every shared root: nothing to do.")
        return EXIT_OK
    typer.echo("\n".join(plain(r.describe(ours)) for r in todo))
    if any(r.seen.owner is not None or r.seen.problem is not None for r in todo) and not yes:
        confirm()
    with lock.held([r.root for r in todo], name, "claim"):
        for rewrite in todo:
            _write(name, rewrite, ours)
    return EXIT_OK


def _roots(desired: DesiredState) -> list[str]:
    """Each shared root here; an unmounted one is said, and skipped."""
    from state.observe import absent_roots

    absent = set(absent_roots(desired))
    for cluster in sorted(absent):
        typer.echo(f"cluster {cluster!r}: its shared root {desired.shared_roots[cluster]} is not here: skipped.",
                   err=True)
    return sorted({root for cluster, root in desired.shared_roots.items() if cluster not in absent})


def _rewrite(desired: DesiredState, root: str, ours: Owner, move_from: str | None) -> Rewrite | None:
    from reconcile.plan.claims import refusal
    from state import claims

    name = desired.workspace.name
    seen = claims.read(root, name)
    if seen.owner is not None and claims.is_ours(seen.owner, ours, desired.root):
        return None
    if seen.owner is None or seen.problem is not None:
        return Rewrite(root, seen)
    if move_from is None:
        raise ArgusError(f"{plain(refusal(name, ours, seen))}. If this workspace moved here, pass --move-from "
                         f"{plain(_old_name(ours, seen.owner))}; otherwise give it its own `name:`.")
    if not _names(move_from, seen.owner):
        raise ArgusError(f"--move-from {plain(move_from)}: the claim of {name!r} on {root} belongs to "
                         f"{plain(str(seen.owner))}, which is not that; nothing was changed.")
    _refuse_if_still_there(desired, ours, seen.owner)
    return Rewrite(root, seen)


def _names(given: str, owner: Owner) -> bool:
    """--move-from names the old owner: its directory, its repository, or REPOSITORY:DIRECTORY."""
    text = given.strip().removeprefix("./").rstrip("/") or "."
    return text in (owner.directory, owner.repository, f"{owner.repository}:{owner.directory}")


def _old_name(ours: Owner, theirs: Owner) -> str:
    return theirs.directory if theirs.repository == ours.repository else theirs.repository


def _refuse_if_still_there(desired: DesiredState, ours: Owner, theirs: Owner) -> None:
    """A move within one repository leaves one workspace of the name: the old directory must not still be one."""
    from specs.load.workspaces import workspace_name
    from state.code.gitinfo import repository_root
    from state.code.repository import directory_in

    top = repository_root(desired.root)
    if theirs.repository != ours.repository or top is None:
        return
    old = directory_in(top, theirs.directory)
    if old is not None and workspace_name(old) == desired.workspace.name:
        raise ArgusError(f"{plain(theirs.directory)} still holds workspace {desired.workspace.name!r}: a move leaves "
                         "one workspace of a name. Rename or remove that one first (or give this one its own "
                         "`name:`); nothing was changed.")


def _write(name: str, rewrite: Rewrite, ours: Owner) -> None:
    from state import claims
    from state.audit import log as audit
    from state.audit.events import NameClaimed
    from state.runs.records import now

    if claims.read(rewrite.root, name) != rewrite.seen:  # under the lock now: what was shown is what is replaced
        raise ArgusError(f"{rewrite.root}: the claim of {name!r} changed while you were asked; run `argus claim` "
                         "again. Nothing more was changed.")
    if rewrite.seen.owner is None and rewrite.seen.problem is None:
        claims.claim(rewrite.root, name, ours, audit.actor(), now())  # only if still absent, as apply claims
    else:
        claims.rewrite(rewrite.root, name, ours, audit.actor(), now())
    previous = rewrite.seen.owner.model_dump() if rewrite.seen.owner is not None else None
    audit.append(rewrite.root, name, NameClaimed(repository=ours.repository, directory=ours.directory,
                                                 previous=previous, replaced=rewrite.seen.problem))
    typer.echo(f"{rewrite.root}: workspace name {name!r} is claimed for {plain(str(ours))}; the audit log says so.")
