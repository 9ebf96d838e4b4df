"""The plan's admission stage: which of this workspace's jobs start now, and where the rest wait. Pure.

Every job that wants to start (submit, replace, retry) and has a demand joins its cluster's queue,
beside the other workspaces' waiting entries from the shared root; the runs argus admitted (any
workspace's) hold their whole demand. reconcile.plan.admission decides; this module turns the
decision into changes: a job that fits keeps its submit, one that does not becomes `queue`.
The same function decides again at apply, under the cluster's admission lock (reconcile.execute.admit).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from reconcile.model import Action, Ask, Change, EnqueueStep, QueueInfo, StopStep, SubmitStep
from reconcile.plan import demand as demands
from reconcile.plan.admission import Decision, decide, never_fits
from reconcile.plan.demand import ask_of
from reconcile.plan.holdings import on_ray
from reconcile.plan.placement import Demand, Entry
from reconcile.plan.queue_trust import trust_diagnostics
from specs.desired import DesiredState
from specs.diagnostics import Diagnostic
from specs.workloads.submission import Submission, driver_needs, resolve
from state.observed import ACTIVE, ClusterQueue, ClusterState, LedgerEntry, ObservedState, RayJob

WANTS_TO_START = (Action.SUBMIT, Action.REPLACE, Action.RETRY)
ADMIT_GRACE = 600.0
"""Seconds at most an admitted run that Ray has not accepted holds its demand: a submit in flight. Its
apply proven gone (state.queue.holders) releases it at once."""
AWAY_GRACE = 600.0
"""Seconds a waiting entry of another workspace may go unconfirmed and still hold capacity against the jobs behind
it: a team with `argus serve` confirms its entries every turn and starts one as soon as it fits; one without a loop
would otherwise keep the queue stopped until its next apply. Past the grace the entry keeps its place (and its
team gets it back by applying or serving again) but holds nothing."""
QUEUE_TTL = 3600.0
"""Seconds a waiting entry keeps its place without its workspace confirming it (serve does every turn)."""
CLOCK_SKEW = 300.0
"""Hosts' clocks may differ this much; a time further in the future is a forged one (it would never expire)."""


@dataclass(frozen=True)
class Want:
    """One of this workspace's runs that wants to start."""

    key: str
    submission_id: str
    spec_hash: str
    ask: Ask
    seen: float | None = None
    """When the plan that wants it observed the world: its arrival, were it never queued before (one
    time for every job of one plan, so apply queues them in the plan's order)."""

    @cached_property
    def demand(self) -> Demand:
        """The ask's demand, made once: the checks, the decision and the plan's queue info all need it."""
        return ask_demand(self.ask)

    @cached_property
    def shape(self) -> tuple[object, ...]:
        """The demand as a value to compare: jobs of one plan mostly ask the same, and what is true
        of one demand on a cluster (it can fit, how it reads) is worked out once (`_Asked`)."""
        demand = self.demand
        return (tuple(tuple(sorted(b.items())) for b in demand.bundles), tuple(sorted(demand.driver.items())),
                tuple(sorted(demand.spread.items())), demand.pools)


def ask_demand(ask: Ask) -> Demand:
    return Demand(bundles=ask.bundles, driver=ask.driver, spread=ask.spread, pools=ask.pools)


def decide_cluster(workspace: str, cluster: ClusterState, queue: ClusterQueue, wants: Sequence[Want],
                   now: float, leaving: Iterable[str] = (), known: Mapping[str, Demand] | None = None,
                   own_waiting: bool = False, specs: Mapping[str, tuple[int, bool]] | None = None,
                   ) -> dict[str, Decision]:
    """Decisions, by key, for `wants` among everything else the cluster's queue holds (and for the
    others' waiting entries). `leaving`: submission ids the plan stops, whose demand is free for
    what follows; `known`: the demand of this workspace's runs as argus knows it (`held`);
    `own_waiting`: weigh this workspace's other waiting entries too."""
    skip, capacity = frozenset(w.key for w in wants), [n.resources for n in cluster.nodes]
    # an admitted entry with a want's own submission id is that very run, planned again after its apply
    # died before Ray had it: it must not wait behind itself
    itself = {w.submission_id for w in wants}
    entries = [*held(cluster, queue, now, set(leaving), specs, workspace, itself, known),
               *waiting(workspace, queue, now, capacity, own_waiting, skip)]
    arrivals = first_arrivals(workspace, queue)
    for want in wants:
        entries.append(Entry(key=want.key, workspace=workspace, demand=want.demand, priority=want.ask.priority,
                             arrived=arrivals.get((want.key, want.spec_hash), now if want.seen is None else want.seen)))
    return {d.key: d for d in decide(entries, capacity, [n.used for n in cluster.nodes], queue.quotas)}


def held(cluster: ClusterState, queue: ClusterQueue, now: float, leaving: set[str],
         specs: Mapping[str, tuple[int, bool]] | None = None, workspace: str = "",
         itself: Iterable[str] = (), known: Mapping[str, Demand] | None = None) -> list[Entry]:
    """What holds resources on the cluster: each run Ray lists as active under argus's labels, as
    reconcile.plan.holdings counts it (what Ray holds for it, and what of its known demand Ray does not
    hold yet); and each admitted entry whose run Ray does not list, in its admission window (`holds`).
    `specs`: `<workspace>/<job>` -> (priority, preemptible) as this workspace's specs say them now, which
    outrank what its ledger recorded at admission. `itself`: submission ids `workspace` wants to start now,
    whose own admitted entries are left out (the want stands for them). `known`: the demand argus knows of
    this workspace's runs that no ledger entry may hold (by submission id, or `<workspace>/<job>`)."""
    listed, mine = {j.submission_id: j for j in cluster.jobs}, set(itself)
    skip = leaving | {sid for sid in mine if (j := listed.get(sid)) is not None and j.workspace == workspace}
    admitted: dict[str, LedgerEntry] = {}
    for e in queue.entries:
        job = listed.get(e.submission_id)
        if e.admitted is not None and job is not None and (job.workspace, job.job) == (e.workspace, e.job):
            admitted.setdefault(e.submission_id, e)
    found = on_ray(cluster, admitted, known or {}, specs or {}, skip)
    for e in queue.entries:
        if e.admitted is None or e.submission_id in leaving or (e.workspace == workspace and e.submission_id in mine):
            continue
        if e.submission_id not in listed and holds(e, None, now, queue.gone):
            key = f"{e.workspace}/{e.job}"
            priority, preemptible = (specs or {}).get(key, (e.priority, e.preemptible))
            found.append(Entry(key=key, workspace=e.workspace, demand=_demand(e), priority=priority,
                               arrived=e.arrived, admitted=True, preemptible=preemptible, since=e.admitted,
                               submission_id=e.submission_id))
    return found


def holds(entry: LedgerEntry, job: RayJob | None, now: float, gone: frozenset[str] = frozenset()) -> bool:
    """An admitted entry's run holds its demand. While Ray lists the run, Ray says: active, and labelled
    as the entry's own job (an entry cannot borrow another's run); what it holds then is counted from Ray
    (reconcile.plan.holdings), the entry's demand only for what Ray does not hold yet. A run Ray does not
    list holds only in its admission window, while a submit may still be on its way: the process that
    admitted it not proven `gone` (its liveness lock, state.queue.holders), and at most ADMIT_GRACE after
    admission. Ray lists every job it has; one it does not list is not running (it ended and was deleted,
    or its head restarted), so an entry of an ended run put back on the shared root, signed or not,
    holds nothing."""
    if entry.admitted is None:
        return False
    if job is not None:
        return job.status in ACTIVE and (job.workspace, job.job) == (entry.workspace, entry.job)
    if entry.holder is not None and entry.holder in gone:
        return False
    return -CLOCK_SKEW <= now - entry.admitted < ADMIT_GRACE


def waiting(workspace: str, queue: ClusterQueue, now: float, capacity: Sequence[Mapping[str, float]],
            own: bool = False, skip: frozenset[str] = frozenset()) -> list[Entry]:
    """The waiting entries still confirmed: the other workspaces' (a plan's own come from the plan
    itself), and with `own` this workspace's too (an admission at apply weighs its other jobs). One
    that could never fit is no head to wait behind (its own workspace's plan says it is an error)."""
    return [Entry(key=f"{e.workspace}/{e.job}", workspace=e.workspace, demand=_demand(e), priority=e.priority,
                  arrived=e.arrived, signed=e.signed, away=_away(e, workspace, now))
            for e in queue.entries
            if e.admitted is None and (own or e.workspace != workspace) and f"{e.workspace}/{e.job}" not in skip
            and -CLOCK_SKEW <= now - e.seen < QUEUE_TTL and not never_fits(_demand(e), capacity)]


def _away(entry: LedgerEntry, workspace: str, now: float) -> float:
    """Seconds since another workspace last confirmed its waiting entry, when over AWAY_GRACE; else 0."""
    since = now - entry.seen
    return since if entry.workspace != workspace and since > AWAY_GRACE else 0.0


def first_arrivals(workspace: str, queue: ClusterQueue) -> dict[tuple[str, str], float]:
    """(key, spec_hash) -> when argus first queued that spec of the job (a spec it never queued
    arrives when its plan saw it). One pass over the ledger, not one per job."""
    arrivals: dict[tuple[str, str], float] = {}
    for e in queue.entries:
        if e.workspace == workspace:
            at = (f"{workspace}/{e.job}", e.spec_hash)
            arrivals[at] = min(e.arrived, arrivals.get(at, e.arrived))
    return arrivals


def waiting_entries(workspace: str, queue: ClusterQueue) -> dict[str, LedgerEntry]:
    """Submission id -> this workspace's waiting entry (the first, as the ledger lists them): an apply queued it."""
    found: dict[str, LedgerEntry] = {}
    for e in queue.entries:
        if e.workspace == workspace and e.admitted is None:
            found.setdefault(e.submission_id, e)
    return found


def says_the_same(entry: LedgerEntry | None, ask: Ask) -> bool:
    """The entry says what the spec says now; a new priority or demand is written again, so the
    other workspaces see it."""
    return entry is not None and (entry.priority, entry.preemptible, entry.bundles, entry.driver, entry.spread) \
        == (ask.priority, ask.preemptible, ask.bundles, ask.driver, ask.spread)


def too_big(cluster: ClusterState, demand: Demand) -> bool:
    return never_fits(demand, [n.resources for n in cluster.nodes])


def over_quota_alone(workspace: str, queue: ClusterQueue, total: Mapping[str, float]) -> str:
    """The demand alone (its `total`) is over the workspace's quota: it could never start."""
    cap = queue.quotas.get(workspace) or {}
    over = [f"{name} {total.get(name, 0):g} > {limit:g}" for name, limit in sorted(cap.items())
            if total.get(name, 0) > limit]
    return ", ".join(over)


def queued_change(change: Change, want: Want, decision: Decision, info: QueueInfo, enqueued: bool) -> Change:
    """The change of a job that waits: the stops it still needs (a replaced run), and its queue entry."""
    stops = tuple(s for s in change.steps if isinstance(s, StopStep))
    enqueue = () if enqueued else (EnqueueStep(cluster=info.cluster, submission_id=want.submission_id,
                                                spec_hash=want.spec_hash, attempt=info.attempt, ask=want.ask,
                                                seen=want.seen),)
    return change.model_copy(update={
        "action": Action.QUEUE, "steps": (*stops, *enqueue), "queue": info,
        "reason": f"queued #{decision.position} on {info.cluster}: {decision.reason}"})


def admitted_change(change: Change, want: Want, info: QueueInfo) -> Change:
    steps = tuple(s.model_copy(update={"ask": want.ask, "seen": want.seen}) if isinstance(s, SubmitStep) else s
                  for s in change.steps)
    return change.model_copy(update={"steps": steps, "queue": info})


def info_of(cluster: str, want: Want, attempt: int, decision: Decision | None, from_queue: bool,
            wanted: Action = Action.SUBMIT) -> QueueInfo:
    described, gpus = _described(want)
    return QueueInfo(cluster=cluster, submission_id=want.submission_id, spec_hash=want.spec_hash, attempt=attempt,
                     ask=want.ask,
                     demand=described, gpus=gpus,
                     priority=want.ask.priority, position=decision.position if decision else None, wanted=wanted,
                     reason=decision.reason if decision else "fits now", from_queue=from_queue)


_DESCRIBED: dict[tuple[object, ...], tuple[str, float]] = {}
"""Demand shape -> how it reads and its GPUs (pure functions of the shape; a plan has a handful)."""


def _described(want: Want) -> tuple[str, float]:
    found = _DESCRIBED.get(want.shape)
    if found is None:
        if len(_DESCRIBED) > 4096:  # shapes are few; a bound all the same, for a long-lived `argus serve`
            _DESCRIBED.clear()
        found = _DESCRIBED[want.shape] = (demands.describe(want.demand), demands.gpus(want.demand))
    return found


def error(address: str, field: str, message: str) -> Diagnostic:
    return Diagnostic(severity="error", address=address, field=field, message=message)


def stopping(changes: Iterable[Change]) -> set[str]:
    return {s.submission_id for c in changes for s in c.steps if isinstance(s, StopStep)}


def _demand(entry: LedgerEntry) -> Demand:
    return Demand(bundles=tuple(entry.bundles), driver=entry.driver, spread=entry.spread)


def by_cluster(wants: Mapping[str, tuple[str, Want]]) -> dict[str, list[Want]]:
    """Wants grouped by the cluster they wait on."""
    grouped: dict[str, list[Want]] = {}
    for cluster, want in wants.values():
        grouped.setdefault(cluster, []).append(want)
    return grouped


def plan_admission(desired: DesiredState, observed: ObservedState, changes: list[Change],
                   flagged: set[str]) -> tuple[list[Change], list[Diagnostic]]:
    """Each job that wants to start and has a demand: admitted now, or queued with its place and why.
    `flagged`: addresses that already have an error (a verl job that can never fit says so itself)."""
    workspace, wants, found = desired.workspace.name, {}, []
    specs = {f"{workspace}/{name}": (job.priority, job.preemptible) for name, job in desired.jobs.items()}
    checked: dict[tuple[str, tuple[object, ...]], tuple[str, str] | None] = {}
    for change in changes:
        want, problem = _want(desired, observed, change, checked)
        if problem and change.address not in flagged:
            found.append(error(change.address, problem[0], problem[1]).located(desired.source(change.address)))
        elif want is not None and not problem:
            wants[change.address] = want
            if note := demands.unreserved(desired.jobs[want[1].ask.job], _submitted(change)):
                found.append(Diagnostic(severity="warning", address=change.address, field="demand", message=note)
                             .located(desired.source(change.address)))
    decisions: dict[str, Decision] = {}
    leaving, grouped, known = stopping(changes), by_cluster(wants), known_demands(desired, observed)
    for name in sorted(observed.clusters):
        queue = _queue(observed, name)
        if _nodes_known(observed, name) and (name in grouped or queue.entries):
            decisions.update(decide_cluster(workspace, observed.clusters[name], queue, grouped.get(name, []),
                                            observed.observed_at, leaving, known,
                                            specs=specs))
    queued = {name: waiting_entries(workspace, _queue(observed, name)) for name in grouped}
    decided = [_decided(c, wants.get(c.address), decisions, queued) for c in changes]
    heads = preempting(decisions)
    decided = [preempted(desired, c, heads) for c in decided]
    return decided, found + trust_diagnostics(desired, observed, decided, decisions)


def preempting(decisions: Mapping[str, Decision]) -> dict[str, Decision]:
    """Each preempted key -> the first decision that preempts it: one pass, not one per change."""
    heads: dict[str, Decision] = {}
    for decision in decisions.values():
        for victim in decision.preempts:
            heads.setdefault(victim, decision)
    return heads


def preempted(desired: DesiredState, change: Change, heads: Mapping[str, Decision]) -> Change:
    """A running job of this workspace that the head of its cluster's queue preempts (`heads`, from
    `preempting`): its run is stopped, only if its spec says `preemptible: true` now."""
    job = desired.jobs.get(change.address.removeprefix("job."))
    head = heads.get(f"{desired.workspace.name}/{job.name}") if job is not None else None
    run = change.current
    if head is None or job is None or not job.preemptible or change.action is not Action.NOOP or run is None \
            or not run.on_ray or run.status not in ACTIVE:
        return change
    return change.model_copy(update={
        "action": Action.PREEMPT, "steps": (StopStep(cluster=run.cluster, submission_id=run.submission_id,
                                                     preempted_for=head.key),),
        "reason": f"preempted for {head.key}, which has a higher priority and cannot otherwise fit; it waits in "
                  "the queue again and resumes from its checkpoint as a new attempt"})


def _want(desired: DesiredState, observed: ObservedState, change: Change,
          checked: dict[tuple[str, tuple[object, ...]], tuple[str, str] | None],
          ) -> tuple[tuple[str, Want] | None, tuple[str, str] | None]:
    """The change's want, or the problem that keeps it from ever starting. `checked`: (cluster, demand
    shape) -> its problem, for the plan's other jobs that ask the same (all but the address's words)."""
    step = next((s for s in change.steps if isinstance(s, SubmitStep)), None)
    if change.action not in WANTS_TO_START or step is None or not _nodes_known(observed, step.cluster):
        return None, None
    job = desired.jobs.get(step.submission.job)
    if job is None:
        return None, None
    want = Want(key=f"{desired.workspace.name}/{job.name}", submission_id=step.submission_id,
                spec_hash=step.spec_hash, ask=ask_of(job, step.submission, observed.verl_profiles.get(job.name)),
                seen=observed.observed_at)
    if not any(want.demand.total().values()):
        return None, None  # asks for nothing: never waits, never delays anyone
    if (step.cluster, want.shape) not in checked:
        checked[(step.cluster, want.shape)] = _never_starts(desired, observed, step.cluster, want.demand)
    problem = checked[(step.cluster, want.shape)]
    if problem:  # a demand's problem is the job's to fix, and says which job; the cluster's is the cluster's
        return None, (problem[0], f"{change.address} {problem[1]}" if problem[0] == "demand" else problem[1])
    return (step.cluster, want), None


def _never_starts(desired: DesiredState, observed: ObservedState, name: str, demand: Demand) -> tuple[str, str] | None:
    """(field, why) a demand can never start on the cluster `name`, the job's address left out; None: it can."""
    cluster, queue = observed.clusters[name], _queue(observed, name)
    if missing := demands.unoffered(demand, (k for n in cluster.nodes for k in n.resources)):
        return "demand", (f"asks for {missing}, which no alive node of cluster {cluster.name!r} offers: fix the "
                          "name (in `demand`, `entrypoint_resources` or the cluster's job_defaults), or start a node "
                          "that offers it")
    if too_big(cluster, demand):
        return "demand", (f"can never start on cluster {cluster.name!r}: its whole demand "
                          f"({demands.describe(demand)}) does not fit the alive nodes even when idle")
    if over := over_quota_alone(desired.workspace.name, queue, demand.total()):
        return "demand", f"can never start under workspace {desired.workspace.name}'s quota on {cluster.name!r}: {over}"
    if queue.problem:
        return "cluster", (f"nothing is admitted on cluster {cluster.name!r} until its admission queue can be read: "
                           f"{queue.problem}")
    return None


def _decided(change: Change, want: tuple[str, Want] | None, decisions: Mapping[str, Decision],
             queued: Mapping[str, Mapping[str, LedgerEntry]]) -> Change:
    """`queued`: cluster -> submission id -> this workspace's waiting entry (`waiting_entries`)."""
    if want is None:
        return change
    cluster, wanted = want
    decision, before = decisions[wanted.key], queued[cluster].get(wanted.submission_id)
    attempt = next(s.attempt for s in change.steps if isinstance(s, SubmitStep))
    info = info_of(cluster, wanted, attempt, decision, from_queue=before is not None and decision.start,
                   wanted=change.action)
    if decision.start:
        return admitted_change(change, wanted, info)
    return queued_change(change, wanted, decision, info, enqueued=says_the_same(before, wanted.ask))


def known_demands(desired: DesiredState, observed: ObservedState) -> dict[str, Demand]:
    """The demand argus knows of this workspace's runs Ray lists as active, for those no ledger entry
    holds (held): what the run's own record says it was submitted with (by submission id), else what its
    job's spec implies now (by `<workspace>/<job>`). A run Ray runs holds it whether or not a file proves it."""
    workspace, known = desired.workspace.name, {}
    active = sorted({(j.submission_id, j.job) for c in observed.clusters.values() for j in c.jobs
                     if j.workspace == workspace and j.status in ACTIVE and j.job})
    for sid, name in active:
        record = observed.records.get(sid)
        if record is not None and record.submission is not None and record.job == name:
            known[sid] = _running(desired, name, record.submission)
        elif (job := desired.jobs.get(name)) is not None and job.cluster in desired.clusters:
            sub = resolve(desired.workspace, desired.clusters[job.cluster], job)
            known[f"{workspace}/{name}"] = demands.demand_of(job, sub, observed.verl_profiles.get(name))
    return known


def _submitted(change: Change) -> Submission:
    return next(s.submission for s in change.steps if isinstance(s, SubmitStep))


def _running(desired: DesiredState, name: str, sub: Submission) -> Demand:
    """A run's demand from what its record says it was submitted with: the GPUs of a verl run (its shape
    unknown, so anywhere) and its driver; a `command` run, its `demand:` as the job's spec says it now."""
    job = desired.jobs.get(name)
    if job is not None and job.workload == "command" and job.demand and sub.gpus is None:
        return demands.demand_of(job, sub)
    return Demand(spread={"GPU": float(sub.gpus)} if sub.gpus else {}, driver=driver_needs(sub))


def _nodes_known(observed: ObservedState, cluster: str) -> bool:
    """A dashboard that answers runs on an alive head: no node at all means nodes were not read."""
    state = observed.clusters.get(cluster)
    return state is not None and bool(state.nodes)


def _queue(observed: ObservedState, cluster: str) -> ClusterQueue:
    return observed.queues.get(cluster) or _NO_QUEUE


_NO_QUEUE = ClusterQueue()
"""A cluster whose shared root holds no queue (frozen: one for all, not one per job asked about)."""
