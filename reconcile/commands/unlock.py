"""argus unlock LOCK_ID: break the lock an apply left behind when it died."""

from __future__ import annotations

from pathlib import Path

import typer

from reconcile.boundary import EXIT_OK
from reconcile.commands.common import load
from specs.errors import ArgusError


def run(directory: Path, lock_id: str) -> int:
    from state.audit import log as audit
    from state.audit.events import LockBroken
    from state.queue import lock

    desired = load(directory)
    broken = [(root, info) for root in sorted(set(desired.shared_roots.values()))
              if (info := lock.break_lock(root, desired.workspace.name, lock_id)) is not None]
    if not broken:
        raise ArgusError(f"No lock with id {lock_id} is held for workspace {desired.workspace.name!r}; "
                         "nothing was changed.")
    for root, info in broken:
        audit.append(root, desired.workspace.name, LockBroken(lock=info.model_dump()))
        typer.echo(f"Broke lock {info.id} of {info.user} on {info.host} (pid {info.pid}, plan {info.plan_id}, "
                   f"since {info.started}) under {root}.")
    return EXIT_OK
