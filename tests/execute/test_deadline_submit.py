"""A run of a job with max_runtime is handed verl's expiration variable at submit, outside its Submission."""

from __future__ import annotations

import time

from reconcile.execute.ray_steps import EXPIRATION_VARIABLE, payload_of
from reconcile.model import SubmitStep
from specs.workloads.submission import resolve, spec_hash
from tests.support.planning import CLUSTER, WS, job


def step(max_runtime: int | None) -> SubmitStep:
    sub = resolve(WS, CLUSTER, job("train", env={"A": "1"}))
    return SubmitStep(cluster="c", submission_id="team.train.abc.1", spec_hash=spec_hash(sub), attempt=1,
                      submission=sub, max_runtime=max_runtime)


def test_the_expiration_time_is_the_submit_time_plus_max_runtime_and_never_in_the_submission():
    before = time.time()
    env = payload_of(step(5400), "/shared", {})["runtime_env"]["env_vars"]
    assert before + 5400 - 0.001 <= float(env[EXPIRATION_VARIABLE]) <= time.time() + 5400.001 and env["A"] == "1"
    assert EXPIRATION_VARIABLE == "MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"  # what verl reads
    assert EXPIRATION_VARIABLE not in payload_of(step(None), "/shared", {})["runtime_env"]["env_vars"]
    assert EXPIRATION_VARIABLE not in step(5400).submission.env_vars  # so the spec hash never moves with it
