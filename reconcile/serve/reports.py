"""The analysis report riding on the loop's events about an interrupted run (issue 38 item 5, docs/incidents.md).

An event about a failed, lost, deadline-stopped, stalled or idle run carries, as its `report`, the analysis of
the incident record argus kept of that run (reconcile.views.incident), when there is one: the JSON webhook
(`json://`) body is then the structured event an ops agent consumes. What argus does next is the event's own
`next` (reconcile.serve.events._next decided it), so the report and the chat message never disagree.
"""

from __future__ import annotations

from reconcile.report import Event
from reconcile.views.incident import report
from state.runs import incident

REPORTED_KINDS = ("failed", "lost", "deadline", "stalled", "idle")


def with_report(event: Event, shared_root: str) -> Event:
    """The event with the report of its run's incident record; the event as it was without one."""
    if event.kind not in REPORTED_KINDS or not event.submission_id or event.report is not None:
        return event
    record = incident.read(shared_root, event.submission_id)
    if record is None:
        return event
    words = event.next or ("nothing but tell: the run goes on" if event.kind in ("stalled", "idle") else "nothing")
    return event.model_copy(update={"report": report(record, action_of(event.kind, words), words)})


def action_of(kind: str, words: str) -> str:
    """The report's `next.action` from the loop's words for it (events._next and the deadline event)."""
    if words.startswith("retries"):
        return "retry"
    if words.startswith("stops"):
        return "stop"
    return "wait" if kind in ("stalled", "idle") else "nothing"
