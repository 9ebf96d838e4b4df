"""state.audit.group_commit: concurrent callers share writes, each returns only once its own item is
written, and a failed write raises in exactly the callers whose items it carried."""

from __future__ import annotations

import threading
import time

import pytest

from specs.errors import ArgusError
from state.audit.group_commit import GroupCommit
from tests.support.slow_log import SlowLog

THREADS, EACH = 8, 25


def run_threads(commit: GroupCommit[str], log: SlowLog) -> dict[str, BaseException | None]:
    """Each thread commits its items in order and checks each is written when commit returns."""
    outcome: dict[str, BaseException | None] = {}
    start = threading.Barrier(THREADS)

    def worker(t: int) -> None:
        start.wait()
        for i in range(EACH):
            item = f"t{t}-{i}"
            try:
                commit.commit(item)
                outcome[item] = None if item in log.written else AssertionError(f"{item} returned unwritten")
            except BaseException as err:  # noqa: BLE001 - the test records what each caller saw
                outcome[item] = err

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    return outcome


def test_every_item_is_written_once_in_each_callers_order_and_writes_are_shared():
    log = SlowLog()
    outcome = run_threads(GroupCommit(log.write), log)
    assert all(err is None for err in outcome.values()), [e for e in outcome.values() if e]
    assert sorted(log.written) == sorted(f"t{t}-{i}" for t in range(THREADS) for i in range(EACH))
    for t in range(THREADS):
        mine = [item for item in log.written if item.startswith(f"t{t}-")]
        assert mine == [f"t{t}-{i}" for i in range(EACH)]
    assert len(log.groups) < THREADS * EACH / 2  # callers queued behind a write shared the next one


def test_a_failed_write_raises_in_exactly_the_callers_it_carried():
    log = SlowLog(fail_when="t3-7")
    outcome = run_threads(GroupCommit(log.write), log)
    failed = {item for item, err in outcome.items() if err is not None}
    assert "t3-7" in failed
    writers = [item for item in failed if isinstance(outcome[item], OSError)]
    assert len(writers) == 1  # the caller that wrote the group gets the error itself...
    others = [outcome[item] for item in failed if item not in writers]
    assert all(isinstance(err, ArgusError) and "may not have been written" in str(err)
               and "No space left on device" in str(err) and err.__cause__ is outcome[writers[0]]
               for err in others)  # ...each of the others one of its own, saying why
    assert len({id(err) for err in others}) == len(others)
    assert not failed & set(log.written)  # nobody is told a lost item was written...
    assert failed | set(log.written) == set(outcome)  # ...and every item is either written or raised
    assert len(failed) < THREADS * EACH  # the writes after the failure went on


def test_an_interrupted_group_raises_argus_error_in_the_others():
    entered, release = threading.Event(), threading.Event()
    written: list[list[str]] = []

    def write(items: list[str]) -> None:
        if items == ["first"]:
            entered.set()
            release.wait(5)
            written.append(items)
            return
        if "boom" in items:
            raise KeyboardInterrupt
        written.append(items)

    commit: GroupCommit[str] = GroupCommit(write)
    seen: dict[str, BaseException | None] = {}
    threads = [threading.Thread(target=lambda: seen.setdefault("first", _raised(lambda: commit.commit("first"))))]
    threads[0].start()
    assert entered.wait(5)
    for name in ("boom", "other"):
        threads.append(threading.Thread(target=lambda n=name: seen.setdefault(n, _raised(lambda: commit.commit(n)))))
        threads[-1].start()
    time.sleep(0.2)  # both queue behind the first write: the next write carries them together
    release.set()
    for thread in threads:
        thread.join(10)
    assert seen["first"] is None
    raised = {name: seen[name] for name in ("boom", "other")}
    assert sum(isinstance(err, KeyboardInterrupt) for err in raised.values()) == 1  # the writer's own
    assert sum(isinstance(err, ArgusError) and "may not have been written" in str(err) for err in raised.values()) == 1
    assert written == [["first"]]


def _raised(call) -> BaseException | None:
    try:
        call()
    except BaseException as err:  # noqa: BLE001 - the test records what each caller saw
        return err
    return None


@pytest.mark.parametrize("count", [1, 3])
def test_a_single_caller_writes_its_own_item_at_once(count: int):
    log = SlowLog()
    commit: GroupCommit[str] = GroupCommit(log.write)
    for i in range(count):
        commit.commit(f"x{i}")
    assert log.groups == [[f"x{i}"] for i in range(count)]
