"""`argus apply` of N new jobs against a bare sequential `submit_job` loop over N, in the same run.

Target (issue 16): `argus apply --auto-approve` of 100 new jobs, process start-up included, takes
no longer than a loop of `JobSubmissionClient(address).submit_job(...)` over the same 100 (ratio
apply/loop <= 1.0). Two loops are measured: as a script of its own (a new process importing Ray's
client, start-up included like argus's), and in this process with the client already imported (the
stricter baseline). Every measurement gets a fresh Ray cluster on loopback (killed afterwards: only what
this script started), since 100 trivial drivers take minutes to drain on a small machine and would
load the next measurement; within one, each side bears the load of its own drivers starting.
    .venv/bin/python bench/apply_bench.py [jobs] [rounds] [--profile]
--profile also applies one more workspace under cProfile and prints where argus spends its time
(its main thread: the submitting threads show best under `py-spy record --idle`).

Where an apply of 100 new jobs goes (2026-11-24, 2 cores, each run separately): start-up to the first
submit ~0.5 s (the CLI's and apply's imports ~0.4 s, load, observe and plan ~0.1 s; argus speaks Ray's
Jobs REST API itself, state/ray/jobs_api.py, and never imports Ray, whose import costs the loop 0.6-0.9 s),
the concurrent submits ~2.8 s, the records brought up to date ~0.1 s, the interpreter's exit ~0.05 s
(~0.2 s before what the command made was frozen out of its last collection). Eight bare concurrent
submits of the same 100 take ~1.7 s, a bare sequential loop ~2.5-3.5 s: what argus adds to each submit
(its records on the shared root, the status made durable before and after, the audit record) costs ~1 s
over the batch. Audit appends are shared by the threads (state/audit/group_commit.py: eight threads queued on
one append at a time before), copies kept for people are not fsynced, and the job list kept after the
apply is one file linked into each run's directory. Ratios measured (apply / the loop as a script,
median of 3): 1.41 at the start of the day, 1.11-1.16 with Ray's client imported, 0.86-0.88 without
(against the loop in this process, Ray's client already imported: 1.06-1.25).
"""

from __future__ import annotations

import contextlib
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from state.ray import local  # noqa: E402

ARGUS = Path(sys.executable).with_name("argus")
DRIVER_CPUS = 0.05
"""Tiny: 100 drivers fit the worker's 8 CPUs, so admission starts every job (none is queued)."""
DRIVER_SLOTS = 128.0
"""worker_node slots on the worker: room for every driver, so admission starts all the jobs."""


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    jobs = int(args[0]) if args else 100
    rounds = int(args[1]) if len(args) > 1 else 3
    with tempfile.TemporaryDirectory() as tmp:
        bare, applied = _measure(Path(tmp), jobs, rounds)
        if "--profile" in sys.argv:
            with _cluster(Path(tmp) / "cluster-profile") as address:
                _profile(Path(tmp), address, jobs)
    b, s = statistics.median(x for x, _ in bare), statistics.median(y for _, y in bare)
    a = statistics.median(applied)
    print(f"{jobs} new jobs, median of {rounds}: argus apply (start-up included) {a:.2f} s; a submit_job loop "
          f"as a script (start-up included) {s:.2f} s, ratio {a / s:.2f}; the loop in this process, Ray's client "
          f"imported {b:.2f} s, ratio {a / b:.2f} (target <= 1.0)")


def _measure(root: Path, jobs: int, rounds: int) -> tuple[list[tuple[float, float]], list[float]]:
    bare, applied = [], []
    for r in range(rounds):  # interleaved, so drift of the noisy machine hits both alike
        with _cluster(root / f"cluster-bare{r}") as address:
            inside = _bare_loop(address, f"bare{r}", jobs)
        with _cluster(root / f"cluster-script{r}") as address:
            bare.append((inside, _script_loop(address, f"script{r}", jobs)))
        with _cluster(root / f"cluster-apply{r}") as address:
            applied.append(_apply(_workspace(root / f"ws{r}", address, f"bench{r}", jobs)))
        print(f"round {r + 1}: loop {bare[-1][0]:.2f} s, as a script {bare[-1][1]:.2f} s, apply {applied[-1]:.2f} s",
              flush=True)
    return bare, applied


def _bare_loop(address: str, prefix: str, jobs: int) -> float:
    from ray.job_submission import JobSubmissionClient

    started = time.perf_counter()
    client = JobSubmissionClient(address)
    for i in range(jobs):
        client.submit_job(entrypoint="true", submission_id=f"{prefix}-{i}", entrypoint_num_cpus=DRIVER_CPUS,
                          entrypoint_resources={"worker_node": 1})
    return time.perf_counter() - started


SCRIPT = """
import sys
from ray.job_submission import JobSubmissionClient
address, prefix, jobs, cpus = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
client = JobSubmissionClient(address)
for i in range(jobs):
    client.submit_job(entrypoint="true", submission_id=f"{prefix}-{i}", entrypoint_num_cpus=cpus,
                      entrypoint_resources={"worker_node": 1})
"""


def _script_loop(address: str, prefix: str, jobs: int) -> float:
    """The loop someone would write instead of argus: its own process, start-up included."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", SCRIPT, address, prefix, str(jobs), str(DRIVER_CPUS)], check=True,
                   env=_env())
    return time.perf_counter() - started


def _apply(workspace: Path, *prefix: str) -> float:
    started = time.perf_counter()
    done = subprocess.run([*prefix, str(ARGUS), "apply", str(workspace), "--auto-approve"], capture_output=True,
                          text=True, env=_env())
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"argus apply failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed


def _profile(root: Path, address: str, jobs: int) -> None:
    workspace = _workspace(root / "ws-profile", address, "bench-profile", jobs)
    stats = root / "apply.prof"
    _apply(workspace, sys.executable, "-m", "cProfile", "-o", str(stats))
    pstats.Stats(str(stats)).sort_stats("cumulative").print_stats(30)


@contextlib.contextmanager
def _cluster(state_dir: Path) -> Iterator[str]:
    cluster = local.up(state_dir, dashboard_port=local._free_port(), cpus_per_node=8,
                       worker_resources={"worker_node": DRIVER_SLOTS})
    try:
        yield cluster.address
    finally:
        local.down(state_dir)


def _workspace(path: Path, address: str, name: str, jobs: int) -> Path:
    (path / "jobs").mkdir(parents=True)
    (path / "argus.yaml").write_text(f"kind: Workspace\nname: {name}\n")
    (path / "cluster.yaml").write_text(f"kind: Cluster\nname: local\naddress: {address}\nshared_root: .shared\n"
                                       f"job_defaults: {{entrypoint_num_cpus: {DRIVER_CPUS}, entrypoint_resources: "
                                       "{worker_node: 1}}\n")
    for i in range(jobs):
        (path / "jobs" / f"j{i}.yaml").write_text(f"kind: Job\nname: j{i}\ncluster: local\nworkload: command\n"
                                                  "entrypoint: 'true'\n")
    return path


def _env() -> dict[str, str]:
    unset = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "ARGUS_AUDIT_KEY")
    return {k: v for k, v in os.environ.items() if k not in unset} | {"RAY_USAGE_STATS_ENABLED": "0"}


if __name__ == "__main__":
    main()
