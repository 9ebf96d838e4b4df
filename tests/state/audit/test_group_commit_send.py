"""state.audit.group_commit, items sent rather than committed: queued without waiting, carried by the next
group written in the order queued, written by `flush` at the latest, and a failed write of one is raised
by `flush`, never lost silently."""

from __future__ import annotations

import threading

import pytest

from specs.errors import ArgusError
from state.audit.group_commit import GroupCommit
from tests.support.slow_log import SlowLog

THREADS, EACH = 8, 25


def test_a_sent_item_waits_for_the_next_group_and_keeps_its_place():
    log = SlowLog()
    commit: GroupCommit[str] = GroupCommit(log.write)
    commit.send("done-1")
    assert log.groups == []  # nothing waited: nothing written yet
    commit.commit("registered-2")
    assert log.groups == [["done-1", "registered-2"]]  # one write for both, in the order queued
    commit.send("done-2")
    commit.flush()
    assert log.groups[-1] == ["done-2"]
    commit.flush()  # nothing left: no empty write
    assert len(log.groups) == 2


def test_threads_that_send_and_commit_lose_nothing_and_keep_their_order():
    log = SlowLog()
    commit: GroupCommit[str] = GroupCommit(log.write)
    start = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        start.wait()
        for i in range(EACH):
            commit.commit(f"t{t}-{i}-registered")
            commit.send(f"t{t}-{i}-done")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    commit.flush()
    assert sorted(log.written) == sorted(f"t{t}-{i}-{what}" for t in range(THREADS) for i in range(EACH)
                                         for what in ("registered", "done"))
    for t in range(THREADS):
        mine = [item for item in log.written if item.startswith(f"t{t}-")]
        assert mine == [f"t{t}-{i}-{what}" for i in range(EACH) for what in ("registered", "done")]


@pytest.mark.parametrize("carried_by", ["commit", "flush"])
def test_a_sent_item_that_cannot_be_written_is_raised_by_flush(carried_by: str):
    log = SlowLog(fail_when="done-1")  # every write carrying it fails: a disk that stays full
    commit: GroupCommit[str] = GroupCommit(log.write)
    commit.send("done-1")
    if carried_by == "commit":
        with pytest.raises(OSError):  # the committing caller's own write failed: it says so
            commit.commit("registered-2")
    with pytest.raises(ArgusError, match=r"1 record\(s\) sent to the audit log could not be written, twice: "
                                         r"OSError.*No space left"):
        commit.flush()  # the sent item it carried is not forgotten, and is said as argus says errors
    assert "done-1" not in log.written
    commit.flush()  # raised once: a later flush with nothing lost passes
    commit.commit("after")
    assert log.written == ["after"]


@pytest.mark.parametrize("carried_by", ["commit", "flush"])
def test_a_sent_item_whose_write_failed_once_is_written_by_flush(carried_by: str):
    failed: list[list[str]] = []

    def write(items: list[str]) -> None:  # a lock that timed out once
        if not failed:
            failed.append(items)
            raise OSError(37, "No locks available")
        log.write(items)

    log = SlowLog()
    commit: GroupCommit[str] = GroupCommit(write)
    commit.send("done-1")
    if carried_by == "commit":
        with pytest.raises(OSError):
            commit.commit("registered-2")
    commit.flush()
    assert "done-1" in log.written and failed == [["done-1", "registered-2"] if carried_by == "commit" else ["done-1"]]


def test_a_commit_beside_a_failed_sent_item_gets_its_own_error():
    entered, release = threading.Event(), threading.Event()
    log = SlowLog(fail_when="done-1")
    first_write = log.write

    def write(items: list[str]) -> None:
        if items == ["first"]:
            entered.set()
            release.wait(5)
        first_write(items)

    commit: GroupCommit[str] = GroupCommit(write)
    seen: dict[str, BaseException | None] = {}

    def committing(item: str) -> None:
        try:
            commit.commit(item)
            seen[item] = None
        except BaseException as err:  # noqa: BLE001 - the test records what each caller saw
            seen[item] = err

    first = threading.Thread(target=committing, args=("first",))
    first.start()
    assert entered.wait(5)
    commit.send("done-1")
    waiter = threading.Thread(target=committing, args=("registered-2",))
    waiter.start()
    release.set()
    first.join(10)
    waiter.join(10)
    assert seen["first"] is None
    assert isinstance(seen["registered-2"], OSError)  # it wrote the group carrying done-1: its own error
    with pytest.raises(ArgusError):
        commit.flush()
