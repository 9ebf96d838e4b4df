"""A running run's progress read from its driver log and checkpoint tracker on a shared root: bounded, never
through a link or a FIFO, with a bounded history of (time, step) samples per run for the stall detector."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from specs.kinds.models import Job
from state.observed import RunRecord, RunStatus
from state.runs import progress as run_progress

SID = "team.train.0123456789ab.1"


@pytest.fixture(autouse=True)
def _fresh_history(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_progress, "_HISTORY", {})


def record(outputs: str | None = "workspace") -> RunRecord:
    return RunRecord(submission_id=SID, workspace="team", job="train", cluster="c", spec_hash="0" * 64, attempt=1,
                     status=RunStatus.RUNNING, updated_at="2026-01-01T00:00:00Z", plan_id="p", commit="c",
                     outputs=outputs)


def ppo(**trainer: object) -> Job:
    return Job(kind="Job", name="train", cluster="c", workload="ppo", model="/m", data={"train": "/d", "val": "/d"},
               trainer=trainer or None)


def write_log(root: Path, text: str | bytes) -> Path:
    log = root / "jobs" / SID / "logs" / "driver.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(text.encode() if isinstance(text, str) else text)
    return log


def test_a_verl_run_reads_step_total_checkpoint_and_eta(tmp_path: Path) -> None:
    write_log(tmp_path, "(TaskRunner pid=7) step:30 - actor/entropy:0.5 - timing_s/step:10.0\n")
    tracker = tmp_path / "outputs/team/checkpoints/train/run-1/latest_checkpointed_iteration.txt"
    tracker.parent.mkdir(parents=True)
    tracker.write_text("20")
    seen = run_progress.progress_of(str(tmp_path), record(), ppo(total_training_steps=100), "team", now=50.0)
    assert seen is not None
    assert (seen.step, seen.total, seen.checkpoint_step, seen.eta_seconds) == (30, 100, 20, pytest.approx(700.0))
    assert run_progress.history(SID) == ((50.0, 30),)


def test_the_total_from_a_hydra_override(tmp_path: Path) -> None:
    job = Job(kind="Job", name="train", cluster="c", workload="ppo", model="/m", data={"train": "/d", "val": "/d"},
              overrides=["trainer.total_training_steps=40", "trainer.total_training_steps=²"])
    assert run_progress.total_of(job) == 40


def test_samples_stay_bounded_and_a_step_seen_again_keeps_its_first_sighting(tmp_path: Path) -> None:
    for at in range(10):
        run_progress.remember(SID, float(at), 7)
    assert run_progress.history(SID) == ((0.0, 7), (9.0, 7))
    for at in range(10, 200):
        run_progress.remember(SID, float(at), at)
    assert len(run_progress.history(SID)) == run_progress.MAX_SAMPLES
    for n in range(run_progress.MAX_RUNS + 10):
        run_progress.remember(f"run-{n}", 1.0, 1)
    assert len(run_progress._HISTORY) == run_progress.MAX_RUNS


def test_a_log_made_a_symlink_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.log"
    outside.write_text("argus:progress step=99 total=100\n")
    log = write_log(tmp_path / "root", "")
    log.unlink()
    log.symlink_to(outside)
    assert run_progress.progress_of(str(tmp_path / "root"), record(), None, "team", now=1.0) is None
    assert run_progress.history(SID) == ()


def test_a_log_made_a_fifo_is_not_waited_on(tmp_path: Path) -> None:
    log = write_log(tmp_path, "")
    log.unlink()
    os.mkfifo(log)
    done: list[object] = []
    reader = threading.Thread(target=lambda: done.append(
        run_progress.progress_of(str(tmp_path), record(), None, "team", now=1.0)), daemon=True)
    reader.start()
    reader.join(5)
    assert done == [None]


def test_a_tracker_made_a_symlink_or_forged_is_no_checkpoint(tmp_path: Path) -> None:
    write_log(tmp_path, "step:3 - a:1\n")
    folder = tmp_path / "outputs/team/checkpoints/train/run-1"
    folder.mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("77")
    (folder / "latest_checkpointed_iteration.txt").symlink_to(secret)
    assert run_progress.checkpoint_step(str(tmp_path), ppo(), "team", legacy=False) is None
    (folder / "latest_checkpointed_iteration.txt").unlink()
    (folder / "latest_checkpointed_iteration.txt").write_text("9" * 40)
    assert run_progress.checkpoint_step(str(tmp_path), ppo(), "team", legacy=False) is None


def test_only_the_tail_of_a_huge_binary_log_is_read(tmp_path: Path) -> None:
    log = write_log(tmp_path, "argus:progress step=1 total=5\n")
    with open(log, "ab") as handle:
        handle.write(os.urandom(1 << 20).replace(b"\n", b" "))
        handle.truncate(1 << 31)  # 2 GiB, sparse: a whole read would never end
        handle.write(b"\nargus:progress step=4 total=5\n")
    seen = run_progress.progress_of(str(tmp_path), record(), None, "team", now=1.0)
    assert seen is not None and (seen.step, seen.total, seen.source) == (4, 5, "argus")


def test_a_record_whose_progress_a_job_forged_reads_as_unknown_not_as_a_crash() -> None:
    fields = record().model_dump(mode="json")
    for forged in ({"step": -1, "seen_at": 0}, {"step": 10**40, "seen_at": 0}, "12/100",
                   {"step": 1, "seen_at": 0, "eta_seconds": 1e300}):
        assert RunRecord.model_validate({**fields, "progress": forged}).progress is None, forged
    kept = RunRecord.model_validate({**fields, "progress": {"step": 5, "total": 9, "seen_at": 2.0}})
    assert kept.progress is not None and kept.progress.step == 5
