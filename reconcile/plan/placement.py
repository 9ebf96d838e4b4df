"""What a job needs and where it fits: the queue's vocabulary (Demand, Entry) and place(). Pure.

Admission (reconcile.plan.admission) and preemption (reconcile.plan.preemption) both build on these;
neither imports the other's decisions from here, so the two form no circle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Resources = Mapping[str, float]


@dataclass(frozen=True)
class Demand:
    """A job's whole demand: bundles that must each fit on one node, its driver (on one node), and
    what may spread over any nodes (a `command` job's declared `demand:`)."""

    bundles: tuple[Resources, ...] = ()
    driver: Resources = field(default_factory=dict)
    spread: Resources = field(default_factory=dict)
    pools: tuple[str, ...] = ()
    """For people: the verl pool each bundle belongs to (same order), or nothing when unnamed."""

    def total(self) -> dict[str, float]:
        summed: dict[str, float] = {}
        for part in (*self.bundles, self.driver, self.spread):
            for name, amount in part.items():
                summed[name] = summed.get(name, 0.0) + amount
        return summed


@dataclass(frozen=True)
class Entry:
    """A job waiting to start (or a run already admitted, when `admitted`)."""

    key: str
    """`<workspace>/<job>`: unique across the cluster's queue."""
    workspace: str
    demand: Demand
    priority: int = 0
    arrived: float = 0.0
    admitted: bool = False
    preemptible: bool = False
    since: float = 0.0
    """When an admitted entry was admitted: preemption stops the most recent first (the least work lost)."""
    signed: bool = True
    """Its ledger entry's signature was checked (or it is the plan's own job): an unsigned head (any
    job could have written it) never preempts another workspace's runs."""
    holds: tuple[tuple[int, Resources], ...] = ()
    """What Ray holds for an admitted run now, by node (an index into the capacity, in its order): counted
    where Ray placed it. `demand` is then what of the run's demand Ray does not hold yet (reconcile.plan.holdings)."""
    submission_id: str = ""
    """The run's, for an admitted one (shown by `argus queue`)."""
    away: float = 0.0
    """Seconds since its workspace last confirmed a waiting entry, when longer than the queue's grace: nobody is
    there to start it, so it keeps its place but holds nothing against the others (reconcile.plan.queue)."""

    def held_total(self) -> dict[str, float]:
        """All the run counts for: what Ray holds and what of its demand it does not hold yet."""
        summed = self.demand.total()
        for _, resources in self.holds:
            for name, amount in resources.items():
                summed[name] = summed.get(name, 0.0) + amount
        return summed


def place(demand: Demand, free: Sequence[Resources]) -> list[dict[str, float]] | None:
    """What is free after the demand is placed (largest bundles first, each on the node it leaves
    tightest, then the driver), or None when it does not fit."""
    left = [dict(node) for node in free]
    bundles = sorted(demand.bundles, key=lambda b: (-b.get("GPU", 0.0), -sum(b.values())))
    for bundle in (*bundles, demand.driver):
        fitting = [node for node in left if _covers(node, bundle)]
        # best fit: the node left tightest, so the big nodes stay whole for big bundles
        spot = min(fitting, key=lambda n: (n.get("GPU", 0.0) - bundle.get("GPU", 0.0), sum(n.values())), default=None)
        if spot is None:
            return None
        for name, amount in bundle.items():
            spot[name] = spot.get(name, 0.0) - amount
    return _spread(demand.spread, left)


def held_in(demand: Demand, free: Sequence[Resources]) -> list[dict[str, float]]:
    """What is free once a run that holds `demand` is counted: placed by shape when it fits; else its
    totals taken wherever any is left, the rest below zero. A run that holds resources never counts as
    holding nothing because what the others hold leaves it no room (more held than there is: nothing fits)."""
    placed = place(demand, free)
    if placed is not None:
        return placed
    left = [dict(node) for node in free]
    for name, amount in demand.total().items():
        for node in sorted(left, key=lambda n: -n.get(name, 0.0)):
            part = min(max(node.get(name, 0.0), 0.0), amount)
            node[name], amount = node.get(name, 0.0) - part, amount - part
        if amount > 1e-9 and left:
            left[0][name] = left[0].get(name, 0.0) - amount
    return left


def taken(holds: Sequence[tuple[int, Resources]], free: Sequence[Resources]) -> list[dict[str, float]]:
    """What is free once what Ray holds is taken from the nodes it holds it on (an amount may go below
    zero: Ray's truth, and nothing fits there then)."""
    left = [dict(node) for node in free]
    for index, resources in holds:
        if 0 <= index < len(left):
            for name, amount in resources.items():
                left[index][name] = left[index].get(name, 0.0) - amount
    return left


def _spread(need: Resources, left: list[dict[str, float]]) -> list[dict[str, float]] | None:
    """Take each resource from the nodes that have least of it first (big nodes stay whole): a
    spread demand fits when the cluster has enough of it in all."""
    for name, amount in need.items():
        wanted = amount
        # CPUs and memory come from nodes without GPUs first: a GPU node's CPUs are its GPU jobs' to use
        for node in sorted(left, key=lambda n: (name != "GPU" and n.get("GPU", 0.0) > 0, n.get(name, 0.0))):
            taken = min(max(node.get(name, 0.0), 0.0), wanted)
            node[name] = node.get(name, 0.0) - taken
            wanted -= taken
        if wanted > 1e-9:
            return None
    return left


def _covers(node: Resources, need: Resources) -> bool:
    return all(node.get(name, 0.0) >= amount - 1e-9 for name, amount in need.items())
