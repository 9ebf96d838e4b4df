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
        self._state = threading.Condition()
        """Guards everything below; notified whenever a write ends."""
        self._pending: list[Item] = []
        self._queued = 0
        """Items queued so far: a caller's ticket is its item's number."""
        self._settled = 0
        """Every item up to this ticket is written or failed."""
        self._writing = False
        self._failures: dict[tuple[int, int], list[Any]] = {}
        """(first ticket, last ticket) of a group whose write failed -> [its error, callers yet to raise it]."""

    def commit(self, item: Item) -> None:
        """Return once `item` is written (with whatever else was queued), or raise why it was not."""
        with self._state:
            self._pending.append(item)
            self._queued += 1
            ticket = self._queued
            while self._writing and self._settled < ticket:  # a write is under way: the next one carries this
                self._state.wait()
            if self._settled >= ticket:
                self._raise_if_failed(ticket)
                return
            self._writing = True
            group, self._pending = self._pending, []
            first, last = self._settled + 1, self._queued
        self._write_group(group, first, last)

    def _write_group(self, group: list[Item], first: int, last: int) -> None:
        """Write the group (this caller's item among them) outside the lock; the error, if any, is this
        caller's own, and each of the others gets one of its own."""
        try:
            self._write(group)
        except BaseException as err:
            with self._state:
                if last > first:
                    self._failures[(first, last)] = [err, last - first]
            raise
        finally:
            with self._state:
                self._settled, self._writing = last, False
                self._state.notify_all()

    def _raise_if_failed(self, ticket: int) -> None:
        """Called holding the lock: raise, as this caller's own error, the failure of the write that carried it."""
        span = next((span for span in self._failures if span[0] <= ticket <= span[1]), None)
        if span is None:
            return
        failure = self._failures[span]
        failure[1] -= 1
        if not failure[1]:
            del self._failures[span]
        err = failure[0]
        shown = str(err) if isinstance(err, ArgusError) else f"{type(err).__name__}: {err}" if str(err) else \
            type(err).__name__
        raise ArgusError(f"the write that carried this record with {span[1] - span[0]} others failed, so it may "
                         f"not have been written: {shown}") from err
