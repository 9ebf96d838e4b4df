"""Independent submits of one plan, carried out concurrently by a bounded pool of threads.

Apply keeps the plan's order wherever one change may need another: directories and snapshots,
stops and preemptions, queue entries, snapshot deletions run one after another (execute.applier).
Only consecutive changes that each submit one new run (action submit or retry, a single
SubmitStep) form a batch, and so do consecutive stops of runs at their deadline (action deadline:
stopped together, each is on time; each waits for Ray to end its run). None of them needs another:
its code and directories were made by the changes before the batch, a replaced run's stop-then-submit
is one change of two steps (never in a batch), and admission is decided for each part of the batch
(AHEAD submits) first, in the queue's order, under each cluster's admission lock (admit.admit_ahead):
the order in which threads reach Ray changes nothing.

Failures: the first submit of a batch runs alone, and the others start only once it went through,
so a cluster that refuses every submit (a wrong resource name, a bad token) fails once, not once
per thread. After a failure, or ^C, no further submit starts; those in flight finish and are
recorded; their rows reach the summary in plan order; admissions of the runs never attempted are
withdrawn; then the first failure is raised. A second ^C leaves without waiting.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from reconcile.execute import admit
from reconcile.execute.ray_steps import marked
from reconcile.execute.world import World
from reconcile.model import Action, Change, StopStep, SubmitStep

WORKERS = 8
"""Submits in flight at once. Each mostly waits (a request to the dashboard; small files and their
fsyncs on the shared root): eight hide that latency. More would only queue up at the head, whose
dashboard answers every request on one event loop while it also runs the cluster."""

AHEAD = 256
"""Submits admitted ahead at once, then carried out. An admission whose run Ray does not list yet holds
its GPUs for ADMIT_GRACE (reconcile.plan.queue, 600 s) only: admitting a whole batch of thousands ahead
would let the last ones' admissions lapse, and their GPUs be given to others, before they are submitted.
A part of 256 leaves each submit more than 2 s of that grace (a dashboard answers in ~20-50 ms); fewer
parts, fewer times the pool drains to one thread before the next part is admitted."""

Row = tuple[str, str, str]
"""(address, action, outcomes): one line of apply's summary table."""


class Shown(Protocol):
    """Where a batch reports: whole lines, and one tick per change done."""

    def echo(self, line: str) -> None: ...

    def advance(self) -> None: ...


Display = Callable[[int], AbstractContextManager[Shown]]
"""Given how many changes the batch holds, what shows its progress while it runs."""


def is_independent(change: Change) -> bool:
    """Submits one new run, or stops runs at their deadline, and nothing else: it may run beside the others of
    its kind."""
    return _kind(change) is not None


def _kind(change: Change) -> str | None:
    if change.action in (Action.SUBMIT, Action.RETRY) and len(change.steps) == 1 \
            and isinstance(change.steps[0], SubmitStep):
        return "submit"
    # a stop at a deadline starts nothing and needs nothing of another: stopped together, each is on time
    if change.action is Action.DEADLINE and change.steps and all(isinstance(s, StopStep) for s in change.steps):
        return "deadline"
    return None


def segments(changes: Sequence[Change]) -> list[list[Change]]:
    """The changes in plan order, cut where independence begins or ends: a segment of independent
    changes of one kind (submits, deadline stops) is a batch, any other segment holds one change."""
    found: list[list[Change]] = []
    for change in changes:
        if found and is_independent(change) and _kind(change) == _kind(found[-1][0]):
            found[-1].append(change)
        else:
            found.append([change])
    return found


def lines(echo: Callable[[str], None]) -> Display:
    """Plain lines, one whole line at a time (not a terminal: CI and tests read them)."""

    @contextmanager
    def show(_total: int) -> Iterator[Shown]:
        yield _Lines(echo)

    return show


def run_batch(changes: Sequence[Change], world: World, apply_one: Callable[[Change, World], Row],
              display: Display) -> None:
    """Apply every change of a batch, AHEAD at a time; the journal gets the rows of those done, in plan order."""
    with display(len(changes)) as shown:
        for start in range(0, len(changes), AHEAD):
            failure, started = _run_part(changes[start:start + AHEAD], world, apply_one, shown,
                                         first_alone=not start and _kind(changes[0]) == "submit")
            if failure is not None:
                unattempted = len(changes) - start - started
                if unattempted:
                    what = "submission(s)" if _kind(changes[0]) == "submit" else "stop(s)"
                    shown.echo(f"Stopped after the first failure: {unattempted} {what} not attempted.")
                raise failure


def _run_part(changes: Sequence[Change], world: World, apply_one: Callable[[Change, World], Row], shown: Shown,
              first_alone: bool) -> tuple[BaseException | None, int]:
    """Admit the part ahead and submit it: (the first failure or None, how many were attempted). Whatever
    stops it, admission included, withdraws the admissions of the runs it never attempted."""
    steps = [c.steps[0] for c in changes if isinstance(c.steps[0], SubmitStep)]
    ahead, pool = admit.Ahead(), _Pool(changes, dataclasses.replace(world, echo=shown.echo), apply_one,
                                       shown.advance, first_alone)
    try:
        admit.admit_ahead(steps, world, ahead)
        pool.run()
    except BaseException:  # admission failed or ^C before the pool ran: nothing of the part was attempted
        _withdraw(ahead, {s.submission_id for s in steps}, world, shown)
        raise
    marked(world, [s.submission_id for s in steps if s.submission_id in world.unmarked])
    world.journal.rows.extend(pool.done[i] for i in sorted(dict(pool.done)))
    if pool.failure is not None:
        _withdraw(ahead, {s.submission_id for i, s in enumerate(steps) if i not in pool.started}, world, shown)
    return pool.failure, len(pool.started)


def _withdraw(ahead: admit.Ahead, submission_ids: set[str], world: World, shown: Shown) -> None:
    """Withdrawn if it can be: the failure that stopped the batch is what apply raises, never this one."""
    try:
        admit.withdraw(ahead, submission_ids, world)
    except Exception as err:  # noqa: BLE001 (the first failure is reported; unwithdrawn admissions lapse)
        shown.echo(f"{len(submission_ids)} admission(s) of runs not submitted could not be withdrawn ({err}): "
                   "they hold their GPUs until they lapse.")


class _Lines:
    def __init__(self, echo: Callable[[str], None]) -> None:
        self._echo, self._lock = echo, threading.Lock()

    def echo(self, line: str) -> None:
        with self._lock:
            self._echo(line)

    def advance(self) -> None:
        pass


class _Pool:
    """Hands out the batch's changes in plan order to at most WORKERS threads until done or stopped."""

    def __init__(self, changes: Sequence[Change], world: World, apply_one: Callable[[Change, World], Row],
                 advance: Callable[[], None], first_alone: bool = True) -> None:
        self._changes, self._world, self._apply_one, self._advance = changes, world, apply_one, advance
        self._first_alone = first_alone
        self._lock, self._stopping, self._next = threading.Lock(), threading.Event(), 0
        self.started: set[int] = set()
        self.done: dict[int, Row] = {}
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            if self._first_alone:
                self._work()  # the first one alone, here: it goes through before anything runs beside it
                if self.failure is not None:
                    return
            threads = [threading.Thread(target=self._work, name=f"argus submit {n}", daemon=True)
                       for n in range(min(WORKERS, len(self._changes) - self._next))]
            for thread in threads:
                thread.start()
            self._wait(threads)
        except KeyboardInterrupt as interrupt:
            self._fail(interrupt)

    def _work(self) -> None:
        while (taken := self._take()) is not None:
            index, change = taken
            try:
                row = self._apply_one(change, self._world)
            except BaseException as err:  # ^C in the first one, bugs too: recorded, raised by the batch
                self._fail(err)
                return
            with self._lock:
                self.done[index] = row
            self._advance()
            if index == 0 and self._first_alone:
                return  # the first one went through: the pool takes over

    def _take(self) -> tuple[int, Change] | None:
        with self._lock:
            if self._stopping.is_set() or self._next >= len(self._changes):
                return None
            index, self._next = self._next, self._next + 1
            self.started.add(index)
            return index, self._changes[index]

    def _fail(self, err: BaseException) -> None:
        with self._lock:
            self.failure = self.failure or err
        self._stopping.set()

    def _wait(self, threads: list[threading.Thread]) -> None:
        """Until every thread ends; on ^C no new submit starts, and the ones in flight are waited for."""
        try:
            self._join(threads)
        except KeyboardInterrupt as interrupt:
            self._fail(interrupt)
            in_flight = sum(thread.is_alive() for thread in threads)
            self._world.echo(f"Interrupted: waiting for {in_flight} submission(s) in flight "
                             "(^C again to leave without waiting).")
            self._join(threads)  # a second ^C propagates: the daemon threads die with the process

    @staticmethod
    def _join(threads: list[threading.Thread]) -> None:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
