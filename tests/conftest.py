"""Shared fixtures: a real two-node Ray cluster on loopback, real workspaces in temp dirs. (What tests import
beside fixtures lives in tests/support/.)"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from state.ray import local
from tests.support.cluster import jobs_of, sdk, start_cluster
from tests.support.isolation import GIT_KEPT, GITCONFIG, UNSET
from tests.support.receivers import webhook
from tests.support.workspace import Result, make_workspace

pytest_plugins = ("tests.support.inner_loop", "tests.support.parsed_once")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test may reach a cluster through the environment, read the real git config or write into
    the real home or cache: every test runs with these set, so none can forget."""
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)
    for name in [n for n in os.environ if n.startswith("GIT_") and n not in GIT_KEPT]:
        monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(GITCONFIG)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("ARGUS_LOCAL_DIR", str(tmp_path / "local-cluster"))
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "argus-cache"))


JOBS_RUN: dict[str, int] = {}
"""Jobs each shared cluster ran in this session: each costs Ray a worker and a driver process, seconds of CPU
(bench/suite_time.py prints where the suite's time goes; the summary line says how many there were)."""


def pytest_terminal_summary(terminalreporter) -> None:
    if JOBS_RUN:
        terminalreporter.write_line("Ray jobs in the shared clusters' tables at the end (a few tests delete theirs): " +
                                    ", ".join(f"{name} {count}" for name, count in sorted(JOBS_RUN.items())))


def _count_jobs(name: str, cluster: local.LocalCluster) -> None:
    with contextlib.suppress(Exception):  # a cluster a test broke still goes down; the count is only a figure
        JOBS_RUN[name] = len(sdk(cluster.address).list_jobs())


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory):
    state_dir = tmp_path_factory.mktemp("ray-cluster")
    cluster = start_cluster(state_dir)
    try:
        yield cluster
    finally:
        _count_jobs("ray_cluster", cluster)
        local.down(state_dir)


@pytest.fixture(scope="session")
def gpu_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A second cluster whose worker has 3 logical GPUs (the admission queue's tests), started once.
    Ray keeps every test's finished jobs: each test names its workspaces as no other test does."""
    state_dir = tmp_path_factory.mktemp("gpu-cluster")
    cluster = local.up(state_dir, dashboard_port=local._free_port(), cpus_per_node=8, worker_gpus=3,
                       worker_resources={"worker_node": 8.0})
    try:
        yield cluster
    finally:
        _count_jobs("gpu_cluster", cluster)
        local.down(state_dir)


@pytest.fixture(scope="session")
def verl_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl 0.5.0, 0.8.0 and 0.9.1 (tags v0.5.0, v0.8.0, v0.9.1) as a git repository, built from verl's
    published wheels by the h20 example's own script: once per run, shared by pytest-xdist's workers (~10 s of CPU
    each), read-only (a test that changes verl copies it first)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return _make_verl_repo(tmp_path_factory.mktemp("verl") / "verl")
    shared = tmp_path_factory.getbasetemp().parent / "verl-shared"  # the run's base temp dir, every worker's parent
    with open(str(shared) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes: the other worker waits for the build
        if not (shared / "built").exists():
            shutil.rmtree(shared, ignore_errors=True)  # a worker that died half-way
            _make_verl_repo(shared / "verl")
            (shared / "built").touch()
    return shared / "verl"


def _make_verl_repo(repo: Path) -> Path:
    env = {"PIP": f"{sys.executable} -m pip", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    script = Path(__file__).resolve().parents[1] / "examples" / "h20" / "make-verl-repo.sh"
    subprocess.run([script, repo], check=True, capture_output=True, env=env)
    return repo


@pytest.fixture
def workspace(tmp_path: Path, ray_cluster: local.LocalCluster, request: pytest.FixtureRequest):
    """A workspace named after the test, so tests on the shared cluster never own each other's jobs."""
    name = request.node.name.replace("_", "-").lower()[:40].strip("-")
    ws = make_workspace(tmp_path / "ws", name, ray_cluster.address)
    yield ws
    for job in jobs_of(ray_cluster.address, name):  # free the shared cluster's slots for later tests
        if job.status.value in ("PENDING", "RUNNING"):
            sdk(ray_cluster.address).stop_job(job.submission_id)


@pytest.fixture
def argus(capsys: pytest.CaptureFixture[str]):
    """Run the argus CLI in-process, as a user would type it."""
    from reconcile.cli import main

    def run(*args: str | Path) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """One shared root for the workspaces of a test, as an NFS mount would be (the GPU queue's tests)."""
    root = tmp_path / "nfs"
    (root / ".argus").mkdir(parents=True)
    return root


@pytest.fixture
def hook():
    """A JSON webhook on loopback: its json:// URL and the argus events it has been sent, in order."""
    with webhook() as (url, events):
        yield url, events


os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# A suite started in the background by a non-interactive shell inherits SIGINT ignored, and so would every
# process it starts: a POSIX sh can then never trap it (test_wrapper's SIGINT test hung in such runs).
# Python's own handler instead: what the tests start begins with the default, as under Ray.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
