"""The pure idle and stalled detectors, and the job-level health policy they read."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from reconcile.plan.health import idle, stalled
from specs.kinds.health import Health, IdlePolicy, StallPolicy
from specs.kinds.models import Job

IDLE = IdlePolicy(below_percent=10, window=1800)
STALL = StallPolicy(factor=5, floor=600)


def test_gpus_under_the_threshold_for_the_whole_window_are_idle():
    samples = [(t, 3.0) for t in range(0, 2000, 60)]
    assert idle(samples, now=1990, policy=IDLE)


def test_one_busy_sample_in_the_window_is_not_idle():
    samples = [(t, 3.0) for t in range(0, 2000, 60)]
    samples[20] = (samples[20][0], 55.0)
    assert not idle(samples, now=1990, policy=IDLE)


def test_a_busy_sample_before_the_window_does_not_count():
    samples = [(0.0, 90.0), *((t, 2.0) for t in range(60, 2500, 60))]
    assert idle(samples, now=2450, policy=IDLE)


def test_samples_shorter_than_the_window_are_never_idle():
    samples = [(t, 0.0) for t in range(1000, 2000, 60)]
    assert not idle(samples, now=1990, policy=IDLE)
    assert not idle([], now=1990, policy=IDLE)


def test_a_step_not_advanced_for_factor_times_its_step_time_is_stalled():
    steps = [(float(t), t // 300) for t in range(0, 3001, 300)]  # a step each 5 min, last at 3000
    assert not stalled(steps, now=3000 + 5 * 300 - 1, policy=STALL)
    assert stalled(steps, now=3000 + 5 * 300 + 1, policy=STALL)


def test_the_floor_holds_for_quick_steps():
    steps = [(float(t), t) for t in range(0, 100)]  # a step a second
    assert not stalled(steps, now=99 + 599, policy=STALL)
    assert stalled(steps, now=99 + 601, policy=STALL)


def test_a_repeated_step_is_no_progress():
    steps = [(0.0, 1), (60.0, 2), (120.0, 3), *((120.0 + 60 * k, 3) for k in range(1, 20))]
    assert stalled(steps, now=120 + 601, policy=STALL)


def test_no_step_yet_is_never_stalled():
    assert not stalled([], now=10_000, policy=STALL)


def test_health_policy_reads_for_as_the_window():
    policy = Health.model_validate({"idle": {"below_percent": 5, "for": "45m", "action": "stop"},
                                    "stall": {"factor": 3, "floor": "15m"}})
    assert policy.idle is not None and policy.idle.window == 2700 and policy.stops_when_idle()
    assert policy.stall is not None and policy.stall.floor == 900


def _job(**fields) -> dict:
    return {"kind": "Job", "name": "train", "cluster": "local", "workload": "command", "entrypoint": "true",
            **fields}


def test_stop_is_refused_for_a_protected_job_naming_the_field():
    with pytest.raises(ValidationError) as err:
        Job.model_validate(_job(protect=True, health={"idle": {"action": "stop"}}))
    assert err.value.errors()[0]["loc"] == ("health",)
    assert "protect" in str(err.value)
    assert Job.model_validate(_job(protect=True, health={"idle": {"action": "alert"}})).health is not None
    assert Job.model_validate(_job(health={"idle": {"action": "stop"}})).health.stops_when_idle()


def test_validate_names_the_file_and_line_of_a_stop_on_a_protected_job(tmp_path, argus):
    from tests.support.workspace import make_workspace

    ws = make_workspace(tmp_path / "ws", "health", "http://127.0.0.1:9")
    ws.job("train", "true", extra="protect: true\nhealth:\n  idle: {below_percent: 5, for: 20m, action: stop}\n")
    result = argus("validate", ws.root)
    assert result.code == 1
    assert "jobs/train.yaml:7" in result.out + result.err and "protect" in result.out + result.err


def test_a_window_with_a_hole_in_its_samples_is_never_idle():
    # two idle samples half an hour apart: what the GPUs did between them is unknown (a cluster that did not answer)
    assert not idle([(0.0, 0.0), (1900.0, 0.0)], now=1900, policy=IDLE)
    holed = [(t, 3.0) for t in range(0, 2000, 60) if not 600 <= t < 1200]  # ten minutes without a sample
    assert not idle(holed, now=1990, policy=IDLE)
    stale = [(t, 3.0) for t in range(0, 1400, 60)]  # none for the last ten minutes
    assert not idle(stale, now=1990, policy=IDLE)
