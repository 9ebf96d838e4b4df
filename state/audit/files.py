"""The audit log's and its anchor's files, on a shared root every Ray job can write.

Each directory below the shared root is opened without following a symlink (a planted link must
not carry the log or the anchor elsewhere), the log is appended to under a lock (the tail an
append read is still the tail when it writes), and the anchor is replaced whole, never half written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import PurePosixPath

from specs.errors import ArgusError
from state.beneath import Refused, open_regular, open_root
from state.files import lock_within
from state.runs.records import read_small

LOG_DIR, ANCHOR_DIR = ".argus/audit", ".argus/anchors"
LOCK_WAIT = 30.0
"""Seconds an append waits for another appender (or a hostile lock holder) before it gives up."""
MAX_ANCHOR_BYTES = 4096
MAX_LOG_BYTES = 256 * 1024 * 1024
"""About a million records: a log bigger than this is reported, never read whole (a job can write the root)."""
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Unsafe(OSError):
    """A directory on the way is a symlink or no directory."""


@contextmanager
def locked_log(shared_root: str, workspace: str) -> Iterator[int]:
    """The log opened for appending and reading (created if missing), held by this appender alone."""
    where = f"{shared_root}/{LOG_DIR}/{workspace}.jsonl"
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    # Open and close inside the thread lock: a record lock is the process's, and closing any descriptor
    # of the file, in any thread, releases it.
    with _in_process:
        try:
            with _directory(shared_root, LOG_DIR, create=True) as folder:
                fd = os.open(f"{workspace}.jsonl", flags, 0o666, dir_fd=folder)
        except OSError as err:
            raise ArgusError(f"{where}: cannot append to the audit log ({_why(err)}). "
                             "Run `argus audit verify`.") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ArgusError(f"{where}: the audit log is not a regular file. Run `argus audit verify`.")
            _lock(fd, where)
            yield fd
        finally:
            os.close(fd)  # releases the lock


def read_log(shared_root: str, workspace: str) -> tuple[bytes | None, str | None]:
    """(the log's bytes, None), (None, None) when there is no log, or (None, why it cannot be read)."""
    try:
        with _directory(shared_root, LOG_DIR, create=False) as folder:
            if folder is None:
                return None, None
            fd = open_regular(folder, f"{workspace}.jsonl")
    except Refused:
        return None, "the log is not a regular file"
    except FileNotFoundError:
        return None, None
    except OSError as err:
        return None, f"the log cannot be read ({_why(err)})"
    if fd is None:
        return None, None
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(fd).st_size
        if size > MAX_LOG_BYTES:
            return None, (f"the log is {size} bytes, more than the {MAX_LOG_BYTES >> 20} MiB argus reads of it "
                          "(filled by a job?): not read")
        return handle.read(MAX_LOG_BYTES + 1), None


def read_log_since(shared_root: str, workspace: str, offset: int) -> tuple[os.stat_result | None, bytes]:
    """The log's identity and size (None: no log, or not a regular file) and its bytes from offset on:
    what a reader that verified the rest already needs (state.audit.follow)."""
    try:
        with _directory(shared_root, LOG_DIR, create=False) as folder:
            if folder is None:
                return None, b""
            fd = open_regular(folder, f"{workspace}.jsonl")
    except OSError:
        return None, b""
    if fd is None:
        return None, b""
    try:
        info = os.fstat(fd)
        if info.st_size - offset > MAX_LOG_BYTES:  # read_log says why
            return None, b""
        return info, read_at(fd, offset, max(0, info.st_size - offset))
    finally:
        os.close(fd)


def read_anchor(shared_root: str, workspace: str) -> bytes | None:
    """The anchor's bytes; None when there is none (or it is a symlink, too big, no regular file)."""
    try:
        with _directory(shared_root, ANCHOR_DIR, create=False) as folder:
            return None if folder is None else read_small(f"{workspace}.json", MAX_ANCHOR_BYTES, dir_fd=folder)
    except OSError:
        return None


def write_anchor(shared_root: str, workspace: str, text: str) -> None:
    """Readers see the old anchor or the new one; a symlink put in its place is replaced, not followed."""
    name, temporary = f"{workspace}.json", f".{workspace}.json.{secrets.token_hex(6)}"
    try:
        with _directory(shared_root, ANCHOR_DIR, create=True) as folder:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=folder)
            try:
                _write(fd, text.encode())
            finally:
                os.close(fd)
            _replace(folder, temporary, name)
    except OSError as err:
        raise ArgusError(f"{shared_root}/{ANCHOR_DIR}/{name}: cannot write the audit log's anchor ({_why(err)}); "
                         "the record is in the log. Run `argus audit verify`.") from None


def append_bytes(fd: int, data: bytes) -> None:
    _write(fd, data)


def read_at(fd: int, offset: int, length: int) -> bytes:
    chunks = []
    while length > 0 and (chunk := os.pread(fd, length, offset)):
        chunks.append(chunk)
        offset, length = offset + len(chunk), length - len(chunk)
    return b"".join(chunks)


_in_process = threading.Lock()


@contextmanager
def _directory(shared_root: str, rel: str, create: bool) -> Iterator[int | None]:
    """shared_root/rel, each component opened without following a symlink; None if missing and not created."""
    root = os.path.realpath(shared_root)
    fd = open_root(root) if create else os.open(root, DIRECTORY)  # never made: see state.beneath.made_dir
    try:
        for part in PurePosixPath(rel).parts:
            child = _child(fd, part, create)
            os.close(fd)
            fd = child
            if fd is None:
                break
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def _child(fd: int, part: str, create: bool) -> int | None:
    try:
        return os.open(part, DIRECTORY, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            return None
    except OSError as err:
        raise Unsafe(f"{part!r} is a symbolic link or no directory ({err.strerror})") from None
    with contextlib.suppress(FileExistsError):  # another appender made it first
        os.mkdir(part, 0o777, dir_fd=fd)
    return os.open(part, DIRECTORY, dir_fd=fd)


def _lock(fd: int, where: str) -> None:
    """NFS without a lock manager: appends stay whole (O_APPEND), as before, so the log goes on unlocked."""
    if not lock_within(fd, LOCK_WAIT, unlocked_ok=True):
        raise ArgusError(f"{where}: another process has held the audit log's lock for {LOCK_WAIT:g}s; "
                         "nothing was recorded.")


def _write(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]
    os.fsync(fd)


def _replace(folder: int, temporary: str, name: str) -> None:
    try:
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError:
        os.unlink(temporary, dir_fd=folder)
        raise


def _why(err: OSError) -> str:
    if err.errno == errno.ELOOP and not isinstance(err, Unsafe):
        return "it is a symbolic link, which argus never makes"
    return str(err.strerror or err)

