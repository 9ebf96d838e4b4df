"""Reading, listing and removing beneath a root without ever following a symlink.

The shared root is writable by every Ray job, so any path component under it may be swapped for a
symlink, a FIFO or a device between a check and a use. These helpers hold directory file descriptors
opened with O_NOFOLLOW from the root down, and act relative to them: a planted or swapped symlink
makes them fail, never reach outside the root. Every file argus reads on a shared root goes through
read_regular (or open_regular, for a log streamed in chunks), every listing through names_in: a FIFO
never blocks (opened O_NONBLOCK, then checked regular), a file bigger than its cap is refused unread,
a directory of a million entries is never held in memory. docs/shared-root.md is the trust model.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

from specs.errors import ArgusError
from specs.parse.reading import read_at_most

DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""O_NONBLOCK: opening a FIFO for reading waits for a writer without it; fstat then refuses it unread."""
ROOT = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
"""The root itself is the operator's setting (a mount point may well be a symlink); nothing below it is followed."""


class NotBeneath(OSError):
    """The path leaves the root, or one of its components is a symlink or not a directory."""


class RootMissing(ArgusError):
    """The shared root itself is not there: argus never makes it (an NFS not mounted, a typo'd path)."""


@contextlib.contextmanager
def opened_dir(root: str | Path, rel: str) -> Iterator[int]:
    """A descriptor of root/rel, each component opened without following symlinks."""
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or ".." in parts:
        raise NotBeneath(f"{rel!r} is not a relative path beneath {root}")
    fd = os.open(root, ROOT)
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


@contextlib.contextmanager
def made_dir(root: str | Path, rel: str) -> Iterator[int]:
    """A descriptor of root/rel for writing in, each missing component made in its parent and none
    followed if it is a symlink (a run directory a job made a link in advance leads nowhere).
    The root itself is never made: writing into a root that is not there would lay a new record
    beside the real one (an NFS not mounted, a typo'd path). Only the layout step makes a relative
    root, the workspace's own folder (reconcile.execute.files.lay_root)."""
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or ".." in parts:
        raise NotBeneath(f"{rel!r} is not a relative path beneath {root}")
    fd = open_root(root)
    try:
        for part in parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            try:
                child = os.open(part, DIRECTORY, dir_fd=fd)
            except OSError as err:
                raise NotBeneath(f"{root}/{rel}: {part!r} is a symlink or not a directory ({err.strerror}): "
                                 "argus does not write through it; remove it") from err
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def open_root(root: str | Path) -> int:
    """A descriptor of the shared root itself (followed: a mount point may be a link); RootMissing if absent."""
    try:
        return os.open(root, ROOT)
    except FileNotFoundError:
        raise RootMissing(f"shared root {root} does not exist on this machine: argus never creates it. Mount the "
                          "NFS there, or fix the cluster's `shared_root`") from None


def make_dirs(root: str | Path, rel: str) -> None:
    """root/rel and what is missing on the way, none of it followed if a symlink."""
    with made_dir(root, rel):
        pass


def unlink_beneath(root: str | Path, rel: str) -> None:
    """Remove the file root/rel (a link itself, never its target); nothing when it or its directory is gone."""
    path = PurePosixPath(rel)
    try:
        with opened_dir(root, str(path.parent)) as folder:
            os.unlink(path.name, dir_fd=folder)
    except FileNotFoundError:
        pass
    except NotBeneath as err:
        if not isinstance(err.__cause__, FileNotFoundError):
            raise


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


class Refused(NotBeneath):
    """A file argus reads on the shared root is a symlink, a FIFO, a device or a directory, or bigger
    than argus ever writes one: refused unread. The message names the path and what it is."""


class IsLink(Refused):
    """The file is a symlink."""


class NotRegular(Refused):
    """The file is a FIFO, a device, a socket or a directory."""


class TooBig(Refused):
    """The file is bigger than its cap, or a directory holds more names than its cap."""


def read_regular(root: str | Path, rel: str, cap: int) -> bytes | None:
    """root/rel's bytes; None when it (or a directory on the way, or the root) does not exist.
    Raises Refused when it is no regular file of at most `cap` bytes beneath root (a link on the way
    or at the end, a FIFO, a device), never blocking and never reading more than cap + 1 bytes."""
    path = PurePosixPath(rel)
    try:
        with opened_dir(root, str(path.parent)) as folder:
            return read_regular_at(folder, path.name, cap, f"{root}/{rel}")
    except NotBeneath as err:
        if isinstance(err, Refused) or not isinstance(err.__cause__, FileNotFoundError):
            raise
        return None
    except FileNotFoundError:  # the root itself is not there (not mounted)
        return None


@contextlib.contextmanager
def opened_regular(root: str | Path, rel: str) -> Iterator[int | None]:
    """A descriptor of the regular file root/rel for reading in chunks (a log), or None when absent;
    Refused (or NotBeneath) as read_regular. The caller bounds what it reads."""
    path = PurePosixPath(rel)
    fd = None
    try:
        with opened_dir(root, str(path.parent)) as folder:
            fd = open_regular(folder, path.name, f"{root}/{rel}")
    except NotBeneath as err:
        if isinstance(err, Refused) or not isinstance(err.__cause__, FileNotFoundError):
            raise
    except FileNotFoundError:
        pass
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def stat_beneath(root: str | Path, rel: str) -> os.stat_result | None:
    """lstat of root/rel, no directory on the way followed; None when it cannot be reached."""
    path = PurePosixPath(rel)
    try:
        with opened_dir(root, str(path.parent)) as folder:
            return os.stat(path.name, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return None


def read_regular_at(folder: int, name: str, cap: int, shown: str | None = None) -> bytes | None:
    """read_regular for a file of a directory already opened without following links."""
    fd = open_regular(folder, name, shown)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        if size > cap:  # a sparse 2 GB file is refused by its size, not read
            raise TooBig(f"{shown or name} is larger than {cap} bytes")
        data = read_at_most(fd, cap + 1)
    finally:
        os.close(fd)
    if len(data) > cap:  # grew since fstat
        raise TooBig(f"{shown or name} is larger than {cap} bytes")
    return data


def open_regular(folder: int, name: str, shown: str | None = None) -> int | None:
    """A descriptor of the regular file `name` in `folder` (the caller closes it); None when absent.
    Refused when it is anything else: a device is refused by lstat before any open (opening one may
    act), and what is opened is checked again, since it may have been swapped in between."""
    shown = shown or name
    try:
        _refuse_other(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode, shown)
        fd = os.open(name, READ, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as err:
        if isinstance(err, Refused):
            raise
        if err.errno == errno.ELOOP:
            raise IsLink(f"{shown} is a symlink, which argus does not follow") from None
        raise
    try:
        _refuse_other(os.fstat(fd).st_mode, shown)
    except Refused:
        os.close(fd)
        raise
    return fd


def _refuse_other(mode: int, shown: str) -> None:
    if stat.S_ISLNK(mode):
        raise IsLink(f"{shown} is a symlink, which argus does not follow")
    if not stat.S_ISREG(mode):
        raise NotRegular(f"{shown} is not a regular file ({_kind(mode)})")


def names_in(folder: int | str | Path, keep: Callable[[str], bool], limit: int, shown: str = "") -> list[str]:
    """The names in a directory that `keep` accepts, sorted; listed entry by entry (os.scandir), so a
    directory of a million names holds no more than `limit` kept ones in memory. Refused beyond limit."""
    found: list[str] = []
    with os.scandir(folder) as entries:  # type: ignore[type-var]  # scandir takes a descriptor too
        for entry in entries:
            if keep(entry.name):
                found.append(entry.name)
                if len(found) > limit:
                    raise TooBig(f"{shown or folder}: more than {limit} entries argus would read: "
                                  "not read (remove what argus did not write)")
    return sorted(found)


def _kind(mode: int) -> str:
    """What a file that is not regular is, for a message."""
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
    return next((name for test, name in kinds if test(mode)), "of an unknown kind")
