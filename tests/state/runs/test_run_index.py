"""The run index (state.runs.index): a plan opens the index and the open runs' records, never one
file per run in history; a hostile index is never used and never makes argus submit a run twice."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from state.observed import RunRecord, RunStatus
from state.runs import index as run_index
from state.runs import records
from state.runs.index import keep, read_runs
from tests.support.cluster import jobs_of, sdk, wait_for
from tests.support.planning import PREVIOUS_VERSION_RECORD

WS = "team"


def record(n: int, status: str = "SUCCEEDED", job: str = "ppo", **fields: object) -> RunRecord:
    sid = f"{WS}.{job}.{n:012x}.1"
    return RunRecord.model_validate({**PREVIOUS_VERSION_RECORD, "submission_id": sid, "job": job, "status": status,
                                     "submitted_at": f"2026-01-01T00:{n // 60 % 60:02d}:{n % 60:02d}+00:00",
                                     **fields})


def write(root: Path, *runs: RunRecord) -> None:
    for run in runs:
        records.write_status(str(root), run)


def indexed_once(root: Path, on_ray: set[str] = frozenset()) -> run_index.RunsRead:
    """One plan's read and keep, as state.observe does them (cluster "c" answered)."""
    read = read_runs(str(root), WS, on_ray)
    keep(str(root), WS, read, set(on_ray), {"c"})
    return read


def opened_during(call) -> list[str]:
    """Paths os.open was asked for (records.read_small, the index, the markers) while `call` ran."""
    seen, real = [], os.open

    def counting(path, *args, **kwargs):
        seen.append(str(path))
        return real(path, *args, **kwargs)

    os.open = counting
    try:
        call()
    finally:
        os.open = real
    return seen


def test_settled_runs_are_read_from_the_index_and_open_ones_from_their_records(tmp_path: Path):
    write(tmp_path, *(record(n) for n in range(40)), record(40, "RUNNING"), record(41, "FAILED"))
    first = indexed_once(tmp_path)
    assert first.scanned and first.problem is None and len(first.records) == 42

    second = read_runs(str(tmp_path), WS)
    assert not second.scanned and second.problem is None
    assert second.records.keys() == first.records.keys()
    # the unclassified failure and the running run stay open: their status.json is read each time
    assert second.indexed == {record(n).submission_id for n in range(40)}
    assert second.marked == {record(40).submission_id, record(41).submission_id}
    opened = opened_during(lambda: read_runs(str(tmp_path), WS))
    # each record is opened beneath the root, one component at a time: its run's directory, then status.json
    runs = {record(n).submission_id for n in range(42)}
    assert [p for p in opened if p in runs or p.endswith("status.json")] == [
        record(40).submission_id, "status.json", record(41).submission_id, "status.json"]


def test_the_newest_settled_run_of_a_job_keeps_its_whole_record_older_ones_what_the_planner_needs(tmp_path: Path):
    write(tmp_path, *(record(n, failure="oom" if n == 3 else None) for n in range(5)))
    indexed_once(tmp_path)
    runs = read_runs(str(tmp_path), WS).records
    newest, older = runs[record(4).submission_id], runs[record(3).submission_id]
    assert newest == record(4) and newest.submission is not None
    assert older.submission is None and older.failure == "oom"
    assert (older.status, older.attempt, older.spec_hash, older.session_name) == ("SUCCEEDED", 1, record(3).spec_hash,
                                                                                 "s1")


def test_a_run_settles_into_the_index_once_ray_no_longer_lists_it(tmp_path: Path):
    running = record(1, "RUNNING")
    write(tmp_path, running)
    indexed_once(tmp_path, on_ray={running.submission_id})
    write(tmp_path, running.model_copy(update={"status": RunStatus.SUCCEEDED}))
    indexed_once(tmp_path, on_ray={running.submission_id})  # still on Ray: refresh may still write its record
    assert read_runs(str(tmp_path), WS).marked == {running.submission_id}
    indexed_once(tmp_path)  # Ray forgot it
    read = read_runs(str(tmp_path), WS)
    assert read.indexed == {running.submission_id} and not read.marked


def test_a_crashed_applys_intent_is_found_by_its_marker(tmp_path: Path):
    indexed_once(tmp_path)  # an index exists: nothing lists jobs/ any more
    crashed = record(9, "SUBMITTING")
    run_index.mark_open(str(tmp_path), WS, crashed.submission_id)
    write(tmp_path, crashed)
    assert read_runs(str(tmp_path), WS).records == {crashed.submission_id: crashed}


def test_a_marker_an_apply_left_without_its_intent_is_removed_once_it_is_old(tmp_path: Path):
    """An apply died between the marker and the intent: the marker waits for a record for an hour, then goes;
    a marker just made (an apply about to write the intent) and one whose run has its record stay."""
    indexed_once(tmp_path)
    markers = tmp_path / ".argus" / "runs" / f"{WS}.open"
    died, about_to_write, open_run = record(7, "SUBMITTING"), record(8, "SUBMITTING"), record(9, "RUNNING")
    for run in (died, about_to_write, open_run):
        run_index.mark_open(str(tmp_path), WS, run.submission_id)
    write(tmp_path, open_run)
    old = time.time() - run_index.MARKER_GRACE - 60
    for run in (died, open_run):
        os.utime(markers / run.submission_id, (old, old))
    indexed_once(tmp_path)
    assert {p.name for p in markers.iterdir()} == {about_to_write.submission_id, open_run.submission_id}
    before = (tmp_path / ".argus" / "runs" / f"{WS}.json").stat().st_mtime_ns
    indexed_once(tmp_path)  # nothing abandoned any more: no lock taken, nothing written
    assert (tmp_path / ".argus" / "runs" / f"{WS}.json").stat().st_mtime_ns == before


def test_markers_a_job_planted_neither_leak_nor_make_plans_write(tmp_path: Path):
    """The markers directory is writable by every job: a directory named like a run, and an old marker of a run
    whose record is another workspace's, cost no descriptor, and the second is removed once."""
    indexed_once(tmp_path)
    markers = tmp_path / ".argus" / "runs" / f"{WS}.open"
    planted, theirs = record(5, "SUBMITTING"), record(6, "RUNNING", workspace="other")
    markers.mkdir(exist_ok=True)
    (markers / planted.submission_id).mkdir()
    run_index.mark_open(str(tmp_path), WS, theirs.submission_id)
    write(tmp_path, theirs)
    old = time.time() - run_index.MARKER_GRACE - 60
    for name in (planted.submission_id, theirs.submission_id):
        os.utime(markers / name, (old, old))
    descriptors = len(os.listdir("/proc/self/fd"))
    indexed_once(tmp_path)
    assert {p.name for p in markers.iterdir()} == {planted.submission_id}
    before = (tmp_path / ".argus" / "runs" / f"{WS}.json").stat().st_mtime_ns
    for _ in range(20):
        indexed_once(tmp_path)
    assert (tmp_path / ".argus" / "runs" / f"{WS}.json").stat().st_mtime_ns == before
    assert len(os.listdir("/proc/self/fd")) == descriptors


def test_a_run_sent_again_makes_its_old_marker_young(tmp_path: Path):
    """An apply died after its marker; the next sends the same id: a plan between that marker and the intent
    must not take the marker for the dead apply's."""
    indexed_once(tmp_path)
    markers = tmp_path / ".argus" / "runs" / f"{WS}.open"
    again = record(4, "SUBMITTING")
    run_index.mark_open(str(tmp_path), WS, again.submission_id)
    old = time.time() - run_index.MARKER_GRACE - 60
    os.utime(markers / again.submission_id, (old, old))
    run_index.mark_open(str(tmp_path), WS, again.submission_id)  # the resend, before its intent
    indexed_once(tmp_path)
    assert (markers / again.submission_id).exists()


def test_other_workspaces_runs_are_neither_opened_nor_indexed(tmp_path: Path):
    other = RunRecord.model_validate({**PREVIOUS_VERSION_RECORD, "workspace": "other",
                                      "submission_id": "other.ppo.0d3b16c73fd5.1", "status": "SUCCEEDED"})
    write(tmp_path, other, record(1))
    indexed_once(tmp_path)
    assert set(read_runs(str(tmp_path), WS).records) == {record(1).submission_id}
    assert "other." not in (tmp_path / ".argus" / "runs" / f"{WS}.json").read_text()


HOSTILE_INDEXES = {
    "not json": "{",
    "a list": "[]",
    "another workspace": json.dumps({"version": 1, "workspace": "other", "runs": []}),
    "a running run": json.dumps({"version": 1, "workspace": WS,
                                 "runs": [record(7, "RUNNING").model_dump(mode="json")]}),
    "a run twice": json.dumps({"version": 1, "workspace": WS, "runs": [record(7).model_dump(mode="json")] * 2}),
    "deep": "[" * 100_000,
}


@pytest.mark.parametrize("text", HOSTILE_INDEXES.values(), ids=HOSTILE_INDEXES.keys())
def test_a_hostile_index_is_not_used_every_record_is_read_and_the_index_rebuilt(tmp_path: Path, text: str):
    write(tmp_path, record(1), record(2))
    indexed_once(tmp_path)
    path = tmp_path / ".argus" / "runs" / f"{WS}.json"
    path.write_text(text)
    read = indexed_once(tmp_path)
    assert read.scanned and read.problem and read.problem.startswith(str(path))
    assert set(read.records) == {record(1).submission_id, record(2).submission_id}
    again = read_runs(str(tmp_path), WS)
    assert not again.scanned and set(again.records) == set(read.records)


def test_an_oversized_index_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    write(tmp_path, record(1))
    indexed_once(tmp_path)
    monkeypatch.setattr(run_index, "MAX_INDEX_BYTES", 10)
    read = read_runs(str(tmp_path), WS)
    assert read.scanned and "bigger than argus writes" in read.problem
    assert set(read.records) == {record(1).submission_id}


def test_a_symlinked_runs_directory_is_never_followed_nor_written_through(tmp_path: Path):
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    elsewhere.mkdir()
    root.mkdir()
    write(root, record(1))
    (root / ".argus").mkdir()
    (root / ".argus" / "runs").symlink_to(elsewhere)
    read = indexed_once(root)
    assert read.scanned and "symlink" in read.problem and set(read.records) == {record(1).submission_id}
    assert list(elsewhere.iterdir()) == []


def test_a_deleted_index_is_rebuilt_from_every_record_quietly(tmp_path: Path):
    write(tmp_path, record(1))
    indexed_once(tmp_path)
    run_index.forget_index(str(tmp_path), WS)
    read = indexed_once(tmp_path)
    assert read.scanned and read.problem is None and set(read.records) == {record(1).submission_id}
    assert not read_runs(str(tmp_path), WS).scanned


def test_too_many_open_markers_is_not_a_list_argus_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    write(tmp_path, record(1))
    indexed_once(tmp_path)
    monkeypatch.setattr(run_index, "MAX_OPEN_RUNS", 2)
    for n in range(3):
        run_index.mark_open(str(tmp_path), WS, record(100 + n).submission_id)
    read = read_runs(str(tmp_path), WS)
    assert read.scanned and "marked open" in read.problem


def removed(runs: list[dict]) -> list[dict]:
    return []


def refused(runs: list[dict]) -> list[dict]:
    return [{**r, "status": "SUBMIT_FAILED"} for r in runs]


def test_a_run_removed_from_the_index_is_never_submitted_twice(workspace, argus):
    """The attack: a finished run Ray forgot is edited out of the index: plan sees no run of the spec."""
    never_twice(workspace, argus, removed)


def test_refused_said_by_the_index_of_a_run_that_ran_never_sends_it_again(workspace, argus):
    """The attack: a finished run Ray forgot is marked refused in the index: plan would send it again."""
    never_twice(workspace, argus, refused)


def never_twice(workspace, argus, edit) -> None:
    workspace.job("once", ["sh", "-c", "echo ran"])
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    [job] = [j for j in jobs_of(workspace.address, workspace.name) if j.metadata["argus.job"] == "once"]
    wait_for(workspace.address, job.submission_id, {"SUCCEEDED"})
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # its record says SUCCEEDED
    sdk(workspace.address).delete_job(job.submission_id)  # Ray forgets it
    assert argus("plan", workspace.root).code == 0  # ... and the plan indexes it
    index = workspace.shared / ".argus" / "runs" / f"{workspace.name}.json"
    data = json.loads(index.read_text())
    assert [r["submission_id"] for r in data["runs"]] == [job.submission_id]
    index.write_text(json.dumps({**data, "runs": edit(data["runs"])}))

    refused = argus("apply", workspace.root, "--auto-approve")
    # the audit chain registers the run, so the plan never sends it again (the index's own guard, which refused
    # such an apply before the registry, is behind it)
    assert refused.code == 0 and "not resubmitted" in refused.out, refused.out + refused.err
    assert job.submission_id not in {j.submission_id for j in jobs_of(workspace.address, workspace.name)}
    assert records.read_record(str(workspace.shared), job.submission_id).status == "SUCCEEDED"
    again = argus("plan", workspace.root, "--detailed-exitcode")
    assert again.code == 0, again.out + again.err  # every record read: the run is seen, nothing to do


def index_file(root: Path) -> Path:
    return root / ".argus" / "runs" / f"{WS}.json"


def test_an_index_entry_whose_run_has_no_record_does_not_count(tmp_path: Path):
    """The attack: a job writes an entry saying a run that never ran SUCCEEDED (or was preempted, to
    stretch a retry policy), so plan would never submit it. The records stay the truth: no record, no run."""
    write(tmp_path, record(1))
    indexed_once(tmp_path)
    data = json.loads(index_file(tmp_path).read_text())
    forged = record(2).model_dump(mode="json")  # jobs/<its id>/ was never made
    index_file(tmp_path).write_text(json.dumps({**data, "runs": [*data["runs"], forged]}))
    read = indexed_once(tmp_path)
    assert record(2).submission_id not in read.records
    assert read.scanned and read.problem and "no record" in read.problem
    assert record(2).submission_id not in read_runs(str(tmp_path), WS).records  # rebuilt without it


def resent(root: Path, run: RunRecord) -> None:
    """What apply does to send a refused run again under its id (execute.runbook.RunBook.open)."""
    run_index.mark_open(str(root), WS, run.submission_id)
    write(root, run.model_copy(update={"status": RunStatus.SUBMITTING}))
    run_index.reopened(str(root), WS, run.submission_id)


def test_a_plan_racing_an_apply_that_resends_a_refused_run_never_indexes_it_as_refused(tmp_path: Path):
    """plan (or status) read the refused run, apply resent it, then plan indexed what it had read and
    dropped its marker: once Ray forgot the run, the index said SUBMIT_FAILED and it would be sent a third time."""
    indexed_once(tmp_path)
    refused = record(5, "SUBMIT_FAILED")
    run_index.mark_open(str(tmp_path), WS, refused.submission_id)
    write(tmp_path, refused)
    read = read_runs(str(tmp_path), WS)  # the plan reads it refused ...
    resent(tmp_path, refused)  # ... apply sends it again ...
    keep(str(tmp_path), WS, read, set(), {"c"})  # ... and the plan keeps what it read
    after = read_runs(str(tmp_path), WS)
    assert refused.submission_id in after.marked
    assert after.records[refused.submission_id].status is RunStatus.SUBMITTING


def test_a_plan_indexing_a_refused_run_between_its_marker_and_its_intent_leaves_it_marked(tmp_path: Path):
    indexed_once(tmp_path)
    refused = record(5, "SUBMIT_FAILED")
    run_index.mark_open(str(tmp_path), WS, refused.submission_id)
    write(tmp_path, refused)
    read = read_runs(str(tmp_path), WS)
    run_index.mark_open(str(tmp_path), WS, refused.submission_id)  # apply marks it ...
    keep(str(tmp_path), WS, read, set(), {"c"})  # ... the plan indexes it refused, drops the marker ...
    write(tmp_path, refused.model_copy(update={"status": RunStatus.SUBMITTING}))  # ... apply writes its intent
    run_index.reopened(str(tmp_path), WS, refused.submission_id)
    after = read_runs(str(tmp_path), WS)
    assert refused.submission_id in after.marked
    assert after.records[refused.submission_id].status is RunStatus.SUBMITTING


def test_a_full_read_racing_another_plans_index_keeps_the_runs_it_indexed(tmp_path: Path):
    """Two plans with no index yet: the slower one rebuilt the index from its own read, dropping a run
    the faster one had indexed (and unmarked) since: that run was seen by no plan after."""
    write(tmp_path, record(1))
    slow = read_runs(str(tmp_path), WS)  # no index: everything read (a cluster slow to answer) ...
    late = record(3)
    run_index.mark_open(str(tmp_path), WS, late.submission_id)  # ... meanwhile a run is sent, ends, Ray forgets it
    write(tmp_path, late)
    indexed_once(tmp_path)  # a faster plan indexes it and drops its marker
    keep(str(tmp_path), WS, slow, set(), {"c"})
    assert read_runs(str(tmp_path), WS).records.keys() == {record(1).submission_id, late.submission_id}
