"""Admission decisions for a long queue (issue 15 target: 1,000 queued jobs under 0.1 s).

Prints the time of one `decide` over N queued jobs on a 2 x 8-GPU cluster, and its ratio to
sorting the same queue (the least any ordered queue costs), both measured in this run:
    .venv/bin/python bench/admission_bench.py [jobs]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reconcile.plan.admission import decide, order  # noqa: E402
from reconcile.plan.placement import Demand, Entry  # noqa: E402

NODES = [{"GPU": 8.0, "CPU": 96.0}, {"GPU": 8.0, "CPU": 96.0}]


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    queue = [Entry(key=f"ws{i % 7}/j{i}", workspace=f"ws{i % 7}", priority=i % 3, arrived=float(i),
                   demand=Demand(bundles=tuple({"GPU": 4.0, "CPU": 24.0} for _ in range(1 + i % 2)),
                                 driver={"CPU": 1.0})) for i in range(jobs)]
    baseline = _best(lambda: order(queue))
    decided = _best(lambda: decide(queue, NODES, quotas={"ws1": {"GPU": 8.0}}))
    print(f"{jobs} queued jobs: decide {decided * 1000:.1f} ms (target < 100 ms), sorting alone "
          f"{baseline * 1000:.2f} ms, ratio {decided / baseline:.0f}x")
    # The head preempts: 16 one-GPU preemptible runs hold the cluster, a 16-GPU job of higher priority waits.
    held = [Entry(key=f"ws{i % 7}/held{i}", workspace=f"ws{i % 7}", arrived=float(i), admitted=True,
                  preemptible=True, demand=Demand(bundles=({"GPU": 1.0, "CPU": 6.0},))) for i in range(16)]
    urgent = Entry(key="ws0/urgent", workspace="ws0", priority=10, arrived=0.0,
                   demand=Demand(bundles=({"GPU": 8.0, "CPU": 48.0}, {"GPU": 8.0, "CPU": 48.0})))
    preempting = _best(lambda: decide([*held, urgent, *queue], NODES))
    print(f"{jobs} queued jobs behind a head that preempts 16 runs: decide {preempting * 1000:.1f} ms "
          f"(target < 100 ms), ratio to sorting {preempting / baseline:.0f}x")


def _best(work, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


if __name__ == "__main__":
    main()
