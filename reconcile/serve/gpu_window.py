"""The serve process's memory of GPU use: a bounded window of samples per run and per cluster, one per turn.

What a turn reads (state.ray.gpu_read) is a moment; the idle detector (reconcile.plan.health.idle, pure) wants
samples covering its policy's window, one at or before the window's start included, and the page's timelines the
last half hour. So each series keeps what is newer than WINDOW seconds plus the one sample just before; when a
series reaches MAX_SAMPLES its older half is thinned to every other sample (coverage kept, resolution halved), so
memory stays bounded whatever the interval. Runs and clusters not seen for a window are forgotten. Nothing here
reads Ray or the disk; a restart of serve starts the windows empty.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from state.ray.gpus import ClusterGpus

WINDOW = 7200.0
"""Seconds of samples kept: an idle policy's `for:` longer than this never has its window covered, so never fires
(the loop may build GpuWindows with the desired state's longest `for:` instead)."""
MAX_SAMPLES = 720
"""Per series, before its older half is thinned: 6 h of turns at the default 30 s interval."""



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
        series = table.setdefault(key, deque())
        if len(series) >= self.max_samples:  # thin the older half: the window stays covered, more coarsely
            half = len(series) // 2
            older = [s for i, s in enumerate(list(series)[:half]) if i % 2 == 0]
            table[key] = series = deque([*older, *list(series)[half:]])
        return series

    def _trim(self, now: float) -> None:
        """Drop what is older than the window, except the newest such sample (the detector's window start); forget
        a series whose every sample is older."""
        for table in (self._runs, self._clusters):
            for key in list(table):
                series = table[key]
                while len(series) > 1 and _at(series[1]) <= now - self.window:
                    series.popleft()
                if not series or _at(series[-1]) < now - self.window:
                    del table[key]


def _at(sample: tuple[float, float] | ClusterSample) -> float:
    return sample.at if isinstance(sample, ClusterSample) else sample[0]
