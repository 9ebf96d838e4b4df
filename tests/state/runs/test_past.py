"""Older specs' runs leave the run index for a file per job, only when argus's chain vouches for them, and
come back whole when their spec runs again (state.runs.past). Real directories; Ray's answer as sets."""

from __future__ import annotations

import json
import os
from pathlib import Path

from state.observed import RunRecord
from state.runs import index as run_index
from state.runs import records
from state.runs.index import keep, read_runs
from state.runs.past import HEAD_SPECS, Archive
from tests.support.planning import PREVIOUS_VERSION_RECORD

WS = "team"


def run(spec: int, attempt: int = 1, job: str = "ppo", minute: int = 0, **fields: object) -> RunRecord:
    digest = (f"{spec:012x}" * 6)[:64]
    return RunRecord.model_validate({**PREVIOUS_VERSION_RECORD, "submission_id": f"{WS}.{job}.{digest[:12]}.{attempt}",
                                     "job": job, "spec_hash": digest, "attempt": attempt, "status": "SUCCEEDED",
                                     "submitted_at": f"2026-01-01T00:{minute:02d}:{attempt:02d}+00:00", **fields})


def planned(root: Path, vouched=lambda sid: True) -> dict[str, RunRecord]:
    """One plan's read and keep, as state.observe does them (cluster "c" answered, nothing on Ray)."""
    read = read_runs(str(root), WS)
    keep(str(root), WS, read, set(), {"c"}, vouched)
    return read.records


def history(root: Path, specs: int, job: str = "ppo") -> list[RunRecord]:
    runs = [run(spec, attempt, job, minute=spec) for spec in range(1, specs + 1) for attempt in (1, 2)]
    for record in runs:
        records.write_status(str(root), record)
    return runs


def index_ids(root: Path) -> set[str]:
    return {r["submission_id"] for r in json.loads((root / ".argus/runs/team.json").read_text())["runs"]}


def test_runs_of_older_specs_leave_the_index_and_are_found_by_spec(tmp_path: Path):
    runs = history(tmp_path, HEAD_SPECS + 2)
    planned(tmp_path)  # the first plan reads every record and builds the index
    planned(tmp_path)
    newest = {r.submission_id for r in runs if r.spec_hash not in (run(1).spec_hash, run(2).spec_hash)}
    assert index_ids(tmp_path) == newest  # the newest specs' runs stay, every attempt of each
    assert set(read_runs(str(tmp_path), WS).records) == newest  # what a plan reads: the heads, not the history
    oldest = Archive([str(tmp_path)], WS).of("ppo", run(1).spec_hash)
    assert [r.submission_id for r in oldest] == [run(1).submission_id, run(1, 2).submission_id]
    assert Archive([str(tmp_path)], WS).of("ppo", run(9).spec_hash) == ()


def test_nothing_is_archived_that_argus_chain_does_not_vouch_for_nor_a_protected_run(tmp_path: Path):
    history(tmp_path, HEAD_SPECS + 1)
    records.write_status(str(tmp_path), run(1, 3, minute=1, protect=True))
    planned(tmp_path, vouched=lambda sid: False)
    planned(tmp_path, vouched=lambda sid: False)
    assert len(index_ids(tmp_path)) == 2 * (HEAD_SPECS + 1) + 1  # no adopted chain: the index keeps every run
    planned(tmp_path)
    assert run(1, 3).submission_id in index_ids(tmp_path)  # spec 1 has a protected run: none of its runs leaves
    assert run(1).submission_id in index_ids(tmp_path)


def test_a_new_run_of_an_archived_spec_brings_its_runs_back_to_the_index(tmp_path: Path):
    history(tmp_path, HEAD_SPECS + 1)
    planned(tmp_path)
    planned(tmp_path)
    assert run(1).submission_id not in index_ids(tmp_path)
    run_index.mark_open(str(tmp_path), WS, run(1, 3).submission_id)  # as apply does before the intent
    records.write_status(str(tmp_path), run(1, 3, minute=59))  # the spec reverted to, run again, settled
    planned(tmp_path)
    assert {run(1).submission_id, run(1, 2).submission_id, run(1, 3).submission_id} <= index_ids(tmp_path)
    assert Archive([str(tmp_path)], WS).of("ppo", run(1).spec_hash) == ()  # never in both, never split
    assert Archive([str(tmp_path)], WS).of("ppo", run(2).spec_hash)  # now the oldest of four: archived


def test_an_archived_entry_is_never_more_than_its_record(tmp_path: Path):
    """The attack: a job adds a row for a run that never ran (or rewrites the file for another job): it counts
    for nothing; a run whose directory is gone is not shown (argus's chain still holds its id)."""
    history(tmp_path, HEAD_SPECS + 1)
    planned(tmp_path)
    planned(tmp_path)
    past = tmp_path / ".argus/runs/team.past/ppo.json"
    data = json.loads(past.read_text())
    forged = run(1, 7).model_dump(mode="json")  # jobs/<its id>/ was never made
    past.write_text(json.dumps({**data, "runs": [*data["runs"], forged]}))
    assert run(1, 7).submission_id not in {r.submission_id for r in Archive([str(tmp_path)], WS).of("ppo",
                                                                                                   run(1).spec_hash)}
    (tmp_path / ".argus/runs/team.past/eval.json").write_text(past.read_text())  # ppo's runs as eval's
    assert Archive([str(tmp_path)], WS).of("eval", run(1).spec_hash) == ()
    past.unlink()
    os.symlink(tmp_path / "elsewhere.json", past)
    (tmp_path / "elsewhere.json").write_text(json.dumps(data))
    assert Archive([str(tmp_path)], WS).of("ppo", run(1).spec_hash) == ()  # a link is never followed


def test_an_archive_a_job_linked_away_keeps_every_run_in_the_index(tmp_path: Path):
    """The attack: a job plants a link where the archive goes. Nothing is written through it, and the index
    still takes the runs that settle (slower plans, never a run lost from sight)."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".argus" / "runs").mkdir(parents=True)
    (tmp_path / ".argus" / "runs" / "team.past").symlink_to(tmp_path / "elsewhere")
    runs = history(tmp_path, HEAD_SPECS + 2)
    planned(tmp_path)
    planned(tmp_path)
    assert index_ids(tmp_path) == {r.submission_id for r in runs}
    assert list((tmp_path / "elsewhere").iterdir()) == []
