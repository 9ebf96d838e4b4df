"""What one trivial Ray job costs on this machine: the floor under every test that runs a job on the
real cluster (why `make test` cannot shrink much below its count of jobs times this).

    .venv/bin/python bench/ray_job_cost.py [jobs]

Starts the tests' kind of cluster (head + a worker_node worker, state.ray.local) on loopback, measures
its idle CPU for a few seconds, then submits `jobs` jobs one after another through Ray's own SDK, each
`python3 -c print` with the tests' job defaults, and waits for each to succeed. Prints the wall time
and the machine's CPU time per job, the idle cluster's CPU already taken out, and the cost of
starting and stopping the cluster. Tears down only the cluster it started.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from state.ray import local  # noqa: E402

TICKS = 100  # jiffies per second (USER_HZ)


def busy_seconds() -> float:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / TICKS


def main(jobs: int) -> None:
    from ray.job_submission import JobStatus, JobSubmissionClient

    state_dir = Path(tempfile.mkdtemp(prefix="argus-job-cost-"))
    began = time.monotonic()
    cluster = local.up(state_dir, dashboard_port=local._free_port(), cpus_per_node=8,
                       worker_resources={"worker_node": 8.0})
    started = time.monotonic() - began
    try:
        client = JobSubmissionClient(cluster.address)
        time.sleep(3)  # the start's own work settles
        idle_cpu, idle_wall = busy_seconds(), time.monotonic()
        time.sleep(5)
        idle_rate = (busy_seconds() - idle_cpu) / (time.monotonic() - idle_wall)
        cpu, wall = busy_seconds(), time.monotonic()
        for n in range(jobs):
            job = client.submit_job(entrypoint="python3 -c \"print('hello from argus')\"",
                                    submission_id=f"cost-{n}", entrypoint_num_cpus=0.5,
                                    entrypoint_resources={"worker_node": 1})
            while client.get_job_status(job) not in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
                time.sleep(0.05)
        wall = time.monotonic() - wall
        cpu = busy_seconds() - cpu - idle_rate * wall
    finally:
        began = time.monotonic()
        local.down(state_dir)
        stopped = time.monotonic() - began
    print(f"cluster up {started:.1f} s, down {stopped:.1f} s; idle cluster {idle_rate:.2f} CPU")
    print(f"{jobs} jobs one after another: {wall / jobs:.2f} s wall and {cpu / jobs:.2f} s CPU each "
          f"(this machine has 2 cores)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
