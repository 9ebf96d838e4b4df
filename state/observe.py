"""Observe the world once: every cluster of the desired state and this workspace's records."""

from __future__ import annotations

from specs.desired import DesiredState
from state.observed import ObservedState, RunRecord
from state.ray_client import DEFAULT_TIMEOUT, RayClient
from state.records import read_records


def observe(desired: DesiredState, timeout: float = DEFAULT_TIMEOUT) -> ObservedState:
    clusters = {
        name: RayClient(name, cluster.address, timeout).snapshot()
        for name, cluster in sorted(desired.clusters.items())
    }
    records: dict[str, RunRecord] = {}
    for root in sorted({c.shared_root for c in desired.clusters.values()}):
        records.update(read_records(root, desired.workspace.name))
    return ObservedState(clusters=clusters, records=records)


def clients(desired: DesiredState, timeout: float = DEFAULT_TIMEOUT) -> dict[str, RayClient]:
    return {name: RayClient(name, c.address, timeout) for name, c in desired.clusters.items()}
