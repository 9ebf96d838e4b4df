"""What a run Ray lists as active holds, as admission counts it. Pure.

Ray is the truth while it lists a run: a run it lists as PENDING or RUNNING under argus's labels holds
- what Ray holds for it (ClusterState.holds: its placement groups, its entrypoint, its actors outside a
  group), counted on the node Ray holds it on;
- plus what of its known demand Ray does not hold yet: the bundles no group of it covers yet, its driver
  until Ray holds its entrypoint, the part of a spread demand beyond what Ray holds (a `command` job's
  `demand:` GPUs Ray never reserves are counted for its whole life).
Its known demand is its admitted ledger entry's, else what argus knows of it (`known`: this workspace's
record of the run, or its spec as it is now), else what argus stamped on its Ray job when it submitted
it (`argus.demand`, reconcile.plan.demand_label: how another workspace knows it), else nothing beyond
Ray's holds. So a ledger entry counts only for the window between admission and Ray showing the hold,
and no file on the shared root is needed to keep a running run's GPUs from being promised again:
deleting its ledger entry and its record frees nothing while Ray runs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconcile.plan import demand_label
from reconcile.plan.placement import Demand, Entry, Resources
from state.observed import ACTIVE, ClusterState, Hold, LedgerEntry, RayJob

NOT_SCARCE = frozenset({"CPU", "memory", "object_store_memory"})
"""What a placement group need not match to stand for a bundle of the demand: verl asks Ray for its own
CPUs per GPU, which argus's demand only estimates."""


def on_ray(cluster: ClusterState, admitted: Mapping[str, LedgerEntry], known: Mapping[str, Demand],
           specs: Mapping[str, tuple[int, bool]], skip: set[str]) -> list[Entry]:
    """An admitted Entry for each run Ray lists as active under argus's labels (not in `skip`) that
    holds anything. `admitted`: submission id -> its admitted ledger entry (of the run's own workspace
    and job); `known`: submission id, or `<workspace>/<job>`, -> the demand argus knows for it;
    `specs`: `<workspace>/<job>` -> (priority, preemptible) as its workspace's specs say them now."""
    nodes = {node.node_id: index for index, node in enumerate(cluster.nodes)}
    found = []
    for job in cluster.jobs:
        run = job.run_id
        if run is None or job.status not in ACTIVE or job.submission_id in skip:
            continue
        entry = admitted.get(job.submission_id)
        if entry is not None and (entry.workspace, entry.job) != (run.workspace, run.job):
            entry = None  # an entry cannot borrow another's run
        holds = cluster.holds.get(job.submission_id, ())
        demand = _known_demand(job, entry, known)
        if holds or any(demand.total().values()):
            found.append(_entry(job, entry, remainder(demand, holds), _placed(holds, nodes), specs))
    return found


def remainder(demand: Demand, holds: Sequence[Hold]) -> Demand:
    """What of `demand` Ray does not hold yet: each group covers one bundle whose accelerators it holds
    (the rest of what Ray holds, the spread demand); the entrypoint's reservation covers the driver."""
    bundles, rest, driver = list(demand.bundles), {}, dict(demand.driver)
    for hold in sorted(holds, key=lambda h: (h.kind != "group", -h.resources.get("GPU", 0.0))):
        match = _covered(bundles, hold.resources) if hold.kind == "group" else None
        if match is not None:
            bundles.pop(match)
        elif hold.kind == "driver" and driver:
            driver = {}
        else:
            for name, amount in hold.resources.items():
                rest[name] = rest.get(name, 0.0) + amount
    spread = {name: left for name, amount in demand.spread.items() if (left := amount - rest.get(name, 0.0)) > 1e-9}
    pools = demand.pools if len(bundles) == len(demand.bundles) else ()
    return Demand(bundles=tuple(bundles), driver=driver, spread=spread, pools=pools)


def _known_demand(job: RayJob, entry: LedgerEntry | None, known: Mapping[str, Demand]) -> Demand:
    """The largest of what argus knows: the admitted entry (a file a job can edit), the spec's or record's, and
    the label argus stamped on the Ray job (which no job can rewrite): an edited entry never shrinks a hold."""
    stamped = demand_label.read(job.metadata)
    if entry is not None:
        found: list[Demand] = [Demand(bundles=tuple(entry.bundles), driver=entry.driver, spread=entry.spread)]
    else:
        found = [d for d in (known.get(job.submission_id) or known.get(f"{job.workspace}/{job.job}"),) if d]
    found += [stamped] if stamped is not None else []
    return max(found, key=_weight, default=Demand())


def _weight(demand: Demand) -> tuple[float, float]:
    total = demand.total()
    return total.get("GPU", 0.0), sum(total.values())


def _entry(job: RayJob, entry: LedgerEntry | None, demand: Demand, holds: tuple[tuple[int, Resources], ...],
           specs: Mapping[str, tuple[int, bool]]) -> Entry:
    key = f"{job.workspace}/{job.job}"
    started = (job.start_time or 0) / 1000
    priority, preemptible = specs.get(key) or ((entry.priority, entry.preemptible) if entry else (0, False))
    since = entry.admitted if entry is not None and entry.admitted is not None else started
    return Entry(key=key, workspace=job.workspace or "", demand=demand, priority=priority,
                 arrived=entry.arrived if entry is not None else since, admitted=True, preemptible=preemptible,
                 since=since, holds=holds, submission_id=job.submission_id)


def _placed(holds: Sequence[Hold], nodes: Mapping[str, int]) -> tuple[tuple[int, Resources], ...]:
    """Each hold on its node's index; a hold on a node not alive now holds nothing there."""
    return tuple((nodes[h.node_id], dict(h.resources)) for h in holds if h.node_id in nodes)


def _covered(bundles: list[Resources], held: Resources) -> int | None:
    """The index of the bundle with the most GPUs whose scarce resources `held` covers; None when none."""
    fitting = [i for i, bundle in enumerate(bundles)
               if all(held.get(name, 0.0) >= amount - 1e-9 for name, amount in _scarce(bundle).items())]
    return max(fitting, key=lambda i: bundles[i].get("GPU", 0.0), default=None)


def _scarce(bundle: Resources) -> Resources:
    scarce = {name: amount for name, amount in bundle.items() if name not in NOT_SCARCE and amount}
    return scarce or bundle
