"""Shared fixtures: a real two-node Ray cluster on loopback, real workspaces in temp dirs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from state.audit import log as audit
from state.ray import local

T = TypeVar("T")


UNSET = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "ARGUS_PLAN_KEY", "ARGUS_AUDIT_KEY", "ARGUS_ROOT_KEY",
         *audit.CI_ACTOR_VARIABLES)
"""Would reach another cluster, seal plans, the audit log or the shared root's entries with a real key, or
name a CI actor in audit entries. Tests that need ARGUS_ROOT_KEY set it themselves; Ray nodes never get it
(state.ray.local.node_env)."""
GIT_KEPT = ("GIT_SSL_CAINFO", "GIT_SSL_CAPATH")
"""Every other GIT_* variable could point git at another repository, config or object store."""
GITCONFIG = "[user]\n\tname = argus-tests\n\temail = tests@localhost\n"
"""The test home's only git config: commits in test repositories work without the real one."""


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


def start_cluster(state_dir: Path) -> local.LocalCluster:
    # Logical CPUs and worker_node slots above the machine's 2 cores: test drivers mostly sleep.
    return local.up(state_dir, dashboard_port=local._free_port(), cpus_per_node=8,
                    worker_resources={"worker_node": 8.0})


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory):
    state_dir = tmp_path_factory.mktemp("ray-cluster")
    cluster = start_cluster(state_dir)
    try:
        yield cluster
    finally:
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
        local.down(state_dir)


@pytest.fixture(scope="session")
def verl_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """verl 0.5.0, 0.8.0 and 0.9.1 (tags v0.5.0, v0.8.0, v0.9.1) as a git repository, built from verl's
    published wheels by the h20 example's own script."""
    repo = tmp_path_factory.mktemp("verl") / "verl"
    env = {"PIP": f"{sys.executable} -m pip", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    script = Path(__file__).resolve().parents[1] / "examples" / "h20" / "make-verl-repo.sh"
    subprocess.run([script, repo], check=True, capture_output=True, env=env)
    return repo


@dataclass
class Workspace:
    """A real workspace directory whose cluster is the test's Ray cluster."""

    root: Path
    name: str
    address: str

    @property
    def shared(self) -> Path:
        return self.root / ".shared"

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
        return path

    def job(self, name: str, entrypoint: str | list[str], extra: str = "") -> Path:
        rendered = entrypoint if isinstance(entrypoint, str) else "[" + ", ".join(_quote(a) for a in entrypoint) + "]"
        body = f"kind: Job\nname: {name}\ncluster: local\nworkload: command\nentrypoint: {rendered}\n"
        return self.write(f"jobs/{name}.yaml", body + textwrap.dedent(extra).lstrip())

    def remove(self, rel: str) -> None:
        (self.root / rel).unlink()


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "''") + "'"


def make_workspace(root: Path, name: str, address: str) -> Workspace:
    ws = Workspace(root, name, address)
    ws.write("argus.yaml", f"kind: Workspace\nname: {name}\n")
    ws.write("cluster.yaml", f"""
        kind: Cluster
        name: local
        address: {address}
        shared_root: .shared
        job_defaults:
          entrypoint_num_cpus: 0.5
          entrypoint_resources: {{worker_node: 1}}
        """)
    return ws


@pytest.fixture
def workspace(tmp_path: Path, ray_cluster: local.LocalCluster, request: pytest.FixtureRequest):
    """A workspace named after the test, so tests on the shared cluster never own each other's jobs."""
    name = request.node.name.replace("_", "-").lower()[:40].strip("-")
    ws = make_workspace(tmp_path / "ws", name, ray_cluster.address)
    yield ws
    for job in jobs_of(ray_cluster.address, name):  # free the shared cluster's slots for later tests
        if job.status.value in ("PENDING", "RUNNING"):
            sdk(ray_cluster.address).stop_job(job.submission_id)


@dataclass
class Result:
    code: int
    out: str
    err: str


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


def sdk(address: str):
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(address)


def until(check: Callable[[], T], what: str, timeout: float = 60.0, every: float = 0.25) -> T:
    """Poll the condition itself until it holds (returns something truthy), and return that."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: still not so after {timeout:g}s")
        time.sleep(every)
    return value


def wait_for(address: str, submission_id: str, statuses: set[str], timeout: float = 120.0) -> str:
    """Until Ray reports one of `statuses`; a run that ends otherwise fails at once, saying how it ended."""
    client = sdk(address)
    last: list[str] = []

    def status_wanted() -> str | None:
        info = client.get_job_info(submission_id)
        status = str(info.status.value)
        last[:] = [f"{status} ({info.message})"]
        if status not in statuses and status in ("SUCCEEDED", "FAILED", "STOPPED"):
            raise AssertionError(f"{submission_id} ended {last[0]}, wanted {sorted(statuses)}")
        return status if status in statuses else None

    try:
        return until(status_wanted, f"{submission_id} in {sorted(statuses)}", timeout)
    except AssertionError as err:
        raise AssertionError(f"{err}; last seen {last[0] if last else 'nothing'}") from None


def jobs_of(address: str, workspace: str) -> list:
    return [j for j in sdk(address).list_jobs() if (j.metadata or {}).get("argus.workspace") == workspace]


SLEEP = ["python3", "-c", "import time; time.sleep(120)"]
QUICK = ["python3", "-c", "print('hello from argus')"]


def gated(gate: Path) -> list[str]:
    """A job that runs until the test creates `gate`: "finished between review and merge" without racing a sleep."""
    wait = f"[time.sleep(0.1) for _ in iter(lambda: os.path.exists({str(gate)!r}), True)]"
    return ["python3", "-c", f"import os, time; {wait}"]

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
