"""The audit log's anchor, torn lines and HMACs, on real files: records removed from the end and a
deleted log are counted, a crash is told apart from tampering and recovered from, and with
ARGUS_AUDIT_KEY a rewrite with recomputed hashes is caught (without it, it is not). No Ray."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from pathlib import Path

import pytest

from specs.errors import ArgusError
from state.audit import log as audit
from state.audit.chain import anchor_hmac
from state.audit.events import StepCarriedOut
from tests.support.workspace import make_workspace

KEY = "correct-horse-battery-staple-4f1d"


@pytest.fixture
def ws(tmp_path: Path):
    return make_workspace(tmp_path / "ws", "anchored", "http://127.0.0.1:9")


def add(ws, *numbers: int) -> None:
    for number in numbers:
        audit.append(str(ws.shared), ws.name, StepCarriedOut(address=f"job.j{number}", action="submit",
                                                                step="submit", outcome="ok"))


def log_of(ws) -> Path:
    return audit.audit_path(str(ws.shared), ws.name)


def anchor_of(ws) -> Path:
    return audit.anchor_path(str(ws.shared), ws.name)


def records(ws) -> list[dict]:
    return [json.loads(line) for line in log_of(ws).read_text().splitlines()]


def test_the_anchor_holds_the_newest_hash_and_the_count(ws, argus):
    add(ws, 0, 1, 2)
    assert json.loads(anchor_of(ws).read_text()) == {"records": 3, "hash": records(ws)[-1]["hash"]}
    result = argus("audit", "verify", ws.root)
    assert result.code == 0 and "3 record(s), chain intact." in result.out and "warning" not in result.out


def test_records_removed_from_the_end_are_counted(ws, argus):
    add(ws, 0, 1, 2, 3, 4)
    lines = log_of(ws).read_text().splitlines(keepends=True)
    log_of(ws).write_text("".join(lines[:3]))
    result = argus("audit", "verify", ws.root)
    assert result.code == 1 and "2 record(s) removed from the end (the anchor says 5)" in result.out


def test_a_deleted_log_is_named_and_the_next_append_keeps_the_evidence(ws, argus):
    add(ws, 0, 1, 2)
    log_of(ws).unlink()
    result = argus("audit", "verify", ws.root)
    assert result.code == 1 and "the log is gone but its anchor says 3 record(s)" in result.out
    add(ws, 3)  # the anchor is rewritten now, so the log itself must say what the append found
    assert [e["event"] for e in records(ws)] == ["audit.anchor-mismatch", "action"]
    result = argus("audit", "verify", ws.root)
    assert result.code == 1
    assert "line 1 (" in result.out and "did not match its anchor: the log is gone but its anchor says 3" in result.out


def test_a_torn_last_line_is_reported_then_recovered_never_a_crash(ws, argus):
    add(ws, 0, 1, 2)
    torn = b'{"action": "submit", "address": "job.j3", "ev'
    with open(log_of(ws), "ab") as handle:
        handle.write(torn)  # what a crash halfway through an append leaves

    shown = argus("audit", "show", ws.root, "--json")
    assert shown.code == 0 and len(shown.out.splitlines()) == 3 and "line 4: a torn record" in shown.err
    verified = argus("audit", "verify", ws.root)
    assert verified.code == 0 and "3 record(s), chain intact." in verified.out
    assert "warning: line 4: a torn record (45 byte(s) after the last whole record)" in verified.out

    add(ws, 3)
    *whole, fragment, recovery, after = log_of(ws).read_bytes().split(b"\n")[:-1]
    assert fragment == torn and len(whole) == 3
    recovered, last = json.loads(recovery), json.loads(after)
    assert recovered["event"] == "audit.recovered" and recovered["torn_bytes"] == len(torn)
    assert recovered["torn_sha256"] == hashlib.sha256(torn).hexdigest()
    assert recovered["prev"] == json.loads(whole[-1])["hash"] and last["prev"] == recovered["hash"]
    verified = argus("audit", "verify", ws.root)
    assert verified.code == 0 and "5 record(s), chain intact." in verified.out
    assert verified.out.count("warning") == 1 and "45 torn byte(s) from an interrupted append, recovered at line 5" \
        in verified.out
    shown = argus("audit", "show", ws.root)
    assert shown.code == 0 and shown.err == "" and "audit.recovered after 45 torn byte(s)" in shown.out


@pytest.mark.parametrize("keyed", [False, True])
def test_a_crash_anywhere_in_an_append_is_never_tampering(ws, monkeypatch, keyed):
    """Cut the log at every few bytes of one append (after a torn one, so it writes a recovery too),
    with the anchor as it was before: verify finds no problem, then or after the next append."""
    if keyed:
        monkeypatch.setenv("ARGUS_AUDIT_KEY", KEY)
    add(ws, 0)
    with open(log_of(ws), "ab") as handle:
        handle.write(b'{"torn')
    log_before, anchor_before = log_of(ws).read_bytes(), anchor_of(ws).read_bytes()
    add(ws, 1)
    written = log_of(ws).read_bytes()
    assert [e["event"] for e in map(json.loads, written.split(b"\n")[2:-1])] == ["audit.recovered", "action"]
    for cut in [*range(len(log_before), len(written), 13), len(written) - 1, len(written)]:
        log_of(ws).write_bytes(written[:cut])
        anchor_of(ws).write_bytes(anchor_before)
        assert audit.check(str(ws.shared), ws.name).problems == (), cut
        add(ws, 2)
        assert audit.check(str(ws.shared), ws.name).problems == (), cut


def test_a_new_logs_anchor_is_written_before_its_first_record(ws, argus, monkeypatch):
    monkeypatch.setenv("ARGUS_AUDIT_KEY", KEY)
    add(ws, 0)
    fresh = {"records": 0, "hash": audit.GENESIS, "hmac": anchor_hmac(KEY.encode(), ws.name, 0, audit.GENESIS)}
    anchor_of(ws).write_text(json.dumps(fresh))  # as a crash right after the first record leaves it
    result = argus("audit", "verify", ws.root)
    assert result.code == 0 and "warning: the anchor is 1 record(s) behind the log" in result.out


def test_a_record_whose_newline_was_lost_is_kept_whole(ws, argus):
    add(ws, 0, 1)
    log_of(ws).write_bytes(log_of(ws).read_bytes()[:-1])  # torn exactly before the newline
    add(ws, 2)
    assert [e["event"] for e in records(ws)] == ["action"] * 3
    assert argus("audit", "verify", ws.root).code == 0


def test_a_crash_before_the_anchor_was_updated_is_a_warning_and_heals(ws, argus):
    add(ws, 0, 1)
    before = anchor_of(ws).read_bytes()
    add(ws, 2)
    anchor_of(ws).write_bytes(before)  # the record reached the log, the anchor did not
    result = argus("audit", "verify", ws.root)
    assert result.code == 0 and "warning: the anchor is 1 record(s) behind the log" in result.out
    add(ws, 3)
    result = argus("audit", "verify", ws.root)
    assert result.code == 0 and "4 record(s), chain intact." in result.out and "warning" not in result.out


def test_an_older_anchor_put_back_over_several_records_is_tampering(ws, argus):
    add(ws, 0)
    before = anchor_of(ws).read_bytes()
    add(ws, 1, 2)
    anchor_of(ws).write_bytes(before)
    result = argus("audit", "verify", ws.root)
    assert result.code == 1 and "2 record(s) from line 2 on were not counted by the anchor" in result.out


def test_a_log_older_than_anchors_verifies_with_a_warning_until_the_next_append(ws, argus):
    add(ws, 0, 1)
    anchor_of(ws).unlink()
    result = argus("audit", "verify", ws.root)
    assert result.code == 0 and "warning: no anchor: records removed from the end cannot be seen" in result.out
    add(ws, 2)
    assert json.loads(anchor_of(ws).read_text())["records"] == 3


@pytest.mark.parametrize("garbage", [b"{not json", b"[]", b"5", b'"a string"'])
def test_an_unreadable_line_in_the_middle_is_tampering_named_by_line(ws, argus, garbage):
    add(ws, 0, 1, 2)
    lines = log_of(ws).read_bytes().split(b"\n")
    log_of(ws).write_bytes(b"\n".join([lines[0], garbage, *lines[1:]]))
    shown = argus("audit", "show", ws.root)
    assert shown.code == 1 and len(shown.out.splitlines()) == 3 and "line 2: not a record" in shown.err
    verified = argus("audit", "verify", ws.root)
    assert verified.code == 1 and "line 2: not a JSON record" in verified.out


def test_show_and_verify_survive_records_of_the_wrong_shape(ws, argus, monkeypatch):
    add(ws, 0)
    with open(log_of(ws), "a") as handle:
        handle.write(json.dumps({"time": 5, "event": ["x"], "hash": "h"}) + "\n")
        handle.write(json.dumps({"time": None, "event": {"y": 1}, "hmac": 7}) + "\n")
    shown = argus("audit", "show", ws.root, "--since", "2000")
    assert shown.code == 0
    assert argus("audit", "verify", ws.root).code == 1
    monkeypatch.setenv("ARGUS_AUDIT_KEY", KEY)
    assert argus("audit", "verify", ws.root).code == 1


def rewrite(ws, change) -> None:
    """What someone without the key can do: change records, recompute every hash, fix the anchor."""
    entries, prev = records(ws), audit.GENESIS
    entries = change(entries)
    for entry in entries:
        entry["prev"] = prev
        entry["hash"] = prev = audit.record_hash(entry)
    log_of(ws).write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in entries))
    anchor = json.loads(anchor_of(ws).read_text())
    anchor_of(ws).write_text(json.dumps({**anchor, "records": len(entries), "hash": prev}))


def forge(entries: list[dict]) -> list[dict]:
    entries[1]["outcome"] = "forged"
    return entries


def test_a_full_rewrite_passes_plain_verify(ws, argus):
    add(ws, 0, 1, 2)
    rewrite(ws, forge)
    result = argus("audit", "verify", ws.root)
    assert result.code == 0 and "3 record(s), chain intact." in result.out  # what docs/audit.md says it cannot see


def test_with_the_key_a_full_rewrite_is_caught_and_without_it_is_not(ws, argus, monkeypatch):
    monkeypatch.setenv("ARGUS_AUDIT_KEY", KEY)
    add(ws, 0, 1, 2)
    assert all(len(e["hmac"]) == 64 for e in records(ws)) and "hmac" in json.loads(anchor_of(ws).read_text())
    clean = argus("audit", "verify", ws.root)
    assert clean.code == 0 and "HMACs checked with ARGUS_AUDIT_KEY." in clean.out

    rewrite(ws, forge)
    caught = argus("audit", "verify", ws.root)
    assert caught.code == 1 and "lines 2-3: the HMAC does not match" in caught.out
    assert "the anchor's HMAC does not match" in caught.out

    monkeypatch.delenv("ARGUS_AUDIT_KEY")
    missed = argus("audit", "verify", ws.root)
    assert missed.code == 0 and "3 record(s), chain intact." in missed.out
    assert "ARGUS_AUDIT_KEY is not set: HMACs were not checked" in missed.out
    shown = argus("audit", "show", ws.root, "--json")
    for text in (caught.out, caught.err, missed.out, missed.err, shown.out, shown.err, clean.out,
                 log_of(ws).read_text(), anchor_of(ws).read_text()):
        assert KEY not in text


@pytest.mark.parametrize(("change", "named"), [
    (lambda entries: [*entries[:2], {k: v for k, v in entries[2].items() if k != "hmac"}], "line 3: no HMAC"),
    (lambda entries: entries[:2], "the anchor's HMAC does not match"),
])
def test_with_the_key_a_stripped_hmac_or_a_recounted_anchor_is_caught(ws, argus, monkeypatch, change, named):
    monkeypatch.setenv("ARGUS_AUDIT_KEY", KEY)
    add(ws, 0, 1, 2)
    rewrite(ws, change)
    result = argus("audit", "verify", ws.root)
    assert result.code == 1 and named in result.out


def test_with_the_key_a_deleted_anchor_is_caught(ws, argus, monkeypatch):
    monkeypatch.setenv("ARGUS_AUDIT_KEY", KEY)
    add(ws, 0, 1, 2)
    log_of(ws).write_text("".join(log_of(ws).read_text().splitlines(keepends=True)[:2]))
    anchor_of(ws).unlink()
    result = argus("audit", "verify", ws.root)
    assert result.code == 1 and "the anchor is gone, though the log's records carry HMACs" in result.out


def _append_many(args: tuple[str, str, int]) -> None:
    shared, workspace, start = args
    for number in range(start, start + 10):
        audit.append(shared, workspace, StepCarriedOut(address=f"job.j{number}", action="submit", step="submit",
                                                       outcome="ok"))


def test_appenders_in_several_processes_keep_one_chain(ws, argus):
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_append_many, [(str(ws.shared), ws.name, 10 * n) for n in range(4)])
    result = argus("audit", "verify", ws.root)
    assert result.code == 0 and "40 record(s), chain intact." in result.out and "warning" not in result.out


def test_a_planted_symlink_never_carries_the_log_or_anchor_elsewhere(ws, tmp_path):
    add(ws, 0)
    victim = tmp_path / "victim"
    victim.mkdir()
    anchors = anchor_of(ws).parent
    os.rename(anchors, tmp_path / "anchors-aside")
    anchors.symlink_to(victim)
    with pytest.raises(ArgusError, match="anchor"):
        add(ws, 1)
    assert list(victim.iterdir()) == []
    log_of(ws).unlink()
    log_of(ws).symlink_to(victim / "log.jsonl")
    with pytest.raises(ArgusError, match="symbolic link"):
        add(ws, 2)
    assert list(victim.iterdir()) == []
