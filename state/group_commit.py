"""Group commit: threads that each have an item to write durably share one write of all of them.

Concurrent submits each append an audit record, and every append is a locked read of the log's
tail and anchor, a write, an fsync and an anchor replaced with another fsync: done one at a time,
eight submitting threads queued on it (bench/apply_bench.py). Here the first thread to find the
writer free writes every item queued so far, in the order they were queued; the others wait and
find theirs written. Each caller returns only once its item is written, and a write that fails
raises in every caller whose item it carried: nobody is told an item was recorded that was not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from specs.errors import ArgusError

Item = TypeVar("Item")


class GroupCommit(Generic[Item]):
    def __init__(self, write: Callable[[list[Item]], None]):
        self._write = write
        self._writing = threading.Lock()
        """Held by the one thread writing a group: the rest queue their items meanwhile."""
        self._queue = threading.Lock()
        self._pending: list[Item] = []
        self._queued = 0
        """Items queued so far: a caller's ticket is its item's number."""
        self._settled = 0
        """Every item up to this ticket is written or failed."""
        self._failures: dict[tuple[int, int], list[Any]] = {}
        """(first ticket, last ticket) of a group whose write failed -> [its error, callers yet to raise it]."""

    def commit(self, item: Item) -> None:
        """Return once `item` is written (with whatever else was queued), or raise why it was not."""
        with self._queue:
            self._pending.append(item)
            self._queued += 1
            ticket = self._queued
        with self._writing:
            if self._settled < ticket:
                self._write_pending()  # this caller's item is among them: the write's error is its own
                return
        self._raise_if_failed(ticket)

    def _write_pending(self) -> None:
        with self._queue:
            group, self._pending = self._pending, []
            first, last = self._settled + 1, self._queued
        try:
            self._write(group)
        except BaseException as err:
            shared = err if isinstance(err, Exception) else ArgusError(
                f"interrupted while writing this record with {len(group) - 1} others: none was written")
            with self._queue:
                if last > first:  # the others raise it in their own threads
                    self._failures[(first, last)] = [shared, last - first]
            raise
        finally:
            self._settled = last

    def _raise_if_failed(self, ticket: int) -> None:
        with self._queue:
            span = next((span for span in self._failures if span[0] <= ticket <= span[1]), None)
            if span is None:
                return
            failure = self._failures[span]
            failure[1] -= 1
            if not failure[1]:
                del self._failures[span]
        raise failure[0]
