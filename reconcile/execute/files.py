"""Applying the shared-filesystem steps: layout directories and code snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reconcile.model import DeleteSnapshotStep, MkdirStep, SnapshotStep
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.submission import CodeRef, expand
from state import snapshots
from state.cache import cache_root
from state.sources import DEFAULT_FETCH_TIMEOUT, resolve_source

if TYPE_CHECKING:
    from reconcile.execute.applier import ApplyContext


def make_dir(step: MkdirStep, ctx: ApplyContext) -> str:
    path = _confined(ctx.desired.shared_root(step.cluster), step.path)
    existed = path.is_dir()
    path.mkdir(parents=True, exist_ok=True)
    return "exists" if existed else "created"


def make_snapshot(step: SnapshotStep, ctx: ApplyContext) -> str:
    """Re-resolve the source and export exactly the commit and digest the plan showed."""
    spec = ctx.desired.snapshots[step.name]
    shared_root = ctx.desired.shared_root(step.cluster)
    source = resolve_source(spec, ctx.desired.root, cache_root(), ctx.fetch_timeout or DEFAULT_FETCH_TIMEOUT)
    if source.error or (source.commit, source.digest) != (step.commit, step.digest):
        raise ArgusError(f"code.{step.name}: the source no longer matches the plan "
                         f"({source.error or 'now commit ' + str(source.commit)[:12]}); run `argus plan` again")
    return snapshots.materialize(spec, source, ctx.desired.workspace.name, ctx.desired.root, shared_root,
                                 Path(ctx.desired.snapshot_dir(spec)), progress=ctx.echo)


def delete_snapshot(step: DeleteSnapshotStep, ctx: ApplyContext) -> str:
    target = _confined(ctx.desired.shared_root(step.cluster), step.path)
    if not target.exists() and not target.is_symlink():
        return "already gone"
    manifest = snapshots.read_manifest(target)
    if target.is_symlink() or manifest is None or manifest.workspace != ctx.desired.workspace.name:
        raise ArgusError(f"{target} is not a snapshot of workspace {ctx.desired.workspace.name!r} (a symlink, or "
                         "no manifest of ours): not deleting it")
    try:
        snapshots.delete(ctx.desired.shared_root(step.cluster), step.path)
    except OSError as err:  # a component swapped for a symlink since the checks above
        raise ArgusError(f"{target} could not be deleted safely: {err}") from err
    return "deleted"


def _confined(shared_root: str, rel: str) -> Path:
    """A step's path, proven to stay under the shared root (steps are validated too: this is the last line)."""
    root = Path(shared_root).resolve()
    target = root / rel
    parent = target.parent.resolve()
    if ".." in Path(rel).parts or Path(rel).is_absolute() or not (parent == root or root in parent.parents):
        raise ArgusError(f"{rel!r} is outside the shared root {root}: refused")
    return target


def check_code(code: CodeRef, desired: DesiredState, cluster: str) -> None:
    """Before a job is submitted: its snapshot is there and its files still match the digest."""
    target = Path(expand(code.path, desired.shared_root(cluster)))
    manifest = snapshots.read_manifest(target)
    if manifest is None or manifest.digest != code.digest:
        raise ArgusError(f"code.{code.snapshot} at {target} is missing or holds other content than planned; "
                         "run `argus plan` again")
    problem = snapshots.verify(target, manifest)
    if problem:
        raise ArgusError(f"code.{code.snapshot} at {target} is damaged: {problem}. Not submitting.")
