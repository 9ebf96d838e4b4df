"""Admission at apply: the queue decided again, under the cluster's admission lock, right before a submit.

The plan decided from an observation that may be minutes old, and another workspace may admit on
the same cluster at the same moment. So each submit with a demand takes the shared root's admission
lock, reads the cluster and every workspace's ledger afresh, decides with the planner's own function
(reconcile.plan.queue), and writes its admission to this workspace's ledger before letting go: the
next admission, whoever makes it, counts that demand as held. A run that no longer fits is queued.

A batch of submits that apply runs concurrently (execute.batch) is admitted ahead, all at once per
cluster: one hold of the lock, one fresh read, the queue's own order (priority, arrival, name), one
ledger write. The lock is a POSIX record lock, which belongs to the process: threads of one process
do not exclude each other by it (and one closing its descriptor would release another's), so every
hold also takes a lock of this process's threads.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from reconcile.execute.world import Done, Outcome, World
from reconcile.model import Ask, EnqueueStep, Plan, StopStep, SubmitStep
from reconcile.plan.queue import Want, decide_cluster, holds
from specs.desired import DesiredState
from specs.errors import ArgusError
from state.observe import holders_gone, with_quotas
from state.observed import ClusterQueue, ClusterState, LedgerEntry, ObservedState, RayJob
from state.queue import holders as admission_holders
from state.queue.ledger import admission_lock, read_ledger, read_ledgers, write_ledger


def enqueue(step: EnqueueStep, world: World) -> Done:
    root = world.roots[step.cluster]
    with _held(root):
        mine = read_ledger(root, world.workspace)
        _write(root, world.workspace, mine, _entry(world.workspace, step, step.ask, mine, admitted=None))
    return Done(Outcome.QUEUED)


def admitted(step: SubmitStep, world: World) -> str | None:
    """None when the run may be submitted now (its admission is in the ledger); else why it waits."""
    if step.ask is None:
        return None
    if step.submission_id in world.admissions:  # decided ahead with its batch (admit_ahead)
        return world.admissions.pop(step.submission_id)
    root = world.roots[step.cluster]
    with _held(root):
        cluster, queue, mine = _as_it_is(step.cluster, world)
        want = _want(world.workspace, step, step.ask)
        decision = decide_cluster(world.workspace, cluster, queue, [want], time.time(), known=world.known,
                                  own_waiting=True)[want.key]
        mine = _still_held(mine, cluster, queue.gone)
        entry = _entry(world.workspace, step, step.ask, mine, admitted=time.time() if decision.start else None,
                       holder=admission_holders.token(root))
        _write(root, world.workspace, mine, entry)
    return None if decision.start else f"queued #{decision.position}: {decision.reason}"


def still_preempted(step: StopStep, world: World, job: str) -> bool:
    """A preemption decided again under the admission lock, from the cluster and ledgers as they are
    now: the head may have started elsewhere, left the queue, or found room."""
    with _held(world.roots[step.cluster]):
        cluster, queue, _ = _as_it_is(step.cluster, world)
        decisions = decide_cluster(world.workspace, cluster, queue, [], time.time(), known=world.known,
                                   own_waiting=True)
    return any(f"{world.workspace}/{job}" in d.preempts for d in decisions.values())


def refresh(root: str, workspace: str, cluster: ClusterState, waiting: set[str]) -> None:
    """Confirm this workspace's waiting entries that its plan still queues (the rest are dropped:
    their job changed, stopped or went away) and drop admissions that hold nothing any more: their run
    ended, or Ray does not list it and its admission window passed."""
    with _held(root):
        now, mine = time.time(), read_ledger(root, workspace)
        listed = {j.submission_id: j for j in cluster.jobs}
        kept = [e.model_copy(update={"seen": now}) if e.admitted is None else _on_ray(e, cluster, listed, now)
                for e in _still_held(mine, cluster, holders_gone(root, mine))
                if e.cluster != cluster.name or e.admitted is not None or e.submission_id in waiting]
        if kept != mine:
            write_ledger(root, workspace, kept)


@dataclass
class Ahead:
    """Admissions decided ahead for a batch, and the ledger entries each replaced, so the runs a
    failure left unattempted can be withdrawn: as if apply had never come to them."""

    replaced: dict[str, list[LedgerEntry]] = field(default_factory=dict)
    """By submission id: this workspace's entries of the same job its admission took the place of."""
    roots: dict[str, str] = field(default_factory=dict)
    """By submission id: the shared root whose ledger holds it."""


def admit_ahead(steps: Sequence[SubmitStep], world: World, ahead: Ahead) -> None:
    """Decide every submit of a batch that has a demand, per cluster, in the queue's order, under one
    hold of the cluster's admission lock; `admitted` then hands each its decision. `ahead` is filled as
    it goes: a failure at a later cluster leaves what earlier ones admitted there to withdraw."""
    for name in sorted({s.cluster for s in steps if s.ask is not None}):
        _admit_cluster(name, [s for s in steps if s.cluster == name and s.ask is not None], world, ahead)


def mark_submitted(submission_ids: Sequence[str], world: World) -> None:
    """Ray accepted these runs: their admissions say so (what they hold is decided from Ray's list from
    now on: reconcile.plan.queue.holds)."""
    by_root: dict[str, dict[str, str | None]] = {}
    for sid in submission_ids:
        if (found := world.unmarked.pop(sid, None)) is not None:
            by_root.setdefault(found[0], {})[sid] = found[1]
    for root, sessions in sorted(by_root.items()):
        with _held(root):
            mine, now = read_ledger(root, world.workspace), time.time()
            marked = [e.model_copy(update={"submitted": now, "session": _session(sessions[e.submission_id])})
                      if e.submission_id in sessions and e.admitted is not None and e.submitted is None else e
                      for e in mine]
            if marked != mine:
                write_ledger(root, world.workspace, marked)


def _session(name: str | None) -> str | None:
    """The session as the ledger may hold it (an odd one is left out: the entry must still validate)."""
    return name if name and re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", name) else None


def withdraw(ahead: Ahead, submission_ids: set[str], world: World) -> None:
    """Runs admitted ahead that apply never submitted: their entries go, the ones they replaced return."""
    for sid in submission_ids:
        world.admissions.pop(sid, None)
    for root in sorted({ahead.roots[sid] for sid in submission_ids if sid in ahead.roots}):
        gone = {sid for sid in submission_ids if ahead.roots.get(sid) == root}
        with _held(root):
            mine = [e for e in read_ledger(root, world.workspace) if e.submission_id not in gone]
            back = [e for sid in sorted(gone) for e in ahead.replaced.get(sid, []) if e not in mine]
            write_ledger(root, world.workspace, [*mine, *back])


def _admit_cluster(name: str, steps: list[SubmitStep], world: World, ahead: Ahead) -> None:
    root = world.roots[name]
    with _held(root):
        cluster, queue, mine = _as_it_is(name, world)
        wants = [_want(world.workspace, s, s.ask) for s in steps if s.ask is not None]  # all of them
        decisions = decide_cluster(world.workspace, cluster, queue, wants, time.time(), known=world.known,
                                   own_waiting=True)
        mine = _still_held(mine, cluster, queue.gone)
        holder = admission_holders.token(root)
        for step, want in zip(steps, wants, strict=True):
            decision = decisions[want.key]
            entry = _entry(world.workspace, step, want.ask, mine, admitted=time.time() if decision.start else None,
                           holder=holder)
            ahead.replaced[step.submission_id] = [e for e in mine if _replaces(entry, e)]
            ahead.roots[step.submission_id] = root
            mine = [*(e for e in mine if not _replaces(entry, e)), entry]
            world.admissions[step.submission_id] = None if decision.start else \
                f"queued #{decision.position}: {decision.reason}"
        write_ledger(root, world.workspace, mine)


@contextlib.contextmanager
def _held(root: str) -> Iterator[None]:
    """The shared root's admission lock, for this thread among this process's threads too."""
    with _THREADS, admission_lock(root):
        yield


_THREADS = threading.Lock()


def _want(workspace: str, step: SubmitStep, ask: Ask) -> Want:
    return Want(key=f"{workspace}/{ask.job}", submission_id=step.submission_id, spec_hash=step.spec_hash, ask=ask,
                seen=step.seen)


def _on_ray(entry: LedgerEntry, cluster: ClusterState, listed: Mapping[str, RayJob], now: float) -> LedgerEntry:
    """An admission Ray lists the run of, as accepted: its apply may have died before saying so."""
    job = listed.get(entry.submission_id)
    if entry.submitted is not None or entry.cluster != cluster.name or job is None \
            or (job.workspace, job.job) != (entry.workspace, entry.job):
        return entry
    return entry.model_copy(update={"submitted": now, "session": _session(cluster.session_name)})


def _as_it_is(name: str, world: World) -> tuple[ClusterState, ClusterQueue, list[LedgerEntry]]:
    """The cluster and its queue read afresh (under the admission lock): what an admission decides from;
    and this workspace's own entries on the root, of every cluster, from the same one read of the ledgers
    (what it writes back: read_ledgers keeps exactly what read_ledger would, signed ones with a key set)."""
    root = world.roots[name]
    cluster = world.clients[name].admission_view()
    every = read_ledgers(root)
    entries = tuple(e for e in every if e.cluster == name)
    queue = with_quotas(ClusterQueue(entries=entries, gone=holders_gone(root, entries)), root, name,
                        world.admins.get(name))
    if queue.problem:  # the quotas can't be trusted (or read): admission must never guess one
        raise ArgusError(queue.problem)
    return cluster, queue, [e for e in every if e.workspace == world.workspace]


def _still_held(entries: list[LedgerEntry], cluster: ClusterState, gone: frozenset[str]) -> list[LedgerEntry]:
    """Admissions of this cluster whose run ended, or that Ray does not list past their admission window
    (their apply is gone, or the grace passed), hold nothing: dropped. The same rule as the plan's."""
    jobs, now = {j.submission_id: j for j in cluster.jobs}, time.time()
    return [e for e in entries if e.cluster != cluster.name or e.admitted is None
            or holds(e, jobs.get(e.submission_id), now, gone)]


def _entry(workspace: str, step: SubmitStep | EnqueueStep, ask: Ask, mine: list[LedgerEntry],
           admitted: float | None, holder: str | None = None) -> LedgerEntry:
    now = time.time()
    first = now if step.seen is None or step.seen > now else step.seen  # the plan's time, never a later one
    arrived = min((e.arrived for e in mine if e.job == ask.job and e.cluster == step.cluster
                   and e.spec_hash == step.spec_hash), default=first)
    return LedgerEntry(workspace=workspace, job=ask.job, cluster=step.cluster, submission_id=step.submission_id,
                       spec_hash=step.spec_hash, priority=ask.priority, preemptible=ask.preemptible,
                       arrived=arrived, seen=now, admitted=admitted, bundles=ask.bundles, driver=ask.driver,
                       spread=ask.spread, holder=holder if admitted is not None else None)


def _write(root: str, workspace: str, mine: list[LedgerEntry], entry: LedgerEntry) -> None:
    """The job's waiting entry replaced by this one; its admitted runs stay until they end."""
    write_ledger(root, workspace, [*(e for e in mine if not _replaces(entry, e)), entry])


def _replaces(entry: LedgerEntry, old: LedgerEntry) -> bool:
    return old.job == entry.job and old.cluster == entry.cluster and (
        old.admitted is None or old.submission_id == entry.submission_id)


def confirm_queue(desired: DesiredState, observed: ObservedState, plan: Plan) -> None:
    """After a whole plan (not a --target one): the entries it still queues keep their place, the
    other waiting entries of this workspace go (their job changed, stopped or went away)."""
    if plan.options.targets:
        return
    waiting = {c.queue.submission_id for c in plan.changes if c.queue}  # a submit may have found no room
    for name, cluster in sorted(observed.clusters.items()):
        queue = observed.queues.get(name)  # None: its shared root is not here
        if queue is not None and any(e.workspace == desired.workspace.name for e in queue.entries):
            refresh(desired.shared_roots[name], desired.workspace.name, cluster, waiting)
