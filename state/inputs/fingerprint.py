"""A `path:` source's pin: a cheap fingerprint of what is there now, so that a changed file is a new version.

sha256 over the sorted (relpath, size, mtime_ns) of the path's regular files (the path itself when it is one
file), nothing read. Every component from / down is opened without following a link (state.beneath), and a
symlink, FIFO or device anywhere inside is refused: argus adopts plain data only, and a link could publish a
file the spec's reviewer never saw (the runner's keys) to every job of the cluster.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import PurePosixPath

from state import beneath
from state.inputs.walk import NotSealable

MAX_FILES = 100_000
MAX_DEPTH = 32


class NotAdoptable(NotSealable):
    """A `path:` source argus does not adopt as it is (a link, a device, too many files, not there)."""


def fingerprint(path: str) -> str:
    """The 64-hex fingerprint of the directory or file at the absolute `path`."""
    return fingerprint_of(entries(path))


def fingerprint_of(found: list[tuple[str, os.stat_result]]) -> str:
    h = hashlib.sha256()
    for rel, info in sorted(found, key=lambda entry: entry[0]):
        h.update(f"{rel}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return h.hexdigest()


def entries(path: str) -> list[tuple[str, os.stat_result]]:
    """(relpath, lstat) of every regular file at `path` (the file's own name when it is one file)."""
    parent, name = _split(path)
    try:
        with beneath.opened_dir("/", parent) as fd:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISREG(info.st_mode):
                _refuse_private(info.st_mode, path)
                return [(name, info)]
            _refuse(info.st_mode, path)
            _refuse_closed(info.st_mode, path)
            child = _open_dir(fd, name, path)
    except FileNotFoundError:
        raise NotAdoptable(f"{path} does not exist: stage the files there, or fix the spec's `path`") from None
    except beneath.NotBeneath as err:
        raise NotAdoptable(f"{err}: argus adopts no path through a symlink; give the real path") from None
    try:
        found = []
        for entry in _walk(child, "", path, 0):
            found.append(entry)
            if len(found) > MAX_FILES:
                raise NotAdoptable(f"{path} holds more than {MAX_FILES} files: argus does not adopt it")
        return found
    finally:
        os.close(child)


def _walk(fd: int, prefix: str, shown: str, depth: int) -> Iterator[tuple[str, os.stat_result]]:
    if depth > MAX_DEPTH:
        raise NotAdoptable(f"{shown}: deeper than {MAX_DEPTH} directories: argus does not adopt it")
    for name in beneath.names_in(fd, lambda _: True, MAX_FILES, f"{shown}/{prefix}"):
        if name.startswith("."):
            raise NotAdoptable(f"{shown}/{prefix}{name} is hidden: argus adopts data only, and a hidden file or "
                               "directory (.ssh, .env, .git) is where keys live; every job of the cluster would read "
                               "it. Stage the data in a directory of its own, without hidden names")
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISREG(info.st_mode):
            _refuse_private(info.st_mode, f"{shown}/{prefix}{name}")
            yield f"{prefix}{name}", info
            continue
        _refuse(info.st_mode, f"{shown}/{prefix}{name}")
        _refuse_closed(info.st_mode, f"{shown}/{prefix}{name}")
        child = _open_dir(fd, name, f"{shown}/{prefix}{name}")
        try:
            yield from _walk(child, f"{prefix}{name}/", shown, depth + 1)
        finally:
            os.close(child)


def _refuse_private(mode: int, shown: str) -> None:
    """A file others may not read is private (a key, a token): adopting it would publish it to every job of
    the cluster and seal it 0444, so argus never does; making it readable (chmod o+r) is the owner's say."""
    if not mode & stat.S_IROTH:
        raise NotAdoptable(f"{shown} is not readable by others (mode {stat.S_IMODE(mode):o}): argus would "
                           "publish it to every job of the cluster; not adopted. If it is data, make it readable "
                           "(chmod a+r) and plan again")


def _refuse_closed(mode: int, shown: str) -> None:
    """A directory others cannot list and enter (a 0700 home) keeps what is in it private, whatever the files'
    own modes: argus does not publish it either."""
    if (mode & (stat.S_IROTH | stat.S_IXOTH)) != (stat.S_IROTH | stat.S_IXOTH):
        raise NotAdoptable(f"{shown} is a directory others cannot list or enter (mode {stat.S_IMODE(mode):o}): "
                           "what is in it is private, and argus would publish it to every job of the cluster; not "
                           "adopted. If it is data, make it readable (chmod a+rx) and plan again")


def _refuse(mode: int, shown: str) -> None:
    if stat.S_ISLNK(mode):
        raise NotAdoptable(f"{shown} is a symlink: argus adopts plain files only (a link could publish a file the "
                           "spec's reviewer never saw); replace it with the file itself")
    if not stat.S_ISDIR(mode):
        raise NotAdoptable(f"{shown} is not a regular file or a directory (a FIFO, a device or a socket): argus "
                           "adopts plain files only; remove it")


def _open_dir(fd: int, name: str, shown: str) -> int:
    try:
        return os.open(name, beneath.DIRECTORY, dir_fd=fd)
    except OSError as err:
        raise NotAdoptable(f"{shown} changed while argus read it ({err.strerror}): run again") from None


def _split(path: str) -> tuple[str, str]:
    pure = PurePosixPath(path)
    if not pure.is_absolute() or pure == PurePosixPath("/") or ".." in pure.parts:
        raise NotAdoptable(f"{path!r}: a `path:` source is an absolute path without '..'")
    return str(pure.parent.relative_to("/")) if pure.parent != PurePosixPath("/") else "", pure.name
