"""`argus local` starts a head plus a worker_node node and stops exactly the processes it started."""

from __future__ import annotations

import json
import subprocess
import time

from state.ray import local
from tests.support.cluster import SLEEP, jobs_of, wait_for
from tests.support.workspace import make_workspace


def test_local_up_status_down_kills_only_its_own_processes(tmp_path, argus, monkeypatch):
    state_dir = tmp_path / "local"
    monkeypatch.setenv("ARGUS_LOCAL_DIR", str(state_dir))
    bystander = subprocess.Popen(["sleep", "300"])
    port = local._free_port()
    try:
        up = argus("local", "up", "--dashboard-port", str(port))
        assert up.code == 0, up.err
        assert f"http://127.0.0.1:{port}" in up.out
        assert argus("local", "status").code == 0
        assert json.loads(argus("local", "status", "--json").out)["address"] == f"http://127.0.0.1:{port}"
        assert argus("local", "up", "--dashboard-port", str(port)).code == 1  # already up

        cluster = local.load(state_dir)
        ws = make_workspace(tmp_path / "ws", "local-test", cluster.address)
        ws.job("sleeper", SLEEP)
        assert argus("apply", ws.root, "--auto-approve").code == 0
        [job] = jobs_of(cluster.address, ws.name)
        wait_for(cluster.address, job.submission_id, {"RUNNING"})
        ours, driver = [], []
        deadline = time.monotonic() + 30  # RUNNING is reported just before the driver process starts
        while not driver and time.monotonic() < deadline:
            ours = local.alive_pids(cluster)
            driver = [p for p in ours if "time.sleep(120)" in _cmdline(p)]
            time.sleep(0.2)
        assert driver, "the job's driver process is a descendant of the local cluster"

        down = argus("local", "down")
        assert down.code == 0 and "Stopped" in down.out
        assert not any(_alive(p) for p in ours)
        assert bystander.poll() is None, "a process the cluster did not start was killed"
        assert argus("local", "status").code == 1
    finally:
        local.down(state_dir)
        bystander.kill()


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    return local._exists(pid)
