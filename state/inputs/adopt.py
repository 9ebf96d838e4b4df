"""Adopting a `path:` source: its files hard-linked into argus's staging dir, no data copied (a copy only where
the path is on another filesystem than the shared root).

What is linked is exactly what was fingerprinted: each file's (device, inode) as listed (fingerprint.entries,
every component opened without following a link) must be the one that lands in the staging dir, so a file
swapped for a link to a secret between listing and linking is refused, never published. The fingerprint must be
the one the plan keyed the version by: a file changed since the plan is a new version, planned again.

A hard link is the same file: sealing makes it read-only (0444) at its original place too, and a write there
(by its owner, who may still chmod it) changes the version; observation's size check and verify_digests find it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import PurePosixPath

from state import beneath
from state.inputs.fingerprint import NotAdoptable, entries, fingerprint_of
from state.inputs.walk import remove_staging

CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def adopt(path: str, shared_root: str, staged: str, pin: str | None) -> dict[str, tuple[int, int]]:
    """Link (or copy across filesystems) every regular file of `path` into root/staged, made afresh; the
    (device, inode) that landed at each relative path. The staging dir is on a root any job may write: the seal
    checks that what it walks is exactly these files, none added, removed or swapped since."""
    found = entries(path)
    if pin is not None and fingerprint_of(found) != pin:
        raise NotAdoptable(f"{path} changed since the plan (its files' sizes or times differ): run `argus plan` "
                           "again to adopt it as a new version")
    fresh(shared_root, staged)
    single = len(found) == 1 and found[0][0] == PurePosixPath(path).name and not _is_dir(path)
    landed = {}
    for rel, info in found:
        source = path if single else f"{path}/{rel}"
        parent, name = str(PurePosixPath(rel).parent), PurePosixPath(rel).name
        with beneath.made_dir(shared_root, staged if parent == "." else f"{staged}/{parent}") as folder:
            landed[rel] = _link(source, folder, name, info)
    return landed


def fresh(shared_root: str, staged: str) -> None:
    """An empty staging dir: a leftover of an interrupted adoption removed first (a link there removed itself)."""
    remove_staging(shared_root, staged)
    beneath.make_dirs(shared_root, staged)


def _link(source: str, folder: int, name: str, info: os.stat_result) -> tuple[int, int]:
    """The (device, inode) now at `name`: the source's own (a hard link), or the copy's."""
    try:
        os.link(source, name, dst_dir_fd=folder, follow_symlinks=False)
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
        return _copy(source, folder, name, info)  # checks the inode it copies from itself
    linked = os.stat(name, dir_fd=folder, follow_symlinks=False)
    if (linked.st_dev, linked.st_ino) != (info.st_dev, info.st_ino):
        raise NotAdoptable(f"{source} changed while argus linked it (swapped for another file or a link): not "
                           "adopted; run again")
    return info.st_dev, info.st_ino


def _copy(source: str, folder: int, name: str, info: os.stat_result) -> tuple[int, int]:
    """The copy of the one file listed: opened without following a link and checked to be that inode."""
    parent = str(PurePosixPath(source).parent.relative_to("/"))
    with beneath.opened_dir("/", parent if parent != "." else "") as src_dir:
        fd = beneath.open_regular(src_dir, PurePosixPath(source).name, source)
    if fd is None or (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != (info.st_dev, info.st_ino):
        if fd is not None:
            os.close(fd)
        raise NotAdoptable(f"{source} changed while argus copied it: not adopted; run again")
    with os.fdopen(fd, "rb") as reader, os.fdopen(os.open(name, CREATE, 0o644, dir_fd=folder), "wb") as writer:
        shutil.copyfileobj(reader, writer)
        writer.flush()  # the times set after the last write, or the close's write moves them again
        with contextlib.suppress(OSError):
            os.utime(writer.fileno(), ns=(info.st_atime_ns, info.st_mtime_ns))
        copied = os.fstat(writer.fileno())
    return copied.st_dev, copied.st_ino


def _is_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)
