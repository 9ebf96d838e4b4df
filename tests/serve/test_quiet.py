"""What the loop keeps to itself (reconcile.serve.quiet), from plain events: a merge within its grace is no
drift, and a first start sums up what ended before it."""

from __future__ import annotations

from reconcile.serve.events import Clock, drift_event, event
from reconcile.serve.quiet import Quiet

NOW = 1_800_000_000.0
CLOCK = Clock(now=NOW, pending_alert=600, stall_alert=1800)


def failed(job: str, ended_at: str | None = "2027-01-01T00:00:00+00:00") -> object:
    return event("ws", "failed", f"failed:ws.{job}.h.1", CLOCK, job=job, submission_id=f"ws.{job}.h.1",
                 summary=f"job.{job}: attempt 1 failed").model_copy(update={"ended_at": ended_at})


def test_a_merged_change_is_drift_only_once_its_grace_has_passed():
    quiet = Quiet("ws", grace=600, earlier=set())
    merged = drift_event("ws", [("job.a", "submit", "ws.a.h.1")], CLOCK)
    assert quiet.told((merged,), NOW) == ()
    assert quiet.told((merged,), NOW + 599) == ()  # CI applies in the meantime: never told
    assert quiet.told((merged,), NOW + 600) == (merged,)
    more = drift_event("ws", [("job.a", "submit", "ws.a.h.1"), ("job.b", "submit", "ws.b.h.1")], CLOCK)
    assert quiet.told((more,), NOW + 601) == ()  # another set of changes: its own grace
    stopped = event("ws", "drift", "drift:ws.c.h.1", CLOCK, submission_id="ws.c.h.1", summary="stopped outside")
    assert quiet.told((stopped,), NOW + 602) == (stopped,)  # a run stopped outside argus: at once
    assert Quiet("ws", grace=0, earlier=set()).told((merged,), NOW) == (merged,)


def test_a_first_start_sums_up_what_ended_before_it_once():
    quiet = Quiet("ws", started=NOW)  # nothing was ever told of the workspace
    retried = event("ws", "retried", "retried:ws.c.h.2", CLOCK, job="c", summary="retried")
    after = failed("e", ended_at="2030-01-01T00:00:00+00:00")  # ended once the loop had started: told
    lost = failed("f", ended_at=None)  # no exit.json dates its end: told
    recent = failed("g", ended_at="2027-01-15T07:55:00+00:00")  # five minutes before the start: news
    [summed, *kept] = quiet.told((failed("a"), failed("b"), retried, after, lost, recent), NOW)
    assert summed.kind == "summary" and summed.summary == "before this loop started: 2 failed (a, b)"
    assert kept == [retried, after, lost, recent]
    assert quiet.told((failed("a"), failed("b")), NOW + 30) == ()  # never told one by one afterwards
    assert quiet.told((failed("d"),), NOW + 60) == (failed("d"),)  # a new end is told
    again = Quiet("ws", earlier=set())  # a restart, or `serve --once`: as it always was
    assert again.told((failed("a"),), NOW) == (failed("a"),)
