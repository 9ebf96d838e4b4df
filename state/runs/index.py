"""Which runs a plan reads: an index of this workspace's settled runs and markers of its open ones.

Without it every plan lists <root>/jobs/ (every workspace's runs, ever) and opens the status.json of
each of this workspace's runs, so a plan costs one NFS round trip per run in history. With it:

  .argus/runs/<workspace>.json        every settled run (below), in one file, compact
  .argus/runs/<workspace>.open/<id>   an empty marker per run not settled yet, made before its intent
                                      (removed after MARKER_GRACE when no intent followed: its apply died)
  .argus/runs/<workspace>.lock        held while the index is rewritten

Only each job's heads stay in the index: the runs of its three newest specs (state.runs.past keeps older
ones, which argus's chain vouches for, in a file per job read only for a spec reverted to). A plan opens
the index, lists the markers (a handful) and jobs/ (names only: every indexed run must
still have its record there), and reads the status.json of the marked runs and of this workspace's
jobs Ray still lists: a bounded number of files, whatever the history.

Settled: the record says a final status (SUCCEEDED, STOPPED, FAILED with its class, or SUBMIT_FAILED),
and Ray, answering, no longer lists the run. Nothing rewrites such a record (execute.refresh only
touches runs Ray lists, state.runs.settle only unfinished ones), but a submit Ray refused, which the next
apply sends again under the same id: it is marked open again first, and a marked run's status.json
outranks its index entry. The newest settled run of each job keeps its whole record (the plan's
`before`, the status page's evidence); older ones keep what the planner decides from (status,
attempt, spec hash, failure class, session...), not their submission.

The trade, correctness first. Every file here is writable by every job on the cluster, and the run
records stay the truth:
- an index missing, malformed, oversized, a symlink, holding a run argus would not have indexed or
  one with no directory in jobs/ (an entry is never more than its record) is not used: every record
  is read as before (a status.json per run), with a warning when it existed, and the index is rebuilt;
- a plan indexes a run it read settled only if its status.json still says so under the index lock,
  and apply marks a run it sends again under its id under that lock after the intent (reopened), so a
  plan racing the resend of a refused run never leaves it indexed refused and unmarked;
- a run missing from the index and from the markers (deleted by hand, or submitted by an argus of an
  earlier version after this one built the index) is not seen by plan. The only harm that could do
  is a second submit under its id once Ray forgot it: apply refuses to submit an id whose record
  exists but was not observed (execute.runbook), drops the index, and the next plan reads everything.
  Such a plan may show a diff without the run it could not see, never run it twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from specs.kinds.models import Name
from specs.workloads.submission import SUBMISSION_ID_PATTERN
from state.beneath import NotBeneath, Refused, names_in, opened_dir
from state.files import lock_within, replace_in
from state.observed import TERMINAL, Frozen, RunRecord, RunStatus
from state.runs import past
from state.runs.records import read_record, read_records, read_small

RUNS_DIR = ".argus/runs"
MAX_INDEX_BYTES = 64 * 1024 * 1024
"""About 150,000 settled runs; a bigger index is not read (every record is, instead)."""
MAX_OPEN_RUNS = 10_000
"""More markers than this is no workload argus made: every record is read instead."""
FEW = 512
"""Up to this many indexed runs, each is looked up in jobs/ by name; beyond, jobs/ is listed once."""
LOCK_WAIT = 10.0
MARKER_GRACE = 3600.0
"""Seconds a marker may wait for its run's record: apply makes it a moment before the intent, so one older
without a record was left by an apply that died in between, and is removed."""
_THREADS = threading.RLock()


class RunIndex(Frozen):
    """<root>/.argus/runs/<workspace>.json."""

    version: Literal[1] = 1
    workspace: Name
    runs: tuple[RunRecord, ...]


@dataclass(frozen=True)
class RunsRead:
    """This workspace's records on one shared root, and how they were found."""

    records: dict[str, RunRecord]
    indexed: frozenset[str] = frozenset()
    """Runs whose record came from the index (not opened)."""
    marked: frozenset[str] = frozenset()
    """Runs with an open marker."""
    scanned: bool = False
    """Every record was read (no usable index): the index is to be rebuilt from them."""
    problem: str | None = None
    """Why an index that was there could not be used."""


def read_runs(shared_root: str, workspace: str, on_ray: Iterable[str] = ()) -> RunsRead:
    """The index, then the status.json of every marked run and of every run Ray lists for this workspace."""
    try:
        index, marked = _index_and_markers(shared_root, workspace)
        _recorded(shared_root, index)
    except (Unusable, OSError) as why:
        problem = f"{index_path(shared_root, workspace)}: {why}"
        return _scanned(shared_root, workspace, problem)
    if index is None:  # never built here yet (or removed): read everything once, then build it
        return _scanned(shared_root, workspace, None)
    records = {r.submission_id: r for r in index.runs}
    indexed = set(records)
    for sid in sorted(marked | {s for s in on_ray if belongs(s, workspace)}):
        record = read_record(shared_root, sid)
        if record is not None and record.workspace == workspace:
            records[sid] = record
            indexed.discard(sid)
    return RunsRead(records, frozenset(indexed), frozenset(marked))


def _scanned(shared_root: str, workspace: str, problem: str | None) -> RunsRead:
    """Every record read; when jobs/ holds more of this workspace's names than any history (a job made
    them), none is, and the problem says so: no index is built from half of them."""
    try:
        return RunsRead(read_records(shared_root, workspace), scanned=True, problem=problem)
    except Refused as err:
        return RunsRead({}, problem=f"{err}" if problem is None else f"{problem}; {err}")


def keep(shared_root: str, workspace: str, read: RunsRead, on_ray: set[str], answered: set[str],
         vouched: Callable[[str], bool] = lambda sid: False) -> None:
    """Index the runs that settled since, mark open runs found without a marker, archive the runs of older
    specs the chain vouches for (state.runs.past); nothing to do, no write. `answered`: the clusters whose
    job list was read (only there is "Ray no longer lists it" known)."""
    fresh = {sid: r for sid, r in read.records.items()
             if sid not in read.indexed and sid not in on_ray and r.cluster in answered and settled(r)}
    unmarked = {sid for sid in read.records if sid not in read.indexed and sid not in fresh and sid not in read.marked}
    abandoned = _abandoned(shared_root, workspace, read.marked - set(read.records))
    aged = past.split({sid: read.records[sid] for sid in read.indexed}, vouched)[1]
    if not (fresh or unmarked or abandoned or aged or read.scanned):
        return
    with contextlib.suppress(OSError, Unusable), _locked(shared_root, workspace) as folder:
        base = _base(shared_root, folder, workspace, read)
        # read again under the lock: an apply may have sent a refused run again since (reopened)
        fresh = {sid: r for sid, r in fresh.items() if read_record(shared_root, sid) == r}
        _write_index(folder, workspace, _archived(folder, workspace, {**base, **fresh}, fresh, vouched))
        opened = _markers(folder, workspace, create=True)
        try:
            for sid in sorted(unmarked):
                _mark(opened, sid)
            gone = {sid for sid in abandoned if not _ours(read_record(shared_root, sid), workspace)}  # under the lock
            for sid in sorted(set(fresh) | gone):
                with contextlib.suppress(OSError):  # gone already, or something a job planted that is no file
                    os.unlink(sid, dir_fd=opened)
        finally:
            os.close(opened)


def _archived(folder: int, workspace: str, runs: dict[str, RunRecord], fresh: dict[str, RunRecord],
              vouched: Callable[[str], bool]) -> dict[str, RunRecord]:
    """The index's heads, once the runs of older specs are archived (state.runs.past). When the archive cannot
    be written (a link a job planted where it goes), every run stays in the index: slower plans, never a run
    lost from sight."""
    returned: dict[str, RunRecord] = {}
    try:
        returned = past.taken_back(folder, workspace, fresh)
        heads, aged = past.split({**returned, **runs}, vouched)
        past.archive(folder, workspace, aged, {sid: r for sid, r in returned.items() if sid in heads})
        return heads
    except OSError:
        return {**returned, **runs}


def _ours(record: RunRecord | None, workspace: str) -> bool:
    return record is not None and record.workspace == workspace


def _abandoned(shared_root: str, workspace: str, recordless: set[str]) -> set[str]:
    """Markers (files, or links a job planted) without a record of this workspace, older than MARKER_GRACE:
    each costs every plan an open, and 10,000 of them make plans read every record. Age is the NFS server's
    mtime against this machine's clock: they are assumed to agree within MARKER_GRACE; a marker from the
    future is young."""
    folder, now = f"{shared_root}/{RUNS_DIR}/{workspace}.open", time.time()
    old = set()
    for sid in recordless:
        with contextlib.suppress(OSError):
            found = os.stat(f"{folder}/{sid}", follow_symlinks=False)
            if (stat.S_ISREG(found.st_mode) or stat.S_ISLNK(found.st_mode)) and now - found.st_mtime > MARKER_GRACE:
                old.add(sid)
    return old


def _base(shared_root: str, folder: int, workspace: str, read: RunsRead) -> dict[str, RunRecord]:
    """The index as it is now, to add to: another plan may have indexed runs since this one read (a
    full read too, which listed jobs/ before they were sent). A full read's base must pass the checks
    a plan makes of it, so an index not used is never carried on."""
    try:
        index = _index(folder, workspace)
        if read.scanned:
            _recorded(shared_root, index)
        return _runs_of(index)
    except (Unusable, OSError):  # replaced since it was read: what was read of it still stands
        return {sid: read.records[sid] for sid in read.indexed}


def _recorded(shared_root: str, index: RunIndex | None) -> None:
    """Every indexed run has its directory in jobs/ (one listing): an entry for a run that has no record
    (written by a job, or its record removed) counts for nothing, as a run without a record never did."""
    if index is None or not index.runs:
        return
    indexed = {r.submission_id for r in index.runs}
    with opened_dir(shared_root, "jobs") as folder:
        if len(indexed) <= FEW:  # a stat each: the heads of a workspace, whatever the root's history
            names = {sid for sid in indexed if _is_dir(folder, sid)}
        else:  # only the indexed names are kept, however many others
            names = set(names_in(folder, indexed.__contains__, len(indexed), f"{shared_root}/jobs"))
    missing = [r.submission_id for r in index.runs if r.submission_id not in names]
    if missing:
        raise Unusable(f"holds {len(missing)} run(s) with no record in jobs/, e.g. {missing[0]} (edited?)")


def _is_dir(folder: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def mark_open(shared_root: str, workspace: str, submission_id: str) -> None:
    """Before a run's intent is written: a crash right after still leaves it found. Best effort: a
    run without its marker is still found through Ray, and apply never submits an unseen run's id."""
    with contextlib.suppress(OSError), _runs_dir(shared_root, create=True) as folder:
        opened = _markers(folder, workspace, create=True)
        try:
            _mark(opened, submission_id)
        finally:
            os.close(opened)


def reopened(shared_root: str, workspace: str, submission_id: str) -> None:
    """After the intent of a run sent again under its id (a refused submit): its marker, made under the
    index lock. A plan that read the run refused before the intent re-reads it under that lock before
    indexing it and dropping its marker (keep); one that did so between mark_open and the intent has
    dropped the marker, which this puts back. Without it, once Ray forgot the run, plans would see it
    refused and send it once more."""
    with contextlib.suppress(OSError, Unusable), _locked(shared_root, workspace) as folder:
        opened = _markers(folder, workspace, create=True)
        try:
            _mark(opened, submission_id)
        finally:
            os.close(opened)


def forget_index(shared_root: str, workspace: str) -> None:
    """Drop the index: the next plan reads every record and builds it again."""
    with contextlib.suppress(OSError), _runs_dir(shared_root, create=False) as folder:
        if folder is not None:
            os.unlink(f"{workspace}.json", dir_fd=folder)


def settled(record: RunRecord) -> bool:
    """A final status nothing more will change (a failure already classified)."""
    if record.status is RunStatus.SUBMIT_FAILED:
        return True
    return record.status in TERMINAL and (record.status is not RunStatus.FAILED or record.failure is not None)


def belongs(submission_id: str, workspace: str) -> bool:
    """A submission id starts with the workspace's name (trimmed when long) and a dot."""
    head = submission_id.split(".", 1)[0]
    return bool(head) and "." in submission_id and workspace.startswith(head) \
        and SUBMISSION_ID_PATTERN.match(submission_id) is not None


def index_path(shared_root: str, workspace: str) -> str:
    return f"{shared_root}/{RUNS_DIR}/{workspace}.json"


class Unusable(Exception):
    """The index (or its directory) is there but is not one argus wrote."""


def _index_and_markers(shared_root: str, workspace: str) -> tuple[RunIndex | None, set[str]]:
    with _runs_dir(shared_root, create=False) as folder:
        if folder is None:
            return None, set()
        index = _index(folder, workspace)
        if index is None:
            return None, set()
        return index, _marked(folder, workspace)


def _index(folder: int, workspace: str) -> RunIndex | None:
    name = f"{workspace}.json"
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_INDEX_BYTES:
        raise Unusable("not a regular file, or bigger than argus writes one")
    raw = read_small(name, MAX_INDEX_BYTES, dir_fd=folder)
    try:
        index = RunIndex.model_validate_json(raw or b"")
    except (ValidationError, ValueError, RecursionError):
        raise Unusable("not an index argus wrote (edited?)") from None
    _check(index, workspace)
    return index


def _check(index: RunIndex, workspace: str) -> None:
    ids = [r.submission_id for r in index.runs]
    if index.workspace != workspace or len(set(ids)) != len(ids):
        raise Unusable("names another workspace, or a run twice")
    heads = {sid.split(".", 1)[0] for sid in ids}  # one name check per head, not per run
    if not all(belongs(f"{head}.x", workspace) for head in heads) or not all(
            r.workspace == workspace and SUBMISSION_ID_PATTERN.match(r.submission_id) and settled(r)
            for r in index.runs):
        raise Unusable("holds a run argus would not have indexed (edited?)")


def _runs_of(index: RunIndex | None) -> dict[str, RunRecord]:
    return {r.submission_id: r for r in index.runs} if index is not None else {}


def _marked(folder: int, workspace: str) -> set[str]:
    try:
        fd = os.open(f"{workspace}.open", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except FileNotFoundError:
        return set()
    except OSError as err:
        raise Unusable(f"its open runs' directory is a symlink or no directory ({err.strerror})") from None
    try:
        names = names_in(fd, lambda name: True, MAX_OPEN_RUNS, f"{workspace}.open")
    except Refused:
        raise Unusable(f"more than {MAX_OPEN_RUNS} runs marked open (argus keeps at most {MAX_OPEN_RUNS})") from None
    finally:
        os.close(fd)
    return {n for n in names if belongs(n, workspace)}


def _write_index(folder: int, workspace: str, runs: dict[str, RunRecord]) -> None:
    heads = _heads(runs)
    rows = [_row(r, whole=sid in heads) for sid, r in sorted(runs.items())]
    text = json.dumps({"version": 1, "workspace": workspace, "runs": rows}, separators=(",", ":"), sort_keys=True)
    replace_in(folder, f"{workspace}.json", text + "\n")


def _heads(runs: dict[str, RunRecord]) -> set[str]:
    """The newest settled run of each job: kept whole."""
    newest: dict[str, RunRecord] = {}
    for record in runs.values():
        best = newest.get(record.job)
        if best is None or _age(record) > _age(best):
            newest[record.job] = record
    return {r.submission_id for r in newest.values()}


def _age(record: RunRecord) -> tuple[str, int, str]:
    return record.submitted_at or record.updated_at, record.attempt, record.submission_id


def _row(record: RunRecord, whole: bool) -> dict:
    return record.model_dump(mode="json", exclude_defaults=True, exclude=set() if whole else set(past.COMPACTED))


def _markers(folder: int, workspace: str, create: bool) -> int:
    return past.workspace_dir(folder, f"{workspace}.open", create)


def _mark(opened: int, submission_id: str) -> None:
    """Made, or made young again: a marker an earlier apply left for the same id must not look abandoned
    (MARKER_GRACE) while this one writes the intent."""
    try:
        os.close(os.open(submission_id, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=opened))
    except FileExistsError:
        with contextlib.suppress(OSError):
            os.utime(submission_id, dir_fd=opened, follow_symlinks=False)


@contextlib.contextmanager
def _locked(shared_root: str, workspace: str) -> Iterator[int]:
    """The runs directory, with this workspace's index lock held (a POSIX record lock: NFS has them).
    The thread lock first: a record lock belongs to the process, so it keeps apply's concurrent submits
    apart only with it, and one thread closing its descriptor would drop another's lock."""
    with _THREADS, _runs_dir(shared_root, create=True) as folder:
        fd = os.open(f"{workspace}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                     0o644, dir_fd=folder)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise Unusable("its lock is not a regular file")
            _lock(fd)
            yield folder
        finally:
            os.close(fd)


def _lock(fd: int) -> None:
    """NFS without a lock manager: the index is a cache, so it goes on unlocked."""
    if not lock_within(fd, LOCK_WAIT, unlocked_ok=True):
        raise Unusable(f"its lock stayed held for {LOCK_WAIT:g}s")


@contextlib.contextmanager
def _runs_dir(shared_root: str, create: bool) -> Iterator[int | None]:
    """<root>/.argus/runs, each part opened without following a symlink; None when missing (not created)."""
    if create:
        _make_dirs(shared_root)
    stack = contextlib.ExitStack()
    try:
        fd: int | None = stack.enter_context(opened_dir(shared_root, RUNS_DIR))
    except FileNotFoundError:
        if create:
            raise
        fd = None
    except NotBeneath as err:
        if create or not isinstance(err.__cause__, FileNotFoundError):
            raise Unusable(f"a directory on the way is a symlink or no directory ({err})") from None
        fd = None
    with stack:
        yield fd


def _make_dirs(shared_root: str) -> None:
    """Each part made in its parent opened without following links; the shared root itself never."""
    built = ""
    for part in RUNS_DIR.split("/"):
        with opened_dir(shared_root, built) as fd, contextlib.suppress(FileExistsError):
            os.mkdir(part, 0o755, dir_fd=fd)
        built = f"{built}/{part}".lstrip("/")
