"""The apply lock: <shared_root>/.argus/locks/<workspace>.lock, created atomically (O_EXCL).

Two applies of one workspace never run at once; the loser is told who holds the lock and for how
long, and `argus unlock LOCK_ID` breaks a lock whose holder died.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from specs.base import Frozen
from specs.errors import ArgusError
from state.audit.log import actor
from state.beneath import made_dir, opened_dir, read_regular, stat_beneath, unlink_beneath
from state.runs.records import now


class LockInfo(Frozen):
    id: str
    workspace: str
    user: str
    host: str
    pid: int
    started: str
    plan_id: str


class LockHeld(ArgusError):
    """Another apply of this workspace holds the lock."""


MAX_LOCK_BYTES = 64 * 1024
"""A lock is a few hundred bytes of JSON."""


def lock_path(shared_root: str, workspace: str) -> Path:
    return Path(shared_root) / ".argus" / "locks" / f"{workspace}.lock"


@contextlib.contextmanager
def held(shared_roots: list[str], workspace: str, plan_id: str, timeout: float = 0.0) -> Iterator[LockInfo]:
    """Hold the lock on every shared root (in a fixed order, so two applies cannot deadlock)."""
    info = LockInfo(id=uuid.uuid4().hex[:12], workspace=workspace, user=actor(), host=socket.gethostname(),
                    pid=os.getpid(), started=now(), plan_id=plan_id)
    taken: list[str] = []
    made: dict[str, list[str]] = {}
    try:
        for root in sorted(set(shared_roots)):
            made[root] = [rel for rel in (".argus", ".argus/locks") if stat_beneath(root, rel) is None]
            acquire(root, info, timeout)
            taken.append(root)
        yield info
    finally:
        for root in taken:
            release(root, info)
            _tidy(root, made.get(root, []))


def _tidy(shared_root: str, made: list[str]) -> None:
    """The directories this lock made, removed again when argus left nothing else in `.argus` (an apply that
    found an empty mount point, reconcile.plan.root, leaves it as it found it); a root the apply laid out keeps
    them. Another apply racing into them makes them again."""
    if ".argus" not in made or (stat_beneath(shared_root, ".argus/audit") is not None):
        return
    for rel in reversed(made):
        parent, name = os.path.split(rel)
        with contextlib.suppress(OSError), opened_dir(shared_root, parent) as folder:
            os.rmdir(name, dir_fd=folder)


def acquire(shared_root: str, info: LockInfo, timeout: float) -> None:
    path = lock_path(shared_root, info.workspace)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with made_dir(shared_root, ".argus/locks") as folder:  # never through a linked directory
                fd = os.open(path.name, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                             dir_fd=folder)
        except FileExistsError:
            if _holder_died_here(path, info.workspace):
                continue
            if time.monotonic() >= deadline:
                raise LockHeld(_held_message(path)) from None
            time.sleep(0.5)
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(info.model_dump(), indent=2) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        return


def release(shared_root: str, info: LockInfo) -> None:
    """Remove the lock only if it is still ours (someone may have broken and retaken it)."""
    path = lock_path(shared_root, info.workspace)
    holder = read(path)
    if holder is not None and holder.id == info.id:
        unlink_beneath(path.parents[2], f".argus/locks/{path.name}")


def read(path: Path) -> LockInfo | None:
    """The lock at <root>/.argus/locks/<workspace>.lock; None when absent or not one argus wrote (a link,
    a FIFO, a device or a big file a job planted is refused unread, never followed or waited on)."""
    try:
        raw = read_regular(path.parents[2], f".argus/locks/{path.name}", MAX_LOCK_BYTES)
        return LockInfo.model_validate(json.loads(raw)) if raw is not None else None
    except (OSError, ValueError, RecursionError, ValidationError):
        return None


def break_lock(shared_root: str, workspace: str, lock_id: str) -> LockInfo | None:
    """Remove the lock if its id is lock_id; return what was broken."""
    path = lock_path(shared_root, workspace)
    holder = read(path)
    if holder is None or holder.id != lock_id:
        return None
    unlink_beneath(path.parents[2], f".argus/locks/{path.name}")
    return holder


def break_abandoned_loop_lock(shared_root: str, workspace: str, older_than: float) -> LockInfo | None:
    """The lock of an `argus serve` on another host that lost its lease (killed, or cut off) and held
    it longer than any turn takes: the loop that now holds the lease breaks it (audited), since
    `argus unlock` needs a person. A lock of a person's `argus apply` is never broken here."""
    path = lock_path(shared_root, workspace)
    holder = read(path)
    if holder is None or not holder.user.startswith("argus serve@"):
        return None
    if (holder.host, holder.pid) == (socket.gethostname(), os.getpid()) or _seconds_since(holder.started) < older_than:
        return None
    if break_lock(shared_root, workspace, holder.id) is None:
        return None
    from state.audit import log as audit
    from state.audit.events import LockBroken

    audit.append(shared_root, workspace, LockBroken(reason="left by an argus serve that lost its lease",
                                                    lock=holder.model_dump()))
    return holder


def _seconds_since(started: str) -> float:
    try:
        return (datetime.now(timezone.utc) - datetime.fromisoformat(started)).total_seconds()
    except ValueError:
        return 0.0


def _holder_died_here(path: Path, workspace: str) -> bool:
    """A lock whose holder ran on this host and no longer exists is broken at once (and audited):
    a SIGKILLed apply must not block the next one. Holders on other hosts need `argus unlock`."""
    holder = read(path)
    if holder is None or holder.host != socket.gethostname() or _alive(holder.pid):
        return False
    unlink_beneath(path.parents[2], f".argus/locks/{path.name}")
    from state.audit import log as audit
    from state.audit.events import LockBroken

    audit.append(str(path.parents[2]), workspace, LockBroken(reason="holder process is gone",
                                                             lock=holder.model_dump()))
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _held_message(path: Path) -> str:
    holder = read(path)
    if holder is None:
        return f"The apply lock {path} exists but cannot be read. If no apply is running, remove it by hand."
    return (f"Another apply holds the lock of workspace {holder.workspace!r}: {holder.user} on {holder.host} "
            f"(pid {holder.pid}, plan {holder.plan_id}) for {_age(holder.started)}. Wait for it "
            f"(--lock-timeout SECONDS), or if that apply died, run `argus unlock {holder.id}`.")


def _age(started: str) -> str:
    try:
        seconds = (datetime.now(timezone.utc) - datetime.fromisoformat(started)).total_seconds()
    except ValueError:
        return "an unknown time"
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"
