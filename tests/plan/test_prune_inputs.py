"""`--prune` of Datasets' and Models' versions: this workspace's sealed versions no spec names are deleted, never
one a run still names (a running job of any workspace, or this workspace's newest run of a desired job)."""

from __future__ import annotations

from reconcile.model import Action, DeleteInputStep, PlanOptions
from reconcile.plan.planner import plan
from state.observed import RayJob
from tests.support.input_planning import (
    KEY_A,
    KEY_B,
    desired_with,
    manifest,
    observed_inputs,
    ray_run,
    state,
    url_dataset,
)
from tests.support.planning import job

OLD = "datasets/gsm8k/aaaaaaaaaaaa"
PRUNE = PlanOptions(prune=True)


def setting(*ray_jobs, records=(), jobs=(), stored_by="team"):
    spec = url_dataset()
    desired = desired_with(jobs, (spec,))
    seen = observed_inputs(*ray_jobs, states={"dataset.gsm8k": state(spec, KEY_B, sealed="team")}, records=records,
                           stored={OLD: manifest(spec, KEY_A, stored_by),
                                   "datasets/gsm8k/bbbbbbbbbbbb": manifest(spec, KEY_B)})
    return desired, seen


def deletes(result):
    return [s for c in result.changes for s in c.steps if isinstance(s, DeleteInputStep)]


def test_an_unnamed_version_is_deleted_only_with_prune():
    desired, seen = setting()
    assert deletes(plan(desired, seen)) == []
    [step] = deletes(plan(desired, seen, PRUNE))
    assert (step.rel, step.bytes, step.cluster) == (OLD, 10, "c")
    [change] = [c for c in plan(desired, seen, PRUNE).changes if c.action is Action.DELETE]
    assert change.address == "dataset.gsm8k"


def test_another_workspaces_version_is_never_pruned():
    desired, seen = setting(stored_by="other")
    assert deletes(plan(desired, seen, PRUNE)) == []


def test_prune_is_refused_while_any_workspaces_running_job_names_the_version():
    foreign = RayJob(submission_id="raw-1", status="RUNNING", entrypoint=f"python t.py /shared/{OLD}/train.parquet")
    desired, seen = setting(foreign)
    result = plan(desired, seen, PRUNE)
    assert deletes(result) == []
    [error] = [d for d in result.errors if d.address == "dataset.gsm8k"]
    assert error.message == f"prune refused: run raw-1 (job unknown, workspace unknown) names {OLD}"
    ended = foreign.model_copy(update={"status": "SUCCEEDED"})
    assert [s.rel for s in deletes(plan(*setting(ended), PRUNE))] == [OLD]


def test_prune_is_refused_while_this_workspaces_newest_run_of_a_job_names_it_even_finished():
    reader = job("train")
    desired, _ = setting(jobs=(reader,))
    sub = plan(desired, observed_inputs(states={"dataset.gsm8k": state(url_dataset(), KEY_A, sealed="team")}))
    first = next(c for c in sub.changes if c.address == "job.train").steps[0].submission
    named = first.model_copy(update={"inputs": {"dataset.gsm8k": OLD}})
    done, record = ray_run(named, "SUCCEEDED")
    result = plan(*setting(done, records=(record,), jobs=(reader,)), PRUNE)
    assert deletes(result) == []
    assert any(d.message.startswith(f"prune refused: run {done.submission_id} (job train, workspace team)")
               for d in result.errors)


def test_prune_is_refused_while_another_workspaces_running_job_names_the_version_in_its_env():
    """A command job's `env: {DATA: ${dataset:gsm8k}}` reaches Ray in runtime_env, not in the entrypoint: a run of
    another workspace (whose records this workspace does not read) reading the version through it must still hold
    it."""
    from state.ray.client import _ray_job

    foreign = _ray_job({"type": "SUBMISSION", "submission_id": "other-1", "status": "RUNNING",
                        "entrypoint": "sh -c 'wrapper' python train.py",
                        "runtime_env": {"env_vars": {"DATA": f"/shared/{OLD}/train.parquet"}}})
    assert foreign is not None
    desired, seen = setting(foreign)
    result = plan(desired, seen, PRUNE)
    assert deletes(result) == []
    assert any(d.message.startswith("prune refused: run other-1") for d in result.errors)


def test_a_ray_jobs_env_is_never_shown_where_observations_are_dumped():
    from state.ray.client import _ray_job

    job_ = _ray_job({"type": "SUBMISSION", "submission_id": "x", "status": "RUNNING", "entrypoint": "e",
                     "runtime_env": {"env_vars": {"TOKEN": "plain-value"}}})
    assert job_ is not None and "plain-value" not in job_.model_dump_json()
