"""A loop that now holds the lease breaks the apply lock a killed loop on another host left; a person's never."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from state.audit import log as audit
from state.queue import lock


def planted(root, user: str, minutes_ago: float, host: str = "other-host") -> lock.LockInfo:
    started = (datetime.now(timezone.utc) - timedelta(minutes=minutes_ago)).isoformat(timespec="seconds")
    info = lock.LockInfo(id="abc123", workspace="ws", user=user, host=host, pid=4242, started=started, plan_id="p")
    path = lock.lock_path(str(root), "ws")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info.model_dump()))
    return info


def test_an_abandoned_loop_lock_is_broken_and_audited(tmp_path):
    planted(tmp_path, "argus serve@other-host", minutes_ago=30)
    broken = lock.break_abandoned_loop_lock(str(tmp_path), "ws", older_than=600)
    assert broken is not None and broken.user == "argus serve@other-host"
    assert not lock.lock_path(str(tmp_path), "ws").exists()
    [entry] = audit.read(str(tmp_path), "ws")
    assert entry["event"] == "unlock" and entry["reason"] == "left by an argus serve that lost its lease"


def test_a_persons_lock_or_a_young_loop_lock_is_left_alone(tmp_path):
    for user, minutes in (("alice", 300), ("argus serve@other-host", 2)):
        planted(tmp_path, user, minutes_ago=minutes)
        assert lock.break_abandoned_loop_lock(str(tmp_path), "ws", older_than=600) is None
        assert lock.lock_path(str(tmp_path), "ws").exists()
    assert audit.read(str(tmp_path), "ws") == []
