"""`argus apply` of N new jobs against a bare sequential `submit_job` loop over N, in the same run.

Target (issue 26): `argus apply --auto-approve` of 100 new jobs, process start-up included, takes at
most half a loop of `JobSubmissionClient(address).submit_job(...)` over the same 100 run as a script
of its own (a new process importing Ray's client, start-up included like argus's): ratio apply/loop
<= 0.5 (issue 16 asked for 1.0). Also measured: the loop in this process with the client already
imported (the stricter baseline), and eight bare concurrent submits in this process, as argus sends
them: the least any client of this cluster could take, which bounds what argus can reach. Every
measurement gets a fresh Ray cluster on loopback (killed afterwards: only what this script started),
since 100 trivial drivers take minutes to drain on a small machine and would load the next
measurement; within one, each side bears the load of its own drivers starting. Rounds interleave the
sides, so the machine's drift hits them alike; each ratio is the median of the rounds' own (the sides of
one round are measured minutes apart at most). argus's modules are compiled first, as installing a
package compiles them (and as Ray's were; bench/plan_scale.py says why).
    .venv/bin/python bench/apply_bench.py [jobs] [rounds] [--profile]
--profile also applies one more workspace under cProfile and prints where argus spends its time
(its main thread: the submitting threads show best under `py-spy record --idle`).

Why 0.5 is not met, and cannot be by a client that submits each job: Ray's job server sets the pace.
On a quiet machine (2026-11-26, 5 rounds) the loop as a script took 4.6-5.1 s and eight bare concurrent
submits, with nothing of argus's, 2.7-2.9 s (0.56 of the loop); 16 or 32 threads took 2.4-2.7 s, so
half the loop is about the least any client gets from this cluster. argus apply took 4.2-4.4 s, 1.53x
the bare concurrent submits: its start-up (imports, load, observe, plan: a plan of 100 jobs alone takes
~0.65 s of CPU) and, per submit, its records on the shared root, the status made durable before and
after, and the audit record. Apply / loop as a script: 0.88 there (rounds 0.82-0.91), 1.04 in a run
under some load (0.80-1.05; bare concurrent 0.68 of the loop, apply 1.34x it), MISS; against the loop
in this process 1.16-1.29. Under heavy load (other people's test suites) the sequential loop suffers
more than concurrent submits and the ratio swings (0.56-0.99 in three such runs of 3 rounds that day).

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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apply_floor import argus_bodies  # noqa: E402
from plan_scale import compile_argus  # noqa: E402

from state.ray import local  # noqa: E402

ARGUS = Path(sys.executable).with_name("argus")
DRIVER_CPUS = 0.05
"""Tiny: 100 drivers fit the worker's 8 CPUs, so admission starts every job (none is queued)."""
DRIVER_SLOTS = 128.0
"""worker_node slots on the worker: room for every driver, so admission starts all the jobs."""


TARGET = 0.5
"""argus apply at most this fraction of the bare loop run as a script."""
FLOOR_TARGET = 1.15
"""argus apply (start-up included) at most this multiple of the floor: its own bodies submitted bare (issue 41)."""
THREADS = 8
"""Concurrent submits, as argus sends them (reconcile/execute/batch.py, WORKERS)."""
WIDE = 16
"""The floor again at this concurrency: whether Ray's job server would take argus's bodies faster."""
IN_PROCESS, AS_SCRIPT, CONCURRENT, APPLIED, FLOOR, FLOOR_WIDE = range(6)
"""A round's times, in this order: the loop in this process, as a script, concurrent submits, argus apply,
argus's bodies submitted bare THREADS at a time, and WIDE at a time."""


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    jobs = int(args[0]) if args else 100
    rounds = int(args[1]) if len(args) > 1 else 3
    compile_argus()
    with tempfile.TemporaryDirectory() as tmp:
        measured = _measure(Path(tmp), jobs, rounds)
        if "--profile" in sys.argv:
            with _cluster(Path(tmp) / "cluster-profile") as address:
                _profile(Path(tmp), address, jobs)
    _report(jobs, measured)


def _report(jobs: int, measured: list[tuple[float, ...]]) -> None:
    loop, script, concurrent, applied, floor, wide = (statistics.median(r[i] for r in measured) for i in range(6))
    over, over_wide = _median_ratio(measured, APPLIED, FLOOR), _median_ratio(measured, APPLIED, FLOOR_WIDE)
    print(f"{jobs} new jobs, median of {len(measured)}: the floor, argus's own bodies submitted bare {THREADS} at a "
          f"time, {floor:.2f} s ({WIDE} at a time {wide:.2f} s); argus apply (start-up included) {applied:.2f} s; "
          f"apply / floor, the median of each round's own, {over:.2f} (/ the floor at {WIDE}: {over_wide:.2f}), "
          f"target <= {FLOOR_TARGET}: {'PASS' if over <= FLOOR_TARGET else 'MISS'}")
    ratio = _median_ratio(measured, APPLIED, AS_SCRIPT)
    print(f"  older ratios: a bare submit_job loop as a script (start-up included) {script:.2f} s; apply / loop, the "
          f"median of each round's own, {ratio:.2f}, target <= {TARGET}: {'PASS' if ratio <= TARGET else 'MISS'}")
    sides = ((APPLIED, IN_PROCESS), (CONCURRENT, AS_SCRIPT), (APPLIED, CONCURRENT))
    inside, bound, trivial = (_median_ratio(measured, *pair) for pair in sides)
    print(f"  against the loop in this process, Ray's client imported ({loop:.2f} s): {inside:.2f}; {THREADS} bare "
          f"concurrent submits of `true` in this process ({concurrent:.2f} s): {bound:.2f} of the loop as a "
          f"script, and argus apply {trivial:.2f}x them")


def _median_ratio(measured: list[tuple[float, ...]], top: int, bottom: int) -> float:
    """The median over the rounds of one side's time over another's, each measured in the same round."""
    return statistics.median(r[top] / r[bottom] for r in measured)


def _measure(root: Path, jobs: int, rounds: int) -> list[tuple[float, ...]]:
    """Each round's times (IN_PROCESS, AS_SCRIPT, CONCURRENT, APPLIED, FLOOR, FLOOR_WIDE)."""
    measured = []
    for r in range(rounds):  # interleaved, so drift of the noisy machine hits every side alike
        with _cluster(root / f"cluster-bare{r}") as address:
            inside = _bare_loop(address, f"bare{r}", jobs)
        with _cluster(root / f"cluster-script{r}") as address:
            script = _script_loop(address, f"script{r}", jobs)
        with _cluster(root / f"cluster-concurrent{r}") as address:
            concurrent = _concurrent(address, f"concurrent{r}", jobs)
        with _cluster(root / f"cluster-apply{r}") as address:
            applied = _apply(_workspace(root / f"ws{r}", address, f"bench{r}", jobs))
        with _cluster(root / f"cluster-floor{r}") as address:
            floor = _floor(address, root / f"fl{r}", f"bench{r}", jobs, THREADS)
        with _cluster(root / f"cluster-wide{r}") as address:
            wide = _floor(address, root / f"fw{r}", f"bench{r}", jobs, WIDE)
        measured.append((inside, script, concurrent, applied, floor, wide))
        print(f"round {r + 1}: loop {inside:.2f} s, as a script {script:.2f} s, {THREADS} concurrent "
              f"{concurrent:.2f} s, floor {floor:.2f} s ({WIDE} at a time {wide:.2f} s), apply {applied:.2f} s; "
              f"apply / floor {applied / floor:.2f}, apply / loop as a script {applied / script:.2f}", flush=True)
    return measured


def _bare_loop(address: str, prefix: str, jobs: int) -> float:
    from ray.job_submission import JobSubmissionClient

    started = time.perf_counter()
    client = JobSubmissionClient(address)
    for i in range(jobs):
        client.submit_job(entrypoint="true", submission_id=f"{prefix}-{i}", entrypoint_num_cpus=DRIVER_CPUS,
                          entrypoint_resources={"worker_node": 1})
    return time.perf_counter() - started


def _concurrent(address: str, prefix: str, jobs: int) -> float:
    """The same submits, THREADS at a time, a client per thread: how fast this cluster takes them at all."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from ray.job_submission import JobSubmissionClient

    clients = threading.local()

    def submit(i: int) -> None:
        if not hasattr(clients, "client"):
            clients.client = JobSubmissionClient(address)
        clients.client.submit_job(entrypoint="true", submission_id=f"{prefix}-{i}", entrypoint_num_cpus=DRIVER_CPUS,
                                  entrypoint_resources={"worker_node": 1})

    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(submit, range(jobs)))
    return time.perf_counter() - started


def _floor(address: str, workspace: Path, name: str, jobs: int, threads: int) -> float:
    """argus's own bodies (bench/apply_floor.py), `threads` at a time, a client per thread, nothing of argus:
    the least an apply of these jobs can take from this cluster."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from ray.job_submission import JobSubmissionClient

    bodies = argus_bodies(workspace / ".shared", name, jobs, DRIVER_CPUS)
    clients = threading.local()

    def submit(body: dict[str, Any]) -> None:
        if not hasattr(clients, "client"):
            clients.client = JobSubmissionClient(address)
        clients.client.submit_job(**body)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(submit, bodies))
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
