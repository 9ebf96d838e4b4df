"""Admission: which queued jobs start now, on a fixed Ray cluster that has no queue of its own. Pure.

A job starts only when its *whole* demand fits what is free, by shape: verl makes one placement
group per node, so a 2-node job needs two bundles of `n_gpus_per_node` GPUs, each on one node (two
such jobs each holding one node is the deadlock this prevents). Free is what alive nodes offer, less
what other work uses, less the whole demand of every admitted argus run, also one that has not
allocated yet, so two admissions never count the same GPUs. What Ray holds for a run (its placement
groups, its entrypoint) is counted on the node Ray holds it on, and only the rest of its demand by shape.

Order: higher `priority` first, then first come (when argus first saw the spec), then the key.
The head of the queue is never starved. A job behind it may start first (backfill) only if the head
would still fit once every run now holding resources has ended, with the backfilled job still running:
backfill never uses the room the head is waiting for. Durations are unknown, so this is the
conservative rule (EASY backfilling without run-time estimates).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconcile.plan.placement import Demand, Entry, Resources, held_in, place, taken
from reconcile.plan.preemption import victims


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
    queue = _Pass(held, capacity, _free_now(held, capacity, in_use), _usage_by_workspace(held),
                  [dict(node) for node in capacity])
    return [_decide_one(entry, queue, quotas or {}) for entry in order([e for e in entries if not e.admitted])]


@dataclass
class _Pass:
    """One pass down the queue, in order: what is still free, and who is the head that must not be delayed."""

    held: list[Entry]
    capacity: Sequence[Resources]
    free: list[dict[str, float]]
    usage: dict[str, dict[str, float]]
    after_all_end: list[dict[str, float]]
    """What would be free once every run now holding resources has ended, less what this pass started."""
    head: Entry | None = None
    waiting: int = 0
    ahead: list[str] = field(default_factory=list)
    """The keys of the entries found waiting so far, in queue order."""
    fitting: list[str] = field(default_factory=list)
    """The keys of the entries ahead that fit now (their team's apply or serve starts them): they take room too."""

    def wait(self, entry: Entry) -> int:
        """The entry waits: its place in the queue."""
        self.waiting += 1
        self.ahead.append(entry.key)
        return self.waiting


def _free_now(held: Sequence[Entry], capacity: Sequence[Resources],
              in_use: Sequence[Resources]) -> list[dict[str, float]]:
    free = [dict(node) for node in capacity]
    for entry in held:
        # where Ray holds it; then what of its demand Ray does not hold yet, by shape where it fits
        free = held_in(entry.demand, taken(entry.holds, free))
    reported = [_minus(node, used) for node, used in zip(capacity, _padded(in_use, len(capacity)), strict=True)]
    return [{name: min(amount, seen.get(name, amount)) for name, amount in node.items()}
            for node, seen in zip(free, reported, strict=True)]


def _decide_one(entry: Entry, queue: _Pass, quotas: Mapping[str, Resources]) -> Decision:
    over = _over_quota(entry, queue.usage, quotas)
    if over:
        return Decision(entry.key, False, queue.wait(entry), over)
    if entry.away:  # nobody there to start it: it keeps its place, and holds nothing against the others
        return Decision(entry.key, False, queue.wait(entry), _away(entry))
    placed = place(entry.demand, queue.free)
    if placed is not None and (queue.head is None or _head_still_fits(queue.head, entry, queue.after_all_end)):
        queue.free = placed
        queue.after_all_end = place(entry.demand, queue.after_all_end) or queue.after_all_end
        queue.usage[entry.workspace] = _plus(queue.usage.get(entry.workspace, {}), entry.demand.total())
        queue.fitting.append(entry.key)
        return Decision(entry.key, True, None, _started(queue.head))
    queue.wait(entry)
    if queue.head is None:
        queue.head = entry
        return _head_waits(entry, queue)
    return Decision(entry.key, False, queue.waiting, _why_waiting(entry, queue))


def _head_waits(head: Entry, queue: _Pass) -> Decision:
    """The head does not fit: it preempts what it may, and what that frees is its own."""
    preempts = victims(head, queue.held, queue.capacity)
    if preempts and not head.signed and any(not k.startswith(f"{head.workspace}/") for k in preempts):
        return Decision(head.key, False, queue.waiting, _why_waiting(head, queue), unsigned_preempts=preempts)
    if preempts:
        queue.free = [{} for _ in queue.free]  # what the stopped runs free is the head's: nothing backfills it
        return Decision(head.key, False, queue.waiting, _preempting(preempts), preempts)
    return Decision(head.key, False, queue.waiting, _why_waiting(head, queue))


def _away(entry: Entry) -> str:
    return (f"its workspace {entry.workspace} has not confirmed it for {entry.away / 60:.0f} min (no apply or serve "
            "since): it keeps its place but holds nothing, and the jobs behind it may start, until its team "
            "applies or serves again")


def _preempting(keys: tuple[str, ...]) -> str:
    return f"stops the preemptible {', '.join(keys)} to fit; starts once {'they have' if len(keys) > 1 else 'it has'}"


def _head_still_fits(head: Entry, candidate: Entry, after_all_end: Sequence[Resources]) -> bool:
    """Once every run now holding resources has ended, the head still fits beside the candidate."""
    beside = place(candidate.demand, after_all_end)
    return beside is not None and place(head.demand, beside) is not None


def _why_waiting(entry: Entry, queue: _Pass) -> str:
    """What it needs, what of that is short (not GPUs for a job that asks none), and who is ahead."""
    before, head = len(queue.ahead) - 1, queue.head  # the entry itself waits last
    # the head is named on its own; only the first few others are named, so only they are looked at: a queue of
    # thousands asks this of every entry
    others = (key for key in itertools.islice(queue.ahead, before) if head is None or key != head.key)
    named = list(itertools.islice(others, SHOWN))
    count = before - (1 if head is not None and head is not entry else 0)
    fitting = f"; after {_few(queue.fitting)}, which fit now" if queue.fitting else ""
    ahead = (f"; {before} ahead" + (f" ({_named(named, count)})" if count else "")) if before else ""
    behind = "" if head is None or head is entry else f"; waits behind {head.key}, which must not be delayed"
    return f"needs {_shape(entry.demand)}, {_short(entry.demand, queue.free)}{fitting}{ahead}{behind}"


def _short(demand: Demand, free: Sequence[Resources]) -> str:
    """What of the demand is not free, summed over the nodes (GPUs alone when they are short; a CPU job is never
    told about GPUs); when all of it is, that no node fits its shape."""
    total = demand.total()
    have = {name: sum(node.get(name, 0.0) for node in free) for name in total}
    lacking = sorted((name for name, amount in total.items() if amount > 0 and have[name] < amount - 1e-9),
                     key=lambda name: (name != "GPU", name))
    if not lacking:
        gpus = f"{have['GPU']:g} GPU free, " if total.get("GPU") else ""
        return f"{gpus}but no node has room for its shape"
    if "GPU" in lacking:  # what people wait for: the rest of a GPU job's demand follows the GPUs
        lacking = ["GPU"]
    return ", ".join(f"{have[name]:g} GPU free" if name == "GPU" else f"{have[name]:g} of {total[name]:g} {name} free"
                     for name in lacking)


SHOWN = 3
"""Keys named in a reason before `and N more`."""


def _few(keys: Sequence[str]) -> str:
    return _named(keys[:SHOWN], len(keys))


def _named(first: Sequence[str], count: int) -> str:
    return ", ".join(first) + (f" and {count - len(first)} more" if count > len(first) else "")


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
        usage[entry.workspace] = _plus(usage.get(entry.workspace, {}), entry.held_total())
    return usage


def _minus(node: Resources, used: Resources) -> dict[str, float]:
    return {name: amount - used.get(name, 0.0) for name, amount in node.items()}


def _plus(a: Resources, b: Resources) -> dict[str, float]:
    return {name: a.get(name, 0.0) + b.get(name, 0.0) for name in {*a, *b}}


def _padded(rows: Sequence[Resources], length: int) -> list[Resources]:
    return [*rows, *({} for _ in range(length - len(rows)))][:length]
