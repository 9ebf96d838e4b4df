"""Forged queue entries and leases on a real shared root, against a real Ray cluster (3 logical GPUs)
and real `argus serve` processes: what a job that writes the shared root can and cannot make argus do.

Each test asserts the effect: the Ray job is still RUNNING, the job started, the loop took over.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from state.queue.lease import lease_path
from state.queue.ledger import ledger_path
from tests.support.cluster import jobs_of, until, wait_for
from tests.support.gpu_queue import active, gpu_job, stop_all, team
from tests.support.workspace import Workspace

KEY = "forged-root-test-key-0123456789abcdef"
SLEEP = "import time; time.sleep(300)"


def forge_ledger(shared: Path, workspace: str, *entries: dict, sig: str | None = None) -> Path:
    """What a job can write: a ledger of a workspace nobody runs, entries fresh (signed `sig`, if given).
    Without `sig` the rows are what argus before ARGUS_ROOT_KEY accepted (and obeyed)."""
    path = ledger_path(str(shared), workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    now = time.time()
    rows = [{"workspace": workspace, "cluster": "local", "spec_hash": "0" * 64, "arrived": now - 3600, "seen": now,
             "admitted": None, "priority": 0, "preemptible": False, **e, **({"sig": sig} if sig else {})}
            for e in entries]
    path.write_text(json.dumps({"workspace": workspace, "entries": rows}))
    return path


def urgent(gpus: float = 3.0) -> dict:
    return {"job": "urgent", "submission_id": "fake.urgent.1", "priority": 1000, "spread": {"GPU": gpus}}


def preemptible_sleeper(ws: Workspace) -> str:
    ws.write("jobs/low.yaml", f"""
        kind: Job
        name: low
        cluster: local
        workload: command
        entrypoint: [python3, -c, {json.dumps(SLEEP)}]
        demand: {{GPU: 2}}
        preemptible: true
        """)
    return "low"


def running_low(ws: Workspace) -> str:
    [job] = [j for j in jobs_of(ws.address, ws.name) if j.metadata["argus.job"] == "low"]
    return job.status.value


@pytest.mark.parametrize("keyed", [True, False], ids=["with-key", "without-key"])
def test_a_forged_high_priority_head_of_a_fake_workspace_never_stops_a_preemptible_run(
        gpu_cluster, shared, tmp_path, argus, monkeypatch, keyed):
    if keyed:
        monkeypatch.setenv("ARGUS_ROOT_KEY", KEY)
    ws = team(tmp_path, f"victim-{'k' if keyed else 'u'}", gpu_cluster, shared)
    preemptible_sleeper(ws)
    try:
        assert argus("apply", ws.root, "--auto-approve").code == 0
        [run] = jobs_of(ws.address, ws.name)
        wait_for(ws.address, run.submission_id, {"RUNNING"})
        forged = forge_ledger(shared, "fake", urgent())  # 3 GPUs, priority 1000: fits only if low is stopped
        if keyed:
            forge_ledger(shared, "fake2", {**urgent(), "workspace": "fake2"}, sig="f" * 64)  # a made-up signature

        shown = argus("plan", ws.root, "--detailed-exitcode")
        assert shown.code == 0, shown.out  # nothing to do: no preemption
        if keyed:
            fake2 = ledger_path(str(shared), "fake2")
            assert f"{forged}, {fake2}: queue entries without a valid ARGUS_ROOT_KEY signature were ignored" \
                in shown.out, shown.out
        else:
            assert ("low would be preempted for fake/urgent, but preemption across workspaces needs signed queue "
                    "entries: set ARGUS_ROOT_KEY") in shown.out, shown.out
        applied = argus("apply", ws.root, "--auto-approve")
        assert applied.code == 0, applied.out + applied.err
        forge_ledger(shared, "fake", urgent())  # refreshed, as a forger would
        turn = argus("serve", ws.root, "--once", "--sync", "auto")  # the loop carries out preemptions always
        assert turn.code == 0, turn.err
        said = ("queue entries without a valid ARGUS_ROOT_KEY signature were ignored" if keyed else
                "low would be preempted for fake/urgent, but preemption across workspaces needs signed")
        assert turn.err.count(said) == 1, turn.err  # the loop's log names the forgery, once
        assert ("ARGUS_ROOT_KEY is not set: the lease, the sent-event ledger and the admission queue" in turn.err) \
            is not keyed
        time.sleep(1)  # a stop would have been asked for synchronously; give Ray a moment to show it
        assert running_low(ws) == "RUNNING", "a forged queue entry stopped another workspace's run"
        assert [j.metadata["argus.attempt"] for j in jobs_of(ws.address, ws.name)] == ["1"]
        assert KEY not in shown.out + applied.out + applied.err + turn.out + turn.err
    finally:
        stop_all(gpu_cluster.address, ws)


def test_with_a_key_forged_admitted_and_waiting_entries_hold_no_capacity(gpu_cluster, shared, tmp_path, argus,
                                                                        monkeypatch):
    monkeypatch.setenv("ARGUS_ROOT_KEY", KEY)
    ws = team(tmp_path, "capacity-k", gpu_cluster, shared)
    gpu_job(ws, shared, "j", gpus=2)
    forge_ledger(shared, "fake", urgent(),
                 {"job": "hog", "submission_id": "fake.hog.1", "admitted": time.time(), "spread": {"GPU": 3.0}})
    try:
        applied = argus("apply", ws.root, "--auto-approve")
        assert applied.code == 0, applied.out + applied.err
        assert active(ws) == ["j"], applied.out  # the idle cluster's GPUs were not held by the forgery
        assert "queued" not in applied.out
    finally:
        stop_all(gpu_cluster.address, ws)


def _serve(ws: Workspace, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "reconcile.cli", "serve", str(ws.root), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _healthz(site: str) -> str:
    try:
        with urllib.request.urlopen(f"{site}healthz", timeout=10) as answer:
            return answer.read().decode()
    except urllib.error.HTTPError as err:  # 503 before the first turn
        return err.read().decode()


def test_with_a_key_a_forged_lease_does_not_keep_serve_on_standby(gpu_cluster, shared, tmp_path, argus, monkeypatch):
    monkeypatch.setenv("ARGUS_ROOT_KEY", KEY)
    ws = team(tmp_path, "lease-k", gpu_cluster, shared)
    gpu_job(ws, shared, "j", gpus=1)
    lease, stop = lease_path(str(shared), ws.name), threading.Event()

    def forge() -> None:  # a job that rewrites the lease ten times a second, claiming a live holder
        lease.parent.mkdir(parents=True, exist_ok=True)
        while not stop.is_set():
            lease.write_text(json.dumps({"holder": "evil:1:cafe", "renewed_at": "2099-01-01T00:00:00+00:00",
                                         "renewed_epoch": 4e9, "nonce": str(time.monotonic()), "ttl": 1e9,
                                         "sig": "0" * 64}))
            stop.wait(0.1)

    forger = threading.Thread(target=forge, daemon=True)
    forger.start()
    until(lease.exists, "the forged lease is there", 10)
    loop = _serve(ws, "--interval", "1", "--listen", "127.0.0.1:0")
    began = time.monotonic()
    try:
        line = loop.stdout.readline()
        site = line.split("listening on ", 1)[1].strip()
        said = until(lambda: (text := _healthz(site)).startswith("ok") and text, "a first (standby) turn", 30)
        assert said.startswith("ok, standby: (a lease without a valid ARGUS_ROOT_KEY signature)"), said
        until(lambda: _healthz(site) == "ok\n", "the loop took over and made a turn", 30)
        # the lease's ttl is two intervals: taken over after it, plus a renewal period and one turn
        took = time.monotonic() - began
        assert took < 20, took
    finally:
        stop.set()
        forger.join(timeout=5)
        if loop.poll() is None:
            os.kill(loop.pid, signal.SIGTERM)
        _out, err = loop.communicate(timeout=120)
        stop_all(gpu_cluster.address, ws)
    assert err.count(f"ignoring the lease at {lease}") == 1, err
    assert "active for workspace lease-k" in err and KEY not in err
