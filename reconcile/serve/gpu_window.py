"""The serve process's memory of GPU use: a bounded window of samples per run and per cluster, one per turn.

What a turn reads (state.ray.gpu_read) is a moment; an idle detector (reconcile.plan's, pure) and the page's
timelines want the last half hour. Samples older than WINDOW seconds are dropped, and at most MAX_SAMPLES are
kept per series whatever the interval, so memory stays bounded; runs and clusters not seen for a window are
forgotten. Nothing here reads Ray or the disk; a restart of serve starts the windows empty.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from state.ray.gpus import ClusterGpus

WINDOW = 1800.0
"""Seconds of samples kept: the idle detector's longest window."""
MAX_SAMPLES = 720
"""Per series: one sample every 2.5 s over the window at most (turns come every 30 s by default)."""


@dataclass(frozen=True)
class ClusterSample:
    at: float
    gpus: int
    busy: int
    utilization: float | None
    """The mean over the cluster's GPUs that report one."""


@dataclass(frozen=True)
class GpuHistory:
    """A copy of the windows at one moment: what reports carry (they are read on other threads)."""

    runs: Mapping[str, tuple[tuple[float, float], ...]]
    """By submission id: (epoch seconds, mean utilisation %) samples, oldest first. A sample is taken only when the
    run's GPUs reported a utilisation: an unknown moment is a gap, never a 0 that would look idle."""
    clusters: Mapping[str, tuple[ClusterSample, ...]]


class GpuWindows:
    def __init__(self, window: float = WINDOW, max_samples: int = MAX_SAMPLES) -> None:
        self.window, self.max_samples = window, max_samples
        self._runs: dict[str, deque[tuple[float, float]]] = {}
        self._clusters: dict[str, deque[ClusterSample]] = {}
        self._lock = threading.Lock()

    def add(self, use: Mapping[str, ClusterGpus], now: float) -> GpuHistory:
        """Take this turn's samples, drop what fell out of the window, and return a copy."""
        with self._lock:
            for name, cluster in use.items():
                if not cluster.known:
                    continue
                known = [g.utilization for g in cluster.gpus if g.utilization is not None]
                self._series(self._clusters, name).append(ClusterSample(
                    at=now, gpus=len(cluster.gpus), busy=cluster.busy,
                    utilization=sum(known) / len(known) if known else None))
                for sid, run in cluster.runs.items():
                    if run.utilization is not None:
                        self._series(self._runs, sid).append((now, run.utilization))
            self._trim(now)
            return self.history()

    def history(self) -> GpuHistory:
        return GpuHistory(runs={k: tuple(v) for k, v in self._runs.items()},
                          clusters={k: tuple(v) for k, v in self._clusters.items()})

    def _series(self, table: dict, key: str) -> deque:
        return table.setdefault(key, deque(maxlen=self.max_samples))

    def _trim(self, now: float) -> None:
        for table in (self._runs, self._clusters):
            for key in list(table):
                series = table[key]
                while series and _at(series[0]) < now - self.window:
                    series.popleft()
                if not series:
                    del table[key]


def _at(sample: tuple[float, float] | ClusterSample) -> float:
    return sample.at if isinstance(sample, ClusterSample) else sample[0]
