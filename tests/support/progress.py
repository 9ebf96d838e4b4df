"""Waiting on many Ray jobs at once for as long as they make progress: a loaded 2-core machine starts
drivers slowly, and a fixed wait per job (120 s) once ran out with a job still PENDING, while a real
hang (nothing moves at all) must still fail, and soon."""

from __future__ import annotations

import time

from tests.support.cluster import sdk

ENDED = ("SUCCEEDED", "FAILED", "STOPPED")
STALL = 120.0
"""Seconds without any of the jobs changing status before the wait fails: the old per-job bound, now
counted from the last progress rather than from the start."""
BOUND = 900.0
"""Seconds in all, however the jobs move: a run that keeps flapping still ends the test."""


def wait_all(address: str, submission_ids: list[str], statuses: set[str], stall: float = STALL,
             bound: float = BOUND, every: float = 0.5) -> None:
    """Until Ray reports every job in one of `statuses`. A job that ends otherwise fails at once; the wait
    fails when no job has changed status (PENDING -> RUNNING -> ...) for `stall` seconds, or after `bound`."""
    client = sdk(address)
    started = moved = time.monotonic()
    seen: dict[str, str] = {}
    while waiting := sorted(s for s in submission_ids if seen.get(s) not in statuses):
        now = time.monotonic()
        if now - moved >= stall or now - started >= bound:
            why = f"no job moved for {stall:g}s" if now - moved >= stall else f"still not done after {bound:g}s"
            raise AssertionError(f"{why}; waiting on {len(waiting)}: "
                                 + ", ".join(f"{s} {seen.get(s, 'absent')}" for s in waiting))
        time.sleep(every if seen else 0)
        now_seen = _statuses(client, submission_ids, statuses)
        if now_seen != seen:
            seen, moved = now_seen, time.monotonic()


def _statuses(client, submission_ids: list[str], statuses: set[str]) -> dict[str, str]:
    """Each job's status on Ray now, one request for them all; a job ended otherwise than wanted fails at once."""
    ids = set(submission_ids)
    found = {j.submission_id: str(j.status.value) for j in client.list_jobs() if j.submission_id in ids}
    for submission_id, status in found.items():
        if status not in statuses and status in ENDED:
            raise AssertionError(f"{submission_id} ended {status}, wanted {sorted(statuses)}")
    return found
