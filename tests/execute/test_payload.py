"""What a submit hands to Ray: a follower's `${job:...}` filled from its step's bindings (placed by the planner),
a command job's ARGUS_CHECKPOINT_DIR, argus's own placeholders expanded after them."""

from __future__ import annotations

import shlex

from reconcile.execute.ray_steps import payload_of
from reconcile.plan.planner import plan
from tests.support.planning import desired, job, observed, run_of


def test_a_released_follower_gets_its_bindings_and_its_checkpoint_directory():
    train = job("train")
    follower = job("eval", after=["train"], env={"CKPT": "${job:train.checkpoint_dir}"},
                   entrypoint_num_cpus=None)
    done = run_of(train, "SUCCEEDED")
    [step] = [c for c in plan(desired(train, follower), observed(done)).changes if c.address == "job.eval"][0].steps
    payload = payload_of(step, "/mnt/shared", {})
    env = payload["runtime_env"]["env_vars"]
    assert env["CKPT"] == "/mnt/shared/outputs/team/checkpoints/train/run-1"
    assert env["ARGUS_CHECKPOINT_DIR"] == "/mnt/shared/outputs/team/checkpoints/eval/run-1"
    assert "${job:" not in payload["entrypoint"] and "${shared_root}" not in shlex.join(env.values())
    assert step.submission.env_vars["CKPT"] == "${job:train.checkpoint_dir}"  # the spec's hash keeps the placeholder


def test_a_job_s_own_env_wins_over_argus_checkpoint_variable():
    own = job("train", env={"ARGUS_CHECKPOINT_DIR": "/elsewhere"})
    [step] = plan(desired(own), observed()).changes[0].steps
    assert payload_of(step, "/mnt/shared", {})["runtime_env"]["env_vars"]["ARGUS_CHECKPOINT_DIR"] == "/elsewhere"
