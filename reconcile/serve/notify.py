"""The loop's events to people and programs, through apprise: each event to each channel once.

A channel is one `--notify` URL, which hears every event, or one URL of a route of argus.yaml's
`notifications:` (specs.kinds.notifications), which hears the events its route takes, in its template's
words. `deliver` says what the services took, so the turn's log says "sent" for those alone.

The ledger (state.queue.sent_events) is kept per channel, so a Slack that is down does not make a
working webhook hear an event twice; it is on the shared root, so a restarted loop, or a standby
that takes over, does not send again what was sent. A try is counted before it is made; after
MAX_TRIES failed tries an event is given up on that channel.

`deliver` never raises and never takes much longer than its budget: each channel sends from its own
thread, the caller waits for them at most `budget` seconds, and a channel that is still busy then
finishes the one send it is in (apprise's own timeouts bound it) and leaves the rest to the next
turn. The first failure of a channel also leaves the rest to the next turn: a dead service costs
one timeout a turn, not one per event. What a late send ends in is reported by the next `deliver`.

Channels, and what may be said of their URLs, are in reconcile.serve.channels.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import apprise

from reconcile.report import Event
from reconcile.serve.channels import CAPTURE, STRUCTURED, Channel, channels, quiet_apprise, route_channels, scrub
from reconcile.serve.messages import SEVERITY, body, payload_text, render, title
from reconcile.views.links import Links
from specs.kinds.notifications import Notifications
from state.queue.sent_events import SentLedger

BUDGET = 5.0
"""Seconds a turn waits for its notifications, whatever the services do."""
MAX_TRIES = 3


@dataclass
class Outcome:
    """What one `deliver` call can say: the sends that the services took (this turn's, and late ones of
    earlier turns that ended since), and the problems."""

    delivered: list[tuple[str, Event]] = field(default_factory=list)
    """(channel label, event), one per send a service took."""
    problems: list[str] = field(default_factory=list)


class Notifier:
    def __init__(self, urls: Sequence[str], shared_root: str, workspace: str, budget: float = BUDGET,
                 routes: Notifications | None = None, links: Links | None = None):
        """`urls`: --notify, every event; `routes`: argus.yaml's. Raises NotifyError naming every URL apprise
        cannot use (by place and scheme) and every route whose variable holds none."""
        quiet_apprise()
        self.routes = routes or Notifications()
        self.channels = channels(urls) + route_channels(self.routes)
        self.ledger = SentLedger(shared_root, workspace)
        self.budget = budget
        self.links = links or Links()
        self._delivered: list[tuple[str, Event]] = []
        self._workers: dict[str, threading.Thread] = {}
        """Channel id -> the thread sending to it, from this or an earlier turn."""
        self._problems: list[str] = []
        self._noticed: set[Path] = set()
        self._lock = threading.Lock()

    def deliver(self, events: Sequence[Event]) -> Outcome:
        """Send what each channel's route wants and it has not had yet; never raises."""
        deadline = time.monotonic() + self.budget
        stop = threading.Event()
        linked = [self.links.add(event) for event in events]
        taken = {event.key: self.routes.routes_for(event.kind, event.job) for event in linked}
        started = [c for c in self.channels
                   if self._start(c, [e for e in linked if c.route is None or c.route in taken[e.key]], stop)]
        for channel in started:
            self._workers[channel.id].join(max(0.0, deadline - time.monotonic()))
        stop.set()
        for channel in [c for c in started if self._busy(c)]:
            self._problem(f"{channel.label}: no answer within {self.budget:g} s; "
                          "its other events wait for the next turn")
        with self._lock:
            delivered, self._delivered = self._delivered, []
        return Outcome(delivered, self._drain())

    def blocked(self) -> str | None:
        """Why no event can be sent now (the sent-event ledger cannot be used), or None: asked every turn, so a
        linked ledger directory is an incident (/healthz fails) even while nothing new is to be told."""
        try:
            self.ledger.check()
        except OSError as err:
            return (f"notifications cannot be sent: the ledger at {self.ledger.path} cannot be used "
                    f"({err.strerror or err})")
        return None

    def wait(self, timeout: float) -> bool:
        """Until no channel is sending (a send the budget cut short); True when none is. For a loop
        that is stopping: what is in flight gets recorded."""
        deadline = time.monotonic() + timeout
        for worker in self._workers.values():
            worker.join(max(0.0, deadline - time.monotonic()))
        return not any(self._busy(c) for c in self.channels)

    def _busy(self, channel: Channel) -> bool:
        worker = self._workers.get(channel.id)
        return worker is not None and worker.is_alive()

    def _start(self, channel: Channel, events: list[Event], stop: threading.Event) -> bool:
        if not events:
            return False
        if self._busy(channel):
            self._problem(f"{channel.label}: still busy with an earlier send; its events wait for the next turn")
            return False
        worker = threading.Thread(target=self._deliver_all, args=(channel, events, stop),
                                  name=f"argus notify {channel.id}", daemon=True)
        self._workers[channel.id] = worker
        worker.start()
        return True

    def _deliver_all(self, channel: Channel, events: list[Event], stop: threading.Event) -> None:
        for event in events:
            if stop.is_set() or not self._deliver(channel, event):
                return

    def _deliver(self, channel: Channel, event: Event) -> bool:
        """True when the channel is done with the event (now or before); False ends its turn."""
        try:
            sent = self.ledger.sent(channel.id, event.key)
            if sent == "sent":
                return True
            if sent == "forged":
                self._forged(channel, event)
            tries = self.ledger.tries(channel.id, event.key)
            if tries >= MAX_TRIES:
                return True
            self.ledger.count_try(channel.id, event.key, tries + 1)
        except OSError as err:
            self._problem(f"{channel.label}: event {event.key} not sent: the ledger at {self.ledger.path} "
                          f"cannot be used ({err.strerror or err})")
            return False
        accepted, why = _post(channel, event)
        if accepted:
            with self._lock:
                self._delivered.append((channel.label, event))
            self._record(channel, event)
            return True
        if tries + 1 >= MAX_TRIES:
            self._problem(f"{channel.label}: event {event.key} given up after {MAX_TRIES} tries: {why}")
        else:
            self._problem(f"{channel.label}: event {event.key} not sent (try {tries + 1} of {MAX_TRIES}, "
                          f"again next turn): {why}")
        return False

    def _record(self, channel: Channel, event: Event) -> None:
        sent_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            self.ledger.record_sent(channel.id, event.key, event.kind, event.time, channel.label, sent_at)
        except OSError as err:
            self._problem(f"{channel.label}: event {event.key} was sent but not recorded in {self.ledger.path} "
                          f"({err.strerror or err}): it may be sent again")

    def _forged(self, channel: Channel, event: Event) -> None:
        """Said once per file: a forgery is news, its every turn is not."""
        path = self.ledger.entry_path(channel.id, event.key)
        with self._lock:
            if path in self._noticed:
                return
            self._noticed.add(path)
        self._problem(f"{channel.label}: {path} says event {event.key} was sent, but its ARGUS_ROOT_KEY signature "
                      "is missing or wrong (forged by a job, or written without this key): sending it")

    def _problem(self, text: str) -> None:
        with self._lock:
            self._problems.append(text)

    def _drain(self) -> list[str]:
        with self._lock:
            drained, self._problems = self._problems, []
        return drained


def _post(channel: Channel, event: Event) -> tuple[bool, str]:
    """One apprise send: (accepted, why not). A plugin that raises is a failed send."""
    structured = channel.scheme in STRUCTURED
    overflow = _overflow(channel.plugin, structured)
    said_title, said = render(channel.template, event) if channel.template else (title(event), body(event))
    with CAPTURE.lines() as lines:
        try:
            accepted = bool(channel.plugin.notify(
                body=payload_text(event) if structured else said, title=said_title,
                notify_type=apprise.NotifyType(SEVERITY[event.kind]), body_format=apprise.NotifyFormat.TEXT,
                **({"overflow": overflow} if overflow else {})))
        except Exception as err:  # noqa: BLE001 - a bug in a plugin must not end the loop
            accepted = False
            lines.append(f"{type(err).__name__}: {err}")
    why = lines[-1] if lines else "the service did not accept it"
    return accepted, scrub(why, channel.secrets)[:300]


def _overflow(plugin: Any, structured: bool) -> str | None:
    """The JSON event is never cut (cut JSON is no JSON); text for people is cut rather than left
    to a service that refuses long messages, unless the URL asked for something else."""
    if structured:
        return apprise.OverflowMode.UPSTREAM
    mode = getattr(plugin, "overflow_mode", None)
    if getattr(mode, "value", mode) == apprise.OverflowMode.UPSTREAM.value:
        return apprise.OverflowMode.TRUNCATE
    return None
