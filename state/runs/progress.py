"""Each running run's progress, read from the tail of its driver log on the shared root once per observation.

The cost is bounded per run: one open of jobs/<id>/logs/driver.log beneath the root (no link followed, a FIFO
or device refused unread: state.runs.records.log_tail), TAIL_BYTES read from its end, and for a verl job one
read of at most TRACKER_LIMIT bytes of its checkpoint tracker. Only runs Ray lists RUNNING that are argus's
(their id derived from their labels, and argus's record of them on that cluster) are read.

This process keeps a few (time, step) samples of each run it read (`history`): the rate of `argus serve` comes
from them, and a stall detector may read them. A one-shot `argus status` has only what the log says (verl's
timing_s/step, or the convention's time=).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import PurePosixPath

from specs.desired import DesiredState
from specs.kinds.models import Job
from specs.workloads import verl
from specs.workloads.checkpoint_state import TRACKER
from specs.workloads.run_progress import MAX_STEP, Progress, Reading, estimate, read_tail
from specs.workloads.submission import expand
from state.beneath import read_regular
from state.observed import ClusterState, RunRecord
from state.runs.records import log_tail

TAIL_BYTES = 64 * 1024
"""What is read of each running run's log per observation: verl's step line is a few KiB at most."""
TRACKER_LIMIT = 64
MAX_SAMPLES = 32
"""(time, step) samples kept per run: enough for a rate and a stall over the last ~15 min of 30 s turns."""
MAX_RUNS = 4096
"""Runs whose samples this process keeps: the oldest read is forgotten first."""

_HISTORY: dict[str, tuple[tuple[float, int], ...]] = {}
_LOCK = threading.Lock()
"""Several workspaces' loops share one serve process (reconcile.serve.loops)."""


def read_progress(desired: DesiredState, clusters: Mapping[str, ClusterState], records: Mapping[str, RunRecord],
                  now: float) -> dict[str, Progress]:
    """Submission id -> progress of each of this workspace's runs Ray lists RUNNING whose log reports a step."""
    found = {}
    for name, cluster in clusters.items():
        root = desired.shared_roots.get(name)
        for job in cluster.jobs:
            record = records.get(job.submission_id)
            run = job.run_id
            if (root is None or job.status != "RUNNING" or record is None or record.cluster != name or run is None
                    or run.workspace != desired.workspace.name or run.submission_id != job.submission_id):
                continue
            seen = progress_of(root, record, desired.jobs.get(record.job), desired.workspace.name, now)
            if seen is not None:
                found[job.submission_id] = seen
    return found


def progress_of(root: str, record: RunRecord, job: Job | None, workspace: str, now: float) -> Progress | None:
    """One run's progress from its log tail (and checkpoint tracker), its sample added to this process's history."""
    reading = reading_of(root, record.submission_id)
    if reading is None:
        return None
    samples = remember(record.submission_id, now, reading.step)
    checkpoint = checkpoint_step(root, job, workspace, legacy=record.outputs is None) if job else None
    return estimate(reading, total_of(job), samples, now, checkpoint)


def reading_of(root: str, submission_id: str) -> Reading | None:
    """What the last TAIL_BYTES of the run's driver log say; None for no log, or one that is no regular file."""
    return read_tail(log_tail(root, submission_id, TAIL_BYTES))


def history(submission_id: str) -> tuple[tuple[float, int], ...]:
    """This process's (time, step) samples of a run, oldest first: a step seen on several turns keeps its first
    sighting and its latest one, so a run that stopped stepping shows since when."""
    with _LOCK:
        return _HISTORY.get(submission_id, ())


def remember(submission_id: str, at: float, step: int) -> tuple[tuple[float, int], ...]:
    """Add a sample; returns the run's samples. A third sighting of the same step replaces the second."""
    with _LOCK:
        samples = list(_HISTORY.pop(submission_id, ()))
        if samples and samples[-1][0] > at:  # a clock gone back: start again rather than compute a negative rate
            samples = []
        if len(samples) >= 2 and samples[-1][1] == samples[-2][1] == step:
            samples[-1] = (at, step)
        else:
            samples.append((at, step))
        _HISTORY[submission_id] = kept = tuple(samples[-MAX_SAMPLES:])
        while len(_HISTORY) > MAX_RUNS:
            del _HISTORY[next(iter(_HISTORY))]
        return kept


def total_of(job: Job | None) -> int | None:
    """The steps the job's spec says it takes: trainer.total_training_steps, or the same as a Hydra override."""
    if job is None:
        return None
    if job.trainer is not None and job.trainer.total_training_steps is not None:
        return job.trainer.total_training_steps
    for override in reversed(job.overrides):
        key, _, value = override.lstrip("+").partition("=")
        if key == "trainer.total_training_steps" and value.isascii() and value.isdigit() and len(value) <= 13:
            return int(value) if 0 < int(value) <= MAX_STEP else None
    return None


def checkpoint_step(root: str, job: Job, workspace: str, legacy: bool) -> int | None:
    """The step in verl's tracker in the job's checkpoint directory, when that directory is beneath the root."""
    if job.workload == "command":
        return None
    directory = PurePosixPath(expand(verl.checkpoint_dir(job, workspace, legacy), root))
    try:
        rel = directory.relative_to(root)
        raw = read_regular(root, str(rel / TRACKER), TRACKER_LIMIT)
    except (ValueError, OSError):
        return None
    text = raw.decode("ascii", errors="replace").strip() if raw else ""
    return int(text) if text.isdigit() and len(text) <= 13 and int(text) <= MAX_STEP else None
