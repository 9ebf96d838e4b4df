"""What the loop keeps to itself, so that what it tells needs someone (issue 37). Pure: the clock is given.

- A merged change not applied yet is no drift until `grace` has passed with that same set of changes
  unapplied: CI applies on merge, and the seconds between the merge and its apply are no news. A set that
  changes (CI applied part of it, or another merge) starts its own grace. Runs stopped outside argus are
  told at once, as before: they are drift whatever CI does.
- On the first turn of a workspace's first loop (its sent-event ledger holds nothing: nothing was ever told),
  what it would tell about runs that ended over ten minutes before it started (the newest run of each job:
  failed, stopped at a deadline or outside argus, recovered, as its exit.json dates the end) is one `summary`
  event, and those events are never told one by one afterwards. A loop that restarts, or `serve --once`
  from cron, tells as it always did.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from reconcile.report import Event
from reconcile.serve.events import Clock, event

DRIFT_GRACE = 900.0
"""Default seconds a merged change may wait for its apply before it is drift: longer than a CI apply."""
ENDED = ("failed", "lost", "deadline", "recovered", "preempted")
"""Events about a run's end (and a per-run drift, which carries the run's id)."""
LISTED = 10
LONG_AGO = 600.0
"""Seconds before the loop's start that make an end old news: summed up, not told."""


@dataclass
class Quiet:
    workspace: str
    grace: float = DRIFT_GRACE
    first_seen: dict[str, float] = field(default_factory=dict)
    """Unapplied drift (its key) -> when the loop first saw it."""
    earlier: set[str] | None = None
    """The keys summed up on the first turn (None before it: a first start; an empty set: nothing to sum up)."""
    started: float = float("inf")
    """When the loop started (epoch seconds): only runs that ended before it are summed up."""

    def told(self, events: tuple[Event, ...], now: float) -> tuple[Event, ...]:
        """The events worth telling now, from a turn's."""
        kept = [e for e in events if self._after_grace(e, now)]
        self.first_seen = {k: t for k, t in self.first_seen.items() if any(e.key == k for e in events)}
        if self.earlier is None:
            summed = [e for e in kept if _about_an_end(e) and _ended_before(e, self.started)]
            self.earlier = {e.key for e in summed}
            kept = [e for e in kept if e.key not in self.earlier]
            return tuple(([summary(self.workspace, summed, now)] if summed else []) + kept)
        return tuple(e for e in kept if e.key not in self.earlier)

    def _after_grace(self, told: Event, now: float) -> bool:
        if told.kind != "drift" or told.submission_id:
            return True
        since = self.first_seen.setdefault(told.key, now)
        return now - since >= self.grace


def _ended_before(told: Event, started: float) -> bool:
    """The run's own exit.json says it ended well before the loop started (a run that failed a moment ago is
    news, and the loop may retry it now); without one (a lost run) it is told."""
    try:
        return told.ended_at is not None and datetime.fromisoformat(told.ended_at).timestamp() < started - LONG_AGO
    except ValueError:
        return False


def _about_an_end(told: Event) -> bool:
    return told.kind in ENDED or (told.kind == "drift" and bool(told.submission_id))


def summary(workspace: str, summed: list[Event], now: float) -> Event:
    """One event for what happened before the loop started."""
    by_kind: dict[str, list[str]] = {}
    for told in summed:
        by_kind.setdefault(told.kind, []).append(told.job or "?")
    parts = [f"{len(jobs)} {kind} ({', '.join(sorted(jobs)[:LISTED])}{', ...' if len(jobs) > LISTED else ''})"
             for kind, jobs in sorted(by_kind.items())]
    digest = hashlib.sha256("\n".join(sorted(e.key for e in summed)).encode()).hexdigest()[:16]
    return event(workspace, "summary", f"summary:{digest}", Clock(now=now, pending_alert=0.0, stall_alert=0.0),
                 summary=f"before this loop started: {'; '.join(parts)}",
                 next="each is told on the status page and by `argus status`; from now on each new end is told")
