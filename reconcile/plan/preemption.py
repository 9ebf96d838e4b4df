"""Which preemptible runs to stop so the head of the queue can start. Pure.

Only the head preempts, only runs marked `preemptible: true` with a lower priority than the head's,
and never more than needed: the fewest such runs whose whole demand, released, lets the head fit,
chosen lowest priority first, then the most recently admitted (the least work lost), and any that
turn out not to be needed are spared again. The check uses what each run holds as admission counts
it (what Ray holds for it where Ray holds it, and the rest of its demand), not Ray's usage report: a
stopped run's GPUs are free once it has ended. A head whose ledger
entry is not signed (Entry.signed: any job could have written it) preempts no other workspace's run:
reconcile.plan.admission.decide keeps what it would stop in Decision.unsigned_preempts instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconcile.plan.placement import Entry, Resources, held_in, place, taken

MAX_VICTIMS = 64
"""A head never stops more runs than this at once (and the search stays small whatever a ledger holds)."""


def victims(head: Entry, held: Sequence[Entry], capacity: Sequence[Resources]) -> tuple[str, ...]:
    """Keys of the runs to stop for `head`; () when preempting would not make it fit (or is not allowed)."""
    candidates = sorted((e for e in held if e.preemptible and e.priority < head.priority),
                        key=lambda e: (e.priority, -e.since, e.key))[:MAX_VICTIMS]
    if not candidates or not _fits_without(head, held, capacity, candidates):
        return ()  # stopping all of them would not be enough: stop none
    chosen: list[Entry] = []
    for candidate in candidates:
        chosen.append(candidate)
        if _fits_without(head, held, capacity, chosen):
            return tuple(e.key for e in _spared(head, held, capacity, chosen))
    return ()


def _spared(head: Entry, held: Sequence[Entry], capacity: Sequence[Resources], chosen: list[Entry]) -> list[Entry]:
    """Drop every chosen run the head fits without, latest choices first."""
    kept = list(chosen)
    for candidate in reversed(chosen):
        rest = [e for e in kept if e is not candidate]
        if _fits_without(head, held, capacity, rest):
            kept = rest
    return kept


def _fits_without(head: Entry, held: Sequence[Entry], capacity: Sequence[Resources], gone: list[Entry]) -> bool:
    leaving = {id(e) for e in gone}
    free = [dict(node) for node in capacity]
    for entry in held:
        if id(entry) not in leaving:
            free = held_in(entry.demand, taken(entry.holds, free))
    return place(head.demand, free) is not None
