"""Executors of the shared-filesystem steps: layout directories and code snapshots."""

from __future__ import annotations

from pathlib import Path

from reconcile.execute.world import Done, Outcome, World
from reconcile.model import DeleteSnapshotStep, MkdirStep, SnapshotStep
from specs.errors import ArgusError
from state.code import snapshots


def make_dir(step: MkdirStep, world: World) -> Done:
    path = _confined(world.roots[step.cluster], step.path)
    existed = path.is_dir()
    path.mkdir(parents=True, exist_ok=True)
    return Done(Outcome.EXISTS if existed else Outcome.CREATED)


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
