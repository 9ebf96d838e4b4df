"""Stale means a decision changed: the reviewed plan against fresh plans, as plain data."""

from __future__ import annotations

from reconcile.model import (
    Action,
    Change,
    DeleteSnapshotStep,
    MkdirStep,
    Plan,
    RunView,
    SnapshotStep,
    StopStep,
    SubmitStep,
)
from reconcile.plan.reviewed import decision_differences
from specs.workloads.submission import Submission

SUB = Submission(workspace="ws", cluster="c", shared_root=".shared", job="a", run=1, entrypoint="true", env_vars={},
                 entrypoint_num_cpus=None, entrypoint_num_gpus=None, entrypoint_memory=None, entrypoint_resources={})


def submit(sid: str = "ws.a.aaaaaaaaaaaa.1", digest: str = "a" * 64, attempt: int = 1) -> SubmitStep:
    return SubmitStep(cluster="c", submission_id=sid, spec_hash=digest, attempt=attempt, submission=SUB)


def stop(sid: str = "ws.a.000000000000.1") -> StopStep:
    return StopStep(cluster="c", submission_id=sid)


def change(address: str, action: Action, *steps, current: str | None = None) -> Change:
    run = None if current is None else RunView(submission_id=current, cluster="c", spec_hash="a" * 64, attempt=1,
                                               status="RUNNING", on_ray=True)
    return Change(address=address, action=action, reason="display only", steps=steps, current=run)


def plan(*changes: Change) -> Plan:
    return Plan(workspace="ws", changes=changes)


def test_the_same_decisions_apply():
    reviewed = plan(change("job.a", Action.REPLACE, stop(), submit()))
    fresh = plan(change("job.a", Action.REPLACE, stop(), submit()).model_copy(update={"reason": "other words"}))
    assert decision_differences(reviewed, fresh) == []


def test_a_run_that_ended_on_its_own_needs_no_stop():
    reviewed = plan(change("job.a", Action.REPLACE, stop(), submit()), change("job.old", Action.STOP, stop("x.1")))
    fresh = plan(change("job.a", Action.SUBMIT, submit()))
    assert decision_differences(reviewed, fresh) == []


def test_a_step_already_done_is_not_missing_but_another_run_is():
    reviewed = plan(change("job.a", Action.SUBMIT, submit()))
    assert decision_differences(reviewed, plan(change("job.a", Action.NOOP, current="ws.a.aaaaaaaaaaaa.1"))) == []
    [line] = decision_differences(reviewed, plan(change("job.a", Action.NOOP, current="ws.a.bbbbbbbbbbbb.1")))
    assert line == "job.a: reviewed `+ submit` (submit ws.a.aaaaaaaaaaaa.1); now no change"


def test_new_or_different_decisions_are_named():
    reviewed = plan(change("job.a", Action.SUBMIT, submit()))
    fresh = plan(change("job.a", Action.SUBMIT, submit("ws.a.bbbbbbbbbbbb.1", "b" * 64)),
                 change("job.b", Action.STOP, stop("ws.b.cccccccccccc.1")),
                 change("job.c", Action.RETRY, submit("ws.c.dddddddddddd.2", "d" * 64, 2)))
    assert decision_differences(reviewed, fresh) == [
        "job.a: reviewed `+ submit` (submit ws.a.aaaaaaaaaaaa.1); now `+ submit` (submit ws.a.bbbbbbbbbbbb.1)",
        "job.b: reviewed no change; now `- stop` (stop ws.b.cccccccccccc.1)",
        "job.c: reviewed no change; now `+ retry` (submit ws.c.dddddddddddd.2)",
    ]


def test_a_new_stop_of_a_reviewed_replace_is_a_new_decision():
    reviewed = plan(change("job.a", Action.SUBMIT, submit()))
    fresh = plan(change("job.a", Action.REPLACE, stop(), submit()))
    assert decision_differences(reviewed, fresh) == [
        "job.a: reviewed `+ submit` (submit ws.a.aaaaaaaaaaaa.1); now `-/+ replace` (stop ws.a.000000000000.1, "
        "submit ws.a.aaaaaaaaaaaa.1)"]


def test_directories_decide_nothing():
    dirs = change("dirs.c", Action.CREATE, MkdirStep(cluster="c", path="jobs"))
    assert decision_differences(plan(dirs), plan()) == []
    assert decision_differences(plan(), plan(dirs)) == []


def test_snapshots_compare_by_commit_and_digest_and_deletes_by_path():
    made = change("code.v1", Action.CREATE, SnapshotStep(cluster="c", name="v1", commit="1" * 40, digest="2" * 64))
    other = change("code.v1", Action.CREATE, SnapshotStep(cluster="c", name="v1", commit="3" * 40, digest="4" * 64))
    gone = change("code.old", Action.DELETE, DeleteSnapshotStep(cluster="c", path="common/code/x/old"))
    assert decision_differences(plan(made, gone), plan(change("code.v1", Action.NOOP))) == []
    [kept] = decision_differences(plan(gone), plan(change("code.old", Action.NOOP)))
    assert kept == "code.old: reviewed `- delete` (delete-snapshot common/code/x/old); now no change"
    assert decision_differences(plan(made), plan()) != []  # a snapshot no longer wanted is not "done"
    [line] = decision_differences(plan(made), plan(other))
    assert line.startswith("code.v1: reviewed `+ create` (snapshot v1 at 111111111111") and "333333333333" in line
    [added] = decision_differences(plan(), plan(gone))
    assert added == "code.old: reviewed no change; now `- delete` (delete-snapshot common/code/x/old)"


def test_two_changes_under_one_address_never_hide_each_other():
    r1 = change("code.bar", Action.DELETE, DeleteSnapshotStep(cluster="c", path="common/code/r1/bar"))
    r2 = change("code.bar", Action.DELETE, DeleteSnapshotStep(cluster="c", path="common/code/r2/bar"))
    [line] = decision_differences(plan(r2), plan(r1, r2))
    assert line.startswith("code.bar: reviewed `- delete` (delete-snapshot common/code/r2/bar); now `- delete` "
                           "(delete-snapshot common/code/r1/bar) and")


def test_a_reviewed_stop_of_a_run_the_fresh_plan_keeps_running_is_missing():
    reviewed = plan(change("job.old", Action.STOP, stop("ws.old.aaaaaaaaaaaa.1")), change("job.new", Action.SUBMIT,
                                                                                        submit()))
    kept = change("job.old", Action.NOOP, current="ws.old.aaaaaaaaaaaa.1")  # its spec came back on main
    [line] = decision_differences(reviewed, plan(kept, change("job.new", Action.SUBMIT, submit())))
    assert line == "job.old: reviewed `- stop` (stop ws.old.aaaaaaaaaaaa.1); now no change"


def test_a_replacement_already_carried_out_is_not_asked_again():
    from reconcile.model import PlanOptions
    from reconcile.plan.reviewed import replacements_done

    reviewed = plan(change("job.a", Action.SUBMIT, submit("ws.a.aaaaaaaaaaaa.2", attempt=2))).model_copy(
        update={"options": PlanOptions(replace=("job.a",))})
    assert replacements_done(reviewed, {"ws.a.aaaaaaaaaaaa.1"}) == set()
    assert replacements_done(reviewed, {"ws.a.aaaaaaaaaaaa.1", "ws.a.aaaaaaaaaaaa.2"}) == {"job.a"}


def test_input_seals_and_prunes_are_decisions_a_saved_plan_can_hold():
    from reconcile.model import DeleteInputStep, SealInputStep

    seal = SealInputStep(cluster="c", address="dataset.x", key="a" * 64, rel="datasets/x/aaaaaaaaaaaa",
                         staged="datasets/x/.incoming-aaaaaaaaaaaa-ws", run="ws.dataset--x.aaaaaaaaaaaa.1")
    prune = DeleteInputStep(cluster="c", rel="datasets/x/bbbbbbbbbbbb", bytes=10)
    reviewed = plan(change("dataset.x", Action.CREATE, seal), change("dataset.x", Action.DELETE, prune))
    assert decision_differences(reviewed, reviewed) == []
    other = seal.model_copy(update={"run": "ws.dataset--x.aaaaaaaaaaaa.2"})
    [line] = decision_differences(reviewed, plan(change("dataset.x", Action.CREATE, other),
                                                 change("dataset.x", Action.DELETE, prune)))
    assert "seal-input" in line and "dataset.x" in line
    # sealed meanwhile (another apply did it): the input is in sync, nothing is left to decide
    sealed = plan(change("dataset.x", Action.NOOP))
    assert decision_differences(reviewed, sealed) == []
    # still being made (a run there, nothing sealed): the reviewed seal is missing
    assert decision_differences(reviewed, plan(change("dataset.x", Action.NOOP, current="ws.dataset--x.b.1")))


def test_quotas_compare_by_what_they_set():
    from reconcile.model import QuotasStep

    reviewed = plan(change("quotas.c", Action.CREATE, QuotasStep(cluster="c", workspaces={})))
    assert decision_differences(reviewed, reviewed) == []
