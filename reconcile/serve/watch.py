"""Between turns of `argus serve`: a cheap watch of each cluster that starts the next turn early.

What it polls: Ray's job list, `GET /api/jobs/` (the request a turn makes to observe a cluster), once
per cluster every `every` seconds. Ray 2.x's dashboard offers no cheaper signal: no job event
stream, long poll or ETag; the state API's `/api/v0/jobs` reads the same table and filters it after.
A job that ends, fails or is stopped, or leaves the table while it ran, wakes the loop: any job's,
any workspace's, since any run that ends frees room for the queue, and one of ours that fails is
told at once. So does a run of this workspace that starts while one of its jobs has a max_runtime: the
turn learns the run's deadline, and the loop wakes for it (reconcile.serve.loop).
While this workspace has jobs waiting on a cluster, each tick also reads Ray's report
of what is in use (`GET /api/cluster_status`, which admission reads): it trails the job table by 2-5 s
(Ray's autoscaler monitor writes it every ~5 s; measured on Ray 2.60), so the turn a job's end woke may
still find the room taken; the report's drop wakes the one that admits.

It changes nothing and decides nothing: it only wakes the loop, whose turn observes, plans and acts
as every turn does, under the same lock and lease. It polls only while the loop is active (a standby
holds no lease and does not act). A cluster that does not answer is polled again after a backoff
that doubles up to MAX_BACKOFF: a failing dashboard never makes it spin. Nothing a dashboard answers
reaches the log: a job table is hostile input, and the turn reports what it finds.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconcile.report import TurnReport
from specs.errors import ArgusError

EVERY = 1.0
"""Default seconds between two polls of a cluster (`argus serve --watch`)."""
MIN_WATCH = 0.2
"""The shortest time between polls `--watch` accepts: at most five polls of a cluster a second."""
REQUEST_TIMEOUT = 3.0
"""A poll waits no longer for an answer: a slow dashboard delays the watch, never the loop."""
MAX_BACKOFF = 60.0
ACTIVE = frozenset({"PENDING", "RUNNING"})
LEFT_OUT = frozenset({"memory", "objectStoreMemory", "object_store_memory"})
"""Resources in use that move all the time and that no job's demand names."""


def ended(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Jobs that ended between two reads of a job table: a status that became final, a final one
    not seen before (it began and ended between the reads), or a job that ran and is gone."""
    changed = [job for job, status in after.items() if status not in ACTIVE and before.get(job) != status]
    gone = [job for job, status in before.items() if status in ACTIVE and job not in after]
    return sorted(changed + gone)


def started(before: Mapping[str, str], after: Mapping[str, str], workspace: str | None) -> list[str]:
    """This workspace's jobs active now that were not before (none without a workspace to watch for)."""
    from state.runs.index import belongs

    if workspace is None:
        return []
    return sorted(job for job, status in after.items()
                  if status in ACTIVE and before.get(job) not in ACTIVE and belongs(job, workspace))


def freed(before: Mapping[str, float], after: Mapping[str, float], names: frozenset[str]) -> list[str]:
    """The resources among `names` of which less is in use now than before."""
    return sorted(name for name in names if after.get(name, 0.0) < before.get(name, 0.0) - 1e-9)


def waiting_resources(report: TurnReport) -> dict[str, frozenset[str]]:
    """By cluster: the resources this workspace's waiting jobs ask for, as Ray's usage report names them."""
    from reconcile.views.queue import queued
    from state.ray.client import camel

    found: dict[str, set[str]] = {}
    for _job, info in queued(report.plan):
        ask = info.ask
        names = {*((k for b in ask.bundles for k in b) if ask else ()), *(ask.driver if ask else ()),
                 *(ask.spread if ask else ())} or {"GPU"}
        found.setdefault(info.cluster, set()).update(camel(n) for n in names if camel(n) not in LEFT_OUT)
    return {cluster: frozenset(names) for cluster, names in found.items()}


@dataclass
class _Cluster:
    client: Any
    """state.ray.client.RayClient"""
    statuses: dict[str, str] | None = None
    """The last job table read; None until the first read (which wakes nothing)."""
    used: dict[str, float] | None = None
    failures: int = 0
    next_poll: float = 0.0


@dataclass
class Watch:
    """Polls each cluster every `every` seconds; calls `wake(reason)` when a turn should run now."""

    every: float
    wake: Callable[[str], None]
    say: Callable[[str], None]
    timeout: float = REQUEST_TIMEOUT
    _clusters: dict[tuple[str, str], _Cluster] = field(default_factory=dict)
    _waiting: dict[str, frozenset[str]] = field(default_factory=dict)
    _timed: str | None = None
    """This workspace's name while one of its jobs has a max_runtime: a run of it that starts wakes the loop,
    whose turn then knows the run's deadline and wakes for it (a run an apply started between turns)."""

    def follow(self, desired: Any) -> None:
        """The clusters of the desired state a turn just loaded (with --git-pull they may change);
        what was seen of a cluster whose name and address stay is kept."""
        from reconcile.execute.cycle import connect

        timed = any(job.max_runtime is not None for job in desired.jobs.values())
        self._timed = desired.workspace.name if timed else None

        try:
            clients = connect(desired, min(self.timeout, REQUEST_TIMEOUT))
        except ArgusError:  # a token that cannot be read: the turn says so; the watch keeps what it has
            return
        self.follow_clients(clients)

    def follow_clients(self, clients: Mapping[str, Any]) -> None:
        """state.ray.client.RayClient by cluster name."""
        old = self._clusters
        self._clusters = {(name, c.address): old.get((name, c.address)) or _Cluster(c)
                          for name, c in clients.items()}
        for cluster in self._clusters.values():
            if cluster.statuses is None:  # read before the turn observes: a job that ends after is seen to end
                self._first_read(cluster)

    @staticmethod
    def _first_read(cluster: _Cluster) -> None:
        # a failure is the turn's to report; the watch thread reads the cluster again at its next tick
        with contextlib.suppress(ArgusError, OSError, ValueError, TypeError, AttributeError):
            cluster.statuses = cluster.client.job_statuses()

    def after_turn(self, report: TurnReport) -> None:
        if report.plan is not None:  # a turn that could not plan says nothing of the queue: keep what was known
            self._waiting = waiting_resources(report)

    def forget(self) -> None:
        """On standby: what was seen before is stale once the loop is active again."""
        for cluster in self._clusters.values():
            cluster.statuses, cluster.used = None, None

    def run(self, stopping: threading.Event, active: threading.Event) -> None:
        """The watch thread: until `stopping`, a tick every `every` seconds while `active`."""
        while not stopping.wait(self.every):
            if not active.is_set():
                self.forget()
                continue
            reasons = self.tick(time.monotonic())
            if reasons and active.is_set() and not stopping.is_set():
                self.wake("; ".join(reasons))

    def tick(self, now: float) -> list[str]:
        """Poll every cluster that is due; returns why a turn should run now (nothing: it need not)."""
        reasons: list[str] = []
        for (name, _address), cluster in list(self._clusters.items()):
            if now < cluster.next_poll:
                continue
            try:
                reasons += self._poll(name, cluster)
            except (ArgusError, OSError, ValueError, TypeError, AttributeError) as err:  # never the thread's end
                self._failed(name, cluster, now, err)
                continue
            if cluster.failures:
                self.say(f"argus serve: watch: cluster {name} answers again")
            cluster.failures, cluster.next_poll = 0, 0.0
        return reasons

    def _poll(self, name: str, cluster: _Cluster) -> list[str]:
        statuses = cluster.client.job_statuses()
        done = ended(cluster.statuses, statuses) if cluster.statuses is not None else []
        began = started(cluster.statuses, statuses, self._timed) if cluster.statuses is not None else []
        cluster.statuses = statuses
        reasons = [f"{len(done)} job(s) ended on cluster {name}"] if done else []
        reasons += [f"{len(began)} run(s) with a max_runtime started on cluster {name}"] if began else []
        names = self._waiting.get(name)
        if not names:
            cluster.used = None
            return reasons
        used = cluster.client.resources_in_use()
        less = freed(cluster.used, used, names) if cluster.used is not None else []
        cluster.used = used
        return reasons + ([f"{', '.join(less)} freed on cluster {name}"] if less else [])

    def _failed(self, name: str, cluster: _Cluster, now: float, err: Exception) -> None:
        cluster.failures += 1
        delay = min(self.every * 2 ** cluster.failures, MAX_BACKOFF)
        cluster.next_poll = now + delay
        if cluster.failures == 1:  # once per outage; the class only: the dashboard's words are not ours to log
            self.say(f"argus serve: watch: cluster {name} did not answer ({type(err).__name__}); "
                     f"polling again in {delay:g} s, backing off up to {MAX_BACKOFF:g} s; turns go on every interval")
