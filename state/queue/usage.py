"""GPU-hours and run counts from the runs' own records: the platform's usage report.

It reads the records of every workspace on a shared root, not only the caller's. Every file under
jobs/ and .argus/audit/ is writable by every job on the cluster, so each is read as records.py reads
exit.json: size capped, symlinks never followed, anything malformed skipped. Who applied a run is
the actor of the audit record that first names its plan id; "unknown" when no record does.
summarize() is pure: the records in, the report out.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Literal

from specs.errors import ArgusError
from state.audit.files import MAX_LOG_BYTES as MAX_AUDIT_LOG_BYTES
from state.audit.log import audit_path
from state.beneath import Refused, names_in, opened_dir, opened_regular
from state.observed import TERMINAL, RunEnd, RunRecord, RunStatus
from state.runs.records import MAX_RUN_DIRS, read_end, read_record

MAX_AUDIT_LINE = 64 * 1024
"""An audit record is a few hundred bytes; a longer line is skipped, never held in memory whole."""
UNKNOWN_ACTOR = "unknown"
Key = Literal["workspace", "job", "actor"]


@dataclass(frozen=True)
class Run:
    """One run as the report counts it: argus's record, the run's exit.json, who applied it."""

    record: RunRecord
    end: RunEnd | None
    actor: str


@dataclass(frozen=True)
class Usage:
    """One row of the report."""

    key: str
    runs: int = 0
    """Runs that reached Ray, or may have (SUBMITTING); refused submits are counted apart."""
    succeeded: int = 0
    failed: int = 0
    refused: int = 0
    """SUBMIT_FAILED: Ray refused the submit, so the run never existed and used nothing."""
    gpu_hours: float = 0.0


def run_gpus(record: RunRecord) -> float:
    """The GPUs a run holds: its whole demand as admission held it, else verl's nnodes x
    n_gpus_per_node, else what its driver asked Ray for."""
    if record.gpus is not None:
        return float(record.gpus)
    sub = record.submission
    if sub is None:
        return 0.0
    gpus = sub.gpus if sub.gpus is not None else sub.entrypoint_num_gpus or 0
    return max(0.0, float(gpus))  # a forged record's negative count must not cancel others' hours


def read_runs(shared_roots: Iterable[str]) -> list[Run]:
    """Every readable run of every workspace under these shared roots (each root read once)."""
    runs: list[Run] = []
    for root in sorted(set(shared_roots)):
        actors: dict[str, dict[str, str]] = {}
        for record, end in _records(root):
            if record.workspace not in actors:
                actors[record.workspace] = plan_actors(root, record.workspace)
            runs.append(Run(record, end, actors[record.workspace].get(record.plan_id, UNKNOWN_ACTOR)))
    return runs


def summarize(runs: Iterable[Run], by: Key, now: datetime, since: datetime | None = None) -> list[Usage]:
    """Rows by `by`, most GPU-hours first. With `since`, only the part of each run after it counts
    and runs that ended before it are left out. Pure: `now` ends the runs still going."""
    rows: dict[str, Usage] = {}
    for run in runs:
        counted = _counted(run, now, since)
        if counted is not None:
            key = _key(run, by)
            rows[key] = _add(rows.get(key, Usage(key)), *counted)
    return sorted(rows.values(), key=lambda row: (-row.gpu_hours, row.key))


def readable(shared_root: str) -> bool:
    """Its jobs/ is a real directory here: a root not mounted, or whose jobs/ is a symlink, counts nothing."""
    try:
        return stat.S_ISDIR(os.lstat(Path(shared_root) / "jobs").st_mode)
    except OSError:
        return False


def parse_time(text: str) -> datetime | None:
    """An ISO date or datetime, UTC when it names no zone; None when it is not one."""
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def plan_actors(shared_root: str, workspace: str) -> dict[str, str]:
    """plan id -> who applied it: the actor of the first audit record stamped with that plan id."""
    actors: dict[str, str] = {}
    for entry in _audit_entries(shared_root, workspace):
        plan, actor = entry.get("plan_id"), entry.get("actor")
        if isinstance(plan, str) and isinstance(actor, str) and actor:
            actors.setdefault(plan, actor)
    return actors


def _counted(run: Run, now: datetime, since: datetime | None) -> tuple[RunStatus, float] | None:
    """(outcome, GPU-hours) of a run in the window; None when it is outside it or has no readable time."""
    record = run.record
    if record.status is RunStatus.SUBMIT_FAILED:
        refused = parse_time(record.updated_at)
        return None if refused is None or (since is not None and refused < since) else (record.status, 0.0)
    start, end = parse_time(record.submitted_at or record.updated_at), _end_time(run, now)
    if start is None or end is None or (since is not None and end < since):
        return None
    seconds = (end - max(start, since or start)).total_seconds()
    return _outcome(run), max(0.0, seconds) / 3600 * run_gpus(record)


def _end_time(run: Run, now: datetime) -> datetime | None:
    """exit.json's ended_at, else a finished record's last update, else (still going) now."""
    ended = parse_time(run.end.ended_at) if run.end else None
    if ended is None and run.record.status in TERMINAL:
        ended = parse_time(run.record.updated_at)
        if ended is None:
            return None
    return min(ended or now, now)


def _outcome(run: Run) -> RunStatus:
    """The record's status, or how exit.json says the run ended when the record has not caught up."""
    status = run.record.status
    if status not in TERMINAL and run.end is not None and run.end.status is not None:
        return run.end.status
    return status


def _key(run: Run, by: Key) -> str:
    if by == "job":
        return f"{run.record.workspace}/{run.record.job}"
    return run.actor if by == "actor" else run.record.workspace


def _add(row: Usage, outcome: RunStatus, hours: float) -> Usage:
    if outcome is RunStatus.SUBMIT_FAILED:
        return replace(row, refused=row.refused + 1)
    return replace(row, runs=row.runs + 1, gpu_hours=row.gpu_hours + hours,
                   succeeded=row.succeeded + (outcome is RunStatus.SUCCEEDED),
                   failed=row.failed + (outcome is RunStatus.FAILED))


def _records(root: str) -> Iterator[tuple[RunRecord, RunEnd | None]]:
    for name in _job_dirs(root):
        record = _record(root, name)
        if record is not None:
            yield record, read_end(root, name)


def _job_dirs(root: str) -> list[str]:
    """Names under jobs/, listed entry by entry and at most MAX_RUN_DIRS of them (a job can make a million:
    the report then says so rather than hold them all); a symlink among them is never entered (read_record)."""
    if not readable(root):
        return []
    try:
        with opened_dir(root, "jobs") as folder:
            return names_in(folder, _may_be_a_run, MAX_RUN_DIRS, f"{root}/jobs")
    except Refused as err:
        raise ArgusError(f"{err}: no usage is reported from half of the runs") from None
    except OSError:
        return []


def _may_be_a_run(name: str) -> bool:
    return "." in name and not name.startswith(".")


def _record(root: str, name: str) -> RunRecord | None:
    """jobs/<name>/status.json, if readable and about the run of that directory (not a copy or a forgery
    pointing elsewhere: the directory, not the record, says where its exit.json is)."""
    return read_record(root, name)


def _audit_entries(shared_root: str, workspace: str) -> Iterator[dict]:
    """The audit log's JSON objects, read line by line; a line too long or not an object is skipped.
    A log that is no regular file beneath the root (a link, a FIFO) names no actor."""
    rel = audit_path(shared_root, workspace).relative_to(shared_root).as_posix()
    try:
        with opened_regular(shared_root, rel) as fd:
            if fd is None or os.fstat(fd).st_size > MAX_AUDIT_LOG_BYTES:  # filled by a job: no actor is named
                return
            with os.fdopen(os.dup(fd), "rb") as handle:
                for line in _bounded_lines(handle, MAX_AUDIT_LINE):
                    entry = _json(line)
                    if isinstance(entry, dict):
                        yield entry
    except OSError:
        return


def _json(line: bytes) -> object:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _bounded_lines(handle: BinaryIO, limit: int) -> Iterator[bytes]:
    while line := handle.readline(limit + 1):
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        while line and not line.endswith(b"\n"):  # the rest of the overlong line
            line = handle.readline(limit + 1)
