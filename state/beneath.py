"""Removing trees beneath a root without ever following a symlink.

The shared root is writable by every Ray job, so any path component under it may be swapped for a
symlink between a check and a use. These helpers hold directory file descriptors opened with
O_NOFOLLOW from the root down, and act relative to them: a planted or swapped symlink makes them
fail, never reach outside the root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class NotBeneath(OSError):
    """The path leaves the root, or one of its components is a symlink or not a directory."""


@contextlib.contextmanager
def opened_dir(root: str | Path, rel: str) -> Iterator[int]:
    """A descriptor of root/rel, each component opened without following symlinks."""
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or ".." in parts:
        raise NotBeneath(f"{rel!r} is not a relative path beneath {root}")
    fd = os.open(root, DIRECTORY)
    try:
        for part in parts:
            try:
                child = os.open(part, DIRECTORY, dir_fd=fd)
            except OSError as err:
                raise NotBeneath(f"{root}/{rel}: {part!r} is a symlink or not a directory ({err.strerror})") from err
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def remove_beneath(root: str | Path, rel: str, aside: str) -> None:
    """Move root/rel aside (renamed to `aside` in the same directory: readers never see half of it),
    make its sealed directories writable again, and remove it."""
    parent, name = str(PurePosixPath(rel).parent), PurePosixPath(rel).name
    with opened_dir(root, parent) as fd:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode):
            raise NotBeneath(f"{root}/{rel} is not a directory (a symlink?): not removing it")
        os.rename(name, aside, src_dir_fd=fd, dst_dir_fd=fd)
        _unseal(fd, aside)
        shutil.rmtree(aside, dir_fd=fd)


def unseal_path(path: Path) -> None:
    """remove_tree's helper for argus's own temp dirs: writable again, symlinks never followed."""
    with contextlib.suppress(OSError), opened_dir(path.parent, "") as fd:
        _unseal(fd, path.name)


def _unseal(parent_fd: int, name: str) -> None:
    """fwalk never follows a symlink (it checks each directory it opens is the one it listed)."""
    for _, _, _, fd in os.fwalk(name, dir_fd=parent_fd, follow_symlinks=False):
        os.fchmod(fd, 0o755)
