"""Rendered plans against golden files (no colour, fixed ids). ARGUS_UPDATE_GOLDEN=1 rewrites them."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from reconcile.model import (
    Action,
    Change,
    FieldChange,
    MkdirStep,
    Plan,
    PlanOptions,
    RunView,
    SnapshotStep,
    StopStep,
    SubmitStep,
    UnmanagedJob,
)
from reconcile.views.human import render_plan
from reconcile.views.machine import plan_json, plan_markdown
from specs.diagnostics import Diagnostic, Where
from specs.workloads.submission import Submission

GOLDEN = Path(__file__).parent / "golden"


SNAPSHOT = "${shared_root}/common/code/verl/verl-v091"


def verl_entrypoint(settings: list[str], overrides: list[str]) -> str:
    """What specs/workloads/submission.py submits: cd into the snapshot, then verl's shlex-joined argv with
    Hydra-quoted values (specs/workloads/verl.py); spelled out so the goldens do not move when verl.py does."""
    argv = ["python3", "-m", "verl.trainer.main_ppo", "data.train_files='${shared_root}/datasets/gsm8k/train.parquet'",
            "data.val_files='${shared_root}/datasets/gsm8k/test.parquet'",
            "actor_rollout_ref.model.path='Qwen/Qwen2.5-0.5B-Instruct'", *settings,
            "trainer.logger=['console','wandb']", "hydra.run.dir='${shared_root}/outputs/logs/${submission_id}'",
            *overrides]
    return f"cd {shlex.quote(SNAPSHOT)} && {shlex.join(argv)}"


def submission(job: str, entrypoint: str) -> Submission:
    return Submission(workspace="llm-rl", cluster="h20", shared_root="/mnt/shared", job=job, run=1,
                      entrypoint=entrypoint, env_vars={"WANDB_API_KEY": "${env:WANDB_API_KEY}"},
                      entrypoint_num_cpus=1.0, entrypoint_num_gpus=None, entrypoint_memory=None,
                      entrypoint_resources={"worker_node": 1.0})


def sample_plan() -> Plan:
    old_entrypoint = verl_entrypoint(["trainer.nnodes=1"], ["actor_rollout_ref.actor.optim.lr=1e-6"])
    sub = submission("ppo", verl_entrypoint(["trainer.nnodes=2", "trainer.save_freq=10"],
                                            ["actor_rollout_ref.actor.optim.lr=5e-7"]))
    grpo = submission("grpo", verl_entrypoint(["trainer.experiment_name='grpo run #1'"],
                                              ["algorithm.adv_estimator='grpo'"]))
    old = RunView(submission_id="llm-rl.ppo.aaaaaaaaaaaa.1", cluster="h20", spec_hash="a" * 64, attempt=1,
                  status="RUNNING", on_ray=True)
    return Plan(
        workspace="llm-rl",
        options=PlanOptions(targets=("job.ppo",)),
        changes=(
            Change(address="dirs.h20", action=Action.CREATE, reason="2 directories of the layout missing",
                   steps=(MkdirStep(cluster="h20", path="jobs"), MkdirStep(cluster="h20", path="hf"))),
            Change(address="code.verl", action=Action.CREATE, reason="commit 0123456789ab, 419 files",
                   steps=(SnapshotStep(cluster="h20", name="verl", commit="0123456789ab" * 3, digest="f" * 64),)),
            Change(address="job.old", action=Action.STOP, reason="spec removed from the desired state", current=old,
                   steps=(StopStep(cluster="h20", submission_id=old.submission_id),)),
            Change(address="job.ppo", action=Action.REPLACE, reason="spec changed while llm-rl.ppo.aaaaaaaaaaaa.1 "
                   "is RUNNING", current=old,
                   diff=(FieldChange(path="entrypoint", before=old_entrypoint, after=sub.entrypoint),
                         FieldChange(path="entrypoint_num_cpus", before=2.0, after=1.0)),
                   steps=(StopStep(cluster="h20", submission_id=old.submission_id),
                          SubmitStep(cluster="h20", submission_id="llm-rl.ppo.bbbbbbbbbbbb.1", spec_hash="b" * 64,
                                     attempt=1, submission=sub))),
            Change(address="job.grpo", action=Action.SUBMIT, reason="no run of this spec yet",
                   after=grpo.model_dump(),
                   steps=(SubmitStep(cluster="h20", submission_id="llm-rl.grpo.dddddddddddd.1", spec_hash="d" * 64,
                                     attempt=1, submission=grpo),)),
            Change(address="job.sft", action=Action.NOOP, reason="llm-rl.sft.cccccccccccc.1 finished SUCCEEDED"),
        ),
        diagnostics=(Diagnostic(severity="warning", address="job.ppo", where=Where("jobs.yaml", 6), field="model",
                                message="Qwen/Qwen2.5-0.5B-Instruct is only a hub id"),),
        unmanaged=(UnmanagedJob(cluster="h20", submission_id="raysubmit_1", status="RUNNING", owner=None),),
    )


@pytest.mark.parametrize(("name", "render"), [
    ("plan.txt", lambda p: render_plan(p, colour=False)),
    ("plan.json", plan_json),
    ("plan.md", plan_markdown),
])
def test_renderings_match_their_golden_files(name, render):
    text = render(sample_plan()) + "\n"
    golden = GOLDEN / name
    if os.environ.get("ARGUS_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_a_huge_plan_is_summarised_for_pull_requests():
    plan = sample_plan()
    many = tuple(plan.changes[2].model_copy(update={"address": f"job.old-{i:05d}"}) for i in range(3000))
    text = plan_markdown(plan.model_copy(update={"changes": many}))
    assert len(text) <= 60_000 and "left out to stay under 60000 characters" in text
    assert text.startswith("### argus plan for `llm-rl`")
    assert "**Plan: 0 to submit, 0 to replace, 3000 to stop.**" in text


def test_json_keeps_the_exact_entrypoint_string_that_is_submitted():
    plan = sample_plan()
    [ppo] = [c for c in json.loads(plan_json(plan))["changes"] if c["address"] == "job.ppo"]
    [diff] = [d for d in plan.changes[3].diff if d.path == "entrypoint"]
    assert {"path": "entrypoint", "before": diff.before, "after": diff.after} in ppo["diff"]
    assert ppo["steps"][1]["submission"]["entrypoint"] == diff.after
    assert diff.after.startswith("cd '${shared_root}/common/code/verl/verl-v091' && python3 -m verl.trainer.main_ppo ")


def test_a_terminal_colours_removed_items_red_and_added_items_green():
    text = render_plan(sample_plan(), colour=True)
    assert "\x1b[31m        -   trainer.nnodes=1\x1b[0m" in text
    assert "\x1b[32m        +   trainer.nnodes=2\x1b[0m" in text
