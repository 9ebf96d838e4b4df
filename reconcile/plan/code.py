"""Planning the shared filesystem: layout directories and code snapshots. Pure, like the planner."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, TypeVar

from reconcile.model import Action, Change, DeleteSnapshotStep, MkdirStep, RootStep, RunView, SnapshotStep, Step
from reconcile.plan.root import distrusted, needs_identity
from specs.address import Address
from specs.desired import DesiredState, snapshot_rel
from specs.diagnostics import Diagnostic
from specs.kinds.models import CodeSnapshot
from specs.workloads.submission import SHARED_ROOT_PLACEHOLDER, CodeRef
from state.observed import TERMINAL, ObservedState, SnapshotState


class _Made(Protocol):
    @property
    def workspace(self) -> str: ...


M = TypeVar("M", bound=_Made)


def plan_dirs(desired: DesiredState, observed: ObservedState) -> list[Change]:
    """Missing directories of the NFS layout and argus's identity on the root: one change per shared root,
    none on a root argus does not trust (reconcile.plan.root: nothing is laid on an empty mount point)."""
    changes, seen, distrust = [], set(), distrusted(observed)
    for cluster, missing in sorted(observed.missing_dirs.items()):
        root = desired.shared_root(cluster)
        identity = needs_identity(observed.roots.get(cluster))
        if (missing or identity) and root not in seen and cluster not in distrust:
            seen.add(root)
            steps: list[Step] = [MkdirStep(cluster=cluster, path=rel) for rel in missing]
            steps += [RootStep(cluster=cluster)] if identity else []
            changes.append(Change(address=Address.dirs(cluster), action=Action.CREATE,
                                  reason=_layout_reason(len(missing), identity, root), steps=tuple(steps)))
    return changes


def _layout_reason(missing: int, identity: bool, root: str) -> str:
    what = [f"{missing} directories of the layout"] if missing else []
    what += ["argus's identity"] if identity else []
    return f"{' and '.join(what)} missing under {root}"


def code_ref(desired: DesiredState, observed: ObservedState, name: str) -> CodeRef:
    """The content a job on this snapshot runs: what is on disk, else what the source resolves to."""
    spec = desired.snapshots[name]
    state = observed.snapshots[name]
    pinned = state.manifest or state.source
    return CodeRef(snapshot=name, path=f"{SHARED_ROOT_PLACEHOLDER}/{snapshot_rel(spec)}",
                   commit=pinned.commit or "", digest=pinned.digest or "")


def plan_snapshots(desired: DesiredState, observed: ObservedState) -> tuple[list[Change], list[Diagnostic]]:
    changes, diagnostics = [], []
    for name, spec in sorted(desired.snapshots.items()):
        change, error = plan_snapshot(spec, observed.snapshots[name], desired.workspace.name)
        if change is not None:
            changes.append(change)
        if error is not None:
            diagnostics.append(error.located(desired.source(Address.code(name))))
    return changes, diagnostics


def plan_snapshot(spec: CodeSnapshot, state: SnapshotState, workspace: str) -> tuple[Change | None, Diagnostic | None]:
    """One snapshot: create it, leave it, or explain why neither is right (an error at a field of its spec)."""
    address, source, manifest = Address.code(spec.name), state.source, state.manifest
    if manifest is None:
        if source.error:
            return None, source.error
        step = SnapshotStep(cluster=spec.cluster, name=spec.name, commit=source.commit or "",
                            digest=source.digest or "")
        reason = f"commit {(source.commit or '')[:12]}{' + uncommitted files' if source.dirty else ''}, " \
                 f"{source.files} files, {source.bytes} bytes"
        return Change(address=address, action=Action.CREATE, reason=reason, steps=(step,)), None
    noop = Change(address=address, action=Action.NOOP,
                  reason=f"materialized at commit {manifest.commit[:12]} ({manifest.files} files)")
    if manifest.workspace != workspace:
        return _anothers(spec, state, workspace, noop)
    changed = _changed_source(spec, manifest.source)
    if changed is not None:
        return noop, changed
    if state.problem:
        return noop, _error(address, "", f"{address} is damaged: {state.problem}; jobs on it cannot be submitted. "
                                         "Restore it or give the code a new snapshot name")
    if source.digest and (source.commit, source.digest) != (manifest.commit, manifest.digest):
        field = "git.ref" if spec.git else "path"
        now = f"now resolves to {(source.commit or '')[:12]}" + (" with uncommitted files" if source.dirty else "")
        return noop, _error(address, field, f"{address} {now} but the snapshot holds {manifest.commit[:12]}; "
                                            "snapshots are immutable: give the new version a new name")
    return noop, None


def _anothers(spec: CodeSnapshot, state: SnapshotState, workspace: str,
              noop: Change) -> tuple[Change | None, Diagnostic | None]:
    """Another workspace made the snapshot this name places. The same source (a `git:` url and ref as its
    manifest records them: a materialized snapshot is never fetched again) or the same files (a `path:`) are
    shared: its owner's prune spares a snapshot any unfinished job on the cluster runs from (plan_prune), and a
    submit checks the files are there first. Another source under one name is an error naming both workspaces."""
    address, source, manifest = Address.code(spec.name), state.source, state.manifest
    assert manifest is not None
    same = _changed_source(spec, manifest.source) is None if spec.git else \
        bool(source.digest) and source.digest == manifest.digest
    if same and not state.problem:
        return noop.model_copy(update={"reason": f"materialized by workspace {manifest.workspace!r} at commit "
                                                 f"{manifest.commit[:12]}; shared: the same source"}), None
    ours = f"git {spec.git.url!r} at {spec.git.ref!r}" if spec.git else \
        f"path {spec.path!r} (commit {(source.commit or '?')[:12]}{', with uncommitted files' * source.dirty})"
    return noop, _error(address, "name", f"{address}'s place ({snapshot_rel(spec)}) holds workspace "
                                         f"{manifest.workspace!r}'s snapshot of {_written(manifest.source)} (commit "
                                         f"{manifest.commit[:12]}), and workspace {workspace!r}'s names {ours}: one "
                                         "name holds one source on a shared root; give this one another name or "
                                         "`repo:`")


def _changed_source(spec: CodeSnapshot, recorded: Mapping[str, Any]) -> Diagnostic | None:
    """An error when the spec's source as written is not the one the snapshot was made from.

    A materialized `git:` snapshot is never fetched again, so this is how an edited url or ref shows.
    """
    if spec.git is not None:
        was = recorded.get("git") if isinstance(recorded.get("git"), dict) else {}
        field = "git.url" if was.get("url") != spec.git.url else "git.ref" if was.get("ref") != spec.git.ref else ""
        now = f"git {spec.git.url!r} at {spec.git.ref!r}"
    else:
        field = "path" if recorded.get("path") != spec.path else ""
        now = f"path {spec.path!r}"
    if not field:
        return None
    address = Address.code(spec.name)
    return _error(address, field, f"{address} was materialized from {_written(recorded)} but its spec now says "
                                  f"{now}; snapshots are immutable: give the new source a new name")


def _written(recorded: Mapping[str, Any]) -> str:
    git = recorded.get("git")
    if isinstance(git, dict):
        return f"git {git.get('url')!r} at {git.get('ref')!r}"
    return f"path {recorded.get('path')!r}"


def plan_prune(desired: DesiredState, observed: ObservedState, runs: Mapping[str, list[RunView]],
               prune: bool) -> tuple[list[Change], list[Diagnostic]]:
    """This workspace's snapshots that no spec names: deleted only with --prune, never while in use."""
    wanted = {(desired.shared_root(s.cluster), snapshot_rel(s)) for s in desired.snapshots.values()}
    changes, diagnostics = [], []
    for cluster, root, rel, manifest in owned_unnamed(desired, observed.stored, wanted):
        address = Address.code(manifest.name)
        users = _unfinished_users(rel, runs) + _others_using(observed, f"{root}/{rel}", desired.workspace.name)
        if not prune:
            changes.append(Change(address=address, action=Action.NOOP,
                                  reason="no longer in the desired state; kept (`argus plan --prune` deletes it)"))
        elif users:
            diagnostics.append(Diagnostic(severity="error", address=address,
                                          message=f"{address} cannot be pruned: unfinished run(s) "
                                                  f"{', '.join(users)} use it"))
        else:
            changes.append(Change(address=address, action=Action.DELETE, reason="pruned: no spec names it",
                                  steps=(DeleteSnapshotStep(cluster=cluster, path=rel),)))
    return changes, diagnostics


def owned_unnamed(desired: DesiredState, stored: Mapping[str, Mapping[str, M]],
                  wanted: set[tuple[str, str]]) -> Iterator[tuple[str, str, str, M]]:
    """(cluster, root, rel, manifest) of what this workspace made on a shared root (a snapshot, an input version)
    and no spec names: what a prune may delete. Clusters may share a root: each place is given once."""
    seen: set[tuple[str, str]] = set()
    for cluster, found in sorted(stored.items()):
        root = desired.shared_root(cluster)
        for rel, manifest in sorted(found.items()):
            if manifest.workspace != desired.workspace.name or (root, rel) in wanted | seen:
                continue
            seen.add((root, rel))
            yield cluster, root, rel, manifest


def _error(address: str, field: str, message: str) -> Diagnostic:
    return Diagnostic(severity="error", address=address, field=field, message=message)


def _unfinished_users(rel: str, runs: Mapping[str, list[RunView]]) -> list[str]:
    path = f"{SHARED_ROOT_PLACEHOLDER}/{rel}"
    return sorted(r.submission_id for job_runs in runs.values() for r in job_runs
                  if not r.finished and _code_path(r) == path)


def _others_using(observed: ObservedState, path: str, workspace: str) -> list[str]:
    """Unfinished jobs of other workspaces that run from the snapshot (it is shared when their files match): any
    whose entrypoint names its folder (argus's `cd <folder> &&`, inside its wrapper). A job that only seems to
    use it merely keeps it from being pruned."""
    return sorted(job.submission_id for cluster in observed.clusters.values() for job in cluster.jobs
                  if job.workspace != workspace and job.status not in TERMINAL
                  and re.search(re.escape(path) + r"(?![\w.-])", job.entrypoint))


def _code_path(run: RunView) -> str | None:
    return run.submission.code.path if run.submission and run.submission.code else None
