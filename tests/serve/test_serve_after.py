"""What the loop does and tells about `after:`, on plans the real planner makes: it starts a released follower
even with --sync off (never a replace), tells `blocked` and `released` once each, and /metrics shows who waits."""

from __future__ import annotations

import json

from reconcile.model import Action, Change, SubmitStep
from reconcile.plan.planner import plan
from reconcile.serve.after_events import after_events
from reconcile.serve.choice import choose
from reconcile.serve.events import Clock
from reconcile.serve.metrics import Metrics
from reconcile.views.html import render_page
from reconcile.views.human import render_plan, render_status
from reconcile.views.machine import plan_markdown, status_json
from specs.diagnostics import Diagnostic
from tests.support.planning import desired, job, observed, record_of, run_of
from tests.support.status_page import report

CLOCK = Clock(now=1_800_000_000.0, pending_alert=600.0, stall_alert=1800.0)
TRAIN = job("train")
EVAL = job("eval", after=["train"], env={"CKPT": "${job:train.checkpoint_dir}"})


def test_a_released_follower_is_started_with_sync_off_and_told_once():
    done = run_of(TRAIN, "SUCCEEDED")
    released = plan(desired(TRAIN, EVAL), observed(done))
    [change] = [c for c in released.changes if c.address == "job.eval"]
    assert change.action is Action.SUBMIT and choose(released, sync_auto=False) == [change]
    assert choose(released, sync_auto=False, may_retry=False) == []  # a checkout that is not what was merged
    flagged = released.model_copy(update={"diagnostics": (Diagnostic(severity="error", address="job.eval",
                                                                     message="bad"),)})
    assert choose(flagged, sync_auto=False) == []
    replace = change.model_copy(update={"action": Action.REPLACE})
    assert choose(released.model_copy(update={"changes": (replace,)}), sync_auto=False) == []
    plain = Change(address="job.other", action=Action.SUBMIT, reason="new", steps=change.steps)
    assert choose(released.model_copy(update={"changes": (plain,)}), sync_auto=False) == []  # no after:: drift
    [event] = after_events("team", released, {"job.eval"}, CLOCK)
    [step] = [s for s in change.steps if isinstance(s, SubmitStep)]
    assert (event.kind, event.key, event.submission_id) == ("released", f"team:released:{step.submission_id}",
                                                            step.submission_id)
    assert done.submission_id in event.summary
    assert after_events("team", released, set(), CLOCK) == []  # not carried out: nothing to tell


def test_a_blocked_follower_is_told_once_per_predecessor_run_and_shown_everywhere():
    failed = run_of(TRAIN, "FAILED")
    blocked = plan(desired(TRAIN, EVAL), observed(failed))
    assert choose(blocked, sync_auto=True) == []
    [event] = after_events("team", blocked, set(), CLOCK)
    assert event.kind == "blocked" and event.key == f"team:blocked:eval:{failed.submission_id}"
    assert "blocked until a run of job.train succeeds" in event.next
    again = plan(desired(TRAIN, EVAL), observed(run_of(TRAIN, "FAILED", attempt=2)))
    assert after_events("team", again, set(), CLOCK)[0].key != event.key  # a new failed run is new news

    status = render_status(blocked, {"train", "eval"})
    assert "job.eval   blocked" in status and f"train to succeed (FAILED, {failed.submission_id}, blocked)" in status
    shown = render_plan(blocked)
    assert ".. job.eval  (wait: blocked until" in shown and "CKPT" in shown  # what it will run, reviewed now
    assert "| `..` | `job.eval` | wait |" in plan_markdown(blocked)
    page = render_page(report(workspace="team", plan=blocked, runs={}), CLOCK.now)
    assert "<td>blocked</td>" in page and "wait: blocked until a run of job.train succeeds" in page
    metrics = Metrics()
    metrics.record(report(workspace="team", plan=blocked, runs={}))
    text = metrics.exposition().decode()
    assert 'argus_after_waiting{blocked="true",job="eval",predecessor="train",workspace="team"} 1.0' in text


def test_status_shows_what_a_follower_s_run_was_bound_to():
    ran = run_of(EVAL, "SUCCEEDED")
    bound = {"${job:train.checkpoint_dir}": "${shared_root}/outputs/checkpoints/train/run-1"}
    result = plan(desired(TRAIN, EVAL), observed(run_of(TRAIN, "SUCCEEDED"), ran,
                                                 records=(record_of(ran, "SUCCEEDED", bindings=bound),)))
    status = render_status(result, {"train", "eval"})
    assert "bound:   ${job:train.checkpoint_dir} = ${shared_root}/outputs/checkpoints/train/run-1" in status
    [row] = [r for r in json.loads(status_json(result, {"train", "eval"}))["jobs"] if r["address"] == "job.eval"]
    assert row["bindings"] == bound and row["sync"] == "in sync"
