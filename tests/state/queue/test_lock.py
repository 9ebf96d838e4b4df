"""The apply lock: one apply at a time per workspace, a clear refusal, and a way to break it."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from state.audit import log as audit
from state.queue import lock
from tests.support.cluster import QUICK, SLEEP, jobs_of


def test_a_second_apply_is_refused_naming_the_holder(workspace, argus):
    workspace.job("locked", QUICK)
    with lock.held([str(workspace.shared)], workspace.name, "plan-x") as info:
        refused = argus("apply", workspace.root, "--auto-approve")
    assert refused.code == 1
    assert f"Another apply holds the lock of workspace {workspace.name!r}" in refused.err
    assert "plan plan-x" in refused.err and f"argus unlock {info.id}" in refused.err
    assert jobs_of(workspace.address, workspace.name) == []
    assert not lock.lock_path(str(workspace.shared), workspace.name).exists()


def test_lock_timeout_waits_for_the_holder(workspace, argus, monkeypatch):
    workspace.job("waiter", QUICK)
    taken, refused = threading.Event(), threading.Event()
    found_held = lock._holder_died_here  # asked each time the lock file is found taken

    def held_and_noticed(*args) -> bool:
        refused.set()
        return found_held(*args)

    def hold() -> None:
        with lock.held([str(workspace.shared)], workspace.name, "plan-y"):
            taken.set()
            refused.wait(30)  # release only once the apply has found the lock held

    monkeypatch.setattr(lock, "_holder_died_here", held_and_noticed)
    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(30)
    waited = argus("apply", workspace.root, "--auto-approve", "--lock-timeout", "30")
    holder.join()
    assert refused.is_set() and waited.code == 0, waited.err
    assert len(jobs_of(workspace.address, workspace.name)) == 1


def test_two_applies_started_together_submit_once(workspace):
    workspace.job("raced", SLEEP)
    argus_bin = Path(sys.executable).with_name("argus")
    racers = [subprocess.Popen([argus_bin, "apply", workspace.root, "--auto-approve"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(r.returncode, err) for r in racers for _, err in [r.communicate()]]
    assert len(jobs_of(workspace.address, workspace.name)) == 1
    assert 0 in [code for code, _ in results], results  # one of them applied
    for code, err in results:
        assert code == 0 or (code == 1 and "Another apply holds the lock" in err), err
    assert not lock.lock_path(str(workspace.shared), workspace.name).exists()


def test_unlock_breaks_a_dead_applys_lock_and_is_audited(workspace, argus):
    info = lock.LockInfo(id="dead1234abcd", workspace=workspace.name, user="someone", host="gone", pid=1,
                         started="2026-01-01T00:00:00+00:00", plan_id="p0")
    lock.acquire(str(workspace.shared), info, timeout=0)
    assert argus("unlock", "not-the-id", workspace.root).code == 1
    broken = argus("unlock", "dead1234abcd", workspace.root)
    assert broken.code == 0 and "Broke lock dead1234abcd of someone on gone" in broken.out
    assert not lock.lock_path(str(workspace.shared), workspace.name).exists()
    [event] = [e for e in audit.read(str(workspace.shared), workspace.name) if e["event"] == "unlock"]
    assert event["lock"]["id"] == "dead1234abcd"
