"""One turn of `argus serve` against one `argus plan`, on a workspace of many jobs, in the same run.

Target (issue 14): a steady-state turn (nothing to change) costs at most what `argus plan` costs.
Starts its own local Ray cluster on loopback and stops it. Prints both medians and their ratio:
    .venv/bin/python bench/serve_turn.py [jobs] [rounds]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cli_runs import quiet  # noqa: E402
from state.ray import local  # noqa: E402

RUNNING = 20
"""Jobs that really ran (and finished): the rest are `state: stopped`, as most of a big workspace is."""


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cluster = local.up(root / "cluster", dashboard_port=local._free_port(), cpus_per_node=8,
                           worker_resources={"worker_node": 8.0})
        try:
            workspace = _workspace(root / "ws", cluster.address, jobs)
            quiet(["apply", str(workspace), "--auto-approve"])
            time.sleep(20)  # the few real runs finish
            quiet(["apply", str(workspace), "--auto-approve"])  # records settled: the steady state
            plan, turn = [], []
            for _ in range(rounds):  # interleaved, so drift of the noisy machine hits both alike
                plan.append(_timed(["plan", str(workspace)]))
                turn.append(_timed(["serve", str(workspace), "--once"]))
        finally:
            local.down(root / "cluster")
    p, t = statistics.median(plan), statistics.median(turn)
    print(f"{jobs} jobs ({RUNNING} with runs), median of {rounds}: plan {p:.2f} s, serve turn {t:.2f} s, "
          f"ratio turn/plan {t / p:.2f} (target <= 1.0 plus noise)")


def _workspace(path: Path, address: str, jobs: int) -> Path:
    (path / "jobs").mkdir(parents=True)
    (path / "argus.yaml").write_text("kind: Workspace\nname: bench\n")
    (path / "cluster.yaml").write_text(f"kind: Cluster\nname: local\naddress: {address}\nshared_root: .shared\n"
                                       "job_defaults: {entrypoint_num_cpus: 0.1, entrypoint_resources: "
                                       "{worker_node: 0.1}}\n")
    for i in range(jobs):
        state = "running" if i < RUNNING else "stopped"
        (path / "jobs" / f"j{i}.yaml").write_text(f"kind: Job\nname: j{i}\ncluster: local\nworkload: command\n"
                                                  f"entrypoint: [python3, -c, 'print({i})']\nstate: {state}\n")
    return path


def _timed(args: list[str]) -> float:
    started = time.perf_counter()
    quiet(args)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
