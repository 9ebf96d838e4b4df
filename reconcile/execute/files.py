"""Executors of the shared-filesystem steps: layout directories and code snapshots."""

from __future__ import annotations

from pathlib import Path

from reconcile.execute.world import Done, Outcome, World
from reconcile.model import DeleteSnapshotStep, MkdirStep, RootStep, SnapshotStep
from specs.errors import ArgusError
from state.audit.log import actor
from state.beneath import make_dirs
from state.code import snapshots
from state.root.identity import observe_root, write_identity


def make_dir(step: MkdirStep, world: World) -> Done:
    """Beneath the root only: the root itself is never made (state.beneath.made_dir)."""
    root = world.roots[step.cluster]
    existed = _confined(root, step.path).is_dir()
    make_dirs(root, step.path)
    return Done(Outcome.EXISTS if existed else Outcome.CREATED)


def lay_root(step: RootStep, world: World) -> Done:
    root = world.roots[step.cluster]
    before = observe_root(root).identity
    identity = write_identity(root, actor())
    return Done(Outcome.EXISTS if before is not None and before.id == identity.id else Outcome.CREATED)


def make_snapshot(step: SnapshotStep, world: World) -> Done:
    return Done(Outcome(world.code.export(step.name, step.commit, step.digest, progress=world.echo)))


def delete_snapshot(step: DeleteSnapshotStep, world: World) -> Done:
    root, workspace = world.roots[step.cluster], world.workspace
    target = _confined(root, step.path)
    if not target.exists() and not target.is_symlink():
        return Done(Outcome.ALREADY_GONE)
    manifest = snapshots.read_manifest(target)
    if target.is_symlink() or manifest is None or manifest.workspace != workspace:
        raise ArgusError(f"{target} is not a snapshot of workspace {workspace!r} (a symlink, or "
                         "no manifest of ours): not deleting it")
    try:
        snapshots.delete(root, step.path)
    except OSError as err:  # a component swapped for a symlink since the checks above
        raise ArgusError(f"{target} could not be deleted safely: {err}") from err
    return Done(Outcome.DELETED)


def _confined(shared_root: str, rel: str) -> Path:
    """A step's path, proven to stay under the shared root (steps are validated too: this is the last line)."""
    root = Path(shared_root).resolve()
    target = root / rel
    parent = target.parent.resolve()
    if ".." in Path(rel).parts or Path(rel).is_absolute() or not (parent == root or root in parent.parents):
        raise ArgusError(f"{rel!r} is outside the shared root {root}: refused")
    return target
