"""Failure classes from realistic Ray/verl logs (tests/failure_samples/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from state.failures import Evidence, classify

SAMPLES = Path(__file__).parent / "failure_samples"
RAY_FIELDS = {
    "runtime_env_setup": {"error_type": "RUNTIME_ENV_SETUP_FAILURE",
                          "message": "runtime_env setup failed: Failed to set up runtime environment."},
    "start_timeout": {"error_type": "JOB_SUPERVISOR_ACTOR_START_TIMEOUT",
                      "message": "Job supervisor actor failed to start within 900.0 seconds. This timeout can be "
                                 "configured by setting the environment variable RAY_JOB_START_TIMEOUT_SECONDS."},
}


@pytest.mark.parametrize("sample", sorted(p.stem for p in SAMPLES.glob("*.log")))
def test_each_sample_gets_its_class(sample: str):
    fields = RAY_FIELDS.get(sample, {"message": "Job entrypoint command failed with exit code 1"})
    evidence = Evidence(status="FAILED", exit_code=1, log_tail=(SAMPLES / f"{sample}.log").read_text(), **fields)
    assert classify(evidence) == sample


def test_status_alone_decides_stopped_and_success():
    assert classify(Evidence(status="STOPPED", log_tail="Traceback (most recent call last)")) == "stopped"
    assert classify(Evidence(status="SUCCEEDED")) is None


def test_a_kill_by_the_oom_killer_is_oom_even_without_a_traceback():
    assert classify(Evidence(status="FAILED", exit_code=137, log_tail="step 12\n")) == "oom"
