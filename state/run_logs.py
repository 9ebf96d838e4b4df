"""A run's own driver log on NFS (jobs/<submission_id>/logs/driver.log): printed, or followed until
the run's exit.json appears. The file is written by a job, so it is opened without following a
symlink and read in chunks, whatever its size."""

from __future__ import annotations

import codecs
import os
import stat
import time
from collections.abc import Callable, Iterator

from state.records import open_driver_log, read_end

CHUNK = 64 * 1024
POLL = 0.5


def chunks(shared_root: str, submission_id: str) -> Iterator[str]:
    """The log as it is now, decoded (a character split between chunks stays whole)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for data in _raw(shared_root, submission_id, 0):
        yield decoder.decode(data)
    yield decoder.decode(b"", final=True)


def tail(shared_root: str, submission_id: str, limit: int = 4 * CHUNK) -> str:
    """The log's last `limit` bytes, decoded; "" when the run kept no log. Never blocks: a FIFO or
    device planted in place of the log between the check and the open reads as no log."""
    fd = _open(shared_root, submission_id, os.O_NONBLOCK)
    if fd is None:
        return ""
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        handle.seek(max(0, info.st_size - limit))
        return handle.read(limit).decode("utf-8", errors="replace")


def _raw(shared_root: str, submission_id: str, offset: int) -> Iterator[bytes]:
    """The log's bytes from offset on. Nothing when the run kept no log."""
    fd = _open(shared_root, submission_id)
    if fd is None:
        return
    with os.fdopen(fd, "rb") as handle:
        handle.seek(offset)
        while data := handle.read(CHUNK):
            yield data


def follow(shared_root: str, submission_id: str, write: Callable[[str], None],
           gave_up: Callable[[], bool] = lambda: False, poll: float = POLL) -> None:
    """Write the log as it grows until the run's exit.json appears (then its last lines), or until
    gave_up() says no end will come (Ray ended the run without its wrapper writing one)."""
    offset, decoder = 0, codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        ended = read_end(shared_root, submission_id) is not None or gave_up()
        for data in _raw(shared_root, submission_id, offset):
            offset += len(data)
            write(decoder.decode(data))
        if ended:
            write(decoder.decode(b"", final=True))
            return
        time.sleep(poll)


def _open(shared_root: str, submission_id: str, flags: int = 0) -> int | None:
    """Beneath the root, from the submission id alone (state.records.open_driver_log)."""
    return open_driver_log(shared_root, submission_id, flags)
