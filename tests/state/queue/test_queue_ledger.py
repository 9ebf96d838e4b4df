"""The queue ledgers on a real directory: hostile files are not there, entries expire, each
workspace confirms and cleans only its own."""

from __future__ import annotations

import json
import time
from pathlib import Path

from reconcile.execute.admit import refresh
from reconcile.plan.queue import held, waiting
from state.observed import ClusterQueue, ClusterState, LedgerEntry, RayJob
from state.queue.ledger import ledger_path, read_ledgers, write_ledger

HASH = "a" * 64


def entry(workspace: str, job: str, **fields) -> LedgerEntry:
    now = time.time()
    base = {"workspace": workspace, "job": job, "cluster": "c", "submission_id": f"{workspace}.{job}.1",
            "spec_hash": HASH, "arrived": now, "seen": now, "spread": {"GPU": 2.0}}
    return LedgerEntry.model_validate({**base, **fields})


def cluster(*jobs: tuple[str, str]) -> ClusterState:
    """Ray jobs labelled as argus labels them: workspace.job.attempt is their id here."""
    return ClusterState(name="c", address="http://x:1", session_name="s", ray_version="2.60.0", nodes=(),
                        jobs=tuple(RayJob(submission_id=sid, status=status, metadata=_labels(sid))
                                   for sid, status in jobs))


def _labels(sid: str) -> dict[str, str]:
    workspace, job, attempt = sid.split(".")
    return {"argus.workspace": workspace, "argus.job": job, "argus.spec_hash": HASH, "argus.attempt": attempt}


def test_hostile_ledgers_are_not_there(tmp_path: Path):
    root = str(tmp_path)
    write_ledger(root, "a", [entry("a", "x")])
    folder = ledger_path(root, "a").parent
    (folder / "b.json").write_text(json.dumps({"entries": [entry("a", "forged").model_dump(mode="json")]}))
    (folder / "c.json").write_text("{not json")
    (folder / "d.json").write_text(json.dumps({"entries": [{**entry("d", "x").model_dump(mode="json"),
                                                            "spread": {"GPU": float("nan")}}]}))
    secret = tmp_path / "elsewhere.json"
    secret.write_text(json.dumps({"entries": [entry("e", "x").model_dump(mode="json")]}))
    (folder / "e.json").symlink_to(secret)
    (folder / "f.json").write_bytes(b" " * (600 * 1024))
    assert [(e.workspace, e.job) for e in read_ledgers(root)] == [("a", "x")]


def test_waiting_entries_expire_and_times_from_the_future_are_forged():
    now = time.time()
    queue = ClusterQueue(entries=(entry("b", "fresh"), entry("b", "old", seen=now - 4000),
                                  entry("b", "future", seen=now + 10 ** 9), entry("a", "mine")))
    assert [e.key for e in waiting("a", queue, now, [{"GPU": 8.0}])] == ["b/fresh"]  # its own come from its plan
    admitted = ClusterQueue(entries=(entry("b", "starting", admitted=now - 60),
                                     entry("b", "gone", admitted=now - 700),
                                     entry("b", "forever", admitted=now + 10 ** 9),
                                     entry("b", "running", admitted=now - 10 ** 5),
                                     entry("b", "ended", admitted=now - 60),
                                     entry("c", "thief", submission_id="b.borrowed.1", admitted=now - 10 ** 5)))
    ray = cluster(("b.running.1", "RUNNING"), ("b.ended.1", "SUCCEEDED"), ("b.borrowed.1", "RUNNING"))
    assert sorted(e.key for e in held(ray, admitted, now, set())) == ["b/running", "b/starting"]
    assert [e.key for e in held(ray, admitted, now, {"b.running.1"})] == ["b/starting"]  # being stopped


def test_confirming_keeps_what_the_plan_queues_and_drops_the_rest(tmp_path: Path):
    root, old = str(tmp_path), time.time() - 100
    write_ledger(root, "a", [entry("a", "wanted", seen=old), entry("a", "removed", seen=old),
                             entry("a", "done", admitted=old), entry("a", "live", admitted=old)])
    write_ledger(root, "b", [entry("b", "other", seen=old)])
    refresh(root, "a", cluster(("a.done.1", "SUCCEEDED"), ("a.live.1", "RUNNING")), {"a.wanted.1"})
    mine = {e.job: e for e in read_ledgers(root) if e.workspace == "a"}
    assert sorted(mine) == ["live", "wanted"] and mine["wanted"].seen > old
    [other] = [e for e in read_ledgers(root) if e.workspace == "b"]
    assert other.seen == old  # never touched: not this workspace's


def test_an_admission_lock_held_by_any_process_is_named_as_such(tmp_path: Path):
    """Issue 37: any process that can open the file can hold it; the message must not blame "another admission"."""
    import subprocess
    import sys

    import pytest

    from state.queue.ledger import AdmissionBusy, admission_lock

    with admission_lock(str(tmp_path)):
        pass  # made, as the first admission makes it
    lock = tmp_path / ".argus" / "locks" / "admission.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'r+'); "
                               "fcntl.lockf(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)", str(lock)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(AdmissionBusy) as refused, admission_lock(str(tmp_path), timeout=0.5):
            pass
    finally:
        holder.kill()
        holder.wait()
    said = str(refused.value)
    assert "any other process that can open the file" in said and "fuser -v" in said
    assert "by another admission" not in said
