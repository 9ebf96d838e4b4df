"""Incidents: what keeps the loop from its work, told once when it begins and once when it ends (issue 37).

A cluster that does not answer, a desired state that no longer loads, turns that keep failing, a sent-event
ledger that cannot be used (so nothing can be told: only /healthz and the page say it): each
turn says what it saw (TurnReport.unreachable, failed_at, ok) and the loop's book keeps what is open
across turns. A turn sees an incident at its start, so it is told within one interval (two at most, when
the turn that sees it began just before it did); `/healthz` fails while one is open, the page shows it and
/metrics counts it. Pure: the clock is given.

An incident is keyed by what it is and when the loop first saw it, so each outage is told once, and a
second outage of the same cluster later is a new event. A loop that restarts during an incident tells it
again: it cannot know the earlier process told it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from reconcile.report import Event, Incident, TurnReport
from reconcile.serve.events import Clock, event
from specs.diagnostics import plain

FAILING_TURNS = 2
"""Turns in a row that fail (other than a desired state that does not load: its own incident) before the loop
is said to have stopped acting: one failed turn is often a blip the next turn mends."""
MAX_WHY = 300
"""Characters of a cluster's or a turn's error an incident quotes (the full text is in the log)."""


def seen_in(report: TurnReport, failing: int, silenced: str | None = None) -> dict[tuple[str, str], str]:
    """(kind, subject) -> summary of what this turn shows is wrong now; `silenced`: why no notification can be
    sent (reconcile.serve.notify.Notifier.blocked)."""
    found = {("unreachable", cluster): f"cluster {cluster} does not answer: {_why(why)}"
             for cluster, why in sorted(report.unreachable.items())}
    found |= {("root_distrusted", cluster): f"the shared root of cluster {cluster} is not trusted, so none of its "
                                            f"jobs is planned: {_why(why)}"
              for cluster, why in sorted(report.distrusted.items())}
    if silenced:
        found[("notify_blocked", "")] = _why(silenced)
    if not report.ok and report.failed_at == "load":
        found[("desired_state", "")] = f"the desired state does not load: {_why(report.error)}"
    elif not report.ok and failing >= FAILING_TURNS:
        found[("loop_failing", "")] = f"{failing} turns in a row failed, the last: {_why(report.error)}"
    return found


def _why(text: str | None) -> str:
    return plain(text or "no reason given", lines=False)[:MAX_WHY]


@dataclass
class Incidents:
    """One loop's open incidents, across its turns."""

    workspace: str
    open: dict[tuple[str, str], Incident] = field(default_factory=dict)
    failing: int = 0
    """Turns in a row that failed."""

    def update(self, report: TurnReport, now: float, silenced: str | None = None) -> list[Event]:
        """The events of incidents that began or ended with this turn; the report keeps the open ones."""
        self.failing = 0 if report.ok else self.failing + 1
        seen = seen_in(report, self.failing, silenced)
        clock = Clock(now=now, pending_alert=0.0, stall_alert=0.0)
        told = []
        for key, summary in sorted(seen.items()):
            if key in self.open:
                self.open[key] = replace(self.open[key], summary=summary)
            else:
                self.open[key] = Incident(kind=key[0], subject=key[1], summary=summary, since=now)  # type: ignore[arg-type]
                told.append(_began(self.workspace, self.open[key], clock))
        for key in sorted(set(self.open) - set(seen)):
            if _ended(key, report):
                told.append(_recovered(self.workspace, self.open.pop(key), clock))
        return told

    def current(self) -> tuple[Incident, ...]:
        return tuple(self.open[key] for key in sorted(self.open))


def _ended(key: tuple[str, str], report: TurnReport) -> bool:
    """Whether the turn can tell it ended: a desired state that loaded; for the rest, a turn that succeeded
    (only such a turn read every cluster: a failed one shows the last good turn's plan)."""
    kind, subject = key
    if kind == "root_distrusted":  # Ray's runs are what make a bare root distrusted: a cluster unread cannot clear it
        return report.ok and subject not in report.unreachable
    if kind == "desired_state":
        return report.failed_at != "load"
    if kind == "notify_blocked":
        return True  # asked every turn: gone when not seen
    return report.ok


def _key(incident: Incident) -> str:
    return f"incident:{incident.kind}:{incident.subject}:{incident.since:.0f}"


def _began(workspace: str, incident: Incident, clock: Clock) -> Event:
    return event(workspace, "incident", _key(incident), clock, cluster=incident.subject or None,
                 summary=incident.summary, details={"incident": incident.kind},
                 next="argus tries again every turn and tells `recovered` when it ends; /healthz fails meanwhile")


def _recovered(workspace: str, incident: Incident, clock: Clock) -> Event:
    lasted = max(0.0, clock.now - incident.since)
    what = {"unreachable": f"cluster {incident.subject} answers again",
            "root_distrusted": f"the shared root of cluster {incident.subject} is trusted again",
            "desired_state": "the desired state loads again",
            "loop_failing": "the loop's turns succeed again",
            "notify_blocked": "notifications can be sent again"}[incident.kind]
    return event(workspace, "recovered", f"recovered:{_key(incident)}", clock, cluster=incident.subject or None,
                 summary=f"{what} (after {lasted:.0f} s)", details={"incident": incident.kind})
