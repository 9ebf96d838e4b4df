"""Walking a version's directory beneath the shared root the way a hostile job's leftovers cannot abuse.

A materialisation run wrote the staging directory, and any job may still write there: every directory is
opened with O_NOFOLLOW relative to its parent's descriptor (state.beneath), every file is lstat'd and then
opened O_NOFOLLOW|O_NONBLOCK and checked regular again (beneath.open_regular), so a symlink, a FIFO, a device
or a socket is refused, never followed or read. Each file is hashed from the descriptor argus opened, and what
is said of it (facts.py) is read from that same descriptor: a file swapped after the hash is not the one
described. Bounded in files and depth: a directory of a million names is refused, not held.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from specs.errors import ArgusError
from state import beneath
from state.inputs.facts import facts_of

MAX_FILES = 100_000
"""Files one version may hold: a data set or model has tens to a few thousand."""
MAX_DEPTH = 32
CHUNK = 1 << 20


class NotSealable(ArgusError):
    """What a version's directory holds cannot be sealed (a link, a device, a file not as pinned): nothing sealed."""


@dataclass(frozen=True)
class Walked:
    """One regular file of the directory, as argus read it."""

    path: str
    size: int
    sha256: str
    blob_sha1: str | None = None
    """The git blob sha1, when the caller asked for it (a hub file listed without LFS)."""
    facts: dict[str, Any] = field(default_factory=dict)
    identity: tuple[int, int] = (0, 0)
    """The (device, inode) of the file hashed: an adopted path's files must be the ones apply linked."""


def walk(root: str | Path, rel: str, kind: str, blobs: frozenset[str] = frozenset(),
         known: Mapping[str, int | None] | None = None) -> tuple[list[Walked], tuple[int, int]]:
    """Every regular file beneath root/rel, sorted by path, and the (device, inode) of the directory walked (the
    one a rename must then move); NotSealable on anything but files and directories. `known`: the only names
    (and, where given, sizes) the version may hold, checked before a file is read, so a huge file a job planted
    is refused by its stat, never hashed."""
    found: list[Walked] = []
    try:
        with beneath.opened_dir(root, rel) as fd:
            info = os.fstat(fd)
            _walk_dir(fd, "", found, kind, blobs, f"{root}/{rel}", 0, known)
    except beneath.Refused as err:
        raise NotSealable(f"{err}: argus seals regular files and directories only; remove it and run again") from None
    except beneath.NotBeneath as err:
        raise NotSealable(f"{err}: not sealing it") from None
    return sorted(found, key=lambda w: w.path), (info.st_dev, info.st_ino)


def make_read_only(root: str | Path, rel: str) -> None:
    """Files 0444 and directories 0555 beneath root/rel, through descriptors opened without following links:
    nothing (a job's stray log) can be added to or changed in a sealed version by a mere write."""
    with beneath.opened_dir(root, rel) as fd:
        _read_only(fd, f"{root}/{rel}")


def _read_only(fd: int, shown: str) -> None:
    for name in beneath.names_in(fd, lambda _: True, MAX_FILES, shown):
        if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            child = _open_dir(fd, name, f"{shown}/{name}")
            try:
                _read_only(child, f"{shown}/{name}")
            finally:
                os.close(child)
            continue
        file = beneath.open_regular(fd, name, f"{shown}/{name}")
        if file is not None:
            os.fchmod(file, 0o444)
            os.close(file)
    os.fchmod(fd, 0o555)


def _walk_dir(fd: int, prefix: str, found: list[Walked], kind: str, blobs: frozenset[str], shown: str,
              depth: int, known: Mapping[str, int | None] | None = None) -> None:
    if depth > MAX_DEPTH:
        raise NotSealable(f"{shown}/{prefix}: deeper than {MAX_DEPTH} directories: not sealing it")
    for name in beneath.names_in(fd, lambda _: True, MAX_FILES, f"{shown}/{prefix}"):
        path = f"{prefix}{name}"
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            child = _open_dir(fd, name, f"{shown}/{path}")
            try:
                _walk_dir(child, f"{path}/", found, kind, blobs, shown, depth + 1, known)
            finally:
                os.close(child)
            continue
        if known is not None and stat.S_ISREG(info.st_mode) and path not in known:
            raise NotSealable(f"{shown}/{path} is not expected (the pinned source lists no such file): not sealed; "
                              "remove it (a job wrote it?) and run again")
        if known is not None and known.get(path) is not None and info.st_size != known[path]:
            raise NotSealable(f"{shown}/{path} is {info.st_size} bytes, the pinned source lists {known[path]}: not "
                              "sealed; run again")
        found.append(_read_file(fd, name, path, kind, path in blobs, f"{shown}/{path}"))
        if len(found) > MAX_FILES:
            raise NotSealable(f"{shown}: more than {MAX_FILES} files: not sealing it")


def _open_dir(fd: int, name: str, shown: str) -> int:
    try:
        return os.open(name, beneath.DIRECTORY, dir_fd=fd)
    except OSError as err:
        raise NotSealable(f"{shown} is a symlink or not a directory ({err.strerror}): argus does not follow it; "
                          "remove it and run again") from None


def _read_file(folder: int, name: str, path: str, kind: str, blob: bool, shown: str) -> Walked:
    fd = beneath.open_regular(folder, name, shown)
    if fd is None:
        raise NotSealable(f"{shown} vanished while argus read it (a job still writing?): run again")
    try:
        size = os.fstat(fd).st_size
        sha256, sha1 = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size) if blob else None
        read = 0
        while read <= size and (chunk := os.read(fd, CHUNK)):  # a file a job keeps growing ends the read
            read += len(chunk)
            sha256.update(chunk)
            if sha1 is not None:
                sha1.update(chunk)
        if read != size:
            raise NotSealable(f"{shown} changed size while argus read it (a job still writing?): run again")
        info = os.fstat(fd)
        return Walked(path, size, sha256.hexdigest(), sha1.hexdigest() if sha1 else None, facts_of(fd, path, kind),
                      (info.st_dev, info.st_ino))
    finally:
        os.close(fd)


def digest_of(files: list[tuple[str, int, str]]) -> str:
    """sha256 over the sorted files' "path\\0size\\0sha256\\n": the version's content."""
    h = hashlib.sha256()
    for path, size, sha in sorted(files):
        h.update(f"{path}\0{size}\0{sha}\n".encode())
    return h.hexdigest()


def remove_staging(shared_root: str, staged: str) -> None:
    """Drop a staging dir (a link planted there is removed itself, never followed); nothing when absent."""
    with contextlib.suppress(FileNotFoundError):
        if beneath.stat_beneath(shared_root, staged) is not None:
            try:
                beneath.remove_beneath(shared_root, staged, f"{PurePosixPath(staged).name}.drop-{os.getpid()}")
            except beneath.NotBeneath:
                beneath.unlink_beneath(shared_root, staged)
