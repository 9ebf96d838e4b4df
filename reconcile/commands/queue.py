"""argus queue: each cluster's whole admission queue, every workspace's entries on its shared root.

The runs holding resources, then the waiting jobs in queue order with the place and reason their own
workspace's plan shows, then the GPUs each workspace holds and the quotas. Read-only: it reads each
cluster's nodes, usage and job table once, and the ledgers and quota file of each shared root here;
it writes nothing. A cluster that does not answer is shown, and the exit code is 1.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from reconcile.boundary import EXIT_ERROR, EXIT_OK
from reconcile.commands.common import load
from reconcile.execute.cycle import connect
from reconcile.views.queue import queue_json, queues_of, render
from specs.desired import DesiredState
from state.observed import ObservedState

if TYPE_CHECKING:
    from state.ray.client import RayClient


def run(directory: Path, timeout: float, as_json: bool) -> int:
    desired = load(directory)
    views = queues_of(observe(desired, connect(desired, timeout)), sorted(desired.clusters))
    typer.echo(queue_json(views) if as_json else render(views))
    return EXIT_ERROR if any(v.unseen for v in views) else EXIT_OK


def observe(desired: DesiredState, ray: dict[str, RayClient]) -> ObservedState:
    """Only what the queue needs: the clusters (nodes, usage, jobs) and the queues on the shared roots.
    No records, snapshots or logs are read."""
    from state.observe import absent_roots, read_clusters, read_queues

    clusters, unreachable = read_clusters(ray)
    absent = absent_roots(desired)
    return ObservedState(clusters=clusters, unreachable=unreachable, records={}, absent_roots=absent,
                         queues=read_queues(desired, absent), observed_at=time.time())
