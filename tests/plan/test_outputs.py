"""Each team's outputs are its own (reconcile.plan.outputs, specs.workloads.verl): argus derives checkpoints and logs
under outputs/<workspace>/; the change moves no job's spec hash, and a run made before keeps its directories."""

from __future__ import annotations

from reconcile.model import Action, SubmitStep
from reconcile.plan.checkpoints import resume_note
from reconcile.plan.planner import plan
from specs.desired import DesiredState, Source
from specs.kinds.models import Cluster, Job, Workspace
from specs.workloads.checkpoint_state import CheckpointState
from specs.workloads.submission import legacy_outputs, resolve, spec_hash, submission_id
from state.observed import ClusterState, ObservedState, OutputMark, RunRecord, legacy_key

WS = Workspace(kind="Workspace", name="team")
C = Cluster(kind="Cluster", name="c", address="http://c:8265", shared_root="/nfs",
            job_defaults={"entrypoint_num_cpus": 1})
PPO = Job(kind="Job", name="ppo", cluster="c", workload="ppo", model="Qwen/Qwen2.5-0.5B-Instruct",
          data={"train": "/d/t.parquet", "val": "/d/v.parquet"},
          trainer={"nnodes": 1, "n_gpus_per_node": 4, "total_training_steps": 10},
          retry={"max_attempts": 3, "on": ["unknown"]})
BEFORE = "a161998fac5e8043743c56c8c0a534986e9228ff72960bc33953d964282f3957"
"""PPO's spec hash as argus computed it before outputs were per workspace (main at 6a13bda), retry aside."""


def desired() -> DesiredState:
    return DesiredState("/ws", WS, {"c": C}, {"ppo": PPO}, {}, {"job.ppo": Source("jobs/ppo.yaml", 1, {})},
                        {"c": "/nfs"})


def failed_run(outputs: str | None) -> RunRecord:
    digest = spec_hash(resolve(WS, C, PPO))
    return RunRecord(submission_id=submission_id("team", "ppo", digest, 1), workspace="team", job="ppo", cluster="c",
                     spec_hash=digest, attempt=1, status="FAILED", failure="unknown", session_name="s1",
                     updated_at="2026-01-01T00:00:00+00:00", plan_id="p", commit="c", outputs=outputs)


def observed(*records: RunRecord, checkpoints: dict[str, CheckpointState] | None = None) -> ObservedState:
    cluster = ClusterState(name="c", address=C.address, session_name="s1", ray_version="2.60.0", nodes=(), jobs=())
    return ObservedState(clusters={"c": cluster}, records={r.submission_id: r for r in records},
                         checkpoints=checkpoints or {})


def test_the_new_directories_leave_every_spec_hash_as_it_was() -> None:
    sub = resolve(WS, C, PPO.model_copy(update={"retry": None}))
    assert "${shared_root}/outputs/team/checkpoints/ppo/run-1" in sub.entrypoint
    assert "${shared_root}/outputs/team/logs/${submission_id}" in sub.entrypoint
    assert spec_hash(sub) == BEFORE == spec_hash(legacy_outputs(sub))
    assert "/outputs/team/" not in legacy_outputs(sub).entrypoint


def test_a_path_the_spec_writes_itself_is_hashed_as_written() -> None:
    """A team that put its outputs under outputs/<workspace>/ by hand before keeps its hash: only the words argus
    derives are hashed as before, never a path a spec names (trainer.checkpoint_dir, an override)."""
    own = "${shared_root}/outputs/team/checkpoints/ppo/run-1"
    trainer = PPO.trainer.model_validate({**PPO.trainer.model_dump(), "checkpoint_dir": own})
    sub = resolve(WS, C, PPO.model_copy(update={"trainer": trainer, "overrides": [f"+extra.path={own}/x"]}))
    rewritten = legacy_outputs(sub).entrypoint
    assert rewritten.count("/outputs/team/checkpoints/ppo/run-1") == sub.entrypoint.count(
        "/outputs/team/checkpoints/ppo/run-1") == 2
    assert "/outputs/team/logs/" in sub.entrypoint and "/outputs/team/logs/" not in rewritten


def test_two_workspaces_job_of_one_name_get_their_own_directories() -> None:
    other = WS.model_copy(update={"name": "vision"})
    ours, theirs = resolve(WS, C, PPO), resolve(other, C, PPO)
    assert "/outputs/team/checkpoints/ppo/" in ours.entrypoint
    assert "/outputs/vision/checkpoints/ppo/" in theirs.entrypoint
    assert spec_hash(ours) != spec_hash(theirs)


def test_a_retry_of_a_run_made_before_resumes_from_its_own_directory_and_the_plan_says_so() -> None:
    saved = CheckpointState(step=40, world_size=4, complete=True, layout="fsdp", roles=("actor",))
    result = plan(desired(), observed(failed_run(None), checkpoints={legacy_key("ppo"): saved}))
    [change] = result.changes
    [step] = change.steps
    assert change.action is Action.RETRY and isinstance(step, SubmitStep) and step.legacy_outputs
    assert "trainer.default_local_dir='\"'\"'${shared_root}/outputs/checkpoints/ppo/run-1" in step.submission.entrypoint
    assert step.spec_hash == failed_run(None).spec_hash and step.attempt == 2
    assert "resumes from global_step_40" in (resume_note(desired(), observed(failed_run(None), checkpoints={
        legacy_key("ppo"): saved}), change) or "")


def test_a_retry_of_a_run_made_now_stays_in_the_workspace_directory() -> None:
    result = plan(desired(), observed(failed_run("workspace")))
    [step] = result.changes[0].steps
    assert isinstance(step, SubmitStep) and not step.legacy_outputs
    assert "/outputs/team/checkpoints/ppo/run-1" in step.submission.entrypoint
    note = resume_note(desired(), observed(failed_run("workspace")), result.changes[0])
    assert note == "starts fresh (no checkpoint in /nfs/outputs/team/checkpoints/ppo/run-1)"


def test_a_directory_another_workspace_marked_is_an_error_at_the_job() -> None:
    other = OutputMark(path="/nfs/outputs/team/checkpoints/ppo/run-1", workspace="vision", job="train")
    seen = observed().model_copy(update={"output_marks": {"ppo": other}})
    [error] = [d for d in plan(desired(), seen).errors if d.field == "trainer.checkpoint_dir"]
    assert "which workspace 'vision' (its job.train) writes" in error.message
    mine = seen.model_copy(update={"output_marks": {"ppo": other.model_copy(update={"workspace": "team"})}})
    assert not _about_outputs(plan(desired(), mine))


def test_a_checkpoint_dir_under_another_workspace_s_outputs_is_an_error() -> None:
    trainer = {**PPO.trainer.model_dump(), "checkpoint_dir": "${shared_root}/outputs/vision/checkpoints/x"}
    theirs = PPO.model_copy(update={"trainer": PPO.trainer.model_validate(trainer)})
    state = DesiredState("/ws", WS, {"c": C}, {"ppo": theirs}, {}, {"job.ppo": Source("jobs/ppo.yaml", 1, {})},
                         {"c": "/nfs"})
    [error] = [d for d in plan(state, observed()).errors if d.field == "trainer.checkpoint_dir"]
    assert "under workspace 'vision''s outputs" in error.message
    for own in ("${shared_root}/outputs/team/x", "${shared_root}/outputs/checkpoints/x", "/data/x"):
        mine = PPO.model_copy(update={"trainer": PPO.trainer.model_validate({**trainer, "checkpoint_dir": own})})
        state = DesiredState("/ws", WS, {"c": C}, {"ppo": mine}, {}, {"job.ppo": Source("jobs/ppo.yaml", 1, {})},
                             {"c": "/nfs"})
        assert not _about_outputs(plan(state, observed())), own


def _about_outputs(result) -> list:
    return [d for d in result.errors if d.field == "trainer.checkpoint_dir"]
