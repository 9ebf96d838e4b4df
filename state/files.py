"""Small filesystem helpers shared by the NFS adapters: writes are atomic, appends are durable."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

LOCK_PAUSE = 0.05
"""Seconds between two tries of a busy lock: the holders keep it for moments, not seconds."""


def write_atomic(path: Path, text: str | bytes, durable: bool = True) -> None:
    """Readers see the old file or the new one, never half of it (rename is atomic on NFS too).
    `durable`: on disk before it is renamed in (an fsync: a round trip on NFS), for what argus decides
    from; a copy kept for people (configs, debug snapshots) may reach the disk a moment later."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8") if isinstance(text, str) else text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_beneath(root: str | Path, rel: str, text: str, durable: bool = True) -> None:
    """write_atomic for a file on the shared root: every directory on the way made or opened without
    following a symlink (state.beneath.made_dir), the file replaced whole, never written through a link."""
    from state.beneath import made_dir

    parent, name = os.path.split(rel)
    with made_dir(root, parent) as folder:
        replace_in(folder, name, text, durable=durable)


def replace_in(folder: int, name: str, data: str | bytes, mode: int = 0o644, durable: bool = True) -> None:
    """`name` in the directory open as `folder`, written whole: a new temporary file (never a link
    someone planted) renamed over it, so readers see the old file or the new one. Text is written as
    UTF-8; bytes as they are. The new file is made with `mode` (a umask can only take bits away).
    `durable`: as write_atomic's."""
    temp = f".{name}.{uuid.uuid4().hex[:8]}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=folder)
        raise


def write_json(path: Path, data: Any, durable: bool = True) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n", durable)


def append_line(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def lock_within(fd: int, seconds: float, *, unlocked_ok: bool) -> bool:
    """The file's exclusive record lock (fcntl.lockf: NFS carries it to the server), tried until `seconds`
    pass: True once held, False when other processes held it all along. NFS without a lock manager
    (ENOLCK) locks nothing: True when `unlocked_ok` (the caller may go on without it), raised otherwise,
    as is any other error. The lock is released when fd is closed."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as err:
            if err.errno == errno.ENOLCK and unlocked_ok:
                return True
            if err.errno not in (errno.EACCES, errno.EAGAIN):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(LOCK_PAUSE)
