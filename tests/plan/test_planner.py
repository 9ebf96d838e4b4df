"""The pure planner on plain data: no Ray, no disk."""

from __future__ import annotations

from reconcile.model import Action, Plan, StopStep, SubmitStep
from reconcile.plan.planner import plan
from reconcile.plan.runs import runs_by_job
from reconcile.views.human import summary
from specs.desired import DesiredState, Source
from specs.diagnostics import Where
from specs.kinds.models import Job
from specs.workloads.submission import resolve, spec_hash, submission_id
from state.observed import ClusterState, ObservedState, RayJob
from tests.support.planning import CLUSTER, WS, desired, job, observed, record_of, run_of


def test_a_new_job_is_submitted_with_a_deterministic_id():
    spec = job()
    [change] = plan(desired(spec), observed()).changes
    assert change.action is Action.SUBMIT and change.address == "job.j"
    [step] = change.steps
    assert isinstance(step, SubmitStep) and step.submission_id.startswith("team.j.") and step.attempt == 1
    assert plan(desired(spec), observed()).changes[0].steps == change.steps


def test_finished_runs_are_never_rerun_and_bumping_run_asks_for_a_new_one():
    spec = job()
    for status in ("SUCCEEDED", "FAILED", "RUNNING", "PENDING"):
        assert plan(desired(spec), observed(run_of(spec, status))).changes[0].action is Action.NOOP
    stopped = run_of(spec, "STOPPED")  # by argus: its record says argus asked
    asked = record_of(stopped, "STOPPED", stop_asked="2026-01-01T00:00:00+00:00")
    assert plan(desired(spec), observed(stopped, records=(asked,))).changes[0].action is Action.NOOP
    bumped = plan(desired(job(run=2)), observed(run_of(spec, "SUCCEEDED"))).changes[0]
    assert bumped.action is Action.SUBMIT
    assert [(d.path, d.before, d.after) for d in bumped.diff] == []  # no record of the old run: no diff


def test_a_changed_spec_replaces_an_active_run_stop_first():
    old = job()
    new = job(entrypoint_num_cpus=2)
    change = plan(desired(new), observed(run_of(old, "RUNNING"))).changes[0]
    assert change.action is Action.REPLACE
    assert [type(s) for s in change.steps] == [StopStep, SubmitStep]


def test_diff_comes_from_the_old_runs_record():
    old = job()
    ray_job = run_of(old, "RUNNING")
    rec = record_of(ray_job, "RUNNING", submission=resolve(WS, CLUSTER, old))
    change = plan(desired(job(entrypoint_num_cpus=2)), observed(ray_job, records=(rec,))).changes[0]
    assert [(d.path, d.before, d.after) for d in change.diff] == [("entrypoint_num_cpus", 1.0, 2.0)]


def test_description_is_cosmetic():
    old = job()
    change = plan(desired(job(description="now documented")), observed(run_of(old, "RUNNING"))).changes[0]
    assert change.action is Action.NOOP


def test_removed_or_stopped_jobs_are_stopped_and_protect_is_an_error():
    spec = job()
    removed = plan(desired(), observed(run_of(spec, "RUNNING")))
    assert [c.action for c in removed.changes] == [Action.STOP]
    stopped = plan(desired(job(state="stopped")), observed(run_of(spec, "RUNNING")))
    assert stopped.changes[0].action is Action.STOP and not stopped.errors
    protected = plan(desired(job(state="stopped", protect=True)), observed(run_of(spec, "RUNNING")))
    [error] = protected.errors
    assert error.where == Where("jobs/j.yaml", 7) and "protected" in error.message


def test_jobs_of_other_workspaces_and_by_hand_are_unmanaged():
    spec = job()
    theirs = run_of(spec, "RUNNING", workspace="other")
    by_hand = RayJob(submission_id="raysubmit_1", status="RUNNING")
    result = plan(desired(), observed(theirs, by_hand))
    assert result.changes == ()
    assert {j.submission_id: j.owner for j in result.unmanaged} == {theirs.submission_id: "other", "raysubmit_1": None}


def test_runs_ray_forgot_are_reported_not_resubmitted():
    spec = job()
    forgotten = record_of(run_of(spec, "SUCCEEDED"), "SUCCEEDED")
    change = plan(desired(spec), observed(records=(forgotten,))).changes[0]
    assert change.action is Action.NOOP and "forgotten (SUCCEEDED)" in change.reason
    lost = record_of(run_of(spec, "RUNNING"), "RUNNING")
    result = plan(desired(spec), observed(records=(lost,)))
    assert result.changes[0].action is Action.NOOP
    [warning] = result.diagnostics
    assert warning.severity == "warning" and "no longer knows it" in warning.message


def test_a_submit_that_never_reached_ray_is_submitted_again():
    spec = job()
    failed = record_of(run_of(spec, "PENDING"), "SUBMIT_FAILED")
    change = plan(desired(spec), observed(records=(failed,))).changes[0]
    assert change.action is Action.SUBMIT and change.steps[0].submission_id == failed.submission_id


def test_submission_ids_stay_within_rays_alphabet_and_length():
    long_ws = "w" * 63
    sid = submission_id(long_ws, "j" * 63, "a" * 64, 12)
    assert len(sid) <= 128 and sid.endswith(".12")


def test_a_renamed_job_stops_its_old_run_before_the_new_one_starts():
    old = job("z-old")
    result = plan(desired(job("a-new")), observed(run_of(old, "RUNNING")))
    assert [(c.address, c.action) for c in result.actionable] == [("job.z-old", Action.STOP),
                                                                  ("job.a-new", Action.SUBMIT)]


def test_the_newest_run_is_current_not_the_one_with_the_highest_hash():
    runs = [run_of(job(entrypoint_num_cpus=n), "SUCCEEDED", started=n * 1000) for n in (1, 2, 3, 4, 5)]
    change = plan(desired(job(entrypoint_num_cpus=9)), observed(*runs)).changes[0]
    assert change.current.submission_id == runs[-1].submission_id


def test_protect_survives_the_deletion_of_the_spec():
    ray_job = run_of(job(protect=True), "RUNNING")
    result = plan(desired(job("other")), observed(ray_job, records=(record_of(ray_job, "PENDING", protect=True),)))
    [error] = result.errors
    assert "protect: true" in error.message and ray_job.submission_id in error.message


def test_runs_on_a_cluster_removed_from_the_desired_state_are_an_error():
    ray_job = run_of(job(), "RUNNING")
    elsewhere = record_of(ray_job, "RUNNING").model_copy(update={"cluster": "gone"})
    [error] = plan(desired(), observed(records=(elsewhere,))).errors
    assert "'gone'" in error.message and "no longer in the desired state" in error.message


def test_an_unconfirmed_submit_is_retried_only_while_the_same_ray_session_lacks_it():
    spec = job()
    same_session = record_of(run_of(spec, "PENDING"), "SUBMITTING", session_name="s1")
    assert plan(desired(spec), observed(records=(same_session,))).changes[0].action is Action.SUBMIT
    restarted = same_session.model_copy(update={"session_name": "s0"})
    result = plan(desired(spec), observed(records=(restarted,)))
    assert result.changes[0].action is Action.NOOP
    assert "lost (last seen SUBMITTING)" in result.changes[0].reason
    lost, restart = result.diagnostics
    assert (lost.severity, lost.address, restart.address) == ("warning", "job.j", "cluster.c")
    assert "no longer knows it (head restarted?)" in lost.message and "session s0 -> s1" in restart.message


def test_a_job_with_our_workspace_label_but_no_spec_hash_is_unmanaged():
    odd = RayJob(submission_id="x", status="RUNNING", metadata={"argus.workspace": "team"})
    result = plan(desired(), observed(odd))
    assert result.changes == () and [j.submission_id for j in result.unmanaged] == ["x"]


def test_a_verl_job_that_fits_only_when_others_finish_waits_in_the_queue():
    from specs.kinds.models import CodeSnapshot
    from state.observed import Node, SnapshotState, SourceState

    snapshot = CodeSnapshot(kind="CodeSnapshot", name="verl", cluster="c", git={"url": "/v", "ref": "v1"})
    trainer = Job(kind="Job", name="ppo", cluster="c", workload="ppo", code="verl", model="/m",
                  data={"train": "/d"}, trainer={"nnodes": 1, "n_gpus_per_node": 4})
    sources = {"job.ppo": Source("jobs/ppo.yaml", 1, {"trainer": 9}), "job.j": Source("jobs/j.yaml", 1)}
    state = DesiredState("/ws", WS, {"c": CLUSTER}, {"ppo": trainer, "j": job()}, {"verl": snapshot}, sources,
                         {"c": "/shared"})
    holder = run_of(job(), "RUNNING")
    holding = resolve(WS, CLUSTER, job()).model_copy(update={"gpus": 4})
    worker = Node(node_id="w", ip="127.0.0.3", is_head=False, resources={"GPU": 4, "CPU": 16, "worker_node": 1})
    cluster = ClusterState(name="c", address="http://x:1", session_name="s1", ray_version="2.60.0",
                           nodes=(worker,), jobs=(holder,))
    seen = ObservedState(clusters={"c": cluster},
                         records={holder.submission_id: record_of(holder, "RUNNING", submission=holding)},
                         snapshots={"verl": SnapshotState(source=SourceState(commit="c0", digest="d0"))})
    result = plan(state, seen)
    [queued] = [c for c in result.changes if c.address == "job.ppo"]
    assert not [d for d in result.diagnostics if d.address == "job.ppo"]
    assert queued.action is Action.QUEUE and [s.kind for s in queued.steps] == ["enqueue"]
    assert queued.queue.position == 1 and queued.queue.gpus == 4
    assert queued.reason == "queued #1 on c: needs 4 GPU, 0 GPU free"
    assert queued not in result.actionable or queued.steps  # an enqueue is something to do; waiting is not


def test_a_retryable_failure_gets_a_new_attempt_up_to_the_limit():
    spec = job(retry={"max_attempts": 3, "on": ["nccl_timeout", "lost"]})
    failed = run_of(spec, "FAILED")
    seen = observed(failed, records=(record_of(failed, "FAILED", failure="nccl_timeout"),))
    change = plan(desired(spec), seen).changes[0]
    assert change.action is Action.RETRY and change.steps[0].attempt == 2
    assert change.steps[0].submission_id.endswith(".2") and "attempt 2/3" in change.reason
    user_bug = observed(failed, records=(record_of(failed, "FAILED", failure="user_code"),))
    assert plan(desired(spec), user_bug).changes[0].action is Action.NOOP
    last = run_of(spec, "FAILED", attempt=3)
    exhausted = observed(last, records=(record_of(last, "FAILED", failure="nccl_timeout").model_copy(
        update={"attempt": 3}),))
    assert plan(desired(spec), exhausted).changes[0].action is Action.NOOP
    lost = record_of(run_of(spec, "RUNNING"), "RUNNING", session_name="s0")
    assert plan(desired(spec), observed(records=(lost,))).changes[0].action is Action.RETRY


def test_spec_hashes_and_submission_ids_of_existing_runs_never_change():
    """Pinned values: if these move, every run argus already made looks like another spec and is replaced."""
    from specs.workloads.submission import CodeRef

    command = resolve(WS, CLUSTER, job())
    assert spec_hash(command) == "cbf1c50a18b244e7297e75faa7d32cbe6c478d31149705cdcf8e9db12213b5f5"
    assert submission_id("team", "j", spec_hash(command), 1) == "team.j.cbf1c50a18b2.1"
    ppo = Job(kind="Job", name="ppo", cluster="c", workload="ppo", code="verl", model="/m", data={"train": "/d"},
              trainer={"nnodes": 1, "n_gpus_per_node": 4}, env={"K": "${env:K}"})
    code = CodeRef(snapshot="verl", path="${shared_root}/common/code/verl/verl", commit="c0" * 20, digest="d0" * 32)
    verl_run = resolve(WS, CLUSTER, ppo, code)
    assert spec_hash(verl_run) == "0d3b16c73fd55c16655400e4cfcbfab58a991750bade31697736e7ac830ee3f0"
    assert submission_id("team", "ppo", spec_hash(verl_run), 3) == "team.ppo.0d3b16c73fd5.3"
    [change] = plan(desired(job()), observed()).changes
    assert (change.steps[0].spec_hash, change.steps[0].submission_id) == (spec_hash(command), "team.j.cbf1c50a18b2.1")


def test_a_source_that_does_not_resolve_is_a_plan_error_located_at_the_field_it_blames():
    from specs.diagnostics import Diagnostic
    from specs.kinds.models import CodeSnapshot
    from state.observed import SnapshotState, SourceState

    snapshot = CodeSnapshot(kind="CodeSnapshot", name="verl", cluster="c", git={"url": "/v", "ref": "v9"})
    sources = {"code.verl": Source("code.yaml", 1, {"git": 4, "git.url": 5, "git.ref": 6})}
    state = DesiredState("/ws", WS, {"c": CLUSTER}, {}, {"verl": snapshot}, sources, {"c": "/shared"})
    error = Diagnostic(severity="error", address="code.verl", field="git.ref", message="ref 'v9' not found")
    seen = observed().model_copy(update={"snapshots": {"verl": SnapshotState(source=SourceState(error=error))}})
    [found] = plan(state, seen).diagnostics
    assert found == error.model_copy(update={"where": Where("code.yaml", 6)})


def test_a_verl_job_never_resumes_from_shards_of_another_world_size_or_a_half_written_checkpoint():
    from specs.kinds.models import CodeSnapshot
    from specs.workloads.checkpoint_state import CheckpointState
    from state.observed import Node, SnapshotState, SourceState

    snapshot = CodeSnapshot(kind="CodeSnapshot", name="verl", cluster="c", git={"url": "/v", "ref": "v1"})
    trainer = Job(kind="Job", name="ppo", cluster="c", workload="ppo", code="verl", model="/m",
                  data={"train": "/d"}, trainer={"nnodes": 1, "n_gpus_per_node": 4})
    sources = {"job.ppo": Source("jobs/ppo.yaml", 1, {"trainer": 9})}
    state = DesiredState("/ws", WS, {"c": CLUSTER}, {"ppo": trainer}, {"verl": snapshot}, sources, {"c": "/shared"})
    worker = Node(node_id="w", ip="127.0.0.3", is_head=False, resources={"GPU": 8, "CPU": 64, "worker_node": 1})
    cluster = ClusterState(name="c", address="http://x:1", session_name="s1", ray_version="2.60.0", nodes=(worker,),
                           jobs=())

    def plan_with(checkpoint: CheckpointState | None) -> Plan:
        return plan(state, ObservedState(clusters={"c": cluster}, records={},
                                         checkpoints={"ppo": checkpoint} if checkpoint else {},
                                         snapshots={"verl": SnapshotState(source=SourceState(commit="c0",
                                                                                             digest="d0"))}))

    assert plan_with(None).errors == ()
    assert plan_with(CheckpointState(step=40, world_size=4, complete=True)).errors == ()
    [other_size] = plan_with(CheckpointState(step=40, world_size=8, complete=True)).errors
    assert "saved by 8 GPUs" in other_size.message and "now has 4" in other_size.message
    assert other_size.where == Where("jobs/ppo.yaml", 9)  # at `trainer:`
    [half] = plan_with(CheckpointState(step=40, world_size=4, complete=False, problem="rank 3's optim shard missing"))\
        .errors
    assert "global_step_40 is incomplete (rank 3's optim shard missing)" in half.message


def test_a_resource_no_alive_node_offers_is_an_error_naming_the_near_one():
    from state.observed import Node

    worker = Node(node_id="w", ip="127.0.0.3", is_head=False, resources={"CPU": 8, "GPU": 2, "worker_node": 1})
    cluster = ClusterState(name="c", address="http://x:1", session_name="s1", ray_version="2.60.0", nodes=(worker,),
                           jobs=())
    typo = job(entrypoint_resources={"worker_nodes": 1})
    [error] = plan(desired(typo), ObservedState(clusters={"c": cluster}, records={})).errors
    assert "job.j asks for `worker_nodes` (did you mean `worker_node`?), which no alive node of cluster 'c' " \
           "offers" in error.message
    assert error.where == Where("jobs/j.yaml", 1)
    fixed = plan(desired(job()), ObservedState(clusters={"c": cluster}, records={}))
    assert fixed.errors == () and fixed.changes[0].action is Action.SUBMIT  # fixed: it starts at once


def test_a_lost_run_is_warned_about_only_until_the_job_has_run_again():
    spec, again = job(), job(run=2)
    lost = record_of(run_of(spec, "SUBMITTING"), "SUBMITTING", session_name="s0")
    assert any("no longer knows it" in d.message for d in plan(desired(spec), observed(records=(lost,))).diagnostics)
    newer = run_of(again, "SUCCEEDED", started=1_900_000_000_000)  # ms: after the lost run was recorded
    later = plan(desired(again), observed(newer, records=(lost,)))
    assert not any("no longer knows it" in d.message for d in later.diagnostics), later.diagnostics


def test_a_run_stopped_or_deleted_outside_argus_is_drift_left_stopped_unless_the_job_asks_for_a_restart():
    spec = job()
    stopped = run_of(spec, "STOPPED")
    result = plan(desired(spec), observed(stopped))
    [change] = result.changes
    assert change.action is Action.DRIFT and change.steps == () and "stopped outside argus" in change.reason
    assert result.actionable == () and result.drifted == (change,) and result.differs
    assert "match the desired state" not in summary(result) and "drifted" in summary(result)
    preempted = record_of(stopped, "STOPPED", failure="preempted")  # argus's own stop, for another job
    assert plan(desired(spec), observed(stopped, records=(preempted,))).changes[0].action is not Action.DRIFT
    deleted = record_of(stopped, "RUNNING", session_name="s1")  # Ray forgot it while argus saw it run
    gone = plan(desired(spec), observed(records=(deleted,))).changes[0]
    assert gone.action is Action.DRIFT and "deleted outside argus" in gone.reason
    unread = observed(records=(deleted,)).model_copy(update={"clusters": {}, "unreachable": {"c": "down"}})
    [hidden] = runs_by_job("team", unread)["j"]  # a cluster not read says nothing of what Ray lists
    assert hidden.drifted is None and hidden.health == "unknown (last seen RUNNING)"
    restart = plan(desired(job(on_drift="restart", retry={"max_attempts": 2, "on": ["oom"]})),
                   observed(stopped)).changes[0]
    assert restart.action is Action.RETRY and [s.attempt for s in restart.steps] == [2]
    assert "on_drift: restart" in restart.reason


def test_a_later_attempt_recorded_but_not_on_ray_beside_an_earlier_one_ray_lists_is_no_run():
    """A job can write the record of any future submission id: while Ray lists attempt 1, a record of
    attempt 2 that Ray does not list never stands for a run (it would keep attempt 2 from starting)."""
    spec = job(retry={"max_attempts": 3, "on": ["oom"]})
    first = run_of(spec, "FAILED")
    failed = record_of(first, "FAILED", failure="oom")
    ahead = run_of(spec, "SUCCEEDED", attempt=2)
    forged = record_of(ahead, "SUCCEEDED", attempt=2, session_name="old-session")
    change = plan(desired(spec), observed(first, records=(failed, forged))).changes[0]
    assert change.action is Action.RETRY and [s.attempt for s in change.steps] == [2]


def test_a_head_argus_does_not_fully_support_is_one_warning_on_its_cluster():
    seen = observed()
    old = seen.clusters["c"].model_copy(update={"version_warning": "the Ray head is not one argus fully supports: x"})
    result = plan(desired(job()), seen.model_copy(update={"clusters": {"c": old}}))
    warned = [d for d in result.diagnostics if "fully supports" in d.message]
    assert [(d.severity, d.address) for d in warned] == [("warning", "cluster.c")]
    assert not [d for d in plan(desired(job()), seen).diagnostics if "fully supports" in d.message]
