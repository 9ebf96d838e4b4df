"""`argus serve --once` behind a lease a job wrote: without ARGUS_ROOT_KEY it can't tell, and says so with exit 1
instead of standing by quietly on every cron run; with the key it takes over and acts. Real test cluster."""

from __future__ import annotations

import json

from state import root_key
from state.queue.lease import lease_path
from state.runs.records import now
from tests.support.cluster import QUICK
from tests.support.loops import runs_of


def forge(workspace) -> None:
    """A lease naming a loop on another host, renewed this instant: what any job can write on the shared root."""
    path = lease_path(str(workspace.shared), workspace.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"holder": "elsewhere:7:forged", "host": "elsewhere", "pid": 7, "renewed_at": now(),
                                "ttl": 60}))


def test_once_behind_a_lease_it_cannot_check_says_so_and_exits_1(workspace, argus, monkeypatch):
    monkeypatch.delenv(root_key.KEY_VARIABLE, raising=False)
    workspace.job("quick", QUICK)
    assert argus("apply", workspace.root, "--auto-approve").code == 0  # lays out the root
    workspace.job("later", QUICK)
    forge(workspace)
    result = argus("serve", workspace.root, "--once", "--sync", "auto")
    assert result.code == 1, result.err
    assert "cannot tell the lease of elsewhere:7:forged from one a job wrote" in result.err
    assert runs_of(workspace, "later") == []  # it stood by: nothing done behind the lease


def test_once_with_the_key_takes_over_a_lease_a_job_wrote(workspace, argus, monkeypatch):
    monkeypatch.setenv(root_key.KEY_VARIABLE, "unit-test-root-key-0123456789abcdef")
    workspace.job("quick", QUICK)
    assert argus("apply", workspace.root, "--auto-approve").code == 0
    workspace.job("later", QUICK)
    forge(workspace)
    result = argus("serve", workspace.root, "--once", "--sync", "auto")
    assert result.code == 0, result.err
    assert "ignoring the lease" in result.err
    assert len(runs_of(workspace, "later")) == 1
