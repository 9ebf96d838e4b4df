"""The GPU series of /metrics (reconcile.serve.gpu_metrics), from plain reports: a workspace exports its own runs'
use, busy GPUs per workspace merge across the loops of one serve, and an unknown cluster exports nothing (no series
beats a wrong 0)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from reconcile.serve.metrics import Metrics
from state.ray.gpus import MIB, ClusterGpus, Gpu, RunGpus
from tests.support.status_page import report


def _gpu(index: int, util: float | None) -> Gpu:
    return Gpu(node_id="ab", index=index, name="H20", utilization=util, memory_used=1024 * MIB,
               memory_total=2048 * MIB, pids=frozenset({index + 10}))


def _samples(metrics: Metrics) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(metrics.exposition().decode()) for s in family.samples}


def test_runs_busy_and_cluster_series_and_nothing_for_an_unknown_cluster():
    ours = RunGpus(submission_id="llm-rl.ppo.1", workspace="llm-rl", job="ppo", gpus=(_gpu(0, 80), _gpu(1, 2)))
    theirs = RunGpus(submission_id="vision.vit.1", workspace="vision", job="vit", gpus=(_gpu(2, 50),))
    use = {"gpu": ClusterGpus("gpu", gpus=(_gpu(0, 80), _gpu(1, 2), _gpu(2, 50), _gpu(3, None)),
                              runs={ours.submission_id: ours, theirs.submission_id: theirs}),
           "down": ClusterGpus("down", problem="the dashboard answered 404")}
    metrics = Metrics()
    metrics.record(report(gpu_use=use))
    got = _samples(metrics)
    run = (("cluster", "gpu"), ("job", "ppo"), ("run", "llm-rl.ppo.1"), ("workspace", "llm-rl"))
    assert got[("argus_run_gpu_utilization", run)] == 41.0
    assert got[("argus_run_gpu_memory_bytes", run)] == 2 * 2**30 and got[("argus_run_gpus", run)] == 2
    assert not any(k[0].startswith("argus_run_gpu") and ("workspace", "vision") in k[1] for k in got)
    assert got[("argus_gpus_busy", (("cluster", "gpu"), ("workspace", "llm-rl")))] == 1
    assert got[("argus_gpus_busy", (("cluster", "gpu"), ("workspace", "vision")))] == 1
    assert got[("argus_cluster_gpus", (("cluster", "gpu"),))] == 4
    assert got[("argus_cluster_gpus_busy", (("cluster", "gpu"),))] == 2
    assert not any(("cluster", "down") in k[1] for k in got if "gpu" in k[0])
