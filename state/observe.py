"""Observe the world once: every cluster of the desired state and this workspace's records."""

from __future__ import annotations

from specs.desired import DesiredState
from state.observed import ObservedState, RunRecord
from state.ray_client import DEFAULT_TIMEOUT, RayClient
from state.records import read_records


def clients(desired: DesiredState, timeout: float = DEFAULT_TIMEOUT) -> dict[str, RayClient]:
    """One client per cluster, bound to the address its spec names."""
    return {name: RayClient(name, c.address, timeout) for name, c in sorted(desired.clusters.items())}


def observe(desired: DesiredState, ray: dict[str, RayClient]) -> ObservedState:
    """One snapshot (one list_jobs) per cluster, plus the run records on each shared root."""
    clusters = {name: client.snapshot() for name, client in ray.items()}
    records: dict[str, RunRecord] = {}
    for root in sorted(set(desired.shared_roots.values())):
        records.update(read_records(root, desired.workspace.name))
    return ObservedState(clusters=clusters, records=records)
