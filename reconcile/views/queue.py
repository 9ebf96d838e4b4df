"""The admission queue as people and tools see it: `argus queue`, the GPUs held per workspace in
`argus status --json`, the serve page and /metrics. Pure: an observation in, rows and text out.

Nothing is decided here. The runs holding resources are reconcile.plan.queue's `held`; positions
and reasons come from reconcile.plan.admission.decide over the entries every workspace's plan
weighs, so a job's place reads the same here as in the plan of the workspace that queued it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone

from reconcile.model import Action, Plan, QueueInfo
from reconcile.plan import demand as demands
from reconcile.plan.admission import decide, order
from reconcile.plan.placement import Demand, Entry
from reconcile.plan.queue import held, waiting
from reconcile.report import OtherRun
from state.observed import MAYBE_RUNNING, ClusterQueue, ClusterState, LedgerEntry, ObservedState

QUEUE_FORMAT_VERSION = 1
EVERY_WORKSPACE = ""
"""No workspace has an empty name: asked for the others' waiting entries, reconcile.plan.queue.waiting
returns every workspace's."""


@dataclass(frozen=True)
class Held:
    """A run that holds resources on the cluster: what Ray holds for it, and what of its demand Ray does not
    hold yet."""

    workspace: str
    job: str
    submission_id: str
    gpus: float
    priority: int
    admitted: float
    """Epoch seconds of its admission."""


@dataclass(frozen=True)
class Waiting:
    """A job in the cluster's queue, in queue order."""

    position: int | None
    """1 for the head; None for one that fits now: its workspace's next apply or serve turn starts it."""
    workspace: str
    job: str
    submission_id: str
    gpus: float
    demand: str
    priority: int
    arrived: float
    """Epoch seconds since it waits (for this spec of the job)."""
    reason: str


@dataclass(frozen=True)
class ClusterQueueView:
    """One cluster's whole queue across workspaces."""

    cluster: str
    held: tuple[Held, ...] = ()
    waiting: tuple[Waiting, ...] = ()
    gpus: float = 0.0
    """GPUs of the alive nodes."""
    quotas: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    quotas_from: str = ""
    """Where the quotas come from, in words: the admin that applied them, or the hand-edited file."""
    problem: str | None = None
    """Why the quotas cannot be used: nothing is admitted until it is fixed."""
    unseen: str | None = None
    """Why there is no queue to show: the cluster did not answer, or its shared root is not here."""

    @property
    def gpus_held(self) -> dict[str, float]:
        return held_by_workspace(self.held)


def queues_of(observed: ObservedState, clusters: Iterable[str]) -> list[ClusterQueueView]:
    return [queue_of(name, observed) for name in clusters]


def queue_of(name: str, observed: ObservedState) -> ClusterQueueView:
    if name in observed.unreachable:
        return ClusterQueueView(name, unseen=f"cluster not read: {observed.unreachable[name]}")
    cluster, queue = observed.clusters.get(name), observed.queues.get(name)
    if cluster is None or queue is None:
        return ClusterQueueView(name, unseen="its shared root is not on this machine: no queue read")
    return view(cluster, queue, observed.observed_at)


def view(cluster: ClusterState, queue: ClusterQueue, now: float) -> ClusterQueueView:
    holding = _holding(cluster, queue, now)
    capacity = [n.resources for n in cluster.nodes]
    wanting = [(entry, e) for e in queue.entries for entry in waiting(EVERY_WORKSPACE, _alone(e), now, capacity)]
    decisions = decide([*holding, *(entry for entry, _ in wanting)],
                       [n.resources for n in cluster.nodes], [n.used for n in cluster.nodes], queue.quotas)
    ledger = {id(entry): e for entry, e in wanting}
    # decide answers in queue order: the same order() of the same waiting entries
    rows = [_waiting(ledger[id(entry)], entry.demand, decision.position, decision.reason)
            for entry, decision in zip(order([entry for entry, _ in wanting]), decisions, strict=True)]
    return ClusterQueueView(cluster.name, held=tuple(_held(entry) for entry in holding),
                            waiting=tuple(rows), gpus=sum(n.resources.get("GPU", 0.0) for n in cluster.nodes),
                            quotas=queue.quotas, quotas_from=_quotas_from(queue), problem=queue.problem)


def _quotas_from(queue: ClusterQueue) -> str:
    if queue.quotas_admin is not None:
        return f"applied by workspace {queue.quotas_admin}, its admin"
    return "the hand-edited .argus/quotas.yaml, not reviewed: its admin's Quotas replace it" if queue.quotas else ""


def gpus_held(observed: ObservedState) -> dict[str, dict[str, float]]:
    """Per cluster whose queue was read: the GPUs each workspace's admitted runs hold."""
    return {name: held_by_workspace(_held(entry) for entry in
                                    _holding(observed.clusters[name], queue, observed.observed_at))
            for name, queue in sorted(observed.queues.items()) if name in observed.clusters}


def other_runs(workspace: str, observed: ObservedState) -> tuple[OtherRun, ...]:
    """Every other workspace's runs on the clusters read, newest first: whose labels are argus's and
    name another workspace (a job by hand, or forged labels, names none and is left out)."""
    found = []
    for name, cluster in sorted(observed.clusters.items()):
        for job in cluster.jobs:
            run = job.run_id
            if run is None or run.workspace == workspace:
                continue
            ended = (job.end_time or 0) / 1000 if job.status not in MAYBE_RUNNING else 0.0
            found.append(OtherRun(cluster=name, workspace=run.workspace, job=run.job, submission_id=job.submission_id,
                                  status=job.status, started_at=(job.start_time or 0) / 1000, ended_at=ended))
    return tuple(sorted(found, key=lambda r: (-r.started_at, r.submission_id)))


def held_by_workspace(rows: Iterable[Held]) -> dict[str, float]:
    summed: dict[str, float] = {}
    for row in rows:
        summed[row.workspace] = summed.get(row.workspace, 0.0) + row.gpus
    return dict(sorted(summed.items()))


def queued(plan: Plan | None) -> list[tuple[str, QueueInfo]]:
    """This workspace's jobs that wait, by job name, with their place: the serve page and /metrics."""
    changes = plan.changes if plan is not None else ()
    return sorted(((c.address.removeprefix("job."), c.queue) for c in changes
                   if c.action is Action.QUEUE and c.queue is not None), key=lambda q: (q[1].cluster, q[0]))


def render(views: Iterable[ClusterQueueView]) -> str:
    blocks = ["\n".join(_cluster_lines(v)) for v in views]
    return "\n\n".join(blocks) or "No clusters in the desired state."


def queue_json(views: Iterable[ClusterQueueView]) -> str:
    clusters = [{"cluster": v.cluster, "unseen": v.unseen, "gpus": v.gpus, "quota_problem": v.problem,
                 "held": [{**_fields(h, "workspace", "job", "submission_id", "gpus", "priority"),
                           "admitted_at": iso(h.admitted)} for h in v.held],
                 "waiting": [{**_fields(w, "position", "workspace", "job", "submission_id", "gpus", "demand",
                                       "priority", "reason"), "waiting_since": iso(w.arrived)} for w in v.waiting],
                 "gpus_held": v.gpus_held, "quotas": {ws: dict(cap) for ws, cap in sorted(v.quotas.items())},
                 "quotas_from": v.quotas_from}
                for v in views]
    return json.dumps({"format_version": QUEUE_FORMAT_VERSION, "clusters": clusters}, indent=2, sort_keys=True)


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec="seconds")


def _cluster_lines(v: ClusterQueueView) -> list[str]:
    if v.unseen:
        return [f"Cluster {v.cluster}: {v.unseen}"]
    lines = [f"Cluster {v.cluster} ({v.gpus:g} GPU on its alive nodes)"]
    if v.problem:
        lines.append(f"  Nothing is admitted until the quotas are fixed: {v.problem}")
    lines += _section("Holding resources", ("WORKSPACE", "JOB", "SUBMISSION ID", "GPUS", "PRIORITY", "ADMITTED"),
                      [(h.workspace, h.job, h.submission_id, f"{h.gpus:g}", str(h.priority), _when(h.admitted))
                       for h in v.held], "no run holds resources")
    lines += _section("Waiting, in queue order", ("#", "WORKSPACE/JOB", "GPUS", "DEMAND", "PRIORITY",
                                                  "WAITING SINCE", "REASON"),
                      [(_place(w.position), f"{w.workspace}/{w.job}", f"{w.gpus:g}", w.demand, str(w.priority),
                        _when(w.arrived), w.reason) for w in v.waiting], "nothing waits")
    held_text = ", ".join(f"{ws} {gpus:g}" for ws, gpus in v.gpus_held.items()) or "none"
    lines.append(f"  GPUs held per workspace: {held_text}")
    if v.quotas:
        lines.append(f"  Quotas ({v.quotas_from}): "
                     + "; ".join(f"{ws} {_amounts(cap)}" for ws, cap in sorted(v.quotas.items())))
    return lines


def _section(title: str, head: tuple[str, ...], rows: list[tuple[str, ...]], empty: str) -> list[str]:
    if not rows:
        return [f"  {title}: {empty}."]
    table = [head, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(head) - 1)]
    return [f"  {title}:", *("    " + "  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]])
                             for r in table)]


def _holding(cluster: ClusterState, queue: ClusterQueue, now: float) -> list[Entry]:
    """What holds resources on the cluster, by the rule plans apply: the runs Ray lists as active (with
    what Ray holds for them) and the admissions Ray does not list yet."""
    return held(cluster, queue, now, set())


def _alone(entry: LedgerEntry, gone: frozenset[str] = frozenset()) -> ClusterQueue:
    return ClusterQueue(entries=(entry,), gone=gone)


def _held(entry: Entry) -> Held:
    return Held(workspace=entry.workspace, job=entry.key.split("/", 1)[-1], submission_id=entry.submission_id,
                gpus=entry.held_total().get("GPU", 0.0), priority=entry.priority, admitted=entry.since)


def _waiting(e: LedgerEntry, demand: Demand, position: int | None, reason: str) -> Waiting:
    return Waiting(position=position, workspace=e.workspace, job=e.job, submission_id=e.submission_id,
                   gpus=demands.gpus(demand), demand=demands.describe(demand), priority=e.priority,
                   arrived=e.arrived, reason=reason if position else f"{reason}: its workspace's next apply or "
                                                                     "serve turn starts it")


def _fields(row: object, *names: str) -> dict[str, object]:
    return {name: getattr(row, name) for name in names}


def _place(position: int | None) -> str:
    return str(position) if position else "next"


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _amounts(cap: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {amount:g}" for name, amount in sorted(cap.items()))
