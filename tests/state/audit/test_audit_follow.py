"""A serve loop's reader of its audit log (state.audit.follow), on real files: each turn reads what was
appended since the last, finds the newest apply, and still reports a log cut, edited at its end,
deleted or replaced; an older record edited in place shows at the next full verification. No Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from state.audit import files as audit_files
from state.audit import follow as audit_follow
from state.audit import log as audit
from state.audit.events import ApplyEnded, StepCarriedOut
from state.audit.follow import AuditFollower

WS = "followed"


@pytest.fixture
def root(tmp_path: Path) -> str:
    (tmp_path / "shared").mkdir()  # the mount: argus never makes a shared root
    return str(tmp_path / "shared")


def step(root: str, n: int) -> None:
    audit.append(root, WS, StepCarriedOut(address=f"job.j{n}", action="submit", step="submit", outcome="ok"))


def applied(root: str, outcome: str = "ok") -> None:
    audit.append(root, WS, ApplyEnded(outcome=outcome, changes=1), {"commit": f"c-{outcome}"})


def log(root: str) -> Path:
    return audit.audit_path(root, WS)


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many log bytes each read returned (the real reader, watched)."""
    seen, real = [], audit_files.read_log_since

    def watched(shared_root: str, workspace: str, offset: int):
        info, data = real(shared_root, workspace, offset)
        seen.append(len(data))
        return info, data

    monkeypatch.setattr(audit_files, "read_log_since", watched)
    return seen


def test_each_turn_reads_only_what_was_appended_and_finds_the_newest_apply(root, bytes_read):
    for n in range(50):
        step(root, n)
    applied(root, "failed")
    follower = AuditFollower()
    first = follower.view(root, WS)
    assert first.problems == () and first.last_apply["outcome"] == "failed" and first.last_apply["commit"] == "c-failed"
    assert bytes_read[-1] == log(root).stat().st_size

    step(root, 50)
    applied(root, "ok")
    second = follower.view(root, WS)
    assert second.problems == () and second.last_apply["outcome"] == "ok"
    newest_three = sum(len(line) + 1 for line in log(root).read_bytes().splitlines()[-3:])
    assert bytes_read[-1] == newest_three  # the record verified last turn, and the two appended since
    assert follower.view(root, WS).last_apply["outcome"] == "ok"  # nothing appended: the newest line only


def test_records_cut_from_the_end_are_reported(root):
    for n in range(5):
        step(root, n)
    follower = AuditFollower()
    assert follower.view(root, WS).problems == ()
    lines = log(root).read_bytes().splitlines(keepends=True)
    log(root).write_bytes(b"".join(lines[:3]))
    assert "2 record(s) removed from the end" in " ".join(follower.view(root, WS).problems)


def test_the_newest_record_edited_is_reported(root):
    for n in range(3):
        step(root, n)
    follower = AuditFollower()
    follower.view(root, WS)
    lines = log(root).read_text().splitlines(keepends=True)
    lines[-1] = lines[-1].replace('"ok"', '"no"')
    log(root).write_text("".join(lines))
    assert "does not match its hash" in " ".join(follower.view(root, WS).problems)


def test_a_deleted_or_replaced_log_is_reported(root):
    for n in range(3):
        step(root, n)
    follower = AuditFollower()
    follower.view(root, WS)
    data = log(root).read_bytes()
    log(root).unlink()
    assert "gone" in " ".join(follower.view(root, WS).problems)
    replacement = log(root).with_name("other")
    replacement.write_bytes(data[: data.index(b"\n") + 1] + data)  # same size and more, another file
    replacement.rename(log(root))
    assert follower.view(root, WS).problems


def test_a_line_appended_by_someone_else_is_reported(root):
    step(root, 0)
    follower = AuditFollower()
    follower.view(root, WS)
    with log(root).open("a") as handle:
        handle.write(json.dumps({"event": "apply.end", "outcome": "ok", "hash": "f" * 64}) + "\n")
    assert follower.view(root, WS).problems


def test_a_torn_tail_is_a_crash_not_a_problem_and_the_recovery_follows(root):
    step(root, 0)
    follower = AuditFollower()
    follower.view(root, WS)
    with log(root).open("a") as handle:
        handle.write('{"event": "apply.e')
    assert follower.view(root, WS).problems == ()
    applied(root)
    assert follower.view(root, WS) == audit_follow.Followed({"time": audit.read(root, WS)[-1]["time"],
                                                             "actor": audit.actor(), "outcome": "ok",
                                                             "commit": "c-ok"}, ())


def test_an_older_record_edited_in_place_shows_at_the_next_full_verification(root, monkeypatch):
    monkeypatch.setattr(audit_follow, "FULL_EVERY", 2)
    for n in range(4):
        step(root, n)
    follower = AuditFollower()
    follower.view(root, WS)
    text = log(root).read_text()
    log(root).write_text(text.replace('"job.j1"', '"job.j9"', 1))  # same size, newest record untouched
    seen = [follower.view(root, WS).problems for _ in range(3)]
    assert seen[0] == () and any("does not match its hash" in " ".join(p) for p in seen[1:])
