"""Steps several commands share: load the desired state, check the addresses an option names. (Connecting,
observing and planning, which the loop shares too, are reconcile.execute.cycle's.)"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from pathlib import Path

from reconcile.model import PlanOptions
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic, Where
from specs.errors import ArgusError, SpecError
from specs.load.loader import load_workspace


def load(directory: Path) -> DesiredState:
    """The workspace's desired state; its problems name files as the user finds them (`shown_from`). What each
    unchanged spec file gives is taken from argus's memo (state.memo: it can cost time, never change a result)."""
    from state.code.cache import memo_for

    memo = memo_for("specs", str(directory.resolve()))
    try:
        return load_workspace(directory, memo)
    except SpecError as err:
        prefix = shown_prefix(directory)
        if not prefix:
            raise
        raise SpecError(shown_from(prefix, err.diagnostics)) from None
    finally:
        memo.save()


def chosen_cluster(desired: DesiredState, cluster: str | None) -> str:
    """The cluster a command acts on: the one named (`--cluster`), or the workspace's only one."""
    if cluster is not None and cluster not in desired.clusters:
        raise ArgusError(f"no Cluster named {cluster!r} in the workspace (it has {', '.join(desired.clusters)})")
    if cluster is None and len(desired.clusters) != 1:
        raise ArgusError(f"the workspace has {len(desired.clusters)} clusters: pass --cluster NAME")
    return cluster or next(iter(desired.clusters))


def shown_prefix(workspace: Path) -> str:
    """What goes before a workspace-relative file name to name it for the user. Inside the workspace's git
    repository: its path from the current directory when it lies there (`jobs/x.yaml` from the workspace
    itself, as always; `teams/vision/jobs/x.yaml` from the repository's root), else from the repository's
    root (the name every teammate and CI know the file by). Outside git: from the current directory when
    the workspace lies there, else nothing (names relative to the workspace, as always)."""
    from state.code.gitinfo import repository_root

    here, path = Path.cwd().resolve(), workspace.resolve()
    repository = repository_root(path)
    beneath_here = path == here or here in path.parents
    if beneath_here and (repository is None or repository == here or repository in here.parents):
        rel = os.path.relpath(path, here)
    elif repository is not None:
        rel = os.path.relpath(path, repository)
    else:
        return ""
    return "" if rel == "." else Path(rel).as_posix() + "/"


def shown_from(prefix: str, diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics with `prefix` before each file they name. A shared file a workspace includes
    (`../../platform/clusters.yaml`) is named from the same place: `platform/clusters.yaml` from the
    repository's root (the prefix is a resolved path, so stepping out of it lexically is exact)."""
    return [d.model_copy(update={"where": Where(_joined(prefix, d.where.file), d.where.line)}) if d.where else d
            for d in diagnostics]


def _joined(prefix: str, file: str) -> str:
    return posixpath.normpath(prefix + file) if file.startswith("../") else prefix + file


def check_addresses(desired: DesiredState, options: PlanOptions) -> None:
    """--target and --replace must name things that exist: a typo must not mean "nothing"."""
    inputs = set(desired.inputs)  # dataset.NAME, model.NAME: --replace materialises a version again
    known = {f"job.{n}" for n in desired.jobs} | {f"code.{n}" for n in desired.snapshots} | inputs
    replaceable = {a for a in known if a.startswith("job.")} | inputs
    for flag, addresses, allowed in (("--target", options.targets, known), ("--replace", options.replace, replaceable)):
        unknown = sorted(set(addresses) - allowed)
        if unknown:
            raise ArgusError(f"{flag} {', '.join(unknown)}: no such address. Known: {', '.join(sorted(allowed))}")
