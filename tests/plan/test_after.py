"""`after:` in the pure planner: followers wait on their predecessors' current runs (Ray's word only),
are blocked by a failed one, released as a plain submit with their bindings, and not run again unless asked."""

from __future__ import annotations

from reconcile.model import Action, SubmitStep
from reconcile.plan.planner import plan
from reconcile.plan.reviewed import decision_differences
from reconcile.views.human import summary
from specs.workloads.submission import resolve, spec_hash
from tests.support.planning import CLUSTER, WS, desired, job, observed, record_of, run_of

PREPARE = job("prepare")
TRAIN = job("train", after=["prepare"])
EVAL = job("eval", after={"train": "succeeded"},
           env={"READS": "${job:train.checkpoint_dir}", "FOLLOWS": "${job:train.submission_id}"})


def changes(result) -> dict:
    return {c.address: c for c in result.changes}


def test_a_chain_waits_on_its_predecessors_and_never_counts_as_a_change():
    result = plan(desired(PREPARE, TRAIN, EVAL), observed(run_of(PREPARE, "RUNNING")))
    found = changes(result)
    assert found["job.prepare"].action is Action.NOOP
    train, evaluation = found["job.train"], found["job.eval"]
    assert train.action is Action.WAIT and not train.steps
    [waiting] = train.waiting_on
    assert (waiting.job, waiting.needs, waiting.state, waiting.blocked) == ("prepare", "succeeded", "RUNNING", False)
    assert "waits for job.prepare to succeed (RUNNING)" in train.reason
    assert evaluation.action is Action.WAIT and evaluation.waiting_on[0].state == "waiting on prepare"
    assert not result.actionable and not result.differs and result.steps() == ()
    assert len(result.following) == 2 and "2 job(s) wait on their predecessors" in summary(result)


def test_a_new_chain_submits_only_its_first_job():
    result = changes(plan(desired(PREPARE, TRAIN, EVAL), observed()))
    assert result["job.prepare"].action is Action.SUBMIT
    assert result["job.train"].action is Action.WAIT
    assert result["job.train"].waiting_on[0].state == "submit planned"


def test_a_succeeded_predecessor_releases_its_follower_with_bindings():
    prepare, train = run_of(PREPARE, "SUCCEEDED"), run_of(TRAIN, "SUCCEEDED", started=5)
    found = changes(plan(desired(PREPARE, TRAIN, EVAL), observed(prepare, train)))
    released = found["job.eval"]
    assert released.action is Action.SUBMIT
    assert released.reason.startswith(f"after job.train SUCCEEDED ({train.submission_id})")
    [step] = released.steps
    assert isinstance(step, SubmitStep)
    assert step.bindings == {"${job:train.checkpoint_dir}": "${shared_root}/outputs/team/checkpoints/train/run-1",
                             "${job:train.submission_id}": train.submission_id}
    assert step.submission.env_vars["READS"] == "${job:train.checkpoint_dir}"  # placeholders stay: hash unmoved
    assert step.checkpoint_dir == "${shared_root}/outputs/team/checkpoints/eval/run-1"


def test_a_failed_predecessor_blocks_and_a_planned_retry_only_delays():
    failed = run_of(TRAIN, "FAILED")
    blocked = changes(plan(desired(PREPARE, TRAIN, EVAL), observed(run_of(PREPARE, "SUCCEEDED"), failed)))["job.eval"]
    assert blocked.action is Action.WAIT and blocked.waiting_on[0].blocked
    assert blocked.reason.startswith("blocked until a run of job.train succeeds") and "retry:" in blocked.reason
    retried = job("train", after=["prepare"], retry={"on": ["unknown"], "max_attempts": 2})
    records = (record_of(failed, "FAILED", failure="unknown"),)
    found = changes(plan(desired(PREPARE, retried, EVAL), observed(run_of(PREPARE, "SUCCEEDED"), failed,
                                                                     records=records)))
    assert found["job.train"].action is Action.RETRY
    assert found["job.eval"].action is Action.WAIT and not found["job.eval"].waiting_on[0].blocked
    finished = job("eval", after={"train": "finished"})
    assert changes(plan(desired(PREPARE, TRAIN, finished),
                        observed(run_of(PREPARE, "SUCCEEDED"), failed)))["job.eval"].action is Action.SUBMIT


def test_a_record_alone_never_releases_a_follower():
    """Any job can write a record on the shared root: an end Ray does not confirm releases nothing."""
    prepare = run_of(PREPARE, "SUCCEEDED")
    forged = record_of(run_of(TRAIN, "SUCCEEDED"), "SUCCEEDED", submitted_at="2026-01-01T00:00:00+00:00")
    result = changes(plan(desired(PREPARE, TRAIN, EVAL), observed(prepare, records=(forged,))))
    assert result["job.eval"].action is Action.WAIT and result["job.eval"].steps == ()
    assert "Ray no longer knows it" in result["job.eval"].waiting_on[0].state


def test_a_predecessor_that_ran_again_does_not_rerun_its_follower_unless_asked():
    train_old = job("train", after=["prepare"])
    train_new = job("train", after=["prepare"], run=2)
    runs = (run_of(PREPARE, "SUCCEEDED"), run_of(train_old, "SUCCEEDED", started=1000),
            run_of(EVAL, "SUCCEEDED", started=2000), run_of(train_new, "SUCCEEDED", started=3000))
    kept = changes(plan(desired(PREPARE, train_new, EVAL), observed(*runs)))["job.eval"]
    assert kept.action is Action.NOOP
    assert "train has run again since" in kept.reason
    assert "set rerun_with_predecessors: true or bump run:" in kept.reason
    rerun = job("eval", after=["train"], rerun_with_predecessors=True)
    again = changes(plan(desired(PREPARE, train_new, rerun), observed(*runs)))["job.eval"]
    assert again.action is Action.SUBMIT
    [step] = again.steps
    assert step.submission.follows == {"train": runs[3].submission_id}
    plain = spec_hash(resolve(WS, CLUSTER, rerun))
    assert step.spec_hash != plain  # a new predecessor run is a new spec of the follower


def test_a_reviewed_wait_released_later_is_not_stale():
    world = (run_of(PREPARE, "SUCCEEDED"),)
    reviewed = plan(desired(PREPARE, TRAIN), observed(run_of(PREPARE, "RUNNING")))
    fresh = plan(desired(PREPARE, TRAIN), observed(*world))
    assert changes(fresh)["job.train"].action is Action.SUBMIT
    assert decision_differences(reviewed, fresh) == []
    other = plan(desired(PREPARE, job("train", after=["prepare"], entrypoint_num_cpus=3)), observed(*world))
    assert decision_differences(reviewed, other) != []  # a different submission is a new decision


def test_a_follower_behind_a_blocked_predecessor_points_at_it():
    found = changes(plan(desired(PREPARE, TRAIN, EVAL), observed(run_of(PREPARE, "FAILED"))))
    assert found["job.train"].reason.startswith("blocked until a run of job.prepare succeeds")
    assert found["job.eval"].waiting_on[0].blocked
    assert found["job.eval"].reason == "blocked until job.train can start: it is blocked by prepare (see job.train)"


def test_a_bound_value_that_is_no_plain_path_is_a_plan_error():
    from specs.kinds.models import Job

    odd = Job(kind="Job", name="train", cluster="c", workload="ppo", model="/m", data={"train": "/d", "val": "/d"},
              trainer={"checkpoint_dir": "/ckpt/$(touch pwned)"})
    follower = job("eval", after=["train"], env={"CKPT": "${job:train.checkpoint_dir}"})
    digest = spec_hash(resolve(WS, CLUSTER, odd))
    ran = run_of(odd, "SUCCEEDED")
    assert ran.metadata["argus.spec_hash"] == digest
    result = plan(desired(odd, follower), observed(ran))
    [error] = [d for d in result.errors if d.address == "job.eval"]
    assert "will not paste into a shell line" in error.message and error.field == "after"
