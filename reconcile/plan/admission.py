"""Admission: which queued jobs start now, on a fixed Ray cluster that has no queue of its own. Pure.

A job starts only when its *whole* demand fits what is free, by shape: verl makes one placement
group per node, so a 2-node job needs two bundles of `n_gpus_per_node` GPUs, each on one node (two
such jobs each holding one node is the deadlock this prevents). Free is what alive nodes offer, less
what other work uses, less the whole demand of every admitted argus run, also one that has not
allocated yet, so two admissions never count the same GPUs.

Order: higher `priority` first, then first come (when argus first saw the spec), then the key.
The head of the queue is never starved. A job behind it may start first (backfill) only if the head
would still fit once every run now holding resources has ended, with the backfilled job still running:
backfill never uses the room the head is waiting for. Durations are unknown, so this is the
conservative rule (EASY backfilling without run-time estimates).
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


@dataclass(frozen=True)
class Decision:
    key: str
    start: bool
    position: int | None
    """Place in the queue (1: the head) of a job that waits; None for one that starts."""
    reason: str
    preempts: tuple[str, ...] = ()
    """Keys of the admitted runs to stop so that this one (the head) fits; it starts once they have."""
    unsigned_preempts: tuple[str, ...] = ()
    """What this head would preempt, were its entry signed: runs of other workspaces are not stopped
    for an entry any job could have written."""


def order(entries: Sequence[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (-e.priority, e.arrived, e.key))


def never_fits(demand: Demand, capacity: Sequence[Resources]) -> bool:
    """Bigger than the whole cluster: an error to fix, not a job to queue forever."""
    return place(demand, [dict(node) for node in capacity]) is None


def decide(entries: Sequence[Entry], capacity: Sequence[Resources], in_use: Sequence[Resources] = (),
           quotas: Mapping[str, Resources] | None = None) -> list[Decision]:
    """Which waiting entries start now. `capacity`: each alive node's resources; `in_use`: per node
    (same order), what Ray reports in use now, argus's allocated runs and other work alike.

    Admitted entries hold their whole demand, allocated or not. Free on a node is the smaller of
    two views: capacity less the admitted demand, and capacity less what Ray reports in use (which
    also sees work argus did not admit). The views may place one run on different nodes: then the
    smaller is too small, never too big, so a run may wait longer but no GPU is promised twice."""
    held = [e for e in entries if e.admitted]
    free = [dict(node) for node in capacity]
    for entry in held:
        # a run that no longer fits its shape (a node died) holds nothing here; Ray's report still shows its use
        free = place(entry.demand, free) or free
    reported = [_minus(node, used) for node, used in zip(capacity, _padded(in_use, len(capacity)), strict=True)]
    free = [{name: min(amount, seen.get(name, amount)) for name, amount in node.items()}
            for node, seen in zip(free, reported, strict=True)]
    usage = _usage_by_workspace(held)
    after_all_end = [dict(node) for node in capacity]
    decisions, head, waiting = [], None, 0
    for entry in order([e for e in entries if not e.admitted]):
        over = _over_quota(entry, usage, quotas or {})
        if over:
            waiting += 1
            decisions.append(Decision(entry.key, False, waiting, over))
            continue
        placed = place(entry.demand, free)
        if placed is not None and (head is None or _head_still_fits(head, entry, after_all_end)):
            free = placed
            after_all_end = place(entry.demand, after_all_end) or after_all_end
            usage[entry.workspace] = _plus(usage.get(entry.workspace, {}), entry.demand.total())
            decisions.append(Decision(entry.key, True, None, _started(head)))
            continue
        waiting += 1
        if head is None:
            from reconcile.plan.preemption import victims  # it builds on place() and Entry, here

            head, preempts = entry, victims(entry, held, capacity)
            if preempts and not entry.signed and any(not k.startswith(f"{entry.workspace}/") for k in preempts):
                decisions.append(Decision(entry.key, False, waiting, _why_waiting(entry, free, head, waiting),
                                          unsigned_preempts=preempts))
                continue
            if preempts:
                decisions.append(Decision(entry.key, False, waiting, _preempting(preempts), preempts))
                free = [{} for _ in free]  # what the stopped runs free is the head's: nothing backfills it
                continue
        decisions.append(Decision(entry.key, False, waiting, _why_waiting(entry, free, head, waiting)))
    return decisions


def _preempting(keys: tuple[str, ...]) -> str:
    return f"stops the preemptible {', '.join(keys)} to fit; starts once {'they have' if len(keys) > 1 else 'it has'}"


def _head_still_fits(head: Entry, candidate: Entry, after_all_end: Sequence[Resources]) -> bool:
    """Once every run now holding resources has ended, the head still fits beside the candidate."""
    beside = place(candidate.demand, after_all_end)
    return beside is not None and place(head.demand, beside) is not None


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


def _why_waiting(entry: Entry, free: Sequence[Resources], head: Entry, position: int) -> str:
    need = _shape(entry.demand)
    have = sum(node.get("GPU", 0.0) for node in free)
    ahead = f"; {position - 1} ahead" if position > 1 else ""
    behind = "" if head is entry else f"; waits behind {head.key}, which must not be delayed"
    return f"needs {need}, {have:g} GPU free{ahead}{behind}"


def _started(head: Entry | None) -> str:
    return "fits now" if head is None else f"fits now without delaying {head.key} (backfill)"


def _shape(demand: Demand) -> str:
    gpus = [b.get("GPU", 0.0) for b in demand.bundles if b.get("GPU", 0.0)]
    if not gpus:  # GPUs first: what people wait for
        total = demand.total()
        rest = ", ".join(f"{v:g} {k}" for k, v in sorted(total.items(), key=lambda kv: (kv[0] != "CPU", kv[0]))
                         if v and k != "GPU")
        if total.get("GPU"):
            return f"{total['GPU']:g} GPU" + (f" (and {rest})" if rest else "")
        return rest or "nothing"
    if len(gpus) == 1:
        return f"{gpus[0]:g} GPU"
    # each group on one node; groups may share a node that has room for both (Ray does not spread them)
    return f"{sum(gpus):g} GPU as {len(gpus)} groups of {max(gpus):g}" if len(set(gpus)) == 1 \
        else f"{sum(gpus):g} GPU"


def _over_quota(entry: Entry, usage: Mapping[str, Resources], quotas: Mapping[str, Resources]) -> str:
    cap = quotas.get(entry.workspace)
    if not cap:
        return ""
    using = usage.get(entry.workspace, {})
    for name, limit in sorted(cap.items()):
        wanted = using.get(name, 0.0) + entry.demand.total().get(name, 0.0)
        if wanted > limit:
            return (f"over the quota of workspace {entry.workspace}: {name} {wanted:g} of {limit:g} "
                    f"({using.get(name, 0.0):g} held)")
    return ""


def _usage_by_workspace(held: Sequence[Entry]) -> dict[str, dict[str, float]]:
    usage: dict[str, dict[str, float]] = {}
    for entry in held:
        usage[entry.workspace] = _plus(usage.get(entry.workspace, {}), entry.demand.total())
    return usage


def _covers(node: Resources, need: Resources) -> bool:
    return all(node.get(name, 0.0) >= amount - 1e-9 for name, amount in need.items())


def _minus(node: Resources, used: Resources) -> dict[str, float]:
    return {name: amount - used.get(name, 0.0) for name, amount in node.items()}


def _plus(a: Resources, b: Resources) -> dict[str, float]:
    return {name: a.get(name, 0.0) + b.get(name, 0.0) for name in {*a, *b}}


def _padded(rows: Sequence[Resources], length: int) -> list[Resources]:
    return [*rows, *({} for _ in range(length - len(rows)))][:length]
