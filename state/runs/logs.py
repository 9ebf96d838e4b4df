"""A run's own driver log on NFS (jobs/<submission_id>/logs/driver.log): printed, or followed until
the run's exit.json appears. The file is written by a job, so it is opened as a regular file beneath
the shared root (state.beneath: no link on the way, a FIFO or device refused unopened or unread) and
read in chunks, whatever its size; what is printed whole is at most MAX_SHOWN bytes, its end."""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Callable, Iterator

from state.beneath import opened_regular
from state.runs.records import driver_log_rel, log_tail, read_end

CHUNK = 64 * 1024
POLL = 0.5
MAX_SHOWN = 16 * 1024 * 1024
"""What `argus logs` prints of a log at most: its end (a job can write its log as big as the disk)."""


def chunks(shared_root: str, submission_id: str, limit: int = MAX_SHOWN) -> Iterator[str]:
    """The log as it is now, decoded (a character split between chunks stays whole); of a log bigger
    than `limit`, a line saying so, then its last `limit` bytes."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for data in _raw(shared_root, submission_id, None, limit):
        yield decoder.decode(data)
    yield decoder.decode(b"", final=True)


def size(shared_root: str, submission_id: str) -> int | None:
    """The log's size now; None when the run kept no log (or it is no regular file beneath the root)."""
    try:
        with opened_regular(shared_root, driver_log_rel(submission_id)) as fd:
            return None if fd is None else os.fstat(fd).st_size
    except OSError:
        return None


def refusal(shared_root: str, submission_id: str) -> str | None:
    """Why the run's log on the shared root is not read (a link, a FIFO, a device...); None when it is
    read, or simply absent."""
    try:
        with opened_regular(shared_root, driver_log_rel(submission_id)):
            return None
    except OSError as err:
        return str(err) if err.strerror is None else f"{shared_root}/{driver_log_rel(submission_id)}: {err.strerror}"


def tail(shared_root: str, submission_id: str, limit: int = 4 * CHUNK) -> str:
    """The log's last `limit` bytes, decoded; "" when the run kept no log, or it is not a regular file
    beneath the root. Never blocks: a FIFO or device planted in place of the log reads as no log."""
    return log_tail(shared_root, submission_id, limit)


def _raw(shared_root: str, submission_id: str, offset: int | None, limit: int) -> Iterator[bytes]:
    """The log's bytes from offset on (None: its last `limit` bytes, after a line saying what was left
    out), at most `limit` of them. Nothing when the run kept no log or it is not one argus reads."""
    try:
        with opened_regular(shared_root, driver_log_rel(submission_id)) as fd:
            if fd is None:
                return
            end = os.fstat(fd).st_size
            if offset is None:
                offset = max(0, end - limit)
                if offset:
                    yield (f"[argus: the log is {end} bytes; showing its last {limit}. The whole log is "
                           f"{shared_root}/{driver_log_rel(submission_id)}]\n").encode()
            read = 0
            while read < limit and (data := os.pread(fd, min(CHUNK, limit - read), offset + read)):
                read += len(data)
                yield data
    except OSError:
        return


def follow(shared_root: str, submission_id: str, write: Callable[[str], None],
           gave_up: Callable[[], bool] = lambda: False, poll: float = POLL) -> None:
    """Write the log as it grows until the run's exit.json appears (then its last lines), or until
    gave_up() says no end will come (Ray ended the run without its wrapper writing one). A log already
    bigger than MAX_SHOWN starts at its last MAX_SHOWN bytes."""
    start = size(shared_root, submission_id) or 0
    offset, decoder = max(0, start - MAX_SHOWN), codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        ended = read_end(shared_root, submission_id) is not None or gave_up()
        for data in _raw(shared_root, submission_id, offset, 1 << 62):
            offset += len(data)
            write(decoder.decode(data))
        if ended:
            write(decoder.decode(b"", final=True))
            return
        time.sleep(poll)
