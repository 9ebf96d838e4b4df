"""Reading a file a spec names, the way a hostile file cannot abuse: at most a given number of bytes, a
regular file only (a FIFO would block the plan forever, a device never ends), and only when its real path
(every symlink resolved) is inside the job's shared root. A spec is anyone's pull request and `argus plan`'s
output is posted to it: a file elsewhere on the plan's machine (a CI runner's ~/.docker/config.json) is never
opened, so nothing of it can reach the plan's output. The file opened is checked to be the one whose real path
was checked (a symlink swapped in between is refused). Nothing here raises on the file's account.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

PARQUET_FOOTER_LIMIT = 16 * 1024 * 1024
"""A parquet footer (its schema and row-group index) past this is not read: a dataset's is KiBs to a few MiB."""
MAGIC = b"PAR1"


@dataclass(frozen=True)
class Unread:
    """Why a file was not read, and how sure argus is that verl fails on it too."""

    why: str
    severity: str = "warning"
    missing: bool = False


def read_head(path: Path, root: Path, limit: int, whole: bool = False) -> bytes | Unread:
    """Up to `limit` bytes from the start of the file; with `whole`, a larger file is Unread."""
    fd = _open(path, root)
    if isinstance(fd, Unread):
        return fd
    try:
        if whole and os.fstat(fd).st_size > limit:
            return Unread(f"is larger than the {limit // 1024} KiB argus reads of it", "error")
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as err:
        return Unread(f"cannot be read ({err.strerror or type(err).__name__})")
    finally:
        os.close(fd)


def read_parquet_columns(path: Path, root: Path) -> set[str] | Unread:
    """The top-level column names of a parquet file, from its footer alone (pyarrow's read_schema)."""
    fd = _open(path, root)
    if isinstance(fd, Unread):
        return fd
    with os.fdopen(fd, "rb") as file:
        size = os.fstat(fd).st_size
        tail = os.pread(fd, 8, size - 8) if size >= 12 else b""
        if len(tail) != 8 or tail[4:] != MAGIC or os.pread(fd, 4, 0) != MAGIC:
            return Unread("is not a parquet file (no PAR1 magic): verl's parquet reader fails on it", "error")
        footer = int.from_bytes(tail[:4], "little")
        if footer > min(PARQUET_FOOTER_LIMIT, size - 12):
            return Unread(f"has a parquet footer of {footer} bytes, more than argus reads "
                          f"({PARQUET_FOOTER_LIMIT // (1 << 20)} MiB) or than the file holds")
        try:
            import pyarrow.parquet as pq

            return set(pq.read_schema(file).names)
        except Exception as err:  # noqa: BLE001 - pyarrow's errors on a hostile footer are many; none may crash a plan
            return Unread(f"is not a parquet file pyarrow can read ({type(err).__name__}): verl's reader would "
                          "fail on it too", "error")


def within(path: Path, root: Path) -> bool:
    """Whether the path's real location (every symlink resolved) is inside the root's; a path the OS refuses
    (a NUL, a name too long) is not, and nothing is inside a relative root or the filesystem's own."""
    try:
        real_root = os.path.realpath(root)
        if not os.path.isabs(root) or real_root == os.path.realpath("/"):
            return False
        return Path(os.path.realpath(path)).is_relative_to(real_root)
    except (OSError, ValueError):
        return False


def _open(path: Path, root: Path) -> int | Unread:
    try:
        if not os.path.lexists(path):
            return Unread("does not exist", "error", missing=True)
        real = os.path.realpath(path)
        if not within(Path(real), root):
            return Unread("is a symlink that leads outside the shared root, which argus does not follow, so did not "
                          "check it")
        # O_NOFOLLOW: the last component cannot be a link swapped in since realpath; _same: nor any before it
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, ValueError) as err:
        return Unread(f"cannot be opened ({getattr(err, 'strerror', None) or type(err).__name__})")
    if not _same(fd, real):
        os.close(fd)
        return Unread("changed while argus opened it (a symlink swapped in): argus did not read it")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return Unread("is not a regular file (a FIFO, a device or a directory): argus does not read it, and verl "
                      "cannot read it as data", "error")
    return fd


def _same(fd: int, real: str) -> bool:
    """Whether the opened file is the one at the checked real path: the kernel's own name for the descriptor
    where /proc has it, else the same device and inode as the path now has."""
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        try:
            return os.path.samestat(os.fstat(fd), os.stat(real, follow_symlinks=False))
        except (OSError, ValueError):
            return False
    return opened == real
