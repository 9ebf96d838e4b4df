"""The runs a plan does not read: older settled runs of superseded specs, one file per job, read only when
a plan asks for a spec's runs that the run index does not hold (a spec reverted to an earlier version).

  .argus/runs/<workspace>.past/<job>.json   that job's archived runs, compact as the index keeps them

Why: the index (state.runs.index) used to hold every settled run, so each plan parsed, and the planner
viewed, the whole history: 10,000 past runs made a plan 28x slower than none. The index now keeps each
job's heads (split, below) and a plan costs what the heads and the runs Ray lists cost, whatever the history.

The trade, correctness first. Only runs argus's own verified audit chain holds (Registry.vouches) are ever
archived, so every archived id is one the chain says was submitted: whatever happens to these files (a job
can write them), a plan that cannot read a run here shows it lost, never submits its id again (at most once
rests on the chain, reconcile.plan.registry). A row a job adds here counts only if the chain holds its id,
as a record does. A spec's runs are archived together or not at all, and the index takes a spec's runs
back when a new run of it settles, so a plan sees all of a spec's attempts or asks for them all.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterable
from typing import Literal

from pydantic import ValidationError

from specs.kinds.models import Name
from state.beneath import NotBeneath, opened_dir
from state.files import replace_in
from state.observed import Frozen, PastRuns, RunRecord
from state.runs.records import read_small

COMPACTED = frozenset({"submission", "evidence", "advice", "error"})
"""What an older settled run leaves out, in the index and the archive alike: the planner decides from the rest."""

HEAD_SPECS = 3
"""Per job, the runs of this many newest specs stay in the index: the current one, and the ones a plan
compares it with (the status page shows them); a spec further back is what a revert would ask for."""
MAX_PAST_BYTES = 64 * 1024 * 1024
MAX_CHECKED = 256
"""An archived spec's runs are checked one by one against jobs/ (a stat each); more runs than this of one
spec is more than a plan checks: none is used (they show as lost; the chain keeps their ids from being sent
again)."""
RUNS_DIR = ".argus/runs"


class PastFile(Frozen):
    """<root>/.argus/runs/<workspace>.past/<job>.json."""

    version: Literal[1] = 1
    workspace: Name
    job: Name
    runs: tuple[RunRecord, ...]


def split(runs: dict[str, RunRecord], vouched: Callable[[str], bool]) -> tuple[dict[str, RunRecord],
                                                                                dict[str, RunRecord]]:
    """(the index's heads, the runs to archive): per job, the runs of its HEAD_SPECS newest specs stay, and
    so does every run of an older spec unless the chain vouches for all of that spec's runs and none is
    protected."""
    heads, past = dict(runs), {}
    for group in _older_specs(runs):
        if all(vouched(r.submission_id) and not r.protect for r in group):
            for record in group:
                past[record.submission_id] = heads.pop(record.submission_id)
    return heads, past


def _older_specs(runs: dict[str, RunRecord]) -> Iterable[list[RunRecord]]:
    by_spec: dict[tuple[str, str], list[RunRecord]] = {}
    for record in runs.values():
        by_spec.setdefault((record.job, record.spec_hash), []).append(record)
    by_job: dict[str, list[list[RunRecord]]] = {}
    for (job, _), group in by_spec.items():
        by_job.setdefault(job, []).append(group)
    for groups in by_job.values():
        groups.sort(key=lambda g: max(_age(r) for r in g), reverse=True)
        yield from groups[HEAD_SPECS:]


def _age(record: RunRecord) -> tuple[str, int, str]:
    return record.submitted_at or record.updated_at, record.attempt, record.submission_id


def archive(folder: int, workspace: str, aged: dict[str, RunRecord], returned: dict[str, RunRecord]) -> None:
    """Under the index lock (`folder`: .argus/runs): each job's file gains its newly archived runs and loses
    those returned to the index (taken_back). Written before the index: a run is never in neither."""
    jobs = {r.job for r in aged.values()} | {r.job for r in returned.values()}
    if not jobs:
        return
    opened = _past_dir(folder, workspace, create=True)
    try:
        for job in sorted(jobs):
            kept = {sid: r for sid, r in _read(opened, workspace, job).items() if sid not in returned}
            kept.update({sid: r for sid, r in aged.items() if r.job == job})
            _write(opened, workspace, job, kept)
    finally:
        os.close(opened)


def taken_back(folder: int, workspace: str, fresh: dict[str, RunRecord]) -> dict[str, RunRecord]:
    """The archived runs of the specs that just settled a new run: they return to the index with it, so a
    spec's runs are never split between the two."""
    wanted = {(r.job, r.spec_hash) for r in fresh.values()}
    jobs = archived_jobs(folder, workspace) & {job for job, _ in wanted}
    if not jobs:
        return {}
    opened = _past_dir(folder, workspace, create=False)
    try:
        return {sid: r for job in sorted(jobs) for sid, r in _read(opened, workspace, job).items()
                if (r.job, r.spec_hash) in wanted}
    finally:
        os.close(opened)


def archived_jobs(folder: int, workspace: str) -> set[str]:
    try:
        opened = _past_dir(folder, workspace, create=False)
    except OSError:
        return set()
    try:
        return {name[:-5] for name in os.listdir(opened) if name.endswith(".json") and not name.startswith(".")}
    finally:
        os.close(opened)


class Archive(PastRuns):
    """What a plan asks of the archive on the shared roots it read: a spec's archived runs, one file per
    job, each read at most once. Anything unreadable is no runs (the chain still holds their ids)."""

    def __init__(self, roots: Iterable[str], workspace: str) -> None:
        self._roots, self._workspace = tuple(sorted(set(roots))), workspace
        self._read: dict[str, dict[str, RunRecord]] = {}

    def of(self, job: str, spec_hash: str) -> tuple[RunRecord, ...]:
        if job not in self._read:
            self._read[job] = {sid: (root, r) for root in self._roots
                               for sid, r in read_job(root, self._workspace, job).items()}
        group = [(root, r) for root, r in self._read[job].values() if r.spec_hash == spec_hash]
        if len(group) > MAX_CHECKED:
            return ()
        return tuple(sorted((r for root, r in group if _recorded(root, r.submission_id)), key=_age))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Archive) and (self._roots, self._workspace) == (other._roots, other._workspace)

    __hash__ = None  # type: ignore[assignment]


def read_job(shared_root: str, workspace: str, job: str) -> dict[str, RunRecord]:
    """One job's archived runs on one root; nothing when the file is missing or not argus's."""
    try:
        with opened_dir(shared_root, f"{RUNS_DIR}/{workspace}.past") as opened:
            return _read(opened, workspace, job)
    except (OSError, NotBeneath):
        return {}


def _recorded(shared_root: str, sid: str) -> bool:
    """The run's directory is in jobs/: an entry is never more than its record (as in the index)."""
    try:
        with opened_dir(shared_root, "jobs") as jobs:
            return stat.S_ISDIR(os.stat(sid, dir_fd=jobs, follow_symlinks=False).st_mode)
    except (OSError, NotBeneath):
        return False


def _read(opened: int, workspace: str, job: str) -> dict[str, RunRecord]:
    raw = read_small(f"{job}.json", MAX_PAST_BYTES, dir_fd=opened)
    if raw is None:
        return {}
    try:
        found = PastFile.model_validate_json(raw)
    except (ValidationError, ValueError, RecursionError):
        return {}
    if found.workspace != workspace or found.job != job or any(
            r.workspace != workspace or r.job != job for r in found.runs):
        return {}
    return {r.submission_id: r for r in found.runs}


def _write(opened: int, workspace: str, job: str, runs: dict[str, RunRecord]) -> None:
    if not runs:
        with contextlib.suppress(OSError):
            os.unlink(f"{job}.json", dir_fd=opened)
        return
    rows = [r.model_dump(mode="json", exclude_defaults=True, exclude=set(COMPACTED)) for _, r in sorted(runs.items())]
    text = json.dumps({"version": 1, "workspace": workspace, "job": job, "runs": rows}, separators=(",", ":"),
                      sort_keys=True)
    replace_in(opened, f"{job}.json", text + "\n")


def _past_dir(folder: int, workspace: str, create: bool) -> int:
    return workspace_dir(folder, f"{workspace}.past", create)


def workspace_dir(folder: int, name: str, create: bool) -> int:
    """A directory of `.argus/runs` (made when `create`), opened without following a link a job planted there."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=folder)
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)