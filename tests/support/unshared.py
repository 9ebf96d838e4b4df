"""A Ray cluster whose worker does not share the shared root: the worker runs in its own mount namespace with
another directory bind-mounted at the root's path (`unshare -m`, as root), so its jobs see the same path and
other contents, as a node whose NFS is not mounted (or mounted elsewhere) would. Recorded as `argus local`
records its processes: state.ray.local.down kills exactly those, and the mount dies with the namespace."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from state.ray import local

BIND = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'


def can_unshare() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-m", "true"], capture_output=True).returncode == 0


def start_unshared(state_dir: Path, root: Path, other: Path) -> local.LocalCluster:
    """Head as usual; the worker (worker_node: 8) with `other` mounted at `root` in its namespace alone."""
    if not can_unshare():
        pytest.skip("needs root and `unshare -m` to give the worker a mount namespace of its own")
    cluster = local.LocalCluster(str(state_dir), local._free_port(), local._free_port(),
                                 tempfile.mkdtemp(prefix="argus-ray-", dir="/tmp"))
    cluster.nodes = {"head": {"CPU": 8, "GPU": 0}, "worker": local.worker_shape(8, 0, {"worker_node": 8.0})}
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        local._ray_start(cluster, local._head_args(cluster, 8), "head")
        _start_worker(cluster, root, other)
        local._wait_ready(cluster, nodes=2, timeout=90)
    except BaseException:
        local.down(state_dir)
        raise
    return cluster


def _start_worker(cluster: local.LocalCluster, root: Path, other: Path) -> None:
    """`ray start` for the worker inside `unshare -m` (private propagation: the bind never reaches the host)."""
    args = local._worker_args(cluster, cluster.nodes["worker"])
    command = ["unshare", "-m", "--propagation", "private", "sh", "-c", BIND, "sh", str(other), str(root),
               str(local.ray_cli()), "start", *args]
    log = Path(cluster.state_dir) / "ray-start-worker.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env=local.node_env(cluster, "worker"), cwd=cluster.state_dir)
    cluster.process_groups.append(proc.pid)  # unshare execs sh, which execs ray: one process group, ours
    local._save(cluster)
    if proc.wait(timeout=120) != 0:
        raise AssertionError(f"the unshared worker did not start; its log ends: {log.read_text()[-1500:]}")
