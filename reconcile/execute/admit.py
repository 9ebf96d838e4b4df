"""Admission at apply: the queue decided again, under the cluster's admission lock, right before a submit.

The plan decided from an observation that may be minutes old, and another workspace may admit on
the same cluster at the same moment. So each submit with a demand takes the shared root's admission
lock, reads the cluster and every workspace's ledger afresh, decides with the planner's own function
(reconcile.plan.queue), and writes its admission to this workspace's ledger before letting go: the
next admission, whoever makes it, counts that demand as held. A run that no longer fits is queued.
"""

from __future__ import annotations

import time
from pathlib import Path

from reconcile.execute.world import Done, Outcome, World
from reconcile.model import Ask, EnqueueStep, Plan, StopStep, SubmitStep
from reconcile.plan.queue import ADMIT_GRACE, Want, decide_cluster
from specs.desired import DesiredState
from state.observed import ACTIVE, ClusterQueue, ClusterState, LedgerEntry, ObservedState
from state.queue_ledger import admission_lock, read_ledger, read_ledgers, write_ledger
from state.quotas import load_quotas


def enqueue(step: EnqueueStep, world: World) -> Done:
    root = world.roots[step.cluster]
    with admission_lock(root):
        mine = read_ledger(root, world.workspace)
        _write(root, world.workspace, mine, _entry(world.workspace, step, step.ask, mine, admitted=None))
    return Done(Outcome.QUEUED)


def admitted(step: SubmitStep, world: World) -> str | None:
    """None when the run may be submitted now (its admission is in the ledger); else why it waits."""
    if step.ask is None:
        return None
    root = world.roots[step.cluster]
    with admission_lock(root):
        cluster, queue = _as_it_is(step.cluster, world)
        want = Want(key=f"{world.workspace}/{step.ask.job}", submission_id=step.submission_id,
                    spec_hash=step.spec_hash, ask=step.ask, seen=step.seen)
        decision = decide_cluster(world.workspace, cluster, queue, [want], time.time(), own_waiting=True)[want.key]
        mine = _still_held(read_ledger(root, world.workspace), cluster)
        entry = _entry(world.workspace, step, step.ask, mine, admitted=time.time() if decision.start else None)
        _write(root, world.workspace, mine, entry)
    return None if decision.start else f"queued #{decision.position}: {decision.reason}"


def still_preempted(step: StopStep, world: World, job: str) -> bool:
    """A preemption decided again under the admission lock, from the cluster and ledgers as they are
    now: the head may have started elsewhere, left the queue, or found room."""
    with admission_lock(world.roots[step.cluster]):
        cluster, queue = _as_it_is(step.cluster, world)
        decisions = decide_cluster(world.workspace, cluster, queue, [], time.time(), own_waiting=True)
    return any(f"{world.workspace}/{job}" in d.preempts for d in decisions.values())


def refresh(root: str, workspace: str, cluster: ClusterState, waiting: set[str]) -> None:
    """Confirm this workspace's waiting entries that its plan still queues (the rest are dropped:
    their job changed, stopped or went away) and drop admissions whose run ended."""
    with admission_lock(root):
        now, mine = time.time(), read_ledger(root, workspace)
        kept = [e.model_copy(update={"seen": now}) if e.admitted is None else e
                for e in _still_held(mine, cluster)
                if e.cluster != cluster.name or e.admitted is not None or e.submission_id in waiting]
        if kept != mine:
            write_ledger(root, workspace, kept)


def _as_it_is(name: str, world: World) -> tuple[ClusterState, ClusterQueue]:
    """The cluster and its queue read afresh (under the admission lock): what an admission decides from."""
    root = world.roots[name]
    cluster = world.clients[name].admission_view()
    return cluster, ClusterQueue(entries=tuple(e for e in read_ledgers(root) if e.cluster == name),
                                 quotas=load_quotas(Path(root)))


def _still_held(entries: list[LedgerEntry], cluster: ClusterState) -> list[LedgerEntry]:
    """Admissions of this cluster whose run ended (or never showed up) hold nothing: dropped."""
    status = {j.submission_id: j.status for j in cluster.jobs}
    now = time.time()
    return [e for e in entries if e.cluster != cluster.name or e.admitted is None
            or status.get(e.submission_id) in ACTIVE
            or (e.submission_id not in status and now - e.admitted < ADMIT_GRACE)]


def _entry(workspace: str, step: SubmitStep | EnqueueStep, ask: Ask, mine: list[LedgerEntry],
           admitted: float | None) -> LedgerEntry:
    now = time.time()
    first = now if step.seen is None or step.seen > now else step.seen  # the plan's time, never a later one
    arrived = min((e.arrived for e in mine if e.job == ask.job and e.cluster == step.cluster
                   and e.spec_hash == step.spec_hash), default=first)
    return LedgerEntry(workspace=workspace, job=ask.job, cluster=step.cluster, submission_id=step.submission_id,
                       spec_hash=step.spec_hash, priority=ask.priority, preemptible=ask.preemptible,
                       arrived=arrived, seen=now, admitted=admitted, bundles=ask.bundles, driver=ask.driver,
                       spread=ask.spread)


def _write(root: str, workspace: str, mine: list[LedgerEntry], entry: LedgerEntry) -> None:
    """The job's waiting entry replaced by this one; its admitted runs stay until they end."""
    others = [e for e in mine if not (e.job == entry.job and e.cluster == entry.cluster
                                      and (e.admitted is None or e.submission_id == entry.submission_id))]
    write_ledger(root, workspace, [*others, entry])


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
