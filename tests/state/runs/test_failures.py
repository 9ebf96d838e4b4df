"""Failure classes from realistic Ray/verl logs (tests/state/runs/failure_samples/), the lines that made each
class, and the advice every class carries."""

from __future__ import annotations

from pathlib import Path

import pytest

from state.runs.failures import (
    ADVICE,
    FAILURE_CLASSES,
    HEALTH_KINDS,
    MAX_EVIDENCE_CHARS,
    Evidence,
    advice_for,
    classify,
    matched_lines,
)

SAMPLES = Path(__file__).parent / "failure_samples"
MATCHED = {
    "config_error": "Could not override 'actor_rollout_ref.actor.optim.lrr'",
    "import_error": "ModuleNotFoundError: No module named 'tensordict'",
    "nccl_timeout": "Watchdog caught collective operation timeout",
    "node_lost": "The actor died because its node has died",
    "oom": "torch.OutOfMemoryError: CUDA out of memory",
    "runtime_env_setup": "runtime_env setup failed",
    "start_timeout": "Job supervisor actor failed to start within 900.0 seconds",
    "unknown": "step:3 - timing/gen:12.4",
    "user_code": "IndexError: list index out of range",
}
"""A line each sample's evidence must hold: what made its class (for unknown, where its log ended)."""
RAY_FIELDS = {
    "runtime_env_setup": {"error_type": "RUNTIME_ENV_SETUP_FAILURE",
                          "message": "runtime_env setup failed: Failed to set up runtime environment."},
    "start_timeout": {"error_type": "JOB_SUPERVISOR_ACTOR_START_TIMEOUT",
                      "message": "Job supervisor actor failed to start within 900.0 seconds. This timeout can be "
                                 "configured by setting the environment variable RAY_JOB_START_TIMEOUT_SECONDS."},
}


@pytest.mark.parametrize("sample", sorted(p.stem for p in SAMPLES.glob("*.log")))
def test_each_sample_gets_its_class(sample: str):
    assert classify(_sample(sample)) == sample


@pytest.mark.parametrize("sample", sorted(p.stem for p in SAMPLES.glob("*.log")))
def test_each_sample_shows_the_lines_that_made_its_class(sample: str):
    lines = matched_lines(_sample(sample), sample)
    assert 1 <= len(lines) <= 5 and any(MATCHED[sample] in line for line in lines), lines
    assert all(len(line) <= MAX_EVIDENCE_CHARS and line == line.strip() and line.isprintable() for line in lines)


def test_every_failure_class_has_advice():
    assert set(ADVICE) == {*FAILURE_CLASSES, *HEALTH_KINDS}
    assert all(advice_for(failure) and len(advice_for(failure)) > 80 for failure in (*FAILURE_CLASSES, *HEALTH_KINDS))
    assert advice_for(None) is None and advice_for("not-a-class") is None


def test_the_advice_names_what_to_change():
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" in ADVICE["oom"]
    assert "actor_rollout_ref.actor.fsdp_config.param_offload" in ADVICE["oom"]
    assert "actor_rollout_ref.rollout.gpu_memory_utilization" in ADVICE["oom"]
    assert "NCCL_SOCKET_IFNAME" in ADVICE["nccl_timeout"] and "on: [nccl_timeout]" in ADVICE["nccl_timeout"]
    assert "misspelt" in ADVICE["start_timeout"] and "user_code_path" in ADVICE["import_error"]


def test_user_code_shows_the_exception_raised_not_the_traceback_header():
    log = "step 1\nTraceback (most recent call last):\n  File \"r.py\", line 3, in f\n    x[1]\nKeyError: 1\n"
    assert matched_lines(Evidence(status="FAILED", exit_code=1, log_tail=log), "user_code") == ("KeyError: 1",)


def test_a_class_made_by_the_exit_code_alone_says_so():
    evidence = Evidence(status="FAILED", exit_code=137, log_tail="step 12\n")
    assert matched_lines(evidence, classify(evidence)) == ("driver exit code 137",)


def test_lines_are_distinct_the_last_ones_kept_visible_and_capped():
    log = "".join(f"[rank{r}] CUDA out of memory. Tried to allocate {r} GiB\n" for r in range(8))
    log += "[rank7] CUDA out of memory. Tried to allocate 7 GiB\n"  # the same line again
    log += "\x1b[31mtorch.OutOfMemoryError\x1b[0m:\tCUDA out of memory " + "x" * 1000 + "\x07\n"
    lines = matched_lines(Evidence(status="FAILED", exit_code=1, log_tail=log), "oom", limit=3)
    assert lines[:2] == ("[rank6] CUDA out of memory. Tried to allocate 6 GiB",
                         "[rank7] CUDA out of memory. Tried to allocate 7 GiB")
    assert lines[2].startswith("torch.OutOfMemoryError: CUDA out of memory xxx") and lines[2].endswith("x…")
    assert len(lines[2]) == MAX_EVIDENCE_CHARS and lines[2].isprintable()


def test_runs_that_did_not_fail_or_failed_without_a_log_line_show_nothing():
    log = "Traceback (most recent call last):\nKeyError: 1\n"
    assert matched_lines(Evidence(status="STOPPED", log_tail=log), "stopped") == ()
    assert matched_lines(Evidence(status="SUCCEEDED", log_tail=log), None) == ()
    assert matched_lines(Evidence(status="FAILED", log_tail=log), "lost") == ()
    assert matched_lines(Evidence(status="FAILED", log_tail=log), "user_code", limit=0) == ()


def test_status_alone_decides_stopped_and_success():
    assert classify(Evidence(status="STOPPED", log_tail="Traceback (most recent call last)")) == "stopped"
    assert classify(Evidence(status="SUCCEEDED")) is None


def test_a_kill_by_the_oom_killer_is_oom_even_without_a_traceback():
    assert classify(Evidence(status="FAILED", exit_code=137, log_tail="step 12\n")) == "oom"


def _sample(name: str) -> Evidence:
    fields = RAY_FIELDS.get(name, {"message": "Job entrypoint command failed with exit code 1"})
    return Evidence(status="FAILED", exit_code=1, log_tail=(SAMPLES / f"{name}.log").read_text(), **fields)
