"""Which admissions' argus processes are gone: a liveness lock per admitting process.

An apply SIGKILLed between writing its admission and submitting leaves an admitted entry whose run
Ray will never list. Each argus process that admits on a shared root first takes a POSIX record lock
on a file of its own, .argus/locks/alive/<token>.lock, and names the token in every entry it writes
(LedgerEntry.holder). It keeps the lock until it exits; the kernel (or NFS's lock manager) releases
it the moment the process dies, however it dies. Anyone can then tell within one read that the
process that admitted an entry is gone: the lock can be taken.

POSIX record locks belong to the process, and closing any descriptor of the file drops them all:
this process never opens its own token's file a second time (`gone` answers for it from memory).

A job can delete a token's file (it can write the shared root): its admissions then read as gone,
which is no more than deleting the ledger would do. It cannot make a gone process look alive for
longer than ADMIT_GRACE (reconcile.plan.queue bounds an unsubmitted admission by it as before).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import os
import re
import stat
import threading
import uuid
from collections.abc import Iterable

from state.queue.ledger import LOCK_DIR, QueueUnreadable, made_queue_dirs, queue_dir

ALIVE_DIR = f"{LOCK_DIR}/alive"
TOKEN = re.compile(r"[0-9a-f]{32}")
SWEEP = 64
"""Files of gone processes removed when a process first takes its token: a bound on each one's work."""

_held: dict[str, tuple[str, int]] = {}
"""Shared root -> (this process's token there, the descriptor that holds its lock, kept open)."""
_guard = threading.Lock()


def token(shared_root: str) -> str:
    """This process's token on the shared root, its lock taken on first use and held until exit."""
    with _guard:
        if shared_root in _held:
            return _held[shared_root][0]
        _forget_removed_roots()
        made_queue_dirs(shared_root, ALIVE_DIR)
        name = uuid.uuid4().hex
        with queue_dir(shared_root, ALIVE_DIR, create=False) as folder:
            if folder is None:
                raise QueueUnreadable(f"{shared_root}/{ALIVE_DIR} cannot be created")
            fd = os.open(f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=folder)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh file: nobody else can hold it
            _sweep(folder, {t for t, _ in _held.values()} | {name})
        _held[shared_root] = (name, fd)
        return name


def _forget_removed_roots() -> None:
    """A long-lived process (a test session) admitting on many short-lived roots keeps no descriptor
    for a root that no longer exists."""
    for root in [r for r in _held if not os.path.isdir(r)]:
        with contextlib.suppress(OSError):
            os.close(_held.pop(root)[1])


def gone(shared_root: str, tokens: Iterable[str]) -> frozenset[str]:
    """The tokens whose process is proven gone: its file is missing or its lock is free. A file that
    is not a regular file proves nothing (it stays alive, bounded by the grace)."""
    ours = {t for t, _ in _held.values()}
    wanted = sorted({t for t in tokens if TOKEN.fullmatch(t) and t not in ours})
    if not wanted:
        return frozenset()
    with queue_dir(shared_root, ALIVE_DIR, create=False) as folder:
        if folder is None:
            return frozenset(wanted)  # no process ever took a lock here: none of them is alive
        return frozenset(t for t in wanted if _free(folder, f"{t}.lock"))


def _free(folder: int, name: str) -> bool:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno in (errno.EACCES, errno.EAGAIN):
                return False
            raise
        with contextlib.suppress(OSError):  # its process is gone: nobody needs the file any more
            os.unlink(name, dir_fd=folder)
        return True
    finally:
        os.close(fd)


def _sweep(folder: int, keep: set[str]) -> None:
    """Remove the files of processes that died without removing theirs (a SIGKILL), a few at a time."""
    names = [n[: -len(".lock")] for n in os.listdir(folder) if n.endswith(".lock")]
    stale = [n for n in names if TOKEN.fullmatch(n) and n not in keep][:SWEEP]
    for name in stale:
        _free(folder, f"{name}.lock")


@atexit.register
def _release() -> None:
    """A process that exits normally removes its files (one that is killed leaves them to `_sweep`)."""
    for root, (name, fd) in list(_held.items()):
        with contextlib.suppress(Exception), queue_dir(root, ALIVE_DIR, create=False) as folder:
            if folder is not None:
                os.unlink(f"{name}.lock", dir_fd=folder)
        with contextlib.suppress(OSError):
            os.close(fd)
    _held.clear()


os.register_at_fork(after_in_child=_held.clear)  # a forked child holds none of its parent's locks
