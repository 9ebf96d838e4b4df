"""Group commit: threads that each have an item to write durably share one write of all of them.

Concurrent submits each append an audit record, and every append is a locked read of the log's
tail and anchor, a write, an fsync and an anchor replaced with another fsync: done one at a time,
eight submitting threads queued on it (bench/apply_bench.py). Here the first thread to find the
writer free writes every item queued so far, in the order they were queued; the others wait and
find theirs written. Each caller returns only once its item is written, and a write that fails
raises in every caller whose item it carried: nobody is told an item was recorded that was not.

An item nothing must wait for (what a step did, once its run is registered and sent) can be sent
instead: queued without waiting, it goes with the next group written (a later commit carries it), and
`flush` writes what is left and raises if a write of a sent item failed. A submitting thread then waits
for one group per submit (its registration, carrying its last step's record), not two.
"""

from __future__ import annotations

import contextlib
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
        self._sent: set[int] = set()
        """Tickets of items sent, not committed: nobody waits on them."""
        self._lost: BaseException | None = None
        """The first failed write that carried a sent item: `flush` says it if writing them again fails too."""
        self._lost_items: list[Item] = []
        """The sent items of failed writes, in the order queued: `flush` writes them once more."""

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
            group, first, last = self._take()
        self._write_group(group, first, last, ticket)

    def send(self, item: Item) -> None:
        """Queue `item` and return at once: the next group written carries it (`flush` at the latest)."""
        with self._state:
            self._pending.append(item)
            self._queued += 1
            self._sent.add(self._queued)

    def flush(self) -> None:
        """Return once every item queued so far is written. A sent item whose write failed is written once more
        here (a lock that timed out, a full disk freed meanwhile); raise, as an ArgusError naming how many, only
        if that fails too."""
        with self._state:
            target = self._queued
            while self._writing and self._settled < target:
                self._state.wait()
            taken = self._take() if self._settled < target else None
        if taken is not None:
            with contextlib.suppress(Exception):  # its sent items are kept as lost (retried below); the callers
                self._write_group(*taken, None)  # of its committed ones raise it as their own
        with self._state:
            items, self._lost_items = self._lost_items, []
            lost, self._lost = self._lost, None
        if not items:
            return
        try:
            self._write(items)
        except Exception as err:  # noqa: BLE001 - said with the first failure's cause, as an ArgusError
            raise ArgusError(f"{len(items)} record(s) sent to the audit log could not be written, twice: "
                             f"{_shown(lost or err)}; then: {_shown(err)}") from err

    def _take(self) -> tuple[list[Item], int, int]:
        """Called holding the lock, with no write under way: this caller writes everything queued."""
        self._writing = True
        group, self._pending = self._pending, []
        return group, self._settled + 1, self._queued

    def _write_group(self, group: list[Item], first: int, last: int, own: int | None) -> None:
        """Write the group (this caller's item `own` among them, if it has one) outside the lock; the error,
        if any, is this caller's own, each of the others waiting gets one of its own, and `flush` raises it
        for the items sent."""
        try:
            self._write(group)
        except BaseException as err:
            with self._state:
                sent = self._sent.intersection(range(first, last + 1))
                waiting = last - first + 1 - len(sent) - (own is not None)
                if waiting:
                    self._failures[(first, last)] = [err, waiting]
                if sent and self._lost is None:
                    self._lost = err
                self._lost_items += [group[ticket - first] for ticket in sorted(sent)]
            raise
        finally:
            with self._state:
                self._sent.difference_update(range(first, last + 1))
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
        raise ArgusError(f"the write that carried this record with {span[1] - span[0]} others failed, so it may "
                         f"not have been written: {_shown(err)}") from err


def _shown(err: BaseException) -> str:
    return str(err) if isinstance(err, ArgusError) else f"{type(err).__name__}: {err}" if str(err) else \
        type(err).__name__
