"""Datasets and Models in the pure planner: each version materialised once (a `dataset--NAME` run), sealed by
apply once Ray says the run SUCCEEDED, adopted when a `path:`, shared across workspaces; jobs wait for the
versions they name and read their directories."""

from __future__ import annotations

from reconcile.model import Action, PlanOptions, SealInputStep, SubmitStep
from reconcile.plan.inputs import materialisation, materialiser
from reconcile.plan.planner import plan
from specs.kinds.models import Job
from specs.workloads.submission import resolve, spec_hash
from state.observed import ClusterQueue, ObservedState
from tests.support.input_planning import (
    FETCH,
    KEY_A,
    KEY_B,
    desired_with,
    hub_model,
    observed_inputs,
    path_dataset,
    prepared,
    ray_run,
    state,
    url_dataset,
)
from tests.support.planning import CLUSTER, NOW, WS, cluster_of, job

READER = Job(kind="Job", name="train", cluster="c", workload="command",
             entrypoint=["python", "train.py", "--data", "${dataset:gsm8k}/train.parquet"])


def by_address(result):
    return {c.address: c for c in result.changes}


def materialising_run(spec, st, status, desired=None):
    desired = desired or desired_with(inputs=(spec,))
    sub = materialisation(desired, observed_inputs(states={}), materialiser(spec, st, desired))
    return ray_run(sub, status)


def test_a_fetched_input_is_a_one_cpu_job_of_its_own_running_the_observed_fetch():
    spec = url_dataset()
    built = materialiser(spec, state(spec), desired_with(inputs=(spec,)))
    assert built.name == "dataset--gsm8k" and built.cluster == "c" and built.workload == "command"
    staged = "${shared_root}/datasets/gsm8k/.incoming-aaaaaaaaaaaa-team"
    assert built.entrypoint == f"rm -rf '{staged}' && {FETCH}"
    assert built.entrypoint_num_cpus == 1 and built.entrypoint_num_gpus == 0
    assert materialiser(spec, state(spec, fetch=None), desired_with(inputs=(spec,))) is None
    assert materialiser(hub_model(), state(hub_model()), desired_with(inputs=(hub_model(),))).name == "model--qwen"


def test_a_prepare_step_runs_from_its_snapshot_into_a_clean_staging_directory():
    spec = prepared()
    desired = desired_with(inputs=(spec,))
    built = materialiser(spec, state(spec), desired)
    staged = "${shared_root}/datasets/prepped/.incoming-aaaaaaaaaaaa-team"
    assert built.code == "prep"
    assert built.entrypoint == f"rm -rf '{staged}' && mkdir -p '{staged}' && python prep.py --out '{staged}'"


def test_a_path_has_no_job_and_is_adopted_by_apply():
    spec = path_dataset()
    assert materialiser(spec, state(spec), desired_with(inputs=(spec,))) is None
    [change] = plan(desired_with(inputs=(spec,)), observed_inputs(states={"dataset.local": state(spec)})).changes
    assert change.address == "dataset.local" and change.action is Action.CREATE
    [step] = change.steps
    assert isinstance(step, SealInputStep) and step.adopt == "/staging/local" and step.run is None
    assert step.rel == "datasets/local/aaaaaaaaaaaa" and step.staged == "datasets/local/.incoming-aaaaaaaaaaaa-team"


def test_an_input_with_a_problem_is_an_error_at_its_spec_and_its_readers_are_blocked():
    spec = url_dataset()
    result = plan(desired_with((READER,), (spec,)),
                  observed_inputs(states={"dataset.gsm8k": state(spec, key=None, problem="hub did not answer")}))
    [error] = [d for d in result.diagnostics if d.severity == "error"]
    assert error.address == "dataset.gsm8k" and "hub did not answer" in error.message
    assert (error.where.file, error.where.line) == ("inputs.yaml", 12)
    [change] = result.changes
    assert change.address == "job.train" and change.action is Action.WAIT and not change.steps
    assert change.reason.startswith("blocked until dataset.gsm8k is ready") and "hub did not answer" in change.reason


def test_nothing_there_materialises_it_under_the_inputs_address_and_the_reader_waits():
    spec = url_dataset()
    result = plan(desired_with((READER,), (spec,)), observed_inputs(states={"dataset.gsm8k": state(spec)}))
    changes = by_address(result)
    fetch = changes["dataset.gsm8k"]
    assert fetch.action is Action.SUBMIT and "fetch it into datasets/gsm8k/aaaaaaaaaaaa" in fetch.reason
    [step] = fetch.steps
    assert isinstance(step, SubmitStep) and step.submission.job == "dataset--gsm8k"
    assert step.submission.entrypoint.endswith(FETCH) and step.submission_id.startswith("team.dataset--gsm8k.")
    reader = changes["job.train"]
    assert reader.action is Action.WAIT and not reader.steps
    assert reader.reason == "waits for dataset.gsm8k: its version is materialised by this apply (submit)"
    assert not result.errors


def test_a_running_materialisation_is_in_sync_and_the_reader_still_waits():
    spec = url_dataset()
    running, record = materialising_run(spec, state(spec), "RUNNING")
    result = plan(desired_with((READER,), (spec,)),
                  observed_inputs(running, states={"dataset.gsm8k": state(spec)}, records=(record,)))
    changes = by_address(result)
    assert changes["dataset.gsm8k"].action is Action.NOOP
    assert changes["dataset.gsm8k"].reason == f"https://data.test/train.parquet (sha256 000000000000): being " \
                                              f"fetched: run {running.submission_id} is RUNNING"
    assert changes["job.train"].reason == f"waits for dataset.gsm8k: being materialised (run {running.submission_id} " \
                                          "RUNNING)"
    assert "job.dataset--gsm8k" not in changes  # never stopped as a job whose spec is gone


def test_a_staged_version_whose_run_succeeded_on_ray_is_sealed():
    spec = url_dataset()
    done, record = materialising_run(spec, state(spec), "SUCCEEDED")
    result = plan(desired_with((READER,), (spec,)),
                  observed_inputs(done, states={"dataset.gsm8k": state(spec, staged=True)}, records=(record,)))
    seal = by_address(result)["dataset.gsm8k"]
    assert seal.action is Action.CREATE
    [step] = seal.steps
    assert isinstance(step, SealInputStep) and step.run == done.submission_id and step.adopt is None
    assert step.staged == "datasets/gsm8k/.incoming-aaaaaaaaaaaa-team" and step.key == KEY_A
    assert by_address(result)["job.train"].action is Action.WAIT


def test_a_failed_materialisation_is_not_sealed_and_blocks_its_readers_until_replaced():
    spec = url_dataset()
    failed, record = materialising_run(spec, state(spec), "FAILED")
    seen = observed_inputs(failed, states={"dataset.gsm8k": state(spec, staged=True)}, records=(record,))
    changes = by_address(plan(desired_with((READER,), (spec,)), seen))
    assert changes["dataset.gsm8k"].action is Action.NOOP and not changes["dataset.gsm8k"].steps
    assert "argus apply --replace dataset.gsm8k" in changes["dataset.gsm8k"].reason
    assert changes["job.train"].action is Action.WAIT
    assert changes["job.train"].reason == f"blocked until dataset.gsm8k is ready: {changes['dataset.gsm8k'].reason}"
    again = by_address(plan(desired_with((READER,), (spec,)), seen, PlanOptions(replace=("dataset.gsm8k",))))
    assert again["dataset.gsm8k"].action is Action.SUBMIT and again["dataset.gsm8k"].steps[0].attempt == 2


def test_a_run_that_succeeded_but_left_nothing_is_fetched_again():
    spec = url_dataset()
    done, record = materialising_run(spec, state(spec), "SUCCEEDED")
    change = by_address(plan(desired_with(inputs=(spec,)),
                             observed_inputs(done, states={"dataset.gsm8k": state(spec)}, records=(record,))))
    assert change["dataset.gsm8k"].action is Action.SUBMIT and change["dataset.gsm8k"].steps[0].attempt == 2
    assert "left nothing to seal" in change["dataset.gsm8k"].reason


def test_a_reader_waits_then_starts_once_sealed_reading_the_versions_directory():
    spec = url_dataset()
    desired = desired_with((READER,), (spec,))
    waiting = by_address(plan(desired, observed_inputs(states={"dataset.gsm8k": state(spec)})))["job.train"]
    sealed = by_address(plan(desired, observed_inputs(states={"dataset.gsm8k": state(spec, sealed="team")})))
    assert sealed["dataset.gsm8k"].action is Action.NOOP
    assert sealed["dataset.gsm8k"].reason.endswith(": ready: 1 files, 10 bytes (workspace team, commit cccccccccccc)")
    start = sealed["job.train"]
    assert start.action is Action.SUBMIT
    [step] = start.steps
    sub = step.submission
    assert sub.entrypoint == "python train.py --data '${shared_root}/datasets/gsm8k/aaaaaaaaaaaa/train.parquet'"
    assert sub.inputs == {"dataset.gsm8k": "datasets/gsm8k/aaaaaaaaaaaa"}
    assert sub.input_digests == {"dataset.gsm8k": "d" * 64}
    assert waiting.after["entrypoint"] == sub.entrypoint  # the spec it waits to start is the one that starts


def test_a_second_workspace_sees_the_sealed_version_and_submits_nothing_for_it():
    spec = url_dataset()
    result = plan(desired_with((READER,), (spec,), workspace="other"),
                  observed_inputs(states={"dataset.gsm8k": state(spec, sealed="team")}))
    changes = by_address(result)
    assert changes["dataset.gsm8k"].action is Action.NOOP and changes["dataset.gsm8k"].reason.endswith("; shared")
    assert [s.submission.job for c in result.changes for s in c.steps if isinstance(s, SubmitStep)] == ["train"]


def test_a_new_hub_commit_replaces_the_running_job_saying_its_model_changed():
    model = hub_model()
    trainer = Job(kind="Job", name="train", cluster="c", workload="command",
                  entrypoint=["python", "train.py", "--model", "${model:qwen}"], env={"MODEL": "${model:qwen}"})
    desired = desired_with((trainer,), (model,))
    old = state(model, KEY_A, sealed="team")
    first = by_address(plan(desired, observed_inputs(states={"model.qwen": old})))["job.train"].steps[0].submission
    running, record = ray_run(first, "RUNNING")
    new = state(model, KEY_B, sealed="team")
    change = by_address(plan(desired, observed_inputs(running, states={"model.qwen": new}, records=(record,))))
    replace = change["job.train"]
    assert replace.action is Action.REPLACE
    assert replace.reason == "its model model.qwen changed (aaaaaaaaaaaa -> bbbbbbbbbbbb)"
    assert replace.steps[-1].submission.env_vars["MODEL"] == "${shared_root}/models/qwen/bbbbbbbbbbbb"


def test_a_new_commit_not_yet_fetched_keeps_the_running_job_and_waits():
    model = hub_model()
    trainer = Job(kind="Job", name="train", cluster="c", workload="command", entrypoint="run ${model:qwen}")
    desired = desired_with((trainer,), (model,))
    first = by_address(plan(desired, observed_inputs(states={"model.qwen": state(model, KEY_A, sealed="team")})))
    running, record = ray_run(first["job.train"].steps[0].submission, "RUNNING")
    change = by_address(plan(desired, observed_inputs(running, states={"model.qwen": state(model, KEY_B)},
                                                      records=(record,))))
    assert change["job.train"].action is Action.WAIT and not change["job.train"].steps  # nothing stopped
    assert change["model.qwen"].action is Action.SUBMIT


def test_a_job_naming_no_input_keeps_its_spec_hash():
    # computed on main before inputs existed: a job naming none is the same spec, its runs are not replaced
    sub = resolve(WS, CLUSTER, job("j", env={"A": "1"}))
    assert spec_hash(sub) == "1e0aec4a4d6868751833e69aee85b3bd073089692bdacded2165780fb252a78c"
    [change] = plan(desired_with((job("j", env={"A": "1"}),)), observed_inputs(states={})).changes
    assert change.steps[0].spec_hash == spec_hash(sub) and change.steps[0].submission.inputs is None


def test_a_target_on_an_input_or_on_a_job_keeps_what_it_reads():
    spec, other = url_dataset(), url_dataset("other")
    seen = observed_inputs(states={"dataset.gsm8k": state(spec), "dataset.other": state(other)})
    desired = desired_with((READER, job("solo")), (spec, other))
    only = plan(desired, seen, PlanOptions(targets=("dataset.gsm8k",)))
    assert [c.address for c in only.changes] == ["dataset.gsm8k"]
    reader = plan(desired, seen, PlanOptions(targets=("job.train",)))
    assert sorted(c.address for c in reader.changes) == ["dataset.gsm8k", "job.train"]


def test_a_removed_inputs_materialisation_run_is_stopped_like_a_removed_job():
    spec = url_dataset()
    running, record = materialising_run(spec, state(spec), "RUNNING")
    result = plan(desired_with((job("keep"),)), observed_inputs(running, states={}, records=(record,)))
    assert by_address(result)["job.dataset--gsm8k"].action is Action.STOP


def test_a_materialisation_goes_through_admission_like_any_job():
    spec = url_dataset()
    seen = ObservedState(clusters={"c": cluster_of()}, records={}, observed_at=NOW, queues={"c": ClusterQueue()},
                         inputs={"dataset.gsm8k": state(spec)})
    change = by_address(plan(desired_with(inputs=(spec,)), seen))["dataset.gsm8k"]
    assert change.action is Action.SUBMIT and change.queue is not None and change.queue.position is None
    assert "driver 1 CPU" in change.queue.demand


def test_a_reader_blocked_on_its_input_says_blocked_and_so_do_its_followers():
    from reconcile.views.human import sync_of  # noqa: PLC0415

    spec = url_dataset()
    follower = Job(kind="Job", name="evaluate", cluster="c", workload="command", entrypoint=["true"],
                   after=["train"])
    failed, record = materialising_run(spec, state(spec), "FAILED")
    seen = observed_inputs(failed, states={"dataset.gsm8k": state(spec, staged=True)}, records=(record,))
    changes = by_address(plan(desired_with((READER, follower), (spec,)), seen))
    reader, waiting = changes["job.train"], changes["job.evaluate"]
    assert reader.action is Action.WAIT and sync_of(reader, {"train"}) == "blocked"
    [on] = reader.waiting_on
    assert on.job == "dataset--gsm8k" and on.blocked and on.submission_id == failed.submission_id
    assert waiting.action is Action.WAIT and sync_of(waiting, {"evaluate"}) == "blocked"
    assert "dataset--gsm8k" in waiting.waiting_on[0].state


def test_a_reader_waiting_on_a_running_fetch_is_waiting_not_blocked():
    from reconcile.views.human import sync_of  # noqa: PLC0415

    spec = url_dataset()
    running, record = materialising_run(spec, state(spec), "RUNNING")
    seen = observed_inputs(running, states={"dataset.gsm8k": state(spec)}, records=(record,))
    reader = by_address(plan(desired_with((READER,), (spec,)), seen))["job.train"]
    assert reader.action is Action.WAIT and sync_of(reader, {"train"}) == "waiting"
    [on] = reader.waiting_on
    assert on.job == "dataset--gsm8k" and not on.blocked
