"""ARGUS_ROOT_KEY: what argus writes on the shared root and later trusts is signed, and what a job
forges there is ignored (state.root_key). Real files in tmp_path; the planner with plain data. No Ray."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reconcile.model import Action
from reconcile.plan.planner import plan
from reconcile.serve.notify import MAX_TRIES, Notifier
from state import root_key
from state.queue import lease as lease_module
from state.queue.lease import Lease, lease_path
from state.queue.ledger import ledger_path, read_ledger, read_ledgers, write_ledger
from state.queue.sent_events import SentLedger, key_hash
from state.ray import local
from state.runs.records import now
from tests.support.cluster import until
from tests.support.planning import NOW, desired, job, ledger, observed_with, run_of
from tests.support.receivers import Receiver, event

KEY = "unit-test-root-key-0123456789abcdef"
CHANNEL = "0123456789abcdef"


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(root_key.KEY_VARIABLE, KEY)


# --- sign and verify -------------------------------------------------------------------------------------------------

def test_a_signature_holds_for_its_fields_kind_and_scope_only(keyed, monkeypatch):
    fields = {"job": "j", "priority": 3, "seen": 1.5}
    signature = root_key.sign("queue-entry", "team", fields)
    assert signature is not None and KEY not in signature
    assert root_key.verify("queue-entry", "team", dict(fields), signature)
    assert not root_key.verify("queue-entry", "team", {**fields, "priority": 4}, signature)  # a tampered field
    assert not root_key.verify("queue-entry", "other", fields, signature)  # another workspace's file
    assert not root_key.verify("serve-lease", "team", fields, signature)  # another kind of entry
    assert not root_key.verify("queue-entry", "team", fields, None)  # no signature at all
    assert not root_key.verify("queue-entry", "team", fields, signature.upper())
    monkeypatch.setenv(root_key.KEY_VARIABLE, "another key of the same length....")
    assert not root_key.verify("queue-entry", "team", fields, signature)  # another key
    monkeypatch.delenv(root_key.KEY_VARIABLE)
    assert root_key.sign("queue-entry", "team", fields) is None
    assert not root_key.verify("queue-entry", "team", fields, signature)  # no key: nothing verifies


def test_ray_nodes_are_started_without_any_argus_key(keyed, monkeypatch, tmp_path):
    monkeypatch.setenv("ARGUS_AUDIT_KEY", "audit")
    monkeypatch.setenv("ARGUS_PLAN_KEY", "plan")
    cluster = local.LocalCluster(state_dir=str(tmp_path), dashboard_port=1, gcs_port=1, temp_dir=str(tmp_path))
    env = local.node_env(cluster, "head")
    assert not set(root_key.KEY_VARIABLES) & set(env)
    assert KEY not in json.dumps(env)
    assert env["HOME"]  # the rest of the environment is still there


# --- the admission ledgers ----------------------------------------------------------------------------------------

def _rows(root: Path, workspace: str) -> list[dict]:
    return json.loads(ledger_path(str(root), workspace).read_text())["entries"]


def _write_rows(root: Path, workspace: str, rows: list[dict]) -> None:
    path = ledger_path(str(root), workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"workspace": workspace, "entries": rows}))


def test_with_a_key_forged_tampered_and_moved_ledger_entries_are_ignored_and_named(keyed, tmp_path):
    write_ledger(str(tmp_path), "team", [ledger("team", "j", "team.j.1", seen=time.time())])
    [row] = _rows(tmp_path, "team")
    assert len(row["sig"]) == 64 and "signed" not in row
    [read] = read_ledger(str(tmp_path), "team")
    assert read.signed and read.job == "j"

    tampered = {**row, "priority": 1000}
    unsigned = {k: v for k, v in row.items() if k != "sig"} | {"job": "forged", "signed": True}
    _write_rows(tmp_path, "team", [row, tampered, unsigned])
    moved = {**row, "workspace": "rival"}  # a genuine entry of team's, replayed into rival's file
    _write_rows(tmp_path, "rival", [moved, {**row}])
    ignored: list[str] = []
    entries = read_ledgers(str(tmp_path), ignored)
    assert [(e.workspace, e.job, e.priority) for e in entries] == [("team", "j", 0)]
    # the moved entry fails its signature (named); the copy that still claims team is skipped as ever
    assert ignored == [str(ledger_path(str(tmp_path), "rival")), str(ledger_path(str(tmp_path), "team"))]


def test_without_a_key_entries_read_unsigned_as_before(tmp_path):
    write_ledger(str(tmp_path), "team", [ledger("team", "j", "team.j.1")])
    [row] = _rows(tmp_path, "team")
    assert "sig" not in row
    _write_rows(tmp_path, "team", [{**row, "signed": True}])  # the file cannot say it was checked
    [entry] = read_ledgers(str(tmp_path))
    assert entry.job == "j" and not entry.signed


def test_entries_signed_by_another_key_do_not_count(keyed, monkeypatch, tmp_path):
    monkeypatch.setenv(root_key.KEY_VARIABLE, "the other workspaces key, not ours")
    write_ledger(str(tmp_path), "rival", [ledger("rival", "j", "rival.j.1")])
    monkeypatch.setenv(root_key.KEY_VARIABLE, KEY)
    ignored: list[str] = []
    assert read_ledgers(str(tmp_path), ignored) == () and ignored == [str(ledger_path(str(tmp_path), "rival"))]


# --- the planner: an unsigned head never preempts another workspace ---------------------------------------------------

def _preemptible_run():
    spec = job("low", demand={"GPU": 4.0}, preemptible=True)
    return spec, run_of(spec, "RUNNING")


def test_an_unsigned_waiting_entry_of_another_workspace_preempts_nothing_and_the_plan_says_why():
    spec, running = _preemptible_run()
    admitted = ledger("team", "low", running.submission_id, admitted=NOW - 60, preemptible=True, gpus=4.0)
    head = ledger("fake", "urgent", "fake.urgent.1", priority=1000, gpus=4.0, signed=False)
    result = plan(desired(spec), observed_with([running], [admitted, head], gpus=4.0))
    assert [c.action for c in result.changes] == [Action.NOOP]
    [warning] = [d for d in result.diagnostics if d.address == "job.low"]
    assert warning.severity == "warning" and warning.message == (
        "low would be preempted for fake/urgent, but preemption across workspaces needs signed queue entries: "
        "set ARGUS_ROOT_KEY for every workspace sharing this root (docs/queue.md)")
    assert any("not signed (ARGUS_ROOT_KEY is not set)" in d.message for d in result.diagnostics)

    signed = head.model_copy(update={"signed": True})  # the same head, its signature checked: it preempts
    again = plan(desired(spec), observed_with([running], [admitted, signed], gpus=4.0))
    assert [c.action for c in again.changes] == [Action.PREEMPT]


# --- the serve lease ----------------------------------------------------------------------------------------------

def _forge_lease(root: Path, workspace: str, **fields: object) -> None:
    path = lease_path(str(root), workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"holder": "evil:1:x", "renewed_at": "2099-01-01T00:00:00+00:00", "ttl": 1e18,
                                "nonce": str(time.monotonic()), **fields}))


def test_with_a_key_a_forged_lease_that_keeps_changing_holds_a_standby_one_ttl_at_most(keyed, tmp_path):
    (tmp_path / ".argus").mkdir()
    lease = Lease(str(tmp_path), "ws", ttl=0.5)
    _forge_lease(tmp_path, "ws")
    began = time.monotonic()
    while not lease.try_hold():
        _forge_lease(tmp_path, "ws")  # rewritten between every look: it would renew a plain lease
        assert time.monotonic() - began < 5, "a forged lease kept the standby waiting"
        time.sleep(0.05)
    assert time.monotonic() - began >= 0.4  # waited out once
    assert json.loads(lease.path.read_text())["holder"] == lease.holder
    [notice] = lease.notices()
    assert str(lease.path) in notice and KEY not in notice
    assert lease.notices() == []  # said once


def test_with_a_key_old_genuine_leases_replayed_do_not_keep_a_dead_holder_alive(keyed, tmp_path):
    (tmp_path / ".argus").mkdir()
    dead = Lease(str(tmp_path), "ws", ttl=0.5)
    assert dead.try_hold()
    first = lease_path(str(tmp_path), "ws").read_text()
    time.sleep(0.02)
    assert dead.try_hold()
    second = lease_path(str(tmp_path), "ws").read_text()
    standby = Lease(str(tmp_path), "ws", ttl=0.5)
    began = time.monotonic()
    for turn in range(200):
        lease_path(str(tmp_path), "ws").write_text((first, second)[turn % 2])  # every look sees a change
        if standby.try_hold():
            break
        time.sleep(0.05)
    assert standby.holder_now() == standby.holder and time.monotonic() - began < 5


def test_without_a_key_a_forged_ttl_or_future_renewal_cannot_hold_a_standby_forever(tmp_path, monkeypatch):
    (tmp_path / ".argus").mkdir()
    _forge_lease(tmp_path, "ws")  # a ttl of 1e18 s and a renewal in 2099, written once
    once = Lease(str(tmp_path), "ws", ttl=0.5, once=True)
    assert once.try_hold()  # a one-turn process: a renewal further ahead than any clock skew is forged
    monkeypatch.setattr(lease_module, "MAX_TTL", 0.3)  # an hour in truth: the test does not wait for it
    _forge_lease(tmp_path, "ws")
    loop = Lease(str(tmp_path), "ws", ttl=0.2)
    assert not loop.try_hold()
    time.sleep(0.4)
    assert loop.try_hold(), "a forged ttl held the standby past MAX_TTL"


def _local_lease(root: Path, pid: int) -> None:
    _forge_lease(root, "ws", holder=f"{socket.gethostname()}:{pid}:x", host=socket.gethostname(), pid=pid,
                 renewed_at=now(), ttl=3600)


@pytest.mark.parametrize("once", [True, False])
def test_without_a_key_a_lease_naming_a_process_here_that_is_no_argus_is_taken_at_once(tmp_path, once):
    (tmp_path / ".argus").mkdir()
    other = subprocess.Popen(["sleep", "60"])  # not python: the venv's path may hold "argus"
    try:
        for pid in (other.pid, _dead_pid()):  # a live process that is no argus, then one that is gone
            _local_lease(tmp_path, pid)
            lease = Lease(str(tmp_path), "ws", ttl=30.0, once=once)
            assert lease.try_hold(), pid
            assert lease.holder_now() == lease.holder
    finally:
        other.kill()
        other.wait()


def test_without_a_key_a_lease_of_a_live_argus_here_is_waited_on(tmp_path):
    (tmp_path / ".argus").mkdir()
    serving = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "reconcile.cli", "serve"])
    try:
        until(lambda: b"reconcile" in Path(f"/proc/{serving.pid}/cmdline").read_bytes(), "the loop started", 10)
        _local_lease(tmp_path, serving.pid)
        assert not Lease(str(tmp_path), "ws", ttl=30.0, once=True).try_hold()
        assert not Lease(str(tmp_path), "ws", ttl=30.0).try_hold()
    finally:
        serving.kill()
        serving.wait()


def _dead_pid() -> int:
    gone = subprocess.Popen(["true"])
    gone.wait()
    return gone.pid


# --- the sent-event ledger -----------------------------------------------------------------------------------------

def test_with_a_key_forged_sent_entries_and_try_counts_do_not_count(keyed, tmp_path):
    ledger_ = SentLedger(str(tmp_path), "ws")
    ledger_.record_sent(CHANNEL, "ws:failed:a", "failed", "t", "json://h", "t")
    assert ledger_.sent(CHANNEL, "ws:failed:a") == "sent"
    folder = ledger_.path / CHANNEL
    genuine = json.loads((folder / f"{key_hash('ws:failed:a')}.json").read_text())
    (folder / f"{key_hash('ws:failed:b')}.json").write_text(json.dumps({**genuine, "key": "ws:failed:b"}))
    (folder / f"{key_hash('ws:failed:c')}.json").write_text(json.dumps(genuine))  # another event's, copied
    (folder / f"{key_hash('ws:failed:d')}.json").write_text("{}")
    assert [ledger_.sent(CHANNEL, f"ws:failed:{k}") for k in "bcd"] == ["forged"] * 3
    assert not SentLedger(str(tmp_path), "ws2").was_sent(CHANNEL, "ws:failed:a")

    ledger_.count_try(CHANNEL, "ws:failed:e", 2)
    assert ledger_.tries(CHANNEL, "ws:failed:e") == 2
    (folder / f"{key_hash('ws:failed:e')}.tries").write_text("3\n")  # "given up": forged
    assert ledger_.tries(CHANNEL, "ws:failed:e") == 0


def test_with_a_key_a_forged_sent_entry_does_not_silence_an_alert(keyed, tmp_path):
    """A job forges "sent" and "given up after 3 tries" for the event the loop is about to send: the
    real loopback receiver still gets it, and the forgery is named once."""
    receiver = Receiver()
    try:
        url = f"json://127.0.0.1:{receiver.port}/hook"
        notifier = Notifier([url], str(tmp_path), "ws")
        alert = event("failed", "ws.train.h.1")
        folder = SentLedger(str(tmp_path), "ws").path / notifier.channels[0].id
        folder.mkdir(parents=True)
        forged = folder / f"{key_hash(alert.key)}.json"
        forged.write_text(json.dumps({"key": alert.key, "kind": "failed", "time": alert.time, "sig": "a" * 64,
                                      "channel": notifier.channels[0].id, "label": "x", "sent_at": alert.time}))
        (folder / f"{key_hash(alert.key)}.tries").write_text(f"{MAX_TRIES}\n")
        problems = notifier.deliver([alert]).problems
        assert [e["key"] for e in receiver.events()] == [alert.key]
        assert len(problems) == 1 and str(forged) in problems[0] and KEY not in problems[0]
        assert notifier.deliver([alert]).problems == [] and len(receiver.received) == 1  # sent and recorded: once
    finally:
        receiver.close()


def test_a_ledger_says_whether_anything_was_ever_told_and_never_follows_a_link(tmp_path):
    ledger = SentLedger(str(tmp_path), "ws")
    assert not ledger.ever_sent()
    ledger.count_try(CHANNEL, "failed:x", 1)  # a try is no send
    assert not ledger.ever_sent()
    ledger.record_sent(CHANNEL, "failed:x", "failed", "t", "json://", "t")
    assert ledger.ever_sent()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = SentLedger(str(elsewhere), "ws")
    other.record_sent(CHANNEL, "failed:y", "failed", "t", "json://", "t")
    linked = tmp_path / "linked"
    (linked / ".argus" / "serve" / "ws").mkdir(parents=True)
    (linked / ".argus" / "serve" / "ws" / "sent").symlink_to(elsewhere / ".argus" / "serve" / "ws" / "sent")
    assert not SentLedger(str(linked), "ws").ever_sent()
