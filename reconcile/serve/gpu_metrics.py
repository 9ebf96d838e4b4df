"""The GPU series of `/metrics` (reconcile.serve.metrics builds them at each scrape from each workspace's newest
report): a run's GPU use and memory, GPUs busy per workspace and cluster beside argus_gpus_held, and each
cluster's GPUs. A cluster whose GPU use was unknown this turn exports none of them: no series beats a wrong 0."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client.core import GaugeMetricFamily

GPU_SERIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "run_gpu_util": ("argus_run_gpu_utilization", "Mean utilisation (%) of the GPUs a run's processes are on, as "
                     "Ray's reporter agents last saw them.", ("workspace", "cluster", "job", "run")),
    "run_gpu_mem": ("argus_run_gpu_memory_bytes", "GPU memory used on the GPUs a run's processes are on.",
                    ("workspace", "cluster", "job", "run")),
    "run_gpus": ("argus_run_gpus", "GPUs a run's processes are on.", ("workspace", "cluster", "job", "run")),
    "busy": ("argus_gpus_busy", "GPUs at 5% use or more that the runs of each workspace are on, every workspace's "
             "argus runs counted.", ("workspace", "cluster")),
    "cluster_gpus": ("argus_cluster_gpus", "GPUs the cluster's reporter agents report.", ("cluster",)),
    "cluster_busy": ("argus_cluster_gpus_busy", "GPUs of the cluster at 5% use or more, whoever uses them.",
                     ("cluster",)),
}


def add_gpu(f: dict[str, GaugeMetricFamily], reports: Iterable[Any]) -> None:
    """From the newest report of each workspace: its own runs' series; busy and cluster series merged (two
    workspaces on one cluster read the same GPUs: one series each, the later read kept)."""
    clusters: dict[str, Any] = {}
    for report in reports:
        for name, cluster in sorted(report.gpu_use.items()):
            if not cluster.known:
                continue
            clusters[name] = cluster
            for sid, run in sorted(cluster.runs.items()):
                if run.workspace != report.workspace:
                    continue
                labels = [report.workspace, name, run.job, sid]
                f["run_gpus"].add_metric(labels, len(run.gpus))
                f["run_gpu_mem"].add_metric(labels, run.memory_used)
                if run.utilization is not None:
                    f["run_gpu_util"].add_metric(labels, run.utilization)
    for name, cluster in sorted(clusters.items()):
        f["cluster_gpus"].add_metric([name], len(cluster.gpus))
        f["cluster_busy"].add_metric([name], cluster.busy)
        for workspace, busy in sorted(cluster.busy_by_workspace().items()):
            f["busy"].add_metric([workspace, name], busy)
