"""The test's Ray clusters: starting one, asking Ray (through its own SDK, the independent witness), and
polling until something holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from state.ray import local

T = TypeVar("T")

SLEEP = ["python3", "-c", "import time; time.sleep(120)"]
QUICK = ["python3", "-c", "print('hello from argus')"]


def start_cluster(state_dir: Path) -> local.LocalCluster:
    # Logical CPUs and worker_node slots above the machine's 2 cores: test drivers mostly sleep.
    return local.up(state_dir, dashboard_port=local._free_port(), cpus_per_node=8,
                    worker_resources={"worker_node": 8.0})


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


def gated(gate: Path) -> list[str]:
    """A job that runs until the test creates `gate`: "finished between review and merge" without racing a sleep."""
    wait = f"[time.sleep(0.1) for _ in iter(lambda: os.path.exists({str(gate)!r}), True)]"
    return ["python3", "-c", f"import os, time; {wait}"]
