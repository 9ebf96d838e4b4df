"""GPU use per run for a large cluster (issue 38: a serve turn with 100 active runs stays bounded).

Prints the time to read one node summary of N nodes x 8 GPUs (JSON parse and validation, state.ray.gpus.node_gpus)
and to give 100 active runs their GPUs (use_by_run), against json.loads of the same answer alone (the least any
reader pays), and the worst a forged answer under the 64 MiB cap on any answer (state.ray.deadline) can cost:
    .venv/bin/python bench/gpu_use_bench.py [nodes]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from state.observed import RayJob  # noqa: E402
from state.ray.gpus import node_gpus, use_by_run  # noqa: E402

RUNS = 100


def main() -> None:
    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 250
    text, jobs, actors = _cluster(nodes)
    parse = _best(lambda: json.loads(text))
    read = _best(lambda: use_by_run("c", jobs, node_gpus(json.loads(text)), actors))
    print(f"{nodes} nodes x 8 GPUs, {RUNS} active runs: read and attribute {read * 1000:.1f} ms, json.loads alone "
          f"{parse * 1000:.1f} ms, ratio {read / parse:.1f}x")
    forged = json.dumps({"data": {"summary": [_node(f"{n:056x}", 64, 300, n, short=True) for n in range(128)]}},
                        separators=(",", ":"))
    worst = _best(lambda: use_by_run("c", jobs, node_gpus(json.loads(forged)), actors), tries=2)
    print(f"forged answer ({len(forged) / 2**20:.0f} MiB, 8,192 GPUs of 300 processes): {worst * 1000:.0f} ms")


def _cluster(nodes: int) -> tuple[str, list[RayJob], list[dict]]:
    summary = [_node(f"{n:056x}", 8, 2, n) for n in range(nodes)]
    labels = {"argus.workspace": "w", "argus.spec_hash": "0" * 64, "argus.attempt": "1", "argus.commit": "c",
              "argus.plan": "p"}
    jobs = [RayJob(submission_id=f"w.j{r}.000000000000.1", status="RUNNING", ray_job_id=f"{r + 1:08x}",
                   metadata={**labels, "argus.job": f"j{r}"}) for r in range(RUNS)]
    actors = [{"job_id": f"{(n * 8 + g) % RUNS + 1:08x}", "pid": 1000 + n * 16 + g, "node_id": f"{n:056x}",
               "state": "ALIVE"} for n in range(nodes) for g in range(8)]
    return json.dumps({"data": {"summary": summary}}), jobs, actors


def _node(node_id: str, gpus: int, processes: int, n: int, short: bool = False) -> dict:
    def process(pid: int) -> dict:
        return {"pid": pid} if short else {"pid": pid, "gpuMemoryUsage": 10}

    return {"raylet": {"nodeId": node_id}, "gpus": [
        {"index": g, "name": "H20", "uuid": f"u{g}", "utilizationGpu": 50, "memoryUsed": 1024, "memoryTotal": 81920,
         "processesPids": [process(1000 + n * 16 + g + p) for p in range(processes)]} for g in range(gpus)]}


def _best(call, tries: int = 5) -> float:
    times = []
    for _ in range(tries):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


if __name__ == "__main__":
    main()
