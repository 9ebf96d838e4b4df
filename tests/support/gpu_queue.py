"""Teams sharing the GPU queue of conftest's `gpu_cluster` (3 logical GPUs on its worker) through one shared
root (conftest's `shared`): a workspace per team on it, jobs that hold GPUs for RUN_SECONDS and log their
`start` and `end` on the shared root (and the runs read back from that log), what a team has active on Ray,
`argus serve` loops as child processes, and stopping every run a test left. The queue's end-to-end, cancel,
forged-root and queue-view tests build on them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from state.ray import local
from tests.support.cluster import jobs_of, sdk, until
from tests.support.workspace import Workspace

RUN_SECONDS = 2
"""How long a gpu_job holds its GPUs."""


def team(tmp_path: Path, name: str, cluster: local.LocalCluster, shared: Path, admin: str | None = None) -> Workspace:
    """Workspace `name` on `cluster`, its shared root `shared` (the one its rival teams use too); `admin`: the
    workspace the cluster names as its administrator (the one whose Quotas count)."""
    ws = Workspace(tmp_path / name, name, cluster.address)
    ws.write("argus.yaml", f"kind: Workspace\nname: {name}\n")
    ws.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: {cluster.address}
        shared_root: {shared}
        {f"admin: {admin}" if admin else ""}
        job_defaults:
          entrypoint_num_cpus: 0.5
          entrypoint_resources: {{worker_node: 1}}
        """)
    return ws


def gpu_job(ws: Workspace, shared: Path, name: str, gpus: int = 2, priority: int = 0, extra: str = "",
            seconds: float = RUN_SECONDS) -> None:
    """A job that holds `gpus` for `seconds` and logs when it started and ended."""
    log = shared / "ran.log"
    code = (f"import time; f = open({str(log)!r}, 'a'); f.write('start {ws.name}/{name} %f\\n' % time.time()); "
            f"f.flush(); time.sleep({seconds}); f.write('end {ws.name}/{name} %f\\n' % time.time())")
    ws.write(f"jobs/{name}.yaml", textwrap.dedent(f"""
        kind: Job
        name: {name}
        cluster: local
        workload: command
        entrypoint: [python3, -c, {json.dumps(code)}]
        demand: {{GPU: {gpus}}}
        priority: {priority}
        """) + textwrap.dedent(extra))  # each dedented alone: one common indent of both would be none


def ran(shared: Path) -> list[tuple[str, float, float]]:
    """(job, start, end) of every run that ended, by start time."""
    starts, ends = {}, {}
    log = shared / "ran.log"
    for line in log.read_text().splitlines() if log.exists() else []:
        what, job, at = line.split()
        (starts if what == "start" else ends)[job] = float(at)
    return sorted(((job, starts[job], ends[job]) for job in ends), key=lambda r: r[1])


def serve(ws: Workspace, *args: str) -> subprocess.Popen:
    """`argus serve` of the team, a turn a second; its stderr kept for `stop`."""
    return subprocess.Popen([sys.executable, "-m", "reconcile.cli", "serve", str(ws.root), "--interval", "1", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


def stop(loop: subprocess.Popen) -> str:
    """SIGTERM the loop (if it still runs) and return its stderr."""
    if loop.poll() is None:
        os.kill(loop.pid, signal.SIGTERM)
    return loop.communicate(timeout=120)[1]


def active(ws: Workspace) -> list[str]:
    """The team's jobs with a run pending or running on Ray."""
    return [j.metadata["argus.job"] for j in jobs_of(ws.address, ws.name) if j.status.value in ("PENDING", "RUNNING")]


def stop_all(address: str, *teams: Workspace) -> None:
    """Stop every run the teams still have pending or running, and wait until Ray says they ended: the GPU
    cluster is shared by the session, and a run Ray lists as active holds its demand for every test's queue."""
    for ws in teams:
        for job in jobs_of(address, ws.name):
            if job.status.value in ("PENDING", "RUNNING"):
                sdk(address).stop_job(job.submission_id)
    until(lambda: not any(active(ws) for ws in teams), "the teams' runs ended", timeout=120)
