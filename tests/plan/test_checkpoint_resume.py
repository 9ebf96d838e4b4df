"""Where a starting verl run resumes from, judged by the pure planner: resume modes, verl versions,
world sizes, and the rule that a run never silently resumes a checkpoint another spec saved."""

from __future__ import annotations

from reconcile.model import Action, Change
from reconcile.plan.checkpoints import resume_note
from reconcile.plan.planner import plan
from specs.diagnostics import Where
from specs.kinds.models import Job
from specs.workloads.checkpoint_state import CheckpointState
from specs.workloads.submission import resolve, spec_hash
from state.observed import ClusterState, Node
from tests.support.checkpoints import desired, errors_for, judged, observed, ppo, profile, record, start
from tests.support.planning import CLUSTER, WS

DIR = "/shared/outputs/team/checkpoints/ppo/run-1"
STEP_40 = f"{DIR}/global_step_40"


def hash_of(job: Job) -> str:
    return spec_hash(resolve(WS, CLUSTER, job))


def fsdp(step: int = 40, world_size: int = 4, **fields) -> CheckpointState:
    return CheckpointState(step=step, world_size=world_size, complete=True, layout="fsdp", roles=("actor",), **fields)


def test_a_retry_resumes_from_its_own_runs_checkpoint_and_the_plan_says_so():
    job = ppo()
    mine = record(job, status="FAILED")
    found = judged(job, observed(fsdp(), mine))
    assert (found.errors, found.warnings) == ((), ())
    assert found.note == f"resumes from global_step_40 of {mine.submission_id} (saved by 4 GPUs)"
    assert resume_note(desired(job), observed(None), start(job)) == f"starts fresh (no checkpoint in {DIR})"


def test_resume_mode_disable_checks_nothing_and_starts_fresh():
    job = ppo()
    other_size = fsdp(world_size=8)  # an error in auto mode: nobody loads it with disable
    found = judged(job, observed(other_size, verl=profile(mode="disable")))
    assert found == type(found)("starts fresh (trainer.resume_mode=disable)")
    # without a profile (the config did not compose), the job's own overrides say it
    overridden = ppo(overrides=["trainer.resume_mode=disable"])
    assert judged(overridden, observed(other_size)).note == "starts fresh (trainer.resume_mode=disable)"


def test_an_unknown_resume_mode_is_an_error():
    [error] = judged(ppo(), observed(fsdp(), verl=profile(mode="resume"))).errors
    assert error == "job.ppo sets trainer.resume_mode='resume': verl knows auto, disable, resume_path"


def test_a_changed_spec_never_silently_resumes_the_checkpoint_of_the_spec_before():
    before, now = ppo(), ppo(trainer={"nnodes": 1, "n_gpus_per_node": 4, "total_training_steps": 500})
    assert hash_of(before) != hash_of(now)
    old = record(before)
    found = judged(now, observed(fsdp(), old))
    [error] = found.errors
    assert error == (
        f"job.ppo would resume from global_step_40 in {DIR}, which another spec of the job saved there (run "
        f"{old.submission_id}): verl would load its weights and optimizer state into this spec without a word; bump "
        f"`run:` to start fresh in a new directory, or resume it on purpose with the overrides "
        f"`trainer.resume_mode=resume_path` and `trainer.resume_from_path={STEP_40}`")
    assert found.note == f"would resume from global_step_40 of {old.submission_id} (saved by 4 GPUs)"
    # bumping `run:` gives a directory nothing was saved in
    assert judged(ppo(run=2), observed(None, old)).note == \
        "starts fresh (no checkpoint in /shared/outputs/team/checkpoints/ppo/run-2)"


def test_the_newest_run_that_wrote_the_directory_decides():
    first, second = ppo(), ppo(overrides=["actor_rollout_ref.actor.optim.lr=1e-6"])
    older, newer = record(first, "2026-01-01T00:00:00+00:00"), record(second, "2026-01-02T00:00:00+00:00")
    # back to the first spec after the second ran in the same directory: the second's step is there
    [error] = judged(first, observed(fsdp(), older, newer)).errors
    assert f"(run {newer.submission_id})" in error
    assert judged(second, observed(fsdp(), older, newer)).errors == ()


def test_a_refused_submit_of_this_spec_wrote_nothing():
    before, now = ppo(), ppo(overrides=["algorithm.kl_ctrl.kl_coef=0.01"])
    refused = record(now, "2026-01-02T00:00:00+00:00", status="SUBMIT_FAILED")
    [error] = judged(now, observed(fsdp(), record(before), refused)).errors
    assert "another spec of the job saved there" in error


def test_another_jobs_run_in_the_same_directory_is_named():
    shared = {"nnodes": 1, "n_gpus_per_node": 4, "checkpoint_dir": "${shared_root}/outputs/team/checkpoints/ppo/run-1"}
    renamed = ppo(name="ppo2", trainer=shared)
    old = record(ppo())
    [error] = judged(renamed, observed(fsdp(), old, job="ppo2")).errors
    assert f"which job.ppo saved there (run {old.submission_id})" in error


def test_a_checkpoint_no_recorded_run_saved():
    job = ppo(run=2)
    elsewhere = record(ppo(run=1))  # the job's history is known: its runs wrote run-1
    [error] = judged(job, observed(fsdp(), elsewhere)).errors
    assert "which no recorded run of the job saved (its runs used other directories)" in error
    # never run by argus: a checkpoint put there by hand may be meant; said, not refused
    found = judged(job, observed(fsdp()))
    assert found.errors == ()
    [warning] = found.warnings
    assert "which no run argus recorded saved (copied there by hand?)" in warning
    assert "trainer.resume_from_path=/shared/outputs/team/checkpoints/ppo/run-2/global_step_40" in warning
    # a record too old to say what it ran proves nothing either way
    assert judged(job, observed(fsdp(), record(ppo(run=1), known=False))).errors == ()


def test_resume_path_is_the_explicit_opt_in_and_is_inspected_like_the_tracker():
    opted = ppo(overrides=["trainer.resume_mode=resume_path", "trainer.resume_from_path=${shared_root}"
                           "/outputs/team/checkpoints/ppo/run-1/global_step_40"])
    old = record(ppo())
    state = fsdp(path=STEP_40)
    found = judged(opted, observed(state, old, verl=profile("resume_path", STEP_40)))
    assert (found.errors, found.warnings) == ((), ())
    assert found.note == f"resumes from {STEP_40} (trainer.resume_from_path; saved by 4 GPUs)"
    # no profile: the overrides tell the same
    assert judged(opted, observed(state, old)).note == found.note
    # the world size still binds FSDP
    [error] = judged(opted, observed(fsdp(world_size=8, path=STEP_40), old)).errors
    assert error.startswith(f"job.ppo's trainer.resume_from_path {STEP_40} was saved by 8 GPUs")


def test_resume_path_must_name_a_step_folder_that_exists():
    def errors(path: str | None, state: CheckpointState | None = None, job: Job | None = None) -> list[str]:
        return list(judged(job or ppo(), observed(state, verl=profile("resume_path", path))).errors)

    assert errors(None) == ["job.ppo sets trainer.resume_mode=resume_path without trainer.resume_from_path: verl "
                            "asserts it names a global_step_<N> folder"]
    assert errors(DIR) == [f"job.ppo's trainer.resume_from_path {DIR} does not name a global_step_<N> folder: verl "
                           "refuses a path without `global_step_`"]
    assert errors("outputs/global_step_40") == ["job.ppo's trainer.resume_from_path outputs/global_step_40 is "
                                                "relative: verl would look for it in the run's working directory "
                                                "(its code snapshot)"]
    [trailing] = errors(STEP_40 + "/")
    assert "must end with global_step_<N> (no trailing / or sub-folder): verl's PPO trainer reads the step from " \
           "'40/'" in trailing
    sft = Job(kind="Job", name="ppo", cluster="c", workload="sft", model="/m", data={"train": "/d"})
    # SFT's trainer finds the step anywhere in the path
    assert errors(STEP_40 + "/", fsdp(world_size=1, path=STEP_40), job=sft) == []
    missing = CheckpointState(step=40, world_size=None, complete=False, path=STEP_40,
                              problem="global_step_40/ does not exist")
    [gone] = errors(STEP_40, missing)
    assert gone.startswith(f"job.ppo's trainer.resume_from_path {STEP_40} is not a complete checkpoint "
                           "(global_step_40/ does not exist): verl needs it to exist and be complete; there is no "
                           "earlier checkpoint")
    [back] = errors(STEP_40, missing.model_copy(update={"previous": 20, "earlier": 1, "checked": 1}))
    # the job names the step folder itself: a new `run:` or checkpoint directory would load it all the same
    assert back.endswith(f"name the complete {DIR}/global_step_20 instead, or start fresh with "
                         "`trainer.resume_mode=disable` in `overrides:` (verl then ignores trainer.resume_from_path)")
    [size] = errors(STEP_40, fsdp(world_size=8, path=STEP_40))
    assert "bump `run:`" not in size and size.endswith("or start fresh with `trainer.resume_mode=disable` in "
                                                      "`overrides:` (verl then ignores trainer.resume_from_path)")


def test_a_job_naming_its_checkpoint_dir_is_never_told_to_bump_run():
    named = ppo(trainer={"nnodes": 1, "n_gpus_per_node": 4, "checkpoint_dir": DIR})
    [size] = judged(named, observed(fsdp(world_size=8), record(named))).errors
    assert size.endswith("set the GPUs back to 8, or start fresh with a new `trainer.checkpoint_dir`")
    [lineage] = judged(named, observed(fsdp(), record(ppo()))).errors
    assert "bump `run:`" not in lineage
    assert "give `trainer.checkpoint_dir` a new directory to start fresh (its `run:` does not pick it)" in lineage


def test_a_resume_path_argus_did_not_inspect_is_a_warning():
    found = judged(ppo(), observed(fsdp(), verl=profile("resume_path", STEP_40)))  # set in a config file
    assert found.errors == () and "argus did not inspect it" in found.warnings[0]
    assert found.note == f"resumes from {STEP_40} (trainer.resume_from_path, not inspected)"


def test_sft_in_auto_mode_loads_resume_from_path_when_set():
    sft = Job(kind="Job", name="ppo", cluster="c", workload="sft", model="/m", data={"train": "/d"})
    found = judged(sft, observed(fsdp(world_size=1, path=STEP_40), verl=profile("auto", STEP_40)))
    assert found.note == f"resumes from {STEP_40} (trainer.resume_from_path; saved by 1 GPU)"
    assert found.errors == ()


def test_a_legacy_megatron_checkpoint_is_refused_by_verl_0_9():
    legacy = CheckpointState(step=40, world_size=None, complete=True, layout="megatron_legacy",
                             roles=("actor", "critic"))
    [error] = errors_for(legacy, verl=profile(version="0.9.1", backend="megatron"))
    assert error == (
        f"job.ppo's latest checkpoint global_step_40 was saved in verl 0.8's Megatron layout (dist_ckpt/ beside the "
        f"role's files), which the snapshot's verl 0.9.1 refuses when it loads it, after model init with the GPUs "
        f"held: migrate it in place with `python scripts/migrate_megatron_checkpoint_layout.py --checkpoint "
        f"{STEP_40}/actor`; `python scripts/migrate_megatron_checkpoint_layout.py --checkpoint {STEP_40}/critic` "
        f"from verl's source tree (keep the default --mode hardlink: argus does not follow symlinks), or start "
        f"fresh with a new `trainer.checkpoint_dir` (or bump `run:`)")
    assert errors_for(legacy, verl=profile(version="0.8.0")) == []
    assert errors_for(legacy, verl=profile(version="0.10.0.dev")) != []
    assert errors_for(legacy) == []  # no profile: the snapshot's verl is unknown


def test_megatron_reshards_so_another_world_size_is_only_a_warning():
    job = ppo(gpus=8)
    split = CheckpointState(step=40, world_size=16, complete=True, layout="megatron", roles=("actor",))
    found = judged(job, observed(split, record(job)))
    assert found.errors == ()
    [warning] = found.warnings
    assert "saved by 16 GPUs and the job now has 8: Megatron reshards the model on load, but verl's default " \
           "optimizer format (dp_reshardable)" in warning
    assert found.note.endswith("(saved by 16 GPUs)")
    unknown = split.model_copy(update={"world_size": None})  # migrated from 0.8: no manifest
    assert judged(job, observed(unknown, record(job))).note.endswith("(world size not recorded)")


def test_fsdp_needs_the_world_size_it_saved_with():
    assert errors_for(fsdp(world_size=4), gpus=4) == []
    [error] = errors_for(fsdp(world_size=8), gpus=4)
    assert error == ("job.ppo's latest checkpoint global_step_40 was saved by 8 GPUs (model_world_size_8), but the "
                     "job now has 4 (trainer.nnodes x n_gpus_per_node): verl cannot load shards of another world size; "
                     "set the GPUs back to 8, or start fresh with a new `trainer.checkpoint_dir` (or bump `run:`)")


def test_the_advice_for_an_incomplete_checkpoint_names_a_folder_that_exists():
    half = CheckpointState(step=40, world_size=None, complete=False, problem="rank 3's optim shard is missing")
    [back] = errors_for(half.model_copy(update={"previous": 30, "earlier": 3, "checked": 3}))
    assert back == ("job.ppo's latest checkpoint global_step_40 is incomplete (rank 3's optim shard is missing): verl "
                    "cannot resume from it; the newest complete step there is global_step_30: point "
                    "latest_checkpointed_iteration.txt at it (`echo 30 > "
                    f"{DIR}/latest_checkpointed_iteration.txt`) and delete global_step_40, or start fresh with a new "
                    "`trainer.checkpoint_dir` (or bump `run:`)")
    [none] = errors_for(half)
    assert "there is no earlier checkpoint to go back to: start fresh" in none
    [broken] = errors_for(half.model_copy(update={"earlier": 2, "checked": 2}))
    assert "none of the 2 newest earlier checkpoints there is complete" in broken
    [capped] = errors_for(half.model_copy(update={"earlier": 9, "checked": 5}))
    assert "none of the 5 newest of 9 earlier checkpoints there is complete" in capped
    unusable = CheckpointState(step=None, world_size=None, complete=False, problem="x", previous=20, earlier=1,
                               checked=1)
    [tracker] = errors_for(unusable)
    assert tracker.startswith("job.ppo's checkpoint directory has an unusable latest_checkpointed_iteration.txt (x)")
    assert "the newest complete step there is global_step_20" in tracker


def test_changes_that_start_no_verl_run_have_no_note():
    command = Job(kind="Job", name="cmd", cluster="c", workload="command", entrypoint=["true"])
    assert resume_note(desired(command), observed(None), start(command)) is None
    idle = Change(address="job.ppo", action=Action.NOOP, reason="in sync")
    assert resume_note(desired(ppo()), observed(fsdp()), idle) is None


def test_the_plan_carries_resume_errors_and_warnings_at_the_job():
    job = ppo()
    worker = Node(node_id="w", ip="127.0.0.3", is_head=False, resources={"GPU": 8, "CPU": 64, "worker_node": 1})
    cluster = ClusterState(name="c", address="http://x:1", session_name="s1", ray_version="2.60.0", nodes=(worker,),
                           jobs=())
    seen = observed(fsdp()).model_copy(update={"clusters": {"c": cluster}})
    found = plan(desired(job), seen)
    [warning] = [d for d in found.diagnostics if d.field == "trainer.checkpoint_dir"]
    assert warning.severity == "warning" and warning.where == Where("jobs/ppo.yaml", 9)
    changed = seen.model_copy(update={"records": {r.submission_id: r for r in [record(ppo(run=1, overrides=["x=1"]))]}})
    [error] = plan(desired(job), changed).errors
    assert error.address == "job.ppo" and "another spec of the job saved there" in error.message
