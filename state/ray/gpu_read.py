"""One turn's read of GPU use on each cluster (state.ray.gpus says what is read and how it is checked).

At most two GETs per cluster, each tried once within the client's timeout: the node summary and the state API's
alive actors; none at all on a cluster where no run is active. Whatever goes wrong (an old dashboard without the
endpoint, an error status, an answer too large or of another shape, a timeout) makes that cluster's GPU use
unknown, with why, and never ends the turn: GPU use is shown, nothing is decided from it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from specs.diagnostics import plain
from specs.errors import ArgusError
from state.observed import ClusterState
from state.ray import holds
from state.ray.gpus import NODES, ClusterGpus, node_gpus, use_by_run

if TYPE_CHECKING:
    from state.ray.client import RayClient

ALIVE_ACTORS = f"/api/v0/actors?limit={holds.MAX_ROWS}&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"


def gpu_use(clients: Mapping[str, RayClient], clusters: Mapping[str, ClusterState]) -> dict[str, ClusterGpus]:
    """Per cluster that was observed and runs something: its GPUs and which runs use them."""
    found = {}
    for name, state in sorted(clusters.items()):
        client = clients.get(name)
        if client is not None and any(j.status in ("PENDING", "RUNNING") for j in state.jobs):
            found[name] = read_cluster(client, state)
    return found


def read_cluster(client: RayClient, state: ClusterState) -> ClusterGpus:
    try:
        gpus = node_gpus(client.read_once(NODES))
        if gpus is None:
            return ClusterGpus(state.name, problem=f"the dashboard's {NODES} is not Ray's node summary")
        actors = holds.listing(client.read_once(ALIVE_ACTORS))
        if actors is None:
            return ClusterGpus(state.name, problem="the state API's actor list is not in Ray's shape")
        return use_by_run(state.name, state.jobs, gpus, actors.rows)
    except ArgusError as err:
        return ClusterGpus(state.name, problem=plain(str(err))[:300] or type(err).__name__)
    except Exception as err:  # noqa: BLE001 - a read for display: anything unforeseen is "unknown", not a dead turn
        return ClusterGpus(state.name, problem=f"GPU use not read: {type(err).__name__}")
