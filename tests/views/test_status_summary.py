"""`argus status` on a cluster shared with thousands of other jobs: one line, not thousands."""

from __future__ import annotations

from reconcile.model import Plan, UnmanagedJob
from reconcile.views.human import render_status


def other(i: int, owner: str | None, status: str = "SUCCEEDED") -> UnmanagedJob:
    return UnmanagedJob(cluster="h20", submission_id=f"raysubmit_{i}", status=status, owner=owner)


def test_thousands_of_other_jobs_are_summed_up_in_one_line():
    jobs = [other(i, "vision" if i % 2 else None, "RUNNING" if i < 7 else "SUCCEEDED") for i in range(3000)]
    text = render_status(Plan(workspace="llm-rl", changes=(), unmanaged=tuple(jobs)), set())
    assert len(text.splitlines()) < 10
    assert "h20: 3000 job(s), 7 active (by owner: by hand 1500, vision 1500)" in text


def test_a_few_other_jobs_are_listed_one_a_line():
    jobs = [other(1, None), other(2, "vision", "RUNNING")]
    text = render_status(Plan(workspace="llm-rl", changes=(), unmanaged=tuple(jobs)), set())
    assert "h20: raysubmit_1 SUCCEEDED (owner: none, submitted by hand)" in text
    assert "h20: raysubmit_2 RUNNING (owner: vision)" in text
